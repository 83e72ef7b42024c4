"""Kind ``lipschitz`` v1, H3 (proofs/lipschitz.md §4): μ, ν on B_R, Fμ = Σ a_i δ_{Γ_μ(x_i)} in arb;
VERIFIED: W₂(Fμ, Fν) ≤ lhs_upper W₂(μ, ν), lhs_upper ≤ rhs_lower ≤ RHS₃; REFUTED: the reverse."""

import flint

from . import _lipschitz_rule as lip
from ._parse import MAX_REPLAY_COST, Rejected, exact, fields, matrix, small_integer, string, vector
from ._wasserstein_rule import _measure, check_wasserstein_v1


def _gamma(A, V, X, w):  # rows Γ_μ(x_i) = Σ_j P_ij V x_j, P_ij ∝ w_j e^{x_iᵀ A x_j}
    S, r = X * A * X.transpose(), range(len(w))
    E = [[(S[i, j] - S[i, 0].mid()).exp() * w[j] for j in r] for i in r]
    return flint.arb_mat([[x / z for x in e] for e in E for z in [sum(e)]]) * X * V.transpose()


def check_h3_v1(instance, claim, hints) -> str:
    """Check an H3 ``lipschitz`` certificate; return a summary or raise Rejected."""
    inst = fields(instance, "instance", ("Q", "K", "V", "R", "mu", "nu"))
    Q = matrix(inst["Q"], "instance.Q", None, None)
    k, d, R = len(Q), len(Q[0]), exact(inst["R"], "instance.R")
    K, V = matrix(inst["K"], "instance.K", k, d), matrix(inst["V"], "instance.V", d, d)
    (X, a), (Y, b) = (_measure(inst[key], f"instance.{key}", d) for key in ("mu", "nu"))
    refuted = isinstance(claim, dict) and claim.get("verdict") == "REFUTED"
    lk, rk = ("lhs_lower", "rhs_upper") if refuted else ("lhs_upper", "rhs_lower")
    c = fields(claim, "claim", ("hypothesis", "verdict", lk, rk))
    string(c["hypothesis"], "claim.hypothesis", ("H3",))
    verdict = string(c["verdict"], "claim.verdict", ("REFUTED", "VERIFIED"))
    lhs, rhs = exact(c[lk], f"claim.{lk}"), exact(c[rk], f"claim.{rk}")
    h = fields(hints, "hints", ("precision", "norms", "base", *(("pushed",) if refuted else ())))
    prec, n, m = small_integer(h["precision"], "hints.precision", 53, 4096), len(X), len(Y)
    if R <= 0 or any(sum(x * x for x in p) > R * R for p in X + Y):
        raise Rejected("instance: need R > 0 and every atom of mu and nu in B_R")
    if (n + m) ** 2 * d * (1 + prec // 64) > MAX_REPLAY_COST:
        raise Rejected("resource limit: (n + m)^2 d (1 + precision / 64) is too large")
    base = fields(h["base"], "hints.base", ("claim", "hints"))  # a wasserstein claim and hints
    try:  # W₂(μ, ν)² in [lower_q, upper_q]; the coupling is also one of Fμ and Fν
        check_wasserstein_v1(dict(mu=inst["mu"], nu=inst["nu"], q=2), base["claim"], base["hints"])
    except Rejected as exc:
        raise Rejected(f"hints.base: {exc}") from None
    lq, uq = (exact(base["claim"][key], "hints.base.claim") for key in ("lower_q", "upper_q"))
    KtQ = [[sum(K[r][i] * Q[r][j] for r in range(k)) for j in range(d)] for i in range(d)]
    with flint.ctx.workprec(prec):
        nv, nm = lip.norm_bounds(h["norms"], V, KtQ, refuted)
        ar2 = nm / flint.arb(k).sqrt() * flint.arb(R * R)  # ‖A‖₂ R²
        RHS, A = nv * (1 + 3 * ar2) * (2 * ar2).exp(), flint.arb_mat(KtQ) / flint.arb(k).sqrt()
        G, H = (_gamma(A, flint.arb_mat(V), flint.arb_mat(Z), w) for Z, w in ((X, a), (Y, b)))
        cost = [[sum(((e := G[i, t] - H[j, t]) * e for t in range(d)), 0) for j in range(m)]
                for i in range(n)]  # fmt: skip
        if refuted:  # dual potentials of Fμ, Fν: phi_i + psi_j <= cost_ij for every pair
            p = fields(h["pushed"], "hints.pushed", ("phi", "psi"))
            phi, psi = (vector(p[s], f"hints.pushed.{s}", z) for s, z in (("phi", n), ("psi", m)))
            ok = all(u + v <= 0 or cost[i][j] >= flint.arb(u + v)
                     for i, u in enumerate(phi) for j, v in enumerate(psi))  # fmt: skip
            low = sum((w * v for w, v in zip(a + b, phi + psi, strict=True)), flint.fmpq(0))
            ok = ok and lhs > rhs and 0 < low and lhs * lhs * uq <= low and RHS <= flint.arb(rhs)
        else:
            up = sum((cost[i][j] * exact(w, "") for i, j, w in base["hints"]["coupling"]), 0)
            ok = 0 <= lhs <= rhs and lq > 0 and up <= flint.arb(lhs * lhs * lq)
            ok = ok and RHS >= flint.arb(rhs)
    if not ok:
        raise Rejected(f"claim: {lk}, {rk} not certified by the hints (W2 bounds, norms, costs)")
    return f"H3 {verdict}: {n}, {m} atoms in dimension {d}, ratio {'>=' if refuted else '<='} {lhs}"
