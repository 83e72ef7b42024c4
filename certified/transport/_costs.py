"""Rigorous float64 bounds on the transport costs ``c_ij = |x_i - y_j|^q``.

Two ways to bound the squared distances ``s_ij = |x_i - y_j|²``:

* **points exactly in float64** (the common case): evaluate ``ŝ_ij`` in plain numpy float64,
  coordinate by coordinate, left to right; then ``|ŝ - s| ≤ γ_{d+2} s + dη``
  (proofs/bounds.md#w-sqdist), which gives ``c_lo = fl(κ_d ŝ)`` and ``c_hi = fl(K_d ŝ)``
  for ``ŝ ≥ 2^-900`` (0 and ``2^-899`` below). The same matrix ``ŝ`` feeds the float solver,
  so certifying costs two passes over it, not a second distance computation.
* **other points** (rationals that are not doubles): interval arithmetic on the tightest
  float64 enclosures of the coordinates (:class:`certified.arith.interval.Interval`).

Then ``c = s^{q/2}`` by monotone interval functions: ``s`` itself for q = 2, ``sqrt`` for
q = 1 (correctly rounded, widened by one ulp), ``pown``/``sqrt`` for other integers and
``exp((q/2) log s)`` for non-integer q (proofs/bounds.md#w-power).
"""

from __future__ import annotations

import flint
import numpy as np
from numba import njit

from certified.arith import interval as iv
from certified.arith.interval import Interval
from certified.errors import RangeOverflowError, ShapeError

__all__ = ["CostBounds", "squared_distances"]

TINY = 2.0**-900  # below it, ŝ is replaced by the bounds [0, 2^-899]
BLOCK = 1 << 21  # entries per block of the interval path (memory: a few arrays of 16 MB)


def kappas(d: int) -> tuple[float, float]:
    """``κ_d = 1 - (d+4) 2^-52`` and ``K_d = 1 + (d+4) 2^-52`` (exact doubles for d < 2^40).

    proof: proofs/bounds.md#w-sqdist

    Guarantee: exact doubles; with the lemma, ``fl(κ_d ŝ) <= s <= fl(K_d ŝ)`` for ŝ >= 2^-900.
    """
    return 1.0 - (d + 4) * 2.0**-52, 1.0 + (d + 4) * 2.0**-52


@njit(cache=True, error_model="numpy")
def _sqdist(X, YT):  # pragma: no cover - compiled
    # IEEE binary64 operations in exactly the order of the lemma (numba compiles without
    # fastmath: no reassociation, no FMA contraction; checked at import by arith.fpu)
    n, d = X.shape
    m = YT.shape[1]
    S = np.empty((n, m))
    for i in range(n):
        for j in range(m):
            t = X[i, 0] - YT[0, j]
            s = t * t
            for k in range(1, d):
                t = X[i, k] - YT[k, j]
                s = s + t * t
            S[i, j] = s
    return S


def squared_distances(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """``ŝ_ij = fl(Σ_k fl(fl(x_ik - y_jk)²))``, summed left to right over k.

    Guarantee: none by itself; with proofs/bounds.md#w-sqdist, ``|ŝ - s| ≤ γ_{d+2} s + dη``.
    """
    X = np.ascontiguousarray(X, dtype=np.float64)
    YT = np.ascontiguousarray(np.asarray(Y, dtype=np.float64).T)
    return _sqdist(X, YT)


@njit(cache=True, error_model="numpy")
def _row_min_sq(S, psi, kappa, tiny):  # pragma: no cover - compiled
    # min_j (c_lo_ij - psi_j) with c_lo from ŝ (proofs/bounds.md#w-sqdist); rounding of the
    # subtraction is handled by the caller (one pred() per row, proofs/bounds.md#w-dual)
    n, m = S.shape
    out = np.empty(n)
    for i in range(n):
        best = np.inf
        for j in range(m):
            s = S[i, j]
            c = s * kappa if s >= tiny else 0.0
            t = c - psi[j]
            if t < best:
                best = t
        out[i] = best
    return out


class CostBounds:
    """Rigorous lower and upper float64 bounds on ``c_ij = |x_i - y_j|^q``.

    Parameters
    ----------
    mu, nu : Measure
        Same dimension (checked by the caller).
    q : flint.fmpq
        Exponent ``q >= 1``.

    Guarantee: ``lower_block`` and ``row_min_minus`` bound the costs from below,
    ``upper_pairs`` from above, for the exact points of ``mu`` and ``nu``.
    """

    def __init__(self, mu, nu, q: flint.fmpq) -> None:
        self.mu, self.nu, self.q = mu, nu, q
        self.d = mu.d
        if self.d > 2**20:  # the rounding lemma's range (proofs/bounds.md#w-sqdist)
            raise ShapeError(f"points: dimension {self.d} above 2^20 is not supported")
        self.kappa, self.K = kappas(self.d)
        self.exact_float = mu.exact_float and nu.exact_float
        self._S: np.ndarray | None = None
        if self.exact_float:
            S = squared_distances(mu.points_lo, nu.points_lo)
            if not np.isfinite(S.max()) or S.max() * self.K > 1e307:
                raise RangeOverflowError(
                    "points: squared distances overflow float64; rescale the measures"
                )
            self._S = S

    # --- the producer's matrix (heuristic) -----------------------------------------------

    def float_costs(self) -> np.ndarray:
        """Float64 approximation of the cost matrix, for the solver. Guarantee: none."""
        if self._S is not None:
            S = self._S
        else:
            S = squared_distances(self.mu.points_float, self.nu.points_float)
        if self.q == 2:
            return S
        if self.q == 1:
            return np.sqrt(S)
        return np.power(S, float(self.q) / 2.0)

    # --- rigorous bounds ---------------------------------------------------------------------

    def _from_float(self, S: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # proof: proofs/bounds.md#w-sqdist
        return np.where(S >= TINY, S * self.kappa, 0.0), np.where(S >= TINY, S * self.K, 2 * TINY)

    def _interval_s(self, r, c) -> tuple[np.ndarray, np.ndarray]:
        # r, c: index arrays that broadcast (a column of rows against a row of columns, or pairs)
        mu, nu = self.mu, self.nu
        acc = None
        for k in range(self.d):
            x = Interval(mu.points_lo[r, k], mu.points_hi[r, k])
            y = Interval(nu.points_lo[c, k], nu.points_hi[c, k])
            t = iv.sqr(x - y)
            acc = t if acc is None else acc + t
        return np.maximum(acc.lo, 0.0), acc.hi

    def _s_block(self, i0: int, i1: int) -> tuple[np.ndarray, np.ndarray]:
        """Bounds ``(s_lo, s_hi)`` on the squared distances of rows ``i0:i1``."""
        if self._S is not None:
            return self._from_float(self._S[i0:i1])
        return self._interval_s(np.arange(i0, i1)[:, None], np.arange(self.nu.n)[None, :])

    def _power(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Bounds on ``s^{q/2}`` for ``s ∈ [lo, hi]``, ``lo >= 0``. proof: #w-power"""
        q = self.q
        if q == 2:
            return lo, hi
        S = Interval(lo, hi)
        if q.q == 1 and q.p % 2 == 0:
            C = iv.pown(S, int(q.p) // 2)
        elif q.q == 1:
            C = iv.pown(iv.sqrt(S), int(q.p))
        else:
            half = Interval.from_exact(q / 2)
            pos = lo > 0
            clo = np.zeros_like(lo)
            chi = np.zeros_like(hi)
            if np.any(pos):
                P = iv.exp(iv.log(Interval(lo[pos], hi[pos])) * half)
                clo[pos], chi[pos] = P.lo, P.hi
            up = (~pos) & (hi > 0)
            if np.any(up):
                chi[up] = iv.exp(iv.log(Interval(hi[up])) * half).hi
            return clo, chi
        return C.lo, C.hi

    def lower_block(self, i0: int, i1: int) -> np.ndarray:
        """Lower bounds on ``c_ij`` for rows ``i0:i1`` and all columns. Guarantee: lower bound."""
        lo, hi = self._s_block(i0, i1)
        return self._power(lo, hi)[0]

    def upper_pairs(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Upper bounds on ``c_{rows[k], cols[k]}``. Guarantee: upper bound."""
        out = np.empty(len(rows))
        for k0 in range(0, len(rows), BLOCK):
            r, c = rows[k0 : k0 + BLOCK], cols[k0 : k0 + BLOCK]
            if self._S is not None:
                lo, hi = self._from_float(self._S[r, c])
            else:
                lo, hi = self._interval_s(r, c)
            out[k0 : k0 + BLOCK] = self._power(lo, hi)[1]
        if not np.all(np.isfinite(out)):
            raise RangeOverflowError("costs overflow float64; rescale the measures")
        return out

    def row_min_minus(self, psi: np.ndarray) -> np.ndarray:
        """``m_i ≈ min_j (c_lo_ij - psi_j)`` in round-to-nearest; ``pred(m_i)`` is a lower bound
        on ``min_j (c_ij - psi_j)`` (proofs/bounds.md#w-dual). Guarantee: see the caller."""
        n = self.mu.n
        if self._S is not None and self.q == 2:
            return _row_min_sq(self._S, psi, self.kappa, TINY)
        out = np.empty(n)
        step = max(1, BLOCK // max(1, self.nu.n))
        for i0 in range(0, n, step):
            i1 = min(n, i0 + step)
            c = self.lower_block(i0, i1)
            out[i0:i1] = (c - psi[None, :]).min(axis=1)
        return out
