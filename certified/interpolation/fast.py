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


def _anchored(C: np.ndarray, brk: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Prefix sums ``S[k] = c_1 + .. + c_k`` (the slope of G just above β_k), values
    ``V[k] = G(β_k)`` by ``V[k+1] = V[k] + S[k](β_{k+1} − β_k)``, anchors ``β[k]``
    (k = 0..P; row 0 is zero, ``β[0] = 0``), all in float64."""
    zero = np.zeros((1, C.shape[1]))
    S = np.vstack([zero, np.cumsum(C, axis=0)])
    V = np.vstack([zero, zero, np.cumsum(S[1:-1] * np.diff(brk)[:, None], axis=0)])
    return S, V, np.concatenate([[0.0], brk])


def float64_images(phases: list[tuple], X: np.ndarray) -> np.ndarray:
    """Float64 ``Φ_T(x_n)`` (no guarantee: the baseline). Each phase is ``x + G(a·x)`` with
    ``G(s) = V[k] + S[k](s − β_k)``, k the number of breakpoints below s: anchored at the
    breakpoints, so large slopes never multiply s itself (no cancellation between
    ``S·s`` and the intercepts).

    Guarantee: none (heuristic).
    """
    x = np.array(X, dtype=np.float64)
    for a, tau, W, brk in phases:
        S, V, beta = _anchored(W * tau[:, None], brk)
        s = x @ a
        k = np.searchsorted(brk, s, side="left")
        x = x + (V[k] + S[k] * (s - beta[k])[:, None])
    return x


def phase_tables(tau: np.ndarray, W: np.ndarray, brk: np.ndarray) -> tuple:
    """``S, V, β`` of :func:`_anchored` for ``c_i = fl(τ_i w_i)``, ``Sa`` (prefix sums of
    ``|c_i|``, rounded up) and the bounds ``|S_k − Ŝ_k| <= errS[k]``,
    ``|V_k − V̂_k| <= errV[k]`` against the exact ``S_k``, ``V_k`` of the exact ``τ_i w_i``
    (proofs/bounds.md#interp-float).

    Guarantee: upper bounds, under round-to-nearest float64.
    """
    zero = np.zeros((1, W.shape[1]))
    C = W * tau[:, None]
    S, V, beta = _anchored(C, brk)
    absS = np.abs(S)
    Sa = np.vstack([zero, np.cumsum(np.abs(C), axis=0)]) * _F
    # running error bounds: each addition is off by <= u |its result|, each product by
    # <= u |its result| (+ underflow, in _FLOOR); c_i = fl(tau_i w_i) is in Sa
    errS = _U * (np.cumsum(absS, axis=0) + Sa) * _F
    # p_k = fl(S_k delta_k) with delta_k = fl(beta_{k+1} - beta_k) >= 0 (k = 1..P-1), as
    # in _anchored; |S_k delta_k - p_k| <= (errS_k (1 + u) + u|S_k|) delta_k + u|p_k|
    delta = np.diff(brk)[:, None]
    p = S[1:-1] * delta
    errP = ((errS[1:-1] * (1 + _U) + _U * absS[1:-1]) * delta + _U * np.abs(p)) * _F + _FLOOR
    # V[k+1] = fl(V[k] + p_k): off by errV[k] + errP_k + u|V[k+1]|
    errV = np.vstack([zero, zero, np.cumsum(errP + _U * np.abs(V[2:]), axis=0)]) * _F
    return S, V, beta, Sa, errS, errV


def certified_error_float64(phases: list[tuple], X: np.ndarray, Y: np.ndarray) -> float:
    """Upper bound of ``max_n |Φ_T(x_n) − y_n|_2`` for double data and a double laminar
    schedule (from :func:`float_phases`), in float64 with a priori error bounds: the
    evaluation of :func:`float64_images` carrying a componentwise radius.

    Guarantee: upper bound (proofs/bounds.md#interp-float), under round-to-nearest float64.
    """
    x = np.array(X, dtype=np.float64)
    r = np.zeros_like(x)
    for a, tau, W, brk in phases:
        P = len(brk)
        gamma = (P + 4) * _U / (1 - (P + 4) * _U)
        S, V, beta, Sa, errS, errV = phase_tables(tau, W, brk)
        absS = np.abs(S)
        # s = a.x: exact when a has one nonzero entry, a power of two (construction A's
        # normals -e_j; up to underflow, in _FLOOR); otherwise the dot product's rounding
        # (any order, FMA or not). rs0 bounds |s_true - s| including the input radius.
        absa = np.abs(a)
        nz = np.flatnonzero(a)
        if len(nz) == 1 and abs(np.frexp(a[nz[0]])[0]) == 0.5:
            s = x[:, nz[0]] * a[nz[0]]
            rs_dot = 0.0
        else:
            s = x @ a
            rs_dot = (len(nz) + 2) * _U * (np.abs(x) @ absa)
        rs0 = (rs_dot + r @ absa) * _F + _FLOOR
        # margin 4u(|s| + rs0): the rounding of s - rs and s + rs below stays inside it
        rs = (rs0 + 4 * _U * (np.abs(s) + rs0)) * _F + _FLOOR
        lo, hi = s - rs, s + rs
        i_lo = np.searchsorted(brk, lo, side="right")  # breakpoint <= lo: surely active
        i_hi = np.searchsorted(brk, hi, side="left")  # breakpoint >= hi: surely inactive
        i_hi = np.maximum(i_hi, i_lo)
        # neurons with lo < breakpoint < hi: |c (s - breakpoint)_+| <= |c| (hi - lo); the
        # difference of two rounded prefix sums is off by at most 2 gamma Sa[i_hi]
        spread = (Sa[i_hi] - Sa[i_lo] + 2 * gamma * Sa[i_hi]) * (2 * rs[:, None])
        undecided = np.where((i_hi > i_lo)[:, None], spread, 0.0)
        k = i_lo
        t = (s - beta[k])[:, None]  # |t - (s_true - beta_k)| <= u|t| + rs0
        St = S[k] * t
        g = V[k] + St
        y = x + g
        at = np.abs(t)
        err_g = (
            errV[k]
            + errS[k] * at
            + (absS[k] + errS[k]) * (_U * at + rs0[:, None])
            + _U * (np.abs(St) + np.abs(g))
        )
        r = (r + err_g + undecided + _U * np.abs(y)) * _F + _FLOOR
        x = y
    e = (np.abs(x - Y) * (1 + 2 * _U) + r) * _F
    return _norm_upper(e)


def _norm_upper(e: np.ndarray) -> float:
    """Upper bound of ``max_n |e_n|_2`` for nonnegative rows ``e_n`` (float64), without
    underflow (``e_k²`` of ``e_k < 2^-537`` is 0: an error of 1e-226 gave a bound 0) or
    overflow: each row is divided by a power of two ``2^E >= max_k e_k`` (exact up to
    underflow of its small entries), then ``2^E sqrt((Σ q_k² + d 2^-1000) F) F``
    (proofs/bounds.md#interp-float-norm). ``inf`` when it overflows."""
    m = np.max(e, axis=1)
    _, E = np.frexp(np.where(m > 0, m, 1.0))  # m < 2^E
    q = np.ldexp(e, -E[:, None])  # exact division by 2^E (up to underflow)
    total = (np.sum(q * q, axis=1) + e.shape[1] * 2.0**-1000) * _F
    with np.errstate(over="ignore"):
        bounds = np.ldexp(np.sqrt(total) * _F, E)
    # a subnormal result of ldexp is rounded (by at most 2^-1075): one subnormal ulp added
    bounds = bounds + np.where(bounds < 2.0**-1021, 2.0**-1074, 0.0)
    bound = float(np.max(bounds))
    return bound if np.isfinite(bound) else float("inf")
