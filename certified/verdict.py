"""The outcome of a theorem-instance check, shared by every family and by the CLI.

``VERIFIED`` (the claim holds, with a certified argument), ``REFUTED`` (it fails, with a
certified counterexample) or ``UNDECIDED`` (neither could be certified; the verdict's message
says what to change). The member's value is the string of the CLI contract (``--json``
``"verdict"``, the first word of the text output).

``Outcome`` is a ``StrEnum``: a member equals its string (``Outcome.VERIFIED == "VERIFIED"``),
so code and tests that compare a verdict with the contract string keep working, and
``Outcome(text)`` validates a string (``ValueError`` for anything else).
"""

from __future__ import annotations

import enum

__all__ = ["Outcome"]


class Outcome(enum.StrEnum):
    """VERIFIED, REFUTED or UNDECIDED; ``.value`` is the contract string.

    Guarantee: exact (a label; what it asserts is documented by each verdict type)."""

    VERIFIED = "VERIFIED"
    REFUTED = "REFUTED"
    UNDECIDED = "UNDECIDED"

    @property
    def decided(self) -> bool:
        """VERIFIED or REFUTED: a certified answer either way."""
        return self is not Outcome.UNDECIDED
