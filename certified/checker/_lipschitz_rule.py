"""Kind ``lipschitz`` v1: H1 / H2 / H3 verdicts for single-head attention (proofs/lipschitz.md).

f(X)_i = Σ_j softmax_j(x_iᵀ A x_j) V x_j, A = KᵀQ/√k, on (B_R)^n. REFUTED: ‖f(X) − f(X')‖_F /
‖X − X'‖_F ≥ lhs_lower > rhs_upper ≥ RHS; VERIFIED: ‖Df(X)‖₂ ≤ lhs_upper ≤ rhs_lower ≤ RHS (f, Df
in arb). H3 (§4): Fμ = Σ a_i δ_{Γ_μ(x_i)}; VERIFIED: W₂(Fμ, Fν) ≤ lhs_upper W₂(μ, ν),
lhs_upper ≤ rhs_lower ≤ RHS₃; REFUTED: the reverse."""

from __future__ import annotations

from typing import Any

import flint

from . import _parse
from ._parse import Rejected, exact, fields, matrix, measure, small_integer, string, vector
from ._wasserstein_rule import check_wasserstein_v1

MAX_ND = 256  # n * d: the Jacobian is (nd)², its Cholesky (nd)³/6 ball operations


def _pd(G: list) -> bool:  # elimination, exact or in balls: symmetric G ≻ 0 iff pivots > 0
    for k in range(len(G)):
        if not G[k][k] > 0:
            return False
        for i in range(k + 1, len(G)):
            f = G[i][k] / G[k][k]
            for j in range(k + 1, len(G)):
                G[i][j] -= f * G[k][j]
    return True


def _gram_gap(M: Any, s2: Any) -> list:  # s2 I − MᵀM, M an fmpq_mat (exact) or arb_mat
    S = M.transpose() * M
    return [[(s2 if i == j else 0) - S[i, j] for j in range(S.ncols())] for i in range(S.nrows())]


def _softmax_map(A, V, X):
    S, P = X * A * X.transpose(), []
    for i in range(X.nrows()):
        e = [(S[i, j] - S[i, 0].mid()).exp() for j in range(X.nrows())]
        z = sum(e[1:], e[0])
        P.append([x / z for x in e])
    return P, flint.arb_mat(P) * (X * V.transpose())


def _jacobian(A, V, X):
    """J_il = P_il (V + V(x_l − m_i)(Aᵀx_i)ᵀ) + δ_il V Cov_i Aᵀ (proofs/lipschitz.md)."""
    n, d = X.nrows(), X.ncols()
    P, F = _softmax_map(A, V, X)
    XV, U, M = X * V.transpose(), X * A, flint.arb_mat(P) * X
    J = [[flint.arb(0)] * (n * d) for _ in range(n * d)]
    for i in range(n):
        Dc = flint.arb_mat([[X[j, b] - M[i, b] for b in range(d)] for j in range(n)])
        Dw = flint.arb_mat([[P[i][j] * Dc[j, b] for b in range(d)] for j in range(n)])
        C = V * (Dc.transpose() * Dw) * A.transpose()
        for m in range(n):
            for a in range(d):
                for b in range(d):
                    v = P[i][m] * (V[a, b] + (XV[m, a] - F[i, a]) * U[i, b])
                    J[i * d + a][m * d + b] = v + C[a, b] if m == i else v
    return flint.arb_mat(J)


def norm_bounds(norms: Any, V: list, KtQ: list, refuted: bool) -> list:
    """Balls ∋ upper (refuted: exact LDLᵀ) or lower (test vectors) bounds on ‖V‖₂, ‖KᵀQ‖₂."""
    norms, bounds = fields(norms, "hints.norms", ("V", "KtQ")), []
    for name, M in (("V", V), ("KtQ", KtQ)):
        key = "upper" if refuted else "vector"  # REFUTED needs upper bounds, VERIFIED lower
        nb = fields(norms[name], f"hints.norms.{name}", (key,))
        where, zero = f"hints.norms.{name}.{key}", all(x == 0 for r in M for x in r)
        d, h = len(M), 4 * _parse.top() + 16  # KtQ: sums of k products of inputs
        # exact elimination: d^3 / 3 operations on minors of height <= d h (test vector: 2 d^2)
        _parse.charge(d**3 // 3 + d if refuted else 2 * d * d, d * h if refuted else h, where)
        if refuted:
            s = exact(nb[key], where)
            if s < 0 or not (zero or _pd(_gram_gap(flint.fmpq_mat(M), s * s))):
                raise Rejected(f"{where}: not certified >= the spectral norm")
            bounds.append(flint.arb(s))
            continue
        v = vector(nb[key], where, len(M))
        Mv2 = sum(sum(a * b for a, b in zip(r, v, strict=True)) ** 2 for r in M)
        if (v2 := sum(x * x for x in v)) == 0:
            raise Rejected(f"{where}: the test vector is zero")
        bounds.append((flint.arb(Mv2) / flint.arb(v2)).sqrt())
    return bounds


def check_lipschitz_v1(instance: Any, claim: Any, hints: Any) -> str:
    """Check a lipschitz certificate; return a summary or raise Rejected."""
    if isinstance(claim, dict) and claim.get("hypothesis") == "H3":  # measures: check_h3_v1
        return check_h3_v1(instance, claim, hints)
    inst = fields(instance, "instance", ("Q", "K", "V", "R", "X"))
    Q = matrix(inst["Q"], "instance.Q", None, None)
    k, d = len(Q), len(Q[0])
    K, V = matrix(inst["K"], "instance.K", k, d), matrix(inst["V"], "instance.V", d, d)
    R = exact(inst["R"], "instance.R")
    X = matrix(inst["X"], "instance.X", None, d)
    n = len(X)
    inside = lambda Y: all(sum(c * c for c in y) <= R * R for y in Y)  # noqa: E731
    if R <= 0 or n * d > MAX_ND or not inside(X):
        raise Rejected(f"instance: need R > 0, n*d <= {MAX_ND} and X in (B_R)^n")
    refuted = isinstance(claim, dict) and claim.get("verdict") == "REFUTED"
    lk, rk = ("lhs_lower", "rhs_upper") if refuted else ("lhs_upper", "rhs_lower")
    extra = ("X_prime",) if refuted else ()
    c = fields(claim, "claim", ("hypothesis", "verdict", lk, rk, *extra))
    hyp = string(c["hypothesis"], "claim.hypothesis", ("H1", "H2"))
    verdict = string(c["verdict"], "claim.verdict", ("REFUTED", "VERIFIED"))
    lhs, rhs = exact(c[lk], f"claim.{lk}"), exact(c[rk], f"claim.{rk}")
    if refuted:
        Xp = matrix(c["X_prime"], "claim.X_prime", n, d)
        if X == Xp or not lhs > rhs or not inside(Xp):
            raise Rejected("claim: need X != X_prime in (B_R)^n and lhs_lower > rhs_upper")
    elif not 0 <= lhs <= rhs:
        raise Rejected("claim: need 0 <= lhs_upper <= rhs_lower")
    h = fields(hints, "hints", ("precision", "norms"))
    prec = small_integer(h["precision"], "hints.precision", 53, 4096)
    _parse.charge(2 * d * d * k, 2 * _parse.top(), "K^T Q")
    KtQ = [[sum(K[r][a] * Q[r][b] for r in range(k)) for b in range(d)] for a in range(d)]
    with flint.ctx.workprec(prec):
        nv, nm = norm_bounds(h["norms"], V, KtQ, refuted)
        if hyp == "H1":
            RHS = nv * nm * flint.arb(R * R) * flint.arb(12 * n + 3).sqrt()
        else:
            a2 = nm * nm / k * flint.arb(R**4) * (4 * n + 1)
            RHS = flint.arb(3).sqrt() * nv * (a2 + n).sqrt()
        A, Va = flint.arb_mat(KtQ) * (1 / flint.arb(k).sqrt()), flint.arb_mat(V)
        if refuted:
            F, G = (_softmax_map(A, Va, flint.arb_mat(Y))[1] for Y in (X, Xp))
            num = sum(((e := F[i, a] - G[i, a]) * e for i in range(n) for a in range(d)), 0)
            den = sum((x - y) ** 2 for rx, ry in zip(X, Xp) for x, y in zip(rx, ry))  # noqa: B905
            if not ((num / flint.arb(den)).sqrt() >= flint.arb(lhs) and RHS <= flint.arb(rhs)):
                raise Rejected("claim: recomputed ratio or right-hand side misses the claim")
        else:
            J = _jacobian(A, Va, flint.arb_mat(X))
            if not (RHS >= flint.arb(rhs) and _pd(_gram_gap(J, flint.arb(lhs * lhs)))):
                raise Rejected("claim: ‖Df(X)‖₂ <= lhs_upper or RHS >= rhs_lower not certified")
    return f"{hyp} {verdict}: n = {n}, d = {d}, lhs {'>=' if refuted else '<='} {lhs}"


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
    (X, a), (Y, b) = (measure(inst[key], f"instance.{key}", d) for key in ("mu", "nu"))
    refuted = isinstance(claim, dict) and claim.get("verdict") == "REFUTED"
    lk, rk = ("lhs_lower", "rhs_upper") if refuted else ("lhs_upper", "rhs_lower")
    c = fields(claim, "claim", ("hypothesis", "verdict", lk, rk))
    string(c["hypothesis"], "claim.hypothesis", ("H3",))
    verdict = string(c["verdict"], "claim.verdict", ("REFUTED", "VERIFIED"))
    lhs, rhs = exact(c[lk], f"claim.{lk}"), exact(c[rk], f"claim.{rk}")
    h = fields(hints, "hints", ("precision", "norms", "base", *(("pushed",) if refuted else ())))
    prec, n, m = small_integer(h["precision"], "hints.precision", 53, 4096), len(X), len(Y)
    _parse.charge(2 * (n + m) * d, 2 * _parse.top(), "instance")
    if R <= 0 or any(sum(x * x for x in p) > R * R for p in X + Y):
        raise Rejected("instance: need R > 0 and every atom of mu and nu in B_R")
    if (n + m) ** 2 * d * (1 + prec // 64) > _parse.MAX_REPLAY_COST:
        raise Rejected("resource limit: (n + m)^2 d (1 + precision / 64) is too large")
    base = fields(h["base"], "hints.base", ("claim", "hints"))  # a wasserstein claim and hints
    try:  # W₂(μ, ν)² in [lower_q, upper_q]; the coupling is also one of Fμ and Fν
        check_wasserstein_v1(dict(mu=inst["mu"], nu=inst["nu"], q=2), base["claim"], base["hints"])
    except Rejected as exc:
        raise Rejected(f"hints.base: {exc}") from None
    lq, uq = (exact(base["claim"][key], "hints.base.claim") for key in ("lower_q", "upper_q"))
    _parse.charge(2 * d * d * k, 2 * _parse.top(), "K^T Q")
    KtQ = [[sum(K[r][i] * Q[r][j] for r in range(k)) for j in range(d)] for i in range(d)]
    with flint.ctx.workprec(prec):
        nv, nm = norm_bounds(h["norms"], V, KtQ, refuted)
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
