"""Three-valued check of H3, the mean-field Lipschitz bound (theorems.md section 5).

F(μ) = (Γ_μ)#μ with Γ_μ(x) = Σ_j w_j e^{xᵀAy_j} V y_j / Σ_j w_j e^{xᵀAy_j}, A = KᵀQ/√k.
H3 (as transcribed): W₂(F(μ), F(ν)) ≤ ‖V‖₂ (1 + 3‖A‖₂R²) e^{2‖A‖₂R²} W₂(μ, ν) for μ, ν on B_R.

For a given pair (μ, ν) (proofs/bounds.md#h3-pair):

* F(μ) has atoms Γ_μ(x_i) (balls) with weights w_i. Let m_μ be the measure of their exact
  midpoints and e_μ = max_i |Γ_μ(x_i) − mid|₂ (upper bound from the radii). By the triangle
  inequality for W₂ and the coupling atom ↔ midpoint, |W₂(Fμ, Fν) − W₂(m_μ, m_ν)| ≤ e_μ + e_ν,
  and ``certified.transport.wasserstein`` encloses W₂(m_μ, m_ν) and W₂(μ, ν).
* VERIFIED (for this pair): W₂(Fμ,Fν)_upper / W₂(μ,ν)_lower ≤ RHS_lower.
* REFUTED: W₂(Fμ,Fν)_lower / W₂(μ,ν)_upper > RHS_upper — μ, ν are a certified counterexample.
"""

from __future__ import annotations

from typing import Any

import flint

from certified.arith.ball import check_precision, endpoints, mid_rad, precision
from certified.attention.instance import AttentionInstance
from certified.attention.lipschitz import LipschitzVerdict, norm_hint, rhs_bounds
from certified.attention.maps import attention_measure_map
from certified.errors import InputError

__all__ = ["check_h3", "pushforward_w2_bounds"]


def _pushforward(inst: AttentionInstance, measure, prec: int):
    pts, w = measure
    keep = [j for j in range(len(w)) if w[j] > 0]  # atoms of weight 0 carry no mass
    pts, w = pts[keep], w[keep]
    G = attention_measure_map(inst.layer, pts, list(w), pts, prec=prec)
    mids, err2 = [], flint.fmpq(0)
    for i in range(G.nrows()):
        row, e2 = [], flint.fmpq(0)
        for a in range(G.ncols()):
            m, r = mid_rad(G[i, a], "Gamma")
            row.append(m)
            e2 += r * r
        mids.append(row)
        err2 = max(err2, e2)
    with precision(prec):
        err = endpoints(flint.arb(err2).sqrt(), "err")[1]
    return mids, list(w), err


def _as_dict(measure) -> dict:
    """The measure as {atom: total weight} (exact; repeated atoms merged, zero weights dropped)."""
    out: dict = {}
    for x, w in zip(*measure, strict=True):
        key = tuple((int(v.p), int(v.q)) for v in x)
        out[key] = out.get(key, flint.fmpq(0)) + w
    return {key: w for key, w in out.items() if w != 0}


def pushforward_w2_bounds(
    inst: AttentionInstance, prec: int = 128
) -> tuple[flint.fmpq, flint.fmpq, Any, Any]:
    """Bounds on W₂(F(μ), F(ν)) and the enclosure of W₂(μ, ν) for the instance's μ, ν.

    Returns
    -------
    (lower, upper, W2(mu, nu) enclosure, W2(m_mu, m_nu) enclosure)

    Guarantee: ``lower <= W₂(F(μ), F(ν)) <= upper``.
    """
    from certified.transport import Measure, wasserstein

    if inst.mu is None or inst.nu is None:
        raise InputError('mu, nu: H3 needs two measures "mu" and "nu" in the instance')
    mid_mu, w_mu, e_mu = _pushforward(inst, inst.mu, prec)
    mid_nu, w_nu, e_nu = _pushforward(inst, inst.nu, prec)
    base = wasserstein(Measure(inst.mu[0], inst.mu[1]), Measure(inst.nu[0], inst.nu[1]), 2)
    pushed = wasserstein(Measure(mid_mu, w_mu), Measure(mid_nu, w_nu), 2)
    lower = max(pushed.lower - e_mu - e_nu, flint.fmpq(0))
    return lower, pushed.upper + e_mu + e_nu, base, pushed


def check_h3(inst: AttentionInstance, *, prec: int = 128) -> LipschitzVerdict:
    """Three-valued check of H3 on the instance's pair of measures (module docstring).

    Guarantee: VERIFIED ⇒ W₂(Fμ, Fν) ≤ RHS · W₂(μ, ν) for this pair; REFUTED ⇒ H3 is false
    (this pair is a counterexample). No certificate kind covers H3 in version 1.
    """
    prec = check_precision(prec)
    lo, hi, base, _ = pushforward_w2_bounds(inst, prec)
    hv, hm = norm_hint(inst.V, prec), norm_hint(inst.K.T @ inst.Q, prec)
    n = inst.mu[0].shape[0]
    rhs_lo, rhs_hi = rhs_bounds(
        "H3", (hv["lower"], hv["upper"]), (hm["lower"], hm["upper"]), inst.R, n, inst.k, prec
    )
    extra = {"w2_pushforward": (lo, hi), "w2_base": (base.lower, base.upper)}
    if _as_dict(inst.mu) == _as_dict(inst.nu):
        return LipschitzVerdict(
            "H3",
            "UNDECIDED",
            None,
            None,
            rhs_lo,
            rhs_hi,
            "",
            message="mu = nu: W2(mu, nu) = 0, the ratio is undefined; give distinct measures",
            extra=extra,
        )
    lhs_lo = lo / base.upper
    lhs_hi = hi / base.lower if base.lower > 0 else None
    if lhs_lo > rhs_hi:
        return LipschitzVerdict(
            "H3",
            "REFUTED",
            lhs_lo,
            lhs_hi,
            rhs_lo,
            rhs_hi,
            "H3 is false: W2(F mu, F nu) / W2(mu, nu) >= lhs_lower > rhs_upper >= RHS for the "
            "instance's measures on B_R",
            counterexample={"mu": inst.mu, "nu": inst.nu},
            message=f"certified ratio >= {float(lhs_lo):.6g} > {float(rhs_hi):.6g}",
            extra=extra,
        )
    if lhs_hi is not None and lhs_hi <= rhs_lo:
        return LipschitzVerdict(
            "H3",
            "VERIFIED",
            lhs_lo,
            lhs_hi,
            rhs_lo,
            rhs_hi,
            "for the instance's pair: W2(F mu, F nu) <= lhs_upper W2(mu, nu) and lhs_upper <= "
            "rhs_lower <= RHS of H3",
            message=f"ratio <= {float(lhs_hi):.6g} <= {float(rhs_lo):.6g}",
            extra=extra,
        )
    return LipschitzVerdict(
        "H3",
        "UNDECIDED",
        lhs_lo,
        lhs_hi,
        rhs_lo,
        rhs_hi,
        "",
        message="the certified ratio interval overlaps the right side's interval; refine the "
        "measures or raise the precision",
        extra=extra,
    )
