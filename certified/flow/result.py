"""Results of certified flows: what a method returns, whatever the method.

In the spirit of diffrax's ``Solution``: enclosures at the requested times, a status whose
message says what to do when it is not ``SUCCESS``, and the hints a certificate needs.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from certified.arith import Interval

__all__ = ["FlowEnclosure", "FlowStatus"]


class FlowStatus(enum.Enum):
    """Outcome of a certified flow computation (:attr:`FlowEnclosure.status`); every status
    other than ``SUCCESS`` comes with a :attr:`FlowEnclosure.message` saying what to change."""

    SUCCESS = "success"  #: every requested enclosure is certified
    STEP_REJECTED = "step_rejected"  #: a validation (Picard inclusion, region membership) failed
    UNSUPPORTED = "unsupported"  #: the method does not handle this field / schedule


@dataclass(frozen=True)
class FlowEnclosure:
    """Certified enclosures of a flow map at requested times.

    Attributes
    ----------
    times : tuple of str
        The requested times, increasing, as exact fractions (``"1/2"``).
    enclosures : Interval
        Shape (len(times), N, d): the enclosure of ``Phi_t(x_i)`` for each time t and initial
        point (or box) i.
    status : FlowStatus
        ``SUCCESS`` means every enclosure is certified.
    message : str
        Empty on success; otherwise what failed and what to change.
    exact : ndarray or None
        Object array of fmpq, shape (len(times), N, d): the exact images when the method
        computes the flow exactly (laminar ReLU pieces with rational data); otherwise None.
    hints : dict
        Method-specific data a certificate needs (step times, tubes, boxes, ...).
    bounds : ndarray or None
        Object array of fmpq, shape (len(times), N, d, 2): exact enclosure endpoints when
        they are tighter than the float64 ``enclosures`` (arb at more than 53 bits); otherwise
        None.

    Guarantee: if ``status is SUCCESS``, ``enclosures[k, i]`` contains ``Phi_{times[k]}(x_i)``
    for every point of initial set i (and equals it when ``exact`` is given).
    """

    times: tuple[str, ...]
    enclosures: Interval
    status: FlowStatus
    message: str = ""
    exact: np.ndarray | None = None
    hints: dict[str, Any] = field(default_factory=dict)
    bounds: np.ndarray | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.status, FlowStatus):
            raise TypeError("status must be a FlowStatus")
        if self.enclosures.ndim != 3 or self.enclosures.shape[0] != len(self.times):
            raise ValueError("enclosures must have shape (len(times), N, d)")
        if self.status is not FlowStatus.SUCCESS and not self.message:
            raise ValueError("a failed flow needs a message saying what to change")

    @property
    def final(self) -> Interval:
        """Enclosures at the last requested time, shape (N, d)."""
        return self.enclosures[-1]

    def save(self, path) -> Any:
        """Write the enclosures at every requested time to ``path`` (``.csv`` with lo/hi
        columns, ``.npz`` or ``.json``: :mod:`certified.flow.enclosures_file`), atomically;
        the exact ``bounds`` when present. Only a successful result can be saved.

        Guarantee: every number written bounds the enclosure in its direction.
        """
        from certified.errors import InputError
        from certified.flow.enclosures_file import write_enclosures

        if self.status is not FlowStatus.SUCCESS:
            raise InputError(f"the flow failed ({self.status.value}): {self.message}")
        if self.bounds is not None:
            lo, hi = self.bounds[..., 0], self.bounds[..., 1]
            return write_enclosures(path, list(self.times), lo, hi)
        return write_enclosures(path, list(self.times), self.enclosures.lo, self.enclosures.hi)

    def max_width(self) -> float:
        """Largest width (upper bound) over all enclosures at the final time (from the exact
        ``bounds`` when present).

        The claims of a certificate of this result (:func:`~certified.flow_certificate_for`,
        ``certified flow``) are the checker's replay of the same steps in arb, rounded outward,
        and are often tighter: their largest width can be smaller than this one.

        Guarantee: upper bound on every enclosure's width at the final time.
        """
        if self.bounds is not None:
            from certified.arith.exact import fmpq_to_float

            w = max(hi - lo for lo, hi in self.bounds[-1].reshape(-1, 2))
            return fmpq_to_float(w, "up")
        return float(np.max(self.final.width_upper()))
