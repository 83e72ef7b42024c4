"""Rigorous float64 enclosures of the marginals of a Gibbs plan.

For potentials ``f, g`` (doubles), ``γ > 0`` and costs ``c_ij ∈ [clo_ij, chi_ij]``, the Gibbs
plan ``P_ij = a_i b_j exp((f_i + g_j − c_ij)/γ)`` has row sums ``r_i = a_i Σ_j b_j E_ij`` and
column sums ``c_j = b_j Σ_i a_i E_ij``. One compiled pass over the n × m entries encloses the
inner sums ``Σ_j b_j E_ij`` and ``Σ_i a_i E_ij`` with every operation rounded outward
(``dn``/``up``, proofs/bounds.md#pred-succ) and the exponential enclosed by the proved kernel of
:mod:`certified.arith._kernels` (proofs/bounds.md#exp-taylor, #widening); never ``np.exp``.
proof: proofs/bounds.md#eot-sums

Each row is done in three loops over j (enclosed exponentials into two row buffers, then the
column accumulations, then the row sum in four directed partial sums) so that the compiler
can vectorise the first two; the helpers are inlined (``inline="always"``: a numba call that
is not inlined costs more than the whole entry). Numba compiles without ``fastmath``: no
reassociation, no FMA contraction (checked at import by :mod:`certified.arith.fpu`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from certified.arith._kernels import (
    E_EXP,
    ETA,
    EXP_ARG_MAX,
    EXP_ARG_MIN,
    MAX_DOUBLE,
    PHI,
    _exp_approx,
    dn,
    up,
)
from certified.transport._costs import TINY  # the floor of proofs/bounds.md#w-sqdist

__all__ = ["gibbs_sums", "gibbs_sums_s", "gibbs_sums_sq"]

SPLIT = 134217729.0  # 2^27 + 1, Veltkamp's splitting constant
SMALL = 2.0**-450  # below it Dekker's product may underflow: the square is bounded instead

LANES = 16  # partial sums per row sum (a power of two)
CLANES = 8  # partial sums per column sum, over the rows i mod CLANES (a power of two)

_inline = njit(cache=True, error_model="numpy", inline="always")
_jit = njit(cache=True, error_model="numpy")


@_inline
def _enclose_exp(tlo, thi):  # pragma: no cover - compiled
    """Bounds ``elo <= exp(tlo)``, ``exp(thi) <= ehi`` (tlo <= thi) from one kernel value at
    ``thi``: exp(tlo) = exp(thi) e^{-(thi - tlo)} >= lo(exp(thi)) (1 - (thi - tlo)); ``bad``
    when the argument overflows, the bound is not finite or the kernel's precondition fails.
    proof: proofs/bounds.md#eot-sums (#exp-taylor, #widening)"""
    y, broken = _exp_approx(thi)
    t = E_EXP * y + 2.0 * ETA
    lo = max(0.0, dn(y - t))
    hi = up(y + t)
    below = thi <= EXP_ARG_MIN  # exp(thi) < 2^-1074
    lo = 0.0 if below else lo
    hi = ETA if below else hi
    bad = broken | (thi > EXP_ARG_MAX) | (not abs(hi) <= MAX_DOUBLE)  # no branches
    w = up(thi - tlo)
    elo = dn(lo * dn(1.0 - w)) if w < 1.0 else 0.0
    return max(elo, 0.0), hi, bad


@_inline
def _scale_exponent(zlo, zhi, ilo, ihi):  # pragma: no cover - compiled
    """Bounds on z/γ for z ∈ [zlo, zhi] and 1/γ ∈ [ilo, ihi], 0 < ilo."""
    tlo = dn(zlo * (ilo if zlo >= 0.0 else ihi))
    thi = up(zhi * (ihi if zhi >= 0.0 else ilo))
    return tlo, thi


@_inline
def _accumulate(i, elo, ehi, ai_lo, ai_hi, blo, bhi, col_lo, col_hi, lo, hi):  # pragma: no cover
    """Adds ``a_i E_ij`` to the column bounds of lane ``i mod CLANES`` and returns the bounds
    of ``Σ_j b_j E_ij`` from LANES partial sums (j mod LANES) combined pairwise: all terms are
    >= 0 and every partial sum is rounded outward, so any grouping gives bounds; more
    groups keep each accumulated rounding shorter (widths ~ m / LANES ulps, not m)."""
    m = elo.shape[0]
    cl, ch = col_lo[i % CLANES], col_hi[i % CLANES]
    for j in range(m):
        cl[j] = dn(cl[j] + dn(ai_lo * elo[j]))
        ch[j] = up(ch[j] + up(ai_hi * ehi[j]))
    lo[:] = 0.0
    hi[:] = 0.0
    top = m - m % LANES
    for j0 in range(0, top, LANES):
        for k in range(LANES):
            lo[k] = dn(lo[k] + dn(blo[j0 + k] * elo[j0 + k]))
            hi[k] = up(hi[k] + up(bhi[j0 + k] * ehi[j0 + k]))
    for j in range(top, m):
        lo[0] = dn(lo[0] + dn(blo[j] * elo[j]))
        hi[0] = up(hi[0] + up(bhi[j] * ehi[j]))
    return _pairwise(lo, hi, LANES)


@_inline
def _pairwise(lo, hi, w):  # pragma: no cover - compiled
    """lo[0] <= Σ lo, Σ hi <= hi[0] (w a power of two; the arrays are overwritten)."""
    while w > 1:
        w //= 2
        for k in range(w):
            lo[k] = dn(lo[k] + lo[k + w])
            hi[k] = up(hi[k] + hi[k + w])
    return lo[0], hi[0]


@_inline
def _columns(col_lo, col_hi):  # pragma: no cover - compiled
    """The column bounds: the CLANES lanes summed pairwise, rounded outward."""
    m = col_lo.shape[1]
    out_lo, out_hi = np.empty(m), np.empty(m)
    lo, hi = np.empty(CLANES), np.empty(CLANES)
    for j in range(m):
        for k in range(CLANES):
            lo[k] = col_lo[k, j]
            hi[k] = col_hi[k, j]
        out_lo[j], out_hi[j] = _pairwise(lo, hi, CLANES)
    return out_lo, out_hi


@_jit
def _sums(f, g, clo, chi, ilo, ihi, alo, ahi, blo, bhi):  # pragma: no cover - compiled
    n, m = clo.shape
    row_lo, row_hi = np.empty(n), np.empty(n)
    col_lo, col_hi = np.zeros((CLANES, m)), np.zeros((CLANES, m))
    elo, ehi = np.empty(m), np.empty(m)
    lo, hi = np.empty(LANES), np.empty(LANES)
    bad = False
    for i in range(n):
        fi = f[i]
        for j in range(m):
            s = fi + g[j]
            zlo = dn(dn(s) - chi[i, j])
            zhi = up(up(s) - clo[i, j])
            tlo, thi = _scale_exponent(zlo, zhi, ilo, ihi)
            elo[j], ehi[j], b_ = _enclose_exp(tlo, thi)
            bad |= b_
        row_lo[i], row_hi[i] = _accumulate(
            i, elo, ehi, alo[i], ahi[i], blo, bhi, col_lo, col_hi, lo, hi
        )
    return row_lo, row_hi, *_columns(col_lo, col_hi), not bad


def gibbs_sums(f, g, clo, chi, inv_gamma, a_iv, b_iv):
    """Enclosures ``[row_lo, row_hi] ∋ Σ_j b_j E_ij`` and ``[col_lo, col_hi] ∋ Σ_i a_i E_ij``
    with ``E_ij = exp((f_i + g_j − C_ij)/γ)``; ``ok`` is False when an exponential overflows.

    ``inv_gamma``: doubles ``(ilo, ihi)`` around ``1/γ``; ``a_iv``, ``b_iv``: pairs of arrays of
    doubles around the weights (``0 <= lo``).

    Guarantee: encloses (for every ``c_ij ∈ [clo_ij, chi_ij]``), when ``ok``.
    """
    f = np.ascontiguousarray(f, dtype=np.float64)
    g = np.ascontiguousarray(g, dtype=np.float64)
    clo = np.ascontiguousarray(clo, dtype=np.float64)
    chi = np.ascontiguousarray(chi, dtype=np.float64)
    return _sums(f, g, clo, chi, float(inv_gamma[0]), float(inv_gamma[1]), *a_iv, *b_iv)


@_jit
def _sums_s(f, g, S, kappa, kup, ilo, ihi, alo, ahi, blo, bhi):  # pragma: no cover - compiled
    n, m = S.shape
    row_lo, row_hi = np.empty(n), np.empty(n)
    col_lo, col_hi = np.zeros((CLANES, m)), np.zeros((CLANES, m))
    elo, ehi = np.empty(m), np.empty(m)
    lo, hi = np.empty(LANES), np.empty(LANES)
    bad = False
    for i in range(n):
        fi = f[i]
        for j in range(m):
            s2 = S[i, j]  # cost bounds of proofs/bounds.md#w-sqdist
            big = s2 >= TINY
            clo = s2 * kappa if big else 0.0
            chi = s2 * kup if big else 2.0 * TINY
            s = fi + g[j]
            zlo = dn(dn(s) - chi)
            zhi = up(up(s) - clo)
            tlo, thi = _scale_exponent(zlo, zhi, ilo, ihi)
            elo[j], ehi[j], b_ = _enclose_exp(tlo, thi)
            bad |= b_
        row_lo[i], row_hi[i] = _accumulate(
            i, elo, ehi, alo[i], ahi[i], blo, bhi, col_lo, col_hi, lo, hi
        )
    return row_lo, row_hi, *_columns(col_lo, col_hi), not bad


def gibbs_sums_s(f, g, S, kappa_K, inv_gamma, a_iv, b_iv):
    """As :func:`gibbs_sums` for the cost ``|x_i - y_j|^2`` of double points, from the float
    squared distances ``S`` (``transport._costs.squared_distances``) and ``kappa_K`` =
    ``(κ_d, K_d)``: the cost bounds ``fl(κ_d ŝ) <= c <= fl(K_d ŝ)`` of
    proofs/bounds.md#w-sqdist are formed entry by entry instead of as two n × m matrices.

    Guarantee: encloses, when ``ok``.
    """
    f = np.ascontiguousarray(f, dtype=np.float64)
    g = np.ascontiguousarray(g, dtype=np.float64)
    S = np.ascontiguousarray(S, dtype=np.float64)
    kappa, kup = (float(k) for k in kappa_K)
    return _sums_s(f, g, S, kappa, kup, float(inv_gamma[0]), float(inv_gamma[1]), *a_iv, *b_iv)


@_inline
def _two_sum(a, b):  # pragma: no cover - compiled
    # Knuth: s + e == a + b exactly (proofs/bounds.md#two-sum)
    s = a + b
    z = s - a
    return s, (a - (s - z)) + (b - z)


@_inline
def _two_square(a):  # pragma: no cover - compiled
    # Dekker / Veltkamp: p + e == a * a exactly for SMALL <= |a| <= 2^500
    c = SPLIT * a
    hi = c - (c - a)
    lo = a - hi
    p = a * a
    return p, ((hi * hi - p) + 2.0 * hi * lo) + lo * lo


@_inline
def _exponent(fi, gj, X, YT, i, j):  # pragma: no cover - compiled
    """(zlo, zhi) around f_i + g_j - |x_i - y_j|^2; proof: proofs/bounds.md#eot-exponent."""
    d = X.shape[1]
    acc, rest = _two_sum(fi, gj)
    total = abs(rest)
    extra = 0.0
    for k in range(d):
        dh, dl = _two_sum(X[i, k], -YT[k, j])
        if abs(dh) >= SMALL:
            ph, pl = _two_square(dh)
        else:
            ph, pl = 0.0, 0.0
            extra += 2.0**-898
        cross = dl * (2.0 * dh + dl)
        acc, e = _two_sum(acc, -ph)
        rest = ((rest + e) - pl) - cross
        total = ((total + abs(e)) + abs(pl)) + abs(cross)
    z = acc + rest
    bound = up(up((3 * d + 5) * PHI * total) + (extra + 8.0 * (d + 1) * ETA))
    return dn(dn(z) - bound), up(up(z) + bound)


@_inline
def _exponents_row(fi, g, X, YT, i, acc, rest, total, extra):  # pragma: no cover - compiled
    """The construction of :func:`_exponent` for row i and all j at once, coordinate by
    coordinate (loops over j without branches, so that they vectorise); leaves
    ``z_j = acc_j + rest_j`` with the error terms ``total_j``, ``extra_j``."""
    m = YT.shape[1]
    for j in range(m):
        acc[j], rest[j] = _two_sum(fi, g[j])
        total[j] = abs(rest[j])
        extra[j] = 0.0
    for k in range(X.shape[1]):
        xk = X[i, k]
        for j in range(m):
            dh, dl = _two_sum(xk, -YT[k, j])
            ph, pl = _two_square(dh)
            small = not abs(dh) >= SMALL
            ph = 0.0 if small else ph
            pl = 0.0 if small else pl
            extra[j] += 2.0**-898 if small else 0.0
            cross = dl * (2.0 * dh + dl)
            acc[j], e = _two_sum(acc[j], -ph)
            rest[j] = ((rest[j] + e) - pl) - cross
            total[j] = ((total[j] + abs(e)) + abs(pl)) + abs(cross)


@_jit
def _sums_sq(f, g, X, YT, ilo, ihi, alo, ahi, blo, bhi):  # pragma: no cover - compiled
    n, d = X.shape
    m = YT.shape[1]
    row_lo, row_hi = np.empty(n), np.empty(n)
    col_lo, col_hi = np.zeros((CLANES, m)), np.zeros((CLANES, m))
    elo, ehi = np.empty(m), np.empty(m)
    lo, hi = np.empty(LANES), np.empty(LANES)
    acc, rest, total, extra = np.empty(m), np.empty(m), np.empty(m), np.empty(m)
    factor = (3 * d + 5) * PHI
    floor = 8.0 * (d + 1) * ETA
    bad = False
    for i in range(n):
        _exponents_row(f[i], g, X, YT, i, acc, rest, total, extra)
        for j in range(m):  # proof: proofs/bounds.md#eot-exponent (the bound B)
            z = acc[j] + rest[j]
            bound = up(up(factor * total[j]) + (extra[j] + floor))
            tlo, thi = _scale_exponent(dn(dn(z) - bound), up(up(z) + bound), ilo, ihi)
            elo[j], ehi[j], b_ = _enclose_exp(tlo, thi)
            bad |= b_
        row_lo[i], row_hi[i] = _accumulate(
            i, elo, ehi, alo[i], ahi[i], blo, bhi, col_lo, col_hi, lo, hi
        )
    return row_lo, row_hi, *_columns(col_lo, col_hi), not bad


def gibbs_sums_sq(f, g, X, Y, inv_gamma, a_iv, b_iv):
    """As :func:`gibbs_sums` for the cost ``|x_i - y_j|^2`` of double points ``X`` (n × d)
    and ``Y`` (m × d) with ``|x - y| < 2^500`` coordinatewise: the exponent's numerator
    ``f_i + g_j - |x_i - y_j|^2`` is formed with error-free transformations, so its enclosure
    is about one ulp of the numerator (not of the cost), which matters when γ is small.

    Guarantee: encloses, when ``ok``.
    """
    f = np.ascontiguousarray(f, dtype=np.float64)
    g = np.ascontiguousarray(g, dtype=np.float64)
    X = np.ascontiguousarray(X, dtype=np.float64)
    YT = np.ascontiguousarray(np.asarray(Y, dtype=np.float64).T)
    return _sums_sq(f, g, X, YT, float(inv_gamma[0]), float(inv_gamma[1]), *a_iv, *b_iv)
