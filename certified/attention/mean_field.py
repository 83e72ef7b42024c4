"""Three-valued check of H3, the mean-field Lipschitz bound (theorems.md section 5).

F(μ) = (Γ_μ)#μ with Γ_μ(x) = Σ_j w_j e^{xᵀAy_j} V y_j / Σ_j w_j e^{xᵀAy_j}, A = KᵀQ/√k.
H3 (as transcribed): W₂(F(μ), F(ν)) ≤ ‖V‖₂ (1 + 3‖A‖₂R²) e^{2‖A‖₂R²} W₂(μ, ν) for μ, ν on B_R.

For a given pair (μ, ν) (proofs/bounds.md#h3-certificate, proofs/lipschitz.md §4):

* F(μ) has atoms Γ_μ(x_i) (balls) with weights w_i. The exact midpoints of the balls are an
  untrusted guide: the coupling π of the midpoint measures (``certified.transport``) is also a
  coupling of F(μ), F(ν) (same weights) and of μ, ν, so W₂(Fμ, Fν)² ≤ Σ π_ij sup|g_i − h_j|²
  over the balls; the midpoints' dual potentials, shifted down until feasible for the lower
  ends of the ball costs, give W₂(Fμ, Fν)² ≥ Σ a φ + Σ b ψ. W₂(μ, ν) is enclosed directly.
* VERIFIED (for this pair): W₂(Fμ,Fν)_upper / W₂(μ,ν)_lower ≤ RHS_lower.
* REFUTED: W₂(Fμ,Fν)_lower / W₂(μ,ν)_upper > RHS_upper — μ, ν are a certified counterexample.

Both come with a ``lipschitz`` v1 certificate of hypothesis H3 (``_h3_certificate``).
"""

from __future__ import annotations

from typing import Any

import flint
import numpy as np

from certified.arith.ball import check_precision, endpoints, mid_rad, precision
from certified.attention.instance import AttentionInstance
from certified.attention.lipschitz import (
    CLAIM_BITS,
    LipschitzVerdict,
    norm_hint,
    rhs_bounds,
    round_down,
    round_up,
)
from certified.attention.maps import attention_measure_map
from certified.errors import InputError
from certified.verdict import Outcome

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


def _pushed_atoms(inst: AttentionInstance, measure, prec: int) -> flint.arb_mat:
    """Balls ∋ Γ_μ(x_i) at every atom x_i of μ (atoms of weight 0 included as queries).

    Guarantee: row i encloses Γ_μ(x_i) (``attention_measure_map``)."""
    pts, w = measure
    keep = [j for j in range(len(w)) if w[j] > 0]
    return attention_measure_map(inst.layer, pts[keep], list(w[keep]), pts, prec=prec)


def _h3_evidence(inst: AttentionInstance, prec: int) -> dict[str, Any]:
    """Certified bounds on W₂(μ, ν)² and W₂(Fμ, Fν)² with the data of an H3 certificate
    (proofs/lipschitz.md §4, bounds.md #h3-certificate).

    ``cost_upper``: Σ π_ij sup|Γ_μ(x_i) − Γ_ν(y_j)|² for the coupling π of the midpoints of the
    pushed atoms (a coupling of μ and ν as well: same weights); ``low``: Σ a φ' + Σ b ψ with
    the midpoints' potentials shifted down until φ'_i + ψ_j ≤ the lower end of every ball cost.

    Guarantee: ``low <= W₂(Fμ, Fν)² <= cost_upper`` and ``base`` encloses W₂(μ, ν).
    """
    from certified.transport import Measure, wasserstein

    G, H = (_pushed_atoms(inst, m, prec) for m in (inst.mu, inst.nu))
    mids = [
        np.array(
            [[mid_rad(M[i, t], "Gamma")[0] for t in range(M.ncols())] for i in range(M.nrows())]
        )
        for M in (G, H)
    ]
    base = wasserstein(Measure(*inst.mu), Measure(*inst.nu), 2)
    pushed = wasserstein(Measure(mids[0], inst.mu[1]), Measure(mids[1], inst.nu[1]), 2)
    n, m, d = G.nrows(), H.nrows(), G.ncols()
    with precision(prec):
        ends = [
            [endpoints(sum(((e := G[i, t] - H[j, t]) * e for t in range(d)), flint.arb(0)), "cost")
             for j in range(m)]
            for i in range(n)
        ]  # fmt: skip
    phi, psi = list(pushed.phi), list(pushed.psi)
    slack = max(max(phi[i] + psi[j] - ends[i][j][0] for i in range(n) for j in range(m)), 0)
    top = max(ends[i][j][1] for i in range(n) for j in range(m))
    delta = round_up(slack + (1 + top) * flint.fmpq(1, 2**40), 20)  # room for the checker's arb
    phi = [x - delta for x in phi]
    low = sum((w * v for w, v in zip(list(inst.mu[1]) + list(inst.nu[1]), phi + psi, strict=True)),
              flint.fmpq(0))  # fmt: skip
    coupling = pushed.coupling
    cost_upper = sum((w * ends[i][j][1] for i, j, w in coupling), flint.fmpq(0))
    sq = lambda x, y: sum(((u - v) ** 2 for u, v in zip(x, y, strict=True)), flint.fmpq(0))  # noqa: E731
    mu_pts, nu_pts = inst.mu[0], inst.nu[0]
    base_cost = sum((w * sq(mu_pts[i], nu_pts[j]) for i, j, w in coupling), flint.fmpq(0))
    return {
        "base": base, "coupling": coupling, "base_cost": base_cost, "cost_upper": cost_upper,
        "phi": phi, "psi": psi, "low": max(low, flint.fmpq(0)),
    }  # fmt: skip


def _sqrt_bound(q: flint.fmpq, prec: int, upper: bool) -> flint.fmpq:
    """An exact lower (``upper=False``) or upper bound on √q, q >= 0. Guarantee: rigorous."""
    with precision(prec):
        return endpoints(flint.arb(q).sqrt(), "sqrt")[1 if upper else 0]


def _h3_certificate(
    inst: AttentionInstance, claim: dict, norms: dict, ev: dict, prec: int
) -> dict[str, Any]:
    """The ``lipschitz`` v1 certificate of an H3 verdict (format: proofs/lipschitz.md §4).

    ``claim``: hypothesis, verdict and the two exact bounds; ``norms``: the two norm hints
    of :func:`norm_hint`; ``ev``: :func:`_h3_evidence`. VERIFIED embeds the base W₂ claim with
    the pushed coupling (its exact base cost as ``upper_q``); REFUTED the base enclosure as it
    is and the shifted pushed potentials.

    Guarantee: none by itself (the checker decides); every number is written exactly.
    """
    from certified.certificates import exact_number
    from certified.transport.certificate import wasserstein_certificate
    from certified.transport.wasserstein import _root_bounds

    wc = wasserstein_certificate(ev["base"])
    refuted = claim["verdict"] == "REFUTED"
    if not refuted:  # the coupling serves both W₂(μ, ν) <= ... and W₂(Fμ, Fν) <= ...
        upper = _root_bounds(ev["base"].lower_q, ev["base_cost"], flint.fmpq(2))[1]
        wc["claim"]["upper_q"], wc["claim"]["upper"] = map(exact_number, (ev["base_cost"], upper))
        wc["hints"]["coupling"] = [[i, j, exact_number(w)] for i, j, w in ev["coupling"]]
    key = "upper" if refuted else "vector"
    hints: dict[str, Any] = {
        "precision": prec,
        "norms": {
            name: {key: exact_number(b[key]) if refuted else [exact_number(x) for x in b[key]]}
            for name, b in norms.items()
        },
        "base": {"claim": wc["claim"], "hints": wc["hints"]},
    }
    if refuted:
        hints["pushed"] = {
            "phi": [exact_number(x) for x in ev["phi"]],
            "psi": [exact_number(x) for x in ev["psi"]],
        }
    body = inst.to_json()
    instance = {key: body[key] for key in ("Q", "K", "V", "R", "mu", "nu")}
    c = {key: value if key in ("hypothesis", "verdict") else exact_number(value)
         for key, value in claim.items()}  # fmt: skip
    return {"kind": "lipschitz", "version": 1, "instance": instance, "claim": c, "hints": hints}


def check_h3(inst: AttentionInstance, *, prec: int = 128) -> LipschitzVerdict:
    """Three-valued check of H3 on the instance's pair of measures (module docstring).

    Returns
    -------
    LipschitzVerdict
        With a ``lipschitz`` v1 certificate (hypothesis H3, proofs/lipschitz.md §4) for
        VERIFIED and REFUTED, not yet checked.

    Guarantee: VERIFIED ⇒ W₂(Fμ, Fν) ≤ lhs_upper · W₂(μ, ν) with lhs_upper ≤ RHS for this
    pair; REFUTED ⇒ H3 is false (this pair is a counterexample).
    """
    prec = check_precision(prec)
    if inst.mu is None or inst.nu is None:
        raise InputError('mu, nu: H3 needs two measures "mu" and "nu" in the instance')
    ev = _h3_evidence(inst, prec)
    base = ev["base"]
    hv, hm = norm_hint(inst.V, prec), norm_hint(inst.K.T @ inst.Q, prec)
    n = inst.mu[0].shape[0]
    rhs_lo, rhs_hi = rhs_bounds(
        "H3", (hv["lower"], hv["upper"]), (hm["lower"], hm["upper"]), inst.R, n, inst.k, prec
    )
    w2_push = (_sqrt_bound(ev["low"], prec, False), _sqrt_bound(ev["cost_upper"], prec, True))
    extra = {"w2_pushforward": w2_push, "w2_base": (base.lower, base.upper)}
    if _as_dict(inst.mu) == _as_dict(inst.nu):
        return LipschitzVerdict(
            "H3",
            Outcome.UNDECIDED,
            None,
            None,
            rhs_lo,
            rhs_hi,
            "",
            message="mu = nu: W2(mu, nu) = 0, the ratio is undefined; give distinct measures",
            extra=extra,
        )
    uq, lq = base.upper_q, base.lower_q
    lhs_lo = _sqrt_bound(ev["low"] / uq, prec, False) if uq > 0 else flint.fmpq(0)
    lhs_hi = _sqrt_bound(ev["cost_upper"] / lq, prec, True) if lq > 0 else None
    if ev["low"] > 0 and lhs_lo > rhs_hi:
        lhs, rhs = round_down(lhs_lo), round_up(rhs_hi)
        if lhs > rhs:
            claim = {"hypothesis": "H3", "verdict": "REFUTED", "lhs_lower": lhs, "rhs_upper": rhs}
            return LipschitzVerdict(
                "H3",
                Outcome.REFUTED,
                lhs,
                lhs_hi,
                rhs_lo,
                rhs,
                "H3 is false: W2(F mu, F nu) / W2(mu, nu) >= lhs_lower > rhs_upper >= RHS for "
                "the instance's measures on B_R",
                counterexample={"mu": inst.mu, "nu": inst.nu},
                certificate=_h3_certificate(inst, claim, {"V": hv, "KtQ": hm}, ev, prec),
                message=f"certified ratio >= {float(lhs):.6g} > {float(rhs):.6g}",
                extra=extra,
            )
    if lhs_hi is not None and lhs_hi <= rhs_lo:
        # margin for the checker's own evaluation order (its cost balls differ in the last bits)
        lhs = round_up(lhs_hi * (1 + flint.fmpq(1, 2**30)), CLAIM_BITS - 8)
        rhs = round_down(rhs_lo)
        if lhs <= rhs:
            claim = {"hypothesis": "H3", "verdict": "VERIFIED", "lhs_upper": lhs, "rhs_lower": rhs}
            return LipschitzVerdict(
                "H3",
                Outcome.VERIFIED,
                lhs_lo,
                lhs,
                rhs,
                rhs_hi,
                "for the instance's pair: W2(F mu, F nu) <= lhs_upper W2(mu, nu) and lhs_upper "
                "<= rhs_lower <= RHS of H3",
                certificate=_h3_certificate(inst, claim, {"V": hv, "KtQ": hm}, ev, prec),
                message=f"ratio <= {float(lhs):.6g} <= {float(rhs):.6g}",
                extra=extra,
            )
    return LipschitzVerdict(
        "H3",
        Outcome.UNDECIDED,
        lhs_lo,
        lhs_hi,
        rhs_lo,
        rhs_hi,
        "",
        message="the certified ratio interval overlaps the right side's interval; refine the "
        "measures or raise the precision",
        extra=extra,
    )
