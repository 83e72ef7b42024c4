"""Rigorous float64 enclosures of the marginals of a Gibbs plan.

For potentials ``f, g`` (doubles), ``γ > 0`` and costs ``c_ij ∈ [clo_ij, chi_ij]``, the Gibbs
plan ``P_ij = a_i b_j exp((f_i + g_j − c_ij)/γ)`` has row sums ``r_i = a_i Σ_j b_j E_ij`` and
column sums ``c_j = b_j Σ_i a_i E_ij``. One compiled pass over the n × m entries encloses the
inner sums ``Σ_j b_j E_ij`` and ``Σ_i a_i E_ij`` with every operation rounded outward
(``dn``/``up``, proofs/bounds.md#pred-succ) and the exponential enclosed by the proved kernel of
:mod:`certified.arith._kernels` (proofs/bounds.md#exp-taylor, #widening); never ``np.exp``.
proof: proofs/bounds.md#eot-sums
"""

from __future__ import annotations

import numpy as np
from numba import njit

from certified.arith._kernels import ETA, PHI, _exp_point, dn, up

__all__ = ["gibbs_sums", "gibbs_sums_sq"]

SPLIT = 134217729.0  # 2^27 + 1, Veltkamp's splitting constant
SMALL = 2.0**-450  # below it Dekker's product may underflow: the square is bounded instead


@njit(cache=True, error_model="numpy")
def _exp_pair(tlo, thi):  # pragma: no cover - compiled
    """Bounds ``elo <= exp(tlo)``, ``exp(thi) <= ehi`` from one kernel call at ``thi``:
    exp(tlo) = exp(thi) e^{-(thi - tlo)} >= lo(exp(thi)) (1 - (thi - tlo)).
    proof: proofs/bounds.md#eot-sums"""
    lo, hi, good = _exp_point(thi)
    w = up(thi - tlo)
    elo = dn(lo * dn(1.0 - w)) if w < 1.0 else 0.0
    return max(elo, 0.0), hi, good


@njit(cache=True, error_model="numpy")
def _sums(f, g, clo, chi, ilo, ihi, alo, ahi, blo, bhi):  # pragma: no cover - compiled
    n, m = clo.shape
    row_lo = np.zeros(n)
    row_hi = np.zeros(n)
    col_lo = np.zeros(m)
    col_hi = np.zeros(m)
    ok = True
    for i in range(n):
        slo = 0.0
        shi = 0.0
        fi = f[i]
        ai_lo = alo[i]
        ai_hi = ahi[i]
        for j in range(m):
            s = fi + g[j]
            zlo = dn(dn(s) - chi[i, j])
            zhi = up(up(s) - clo[i, j])
            tlo = dn(zlo * (ilo if zlo >= 0.0 else ihi))  # times 1/γ ∈ [ilo, ihi], ilo > 0
            thi = up(zhi * (ihi if zhi >= 0.0 else ilo))
            elo, ehi, good = _exp_pair(tlo, thi)
            ok = ok and good
            slo = dn(slo + dn(blo[j] * elo))
            shi = up(shi + up(bhi[j] * ehi))
            col_lo[j] = dn(col_lo[j] + dn(ai_lo * elo))
            col_hi[j] = up(col_hi[j] + up(ai_hi * ehi))
        row_lo[i] = slo
        row_hi[i] = shi
    return row_lo, row_hi, col_lo, col_hi, ok


def gibbs_sums(f, g, clo, chi, inv_gamma, a_iv, b_iv):
    """Enclosures ``[row_lo, row_hi] ∋ Σ_j b_j E_ij`` and ``[col_lo, col_hi] ∋ Σ_i a_i E_ij``
    with ``E_ij = exp((f_i + g_j − c_ij)/γ)``; ``ok`` is False when an exponential overflows.

    ``inv_gamma``: doubles ``(ilo, ihi)`` around ``1/γ``; ``a_iv``, ``b_iv``: pairs of arrays of
    doubles around the weights (``0 <= lo``).

    Guarantee: encloses (for every ``c_ij ∈ [clo_ij, chi_ij]``), when ``ok``.
    """
    f = np.ascontiguousarray(f, dtype=np.float64)
    g = np.ascontiguousarray(g, dtype=np.float64)
    return _sums(f, g, clo, chi, float(inv_gamma[0]), float(inv_gamma[1]), *a_iv, *b_iv)


@njit(cache=True, error_model="numpy")
def _two_sum(a, b):  # pragma: no cover - compiled
    # Knuth: s + e == a + b exactly (proofs/bounds.md#two-sum)
    s = a + b
    z = s - a
    return s, (a - (s - z)) + (b - z)


@njit(cache=True, error_model="numpy")
def _two_square(a):  # pragma: no cover - compiled
    # Dekker / Veltkamp: p + e == a * a exactly for SMALL <= |a| <= 2^500
    c = SPLIT * a
    hi = c - (c - a)
    lo = a - hi
    p = a * a
    return p, ((hi * hi - p) + 2.0 * hi * lo) + lo * lo


@njit(cache=True, error_model="numpy")
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


@njit(cache=True, error_model="numpy")
def _sums_sq(f, g, X, YT, ilo, ihi, alo, ahi, blo, bhi):  # pragma: no cover - compiled
    n = X.shape[0]
    m = YT.shape[1]
    row_lo = np.zeros(n)
    row_hi = np.zeros(n)
    col_lo = np.zeros(m)
    col_hi = np.zeros(m)
    ok = True
    for i in range(n):
        slo = 0.0
        shi = 0.0
        for j in range(m):
            zlo, zhi = _exponent(f[i], g[j], X, YT, i, j)
            tlo = dn(zlo * (ilo if zlo >= 0.0 else ihi))
            thi = up(zhi * (ihi if zhi >= 0.0 else ilo))
            elo, ehi, good = _exp_pair(tlo, thi)
            ok = ok and good
            slo = dn(slo + dn(blo[j] * elo))
            shi = up(shi + up(bhi[j] * ehi))
            col_lo[j] = dn(col_lo[j] + dn(alo[i] * elo))
            col_hi[j] = up(col_hi[j] + up(ahi[i] * ehi))
        row_lo[i] = slo
        row_hi[i] = shi
    return row_lo, row_hi, col_lo, col_hi, ok


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
