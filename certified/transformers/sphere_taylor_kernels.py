"""Compiled Cauchy sums of interval Taylor series for the particle / sphere-attention steps
(:mod:`certified.transformers.particle_taylor`, ``proofs/particles.md`` §1, §6).

A series recurrence needs, for every order k, sums ``Σ_{m=m0..k} a_m b_{k−m}`` of products of
earlier coefficients (arrays of intervals). Evaluated with :class:`~certified.arith.interval.
Interval` each such sum is a stacked copy of the k terms, one product and one row sum: numpy
passes and Python overhead of O(k) per order. Here one compiled loop over preallocated
coefficient buffers does the same arithmetic with the same rounding: every product is the
four-product interval product with its lower end rounded down and its upper end rounded up by
:func:`certified.arith._kernels.dn` / ``up`` (bounds.md#pred-succ), every partial sum rounded
outward the same way (bounds.md#sum), exactly as ``_mul_into`` followed by ``sum_rows``.

Guarantee: encloses the exact Cauchy sum for all points of the operands.
"""

from __future__ import annotations

import numpy as np

from certified.arith._kernels import OK, OVERFLOW, dn, kernel, up
from certified.errors import RangeOverflowError

__all__ = ["cauchy"]

_LIMIT = 1.7976931348623157e308


@kernel
def _cauchy_into(alo, ahi, blo, bhi, m0, k, lo, hi):  # pragma: no cover - compiled
    """lo, hi (R, C) ⊇ Σ_{m=m0..k} a[m] b[k−m], a (K, R, Ca), b (K, R, Cb); Ca, Cb ∈ {1, C}
    (a last axis of length 1 is broadcast)."""
    R, C = lo.shape
    ca = alo.shape[2] > 1
    cb = blo.shape[2] > 1
    for r in range(R):
        for c in range(C):
            lo[r, c] = 0.0
            hi[r, c] = 0.0
    for m in range(m0, k + 1):
        j = k - m
        for r in range(R):
            for c in range(C):
                x1 = alo[m, r, c if ca else 0]
                x2 = ahi[m, r, c if ca else 0]
                y1 = blo[j, r, c if cb else 0]
                y2 = bhi[j, r, c if cb else 0]
                p1 = x1 * y1
                p2 = x1 * y2
                p3 = x2 * y1
                p4 = x2 * y2
                # proof: bounds.md#pred-succ (each product), #sum (each partial sum)
                lo[r, c] = dn(lo[r, c] + dn(min(min(p1, p2), min(p3, p4))))
                hi[r, c] = up(hi[r, c] + up(max(max(p1, p2), max(p3, p4))))
    bad = 0
    for r in range(R):
        for c in range(C):
            bad += not (abs(lo[r, c]) <= _LIMIT and abs(hi[r, c]) <= _LIMIT)
    return OVERFLOW if bad else OK


def cauchy(alo: np.ndarray, ahi: np.ndarray, blo: np.ndarray, bhi: np.ndarray, m0: int,
           k: int) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Endpoints (lo, hi), shape (R, C), of an enclosure of Σ_{m=m0..k} a_m b_{k−m} for
    coefficient buffers a (K, R, Ca), b (K, R, Cb) (C-contiguous float64; a last axis of length
    1 broadcasts; only orders ≤ k are read).

    Raises RangeOverflowError when an endpoint leaves the float64 range.
    Guarantee: encloses the exact sum for all points of the operands."""
    R = alo.shape[1]
    C = max(alo.shape[2], blo.shape[2])
    out = np.empty((2, R, C))
    if _cauchy_into(alo, ahi, blo, bhi, m0, k, out[0], out[1]) != OK:
        raise RangeOverflowError("series: an endpoint exceeds the float64 range")
    return out[0], out[1]
