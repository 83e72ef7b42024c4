"""The trusted kernel: re-checks a certificate file from its data alone.

This package imports only the Python standard library and python-flint, and only relative
imports within itself (a test enforces both), so the directory can be copied out and run on
its own. The file format is ``proofs/format.md``, the meaning of VERIFIED is
``proofs/semantics.md`` and the soundness argument of each rule is
``proofs/checker_soundness.md``.

Usage::

    python -m certified.checker FILE...     # or: certified check FILE...

    from certified.checker import check_file
    verdict = check_file("cert.json")       # Verdict(verified=..., kind=..., reason=...)

The checker fails closed: anything it does not understand, every resource limit exceeded and
every unexpected exception is a rejection, never an acceptance.
"""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ._interpolation_rule import check_interpolation_v1
from ._lipschitz_rule import check_lipschitz_v1
from ._parse import (
    MAX_BYTES,
    MAX_DEPTH,
    MAX_DIGITS,
    MAX_EXPONENT,
    MAX_HEIGHT_BITS,
    MAX_REPLAY_COST,
    MAX_TOKENS,
    Rejected,
    fields,
    load_json,
    show,
)
from ._separation_rule import check_separation_v1
from ._wasserstein_rule import check_wasserstein_v1
from .flow import check_flow_v1

__all__ = [
    "KINDS",
    "MAX_BYTES",
    "MAX_DEPTH",
    "MAX_DIGITS",
    "MAX_EXPONENT",
    "MAX_HEIGHT_BITS",
    "MAX_REPLAY_COST",
    "MAX_TOKENS",
    "Verdict",
    "check_bytes",
    "check_certificate",
    "check_file",
]

KINDS = {
    "flow": {1: check_flow_v1},
    "separation": {1: check_separation_v1},
    "lipschitz": {1: check_lipschitz_v1},
    "wasserstein": {1: check_wasserstein_v1},
    "interpolation": {1: check_interpolation_v1},
}
"""Known certificate kinds and, for each, the checker of each known version."""


@dataclass(frozen=True)
class Verdict:
    """Outcome of checking one certificate.

    ``verified`` is True only if the certificate is well formed and its claim was replayed
    successfully; ``kind`` is the certificate kind when it could be read (else None);
    ``reason`` says why it was rejected, or summarises what was verified.

    Guarantee: ``verified`` implies the statement of ``proofs/semantics.md`` for ``kind``.
    """

    verified: bool
    kind: str | None
    reason: str

    def __post_init__(self) -> None:
        if not isinstance(self.verified, bool) or not isinstance(self.reason, str):
            raise TypeError("Verdict(verified: bool, kind: str | None, reason: str)")
        if self.verified and self.kind not in KINDS:
            raise ValueError("a verified certificate has a known kind")
        if not self.verified and not self.reason:
            raise ValueError("a rejection has a reason")


def _check(obj: Any) -> tuple[str, str]:
    fields(obj, "certificate", ("kind", "version", "instance", "claim", "hints"))
    kind, version = obj["kind"], obj["version"]
    if not isinstance(kind, str) or kind not in KINDS:
        raise Rejected(f"kind: unknown certificate kind {show(kind)}")
    if isinstance(version, bool) or not isinstance(version, int) or version not in KINDS[kind]:
        known = ", ".join(str(v) for v in KINDS[kind])
        raise Rejected(f"version: {show(version)} is not a known version of {kind} ({known})")
    return kind, KINDS[kind][version](obj["instance"], obj["claim"], obj["hints"])


def _kind_of(obj: Any) -> str | None:
    kind = obj.get("kind") if isinstance(obj, dict) else None
    return kind if isinstance(kind, str) and kind in KINDS else None


def check_certificate(obj: Any) -> Verdict:
    """Check a certificate given as a parsed JSON value (dicts, lists, ints, strings).

    Never raises (except on KeyboardInterrupt and similar): every failure, including an
    unexpected exception, is a rejection.

    Guarantee: ``verified`` implies the statement of ``proofs/semantics.md`` for the kind.
    """
    try:
        with _gc_paused():
            kind, summary = _check(obj)
        return Verdict(True, kind, summary)
    except Rejected as exc:
        return Verdict(False, _kind_of(obj), str(exc) or "rejected")
    except (
        Exception
    ) as exc:  # fail closed on anything unforeseen (MemoryError, RecursionError, ...)
        return Verdict(False, _kind_of(obj), f"internal error: {type(exc).__name__}: {show(exc)}")


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    # a certificate holds millions of acyclic objects; the cyclic collector's passes over them
    # are pure overhead (a third of the time on a 200 MB file). Restored on every exit.
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def check_bytes(data: bytes) -> Verdict:
    """Check the contents of a certificate file (strict JSON, ``proofs/format.md``).

    Guarantee: ``verified`` implies the statement of ``proofs/semantics.md`` for the kind.
    """
    with _gc_paused():
        try:
            obj = load_json(data)
        except Rejected as exc:
            return Verdict(False, None, str(exc))
        except Exception as exc:
            return Verdict(False, None, f"internal error: {type(exc).__name__}: {show(exc)}")
        return check_certificate(obj)


def check_file(path: str | os.PathLike[str]) -> Verdict:
    """Read at most ``MAX_BYTES + 1`` bytes of ``path`` and check them.

    Raises
    ------
    OSError
        The file cannot be read (missing, a directory, no permission): an I/O error, not a
        verdict.

    Guarantee: ``verified`` implies the statement of ``proofs/semantics.md`` for the kind.
    """
    with open(path, "rb") as f:
        data = f.read(MAX_BYTES + 1)
    return check_bytes(data)
