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

from certified.arith._kernels import _exp_point, dn, up

__all__ = ["gibbs_sums"]


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
            elo = _exp_point(tlo)[0]
            ehi, good = _exp_point(thi)[1:]
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
