"""Float64 paths for laminar schedules whose parameters are doubles (float64 export).

* :func:`float_phases` -- the phases of such a schedule as float64 arrays (checked exactly:
  every row of A equals the phase normal, every ``w`` orthogonal to it).
* :func:`float64_images` -- plain float64 evaluation of the flow, phase by phase as
  ``x + G(a·x)`` (sorted breakpoints, prefix sums): the baseline of ``certified bench``.
* :func:`certified_error_float64` -- the same computation carrying a rigorous componentwise
  radius (a priori rounding-error bounds, proofs/bounds.md#interp-float), giving an upper bound
  of ``max_n |Φ_T(x_n) − y_n|_2`` at a few times the cost of the float evaluation.
"""

from __future__ import annotations

import numpy as np

from certified.models import Schedule

__all__ = ["certified_error_float64", "float64_images", "float_phases"]

_U = 2.0**-53
_F = 1.0 + 2.0**-30  # (1 + u)^m <= F for every chain of m <= 2^22 roundings of nonnegatives
_FLOOR = 2.0**-1000  # absorbs underflow: at most 2^30 operations, each off by <= 2^-1074


def float_phases(schedule: Schedule, phases: list[tuple[int, int]]) -> list[tuple] | None:
    """Per phase ``(a, C, brk)``: normal, rows ``c_i = τ w_i`` (P×d, exact products not
    rounded: see :func:`certified_error_float64`), breakpoints ``−b_i`` (sorted), as float64;
    None if a piece is not exactly laminar with rows of A equal to the phase normal, or a
    parameter is not a double.

    Guarantee: exact check of the structure.
    """
    if not schedule.is_float_exact or schedule.activation.value != "relu":
        return None
    out = []
    for lo, hi in phases:
        pieces = schedule.pieces[lo:hi]
        a = pieces[0].A_float[0]
        nz = np.flatnonzero(a)
        for piece in pieces:
            if not np.array_equal(piece.A_float, np.broadcast_to(a, piece.A_float.shape)):
                return None
            if len(nz) == 1:
                if np.any(piece.W_float[nz[0]] != 0):
                    return None
            elif not piece.is_laminar():
                return None
        tau = np.concatenate([np.full(p.width, p.duration_float) for p in pieces])
        W = np.concatenate([p.W_float.T for p in pieces])
        brk = -np.concatenate([p.b_float for p in pieces])
        order = np.argsort(brk, kind="stable")
        out.append((a, tau[order], W[order], brk[order]))
    return out


def float64_images(phases: list[tuple], X: np.ndarray) -> np.ndarray:
    """Float64 ``Φ_T(x_n)`` (no guarantee: the baseline).

    Guarantee: none (heuristic).
    """
    x = np.array(X, dtype=np.float64)
    for a, tau, W, brk in phases:
        C = W * tau[:, None]
        s = x @ a
        S = np.vstack([np.zeros((1, x.shape[1])), np.cumsum(C, axis=0)])
        B = np.vstack([np.zeros((1, x.shape[1])), np.cumsum(C * brk[:, None], axis=0)])
        idx = np.searchsorted(brk, s, side="left")
        x = x + S[idx] * s[:, None] - B[idx]
    return x


def certified_error_float64(phases: list[tuple], X: np.ndarray, Y: np.ndarray) -> float:
    """Upper bound of ``max_n |Φ_T(x_n) − y_n|_2`` for double data and a double laminar
    schedule (from :func:`float_phases`), in float64 with a priori error bounds.

    Guarantee: upper bound (proofs/bounds.md#interp-float), under round-to-nearest float64.
    """
    x = np.array(X, dtype=np.float64)
    r = np.zeros_like(x)
    d = x.shape[1]
    zero = np.zeros((1, d))
    for a, tau, W, brk in phases:
        P = len(brk)
        gamma = (P + 4) * _U / (1 - (P + 4) * _U)
        C = W * tau[:, None]
        CB = C * brk[:, None]
        S = np.vstack([zero, np.cumsum(C, axis=0)])
        B = np.vstack([zero, np.cumsum(CB, axis=0)])
        Sa = np.vstack([zero, np.cumsum(np.abs(C), axis=0)]) * _F
        # running error bounds: each addition is off by <= u |its result|, each product by
        # <= u |its result| (+ underflow, in _FLOOR)
        errS = _U * (np.cumsum(np.abs(S), axis=0) + Sa) * _F
        errB = (
            _U
            * (np.cumsum(np.abs(B), axis=0) + 2 * np.cumsum(np.abs(np.vstack([zero, CB])), axis=0))
            * _F
        )
        # s = a.x: the matrix product's rounding (any order, FMA or not) plus the input radius
        s = x @ a
        absa = np.abs(a)
        rs0 = ((d + 2) * _U * (np.abs(x) @ absa) + r @ absa) * _F
        # margin 4u(|s| + rs0): the rounding of s - rs and s + rs below stays inside it
        rs = (rs0 + 4 * _U * (np.abs(s) + rs0)) * _F + _FLOOR
        lo, hi = s - rs, s + rs
        i_lo = np.searchsorted(brk, lo, side="right")  # breakpoint <= lo: surely active
        i_hi = np.searchsorted(brk, hi, side="left")  # breakpoint >= hi: surely inactive
        i_hi = np.maximum(i_hi, i_lo)
        Si, Bi = S[i_lo], B[i_lo]
        errS, errB = errS[i_lo], errB[i_lo]
        # neurons with lo < breakpoint < hi: |c (s - breakpoint)_+| <= |c| (hi - lo); the
        # difference of two rounded prefix sums is off by at most 2 gamma Sa[i_hi]
        spread = (Sa[i_hi] - Sa[i_lo] + 2 * gamma * Sa[i_hi]) * (2 * rs[:, None])
        undecided = np.where((i_hi > i_lo)[:, None], spread, 0.0)
        y = x + Si * s[:, None] - Bi
        r = (
            r
            + (np.abs(Si) + errS) * rs[:, None]
            + errS * np.abs(s)[:, None]
            + errB
            + undecided
            + 3 * _U * (np.abs(x) + np.abs(Si * s[:, None]) + np.abs(Bi) + np.abs(y))
        ) * _F + _FLOOR
        x = y
    e = (np.abs(x - Y) * (1 + 2 * _U) + r) * _F
    bound = float(np.sqrt(np.max(np.sum(e * e, axis=1)) * _F) * _F)
    return bound if np.isfinite(bound) else float("inf")
