"""Kind ``lipschitz-domain`` v1: H1 / H2 over all of (B_R)^n (proofs/lipschitz.md §5).

VERIFIED: sup over (B_R)^n of ‖Df‖₂ ≤ lhs_upper ≤ rhs_lower ≤ factor·RHS. The hints are the
leaves of a binary subdivision of [−R, R]^{nd} (midpoint splits, preorder), so they cover it by
construction; a leaf is dropped (bound "drop") only if it misses the ball product or the
fundamental domain of the token permutations and X ↦ −X (exact tests); every other leaf's ball
Jacobian (tight softmax form, bounds.md #domain-jacobian) has ‖J‖₂ < its bound ≤ lhs_upper.
REFUTED: at an exact X in (B_R)^n, ‖Df(X)v‖/‖v‖ ≥ lhs_lower > rhs_upper ≥ factor·RHS."""

from __future__ import annotations

from functools import reduce
from typing import Any

import flint

from . import _parse
from ._lipschitz_rule import _gram_gap, _jacobian, _pd, norm_bounds
from ._parse import Rejected, exact, fields, matrix, positive, small_integer, string, vector

MAX_DOMAIN_COST = 2 * 10**8  # Σ over kept leaves of (nd)³ (1 + prec / 64), ~0.8 µs each: 160 s
MAX_NODES = 2**22  # entries of the split sequence
MAX_DEPTH = 512  # splits from the root to a leaf
TREE = ("tree", "bounds")


def _parts(A: Any, X: list) -> tuple:
    """u_i = Aᵀx_i, D[t][j] = x_t − x_j, hulls H of the x_t − x_j, spreads s, and the softmax
    rows P_ij = 1 / Σ_l e^{u_i·(x_l − x_j)} over the ball tokens X (bounds.md #domain-jacobian)."""
    n, d = len(X), len(X[0])
    U = [[sum((A[c, b] * X[i][c] for c in range(d)), flint.arb(0)) for b in range(d)]
         for i in range(n)]  # fmt: skip
    D = [[[X[t][b] - X[j][b] if t != j else flint.arb(0) for b in range(d)] for j in range(n)]
         for t in range(n)]  # fmt: skip
    # x_l − m_i lies in the hull of the x_l − x_j; |Cov_ab| <= s_a s_b / 4 (Popoviciu, C–S)
    H = [[reduce(flint.arb.union, (D[t][j][b] for j in range(n))) for b in range(d)]
         for t in range(n)]  # fmt: skip
    s = [reduce(flint.arb.union, (D[j][t][a] for j in range(n) for t in range(n))).abs_upper()
         for a in range(d)]  # fmt: skip
    P = [[1 / sum((sum((U[i][b] * D[t][j][b] for b in range(d)), flint.arb(0)).exp()
                   for t in range(n) if t != j), flint.arb(1)) for j in range(n)]
         for i in range(n)]  # fmt: skip
    return U, D, H, s, P


def _tight_jacobian(A: Any, V: Any, X: list) -> flint.arb_mat:
    """Df over the ball tokens X: J_il = P_il V (I + (x_l − m_i) u_iᵀ) + δ_il V Cov_i Aᵀ with
    x_l − m_i = Σ_j P_ij (x_l − x_j), Cov_i = Σ_{j<l} P_ij P_il (x_j − x_l)(x_j − x_l)ᵀ
    (bounds.md #domain-jacobian)."""
    n, d, At = len(X), len(X[0]), A.transpose()
    U, D, H, s, Ps = _parts(A, X)
    q = [[s[a] * s[b] / 4 for b in range(d)] for a in range(d)]
    CB = [[(flint.arb(0) if a == b else -q[a][b]).union(q[a][b]) for b in range(d)]
          for a in range(d)]  # fmt: skip
    J = [[flint.arb(0)] * (n * d) for _ in range(n * d)]
    for i in range(n):
        P, cov = Ps[i], [[flint.arb(0)] * d for _ in range(d)]
        for j in range(n):
            for t in range(j + 1, n):
                w = P[j] * P[t]
                for a in range(d):
                    for b in range(d):
                        cov[a][b] += w * D[j][t][a] * D[j][t][b]
        C = V * flint.arb_mat([[cov[a][b].intersection(CB[a][b]) for b in range(d)]
                               for a in range(d)]) * At  # fmt: skip
        for t in range(n):
            y = [sum((P[j] * D[t][j][b] for j in range(n)), flint.arb(0)).intersection(H[t][b])
                 for b in range(d)]  # fmt: skip
            Vy = [sum((V[a, b] * y[b] for b in range(d)), flint.arb(0)) for a in range(d)]
            for a in range(d):
                for b in range(d):
                    v = P[t] * (V[a, b] + Vy[a] * U[i][b])
                    J[i * d + a][t * d + b] = v + C[a, b] if t == i else v
    return flint.arb_mat(J)


def _structural(A: Any, X: list, R: Any, nA: Any, nV: Any) -> Any:
    """A ball ∋ ‖V‖(‖P‖₂ + ‖N‖₂ + ‖A‖ c) >= ‖Df‖₂ on the cell (bounds.md #domain-structure):
    N_il = p_il e_l μ_i, p ≥ P, e_l ≥ |x_l − m_i|, μ_i ≥ |u_i|, c ≥ ‖Cov_i‖₂; nA, nV ≥ norms."""
    U, _, H, s, P = _parts(A, X)
    n, R, top = len(X), flint.arb(R), lambda v: reduce(flint.arb.max, v)  # arb_max: encloses
    up = lambda v: flint.arb(sum(x.abs_upper() ** 2 for x in v)).sqrt()  # noqa: E731
    rho = [R.min(up(x)) for x in X]
    mu = [(nA * r).min(up(u)) for r, u in zip(rho, U)]  # noqa: B905
    e = [(2 * R).min(up(h)) for h in H]
    one = flint.arb(1)  # 0 <= P_ij <= 1 (a non-finite ball: exp overflowed)
    p = [[one.min(x.abs_upper()) if x.is_finite() else one for x in row] for row in P]
    cols = top([sum(p[i][j] for i in range(n)) for j in range(n)])  # ‖P‖_∞ = 1 (row sums)
    c = (top(rho) ** 2).min(sum(x * x for x in s) / 4)  # >= tr Cov_i >= ‖Cov_i‖₂
    w = top(e).min(c.sqrt())  # Σ_l P_il |x_l − m_i| <= (tr Cov_i)^½ (Cauchy–Schwarz)
    rows = top([mu[i] * sum(p[i][t] * e[t] for t in range(n)).min(w) for i in range(n)])
    ncol = top([e[t] * sum(mu[i] * p[i][t] for i in range(n)) for t in range(n)])
    m2 = (rows * ncol).sqrt().min(top(mu) * (c * cols).sqrt())  # three bounds on ‖M₂‖₂
    m2 = m2.min((sum(x * x for x in mu) * c * top([top(r) for r in p])).sqrt())
    return nV * (cols.sqrt() + m2 + nA * c)


def _dropped(box: list, R2: Any, n: int, d: int) -> bool:
    """Exact: the box misses (B_R)^n, or the set F = {x_{0,0} ≥ … ≥ x_{n−1,0},
    x_{0,0} + x_{n−1,0} ≥ 0} (bounds.md #domain-symmetry)."""
    for i in range(n):
        near = [max(lo, -hi, 0) for lo, hi in box[i * d : i * d + d]]
        if sum(t * t for t in near) > R2:
            return True
    t = box[0][1]  # greedy non-increasing choice of the first coordinates
    for i in range(1, n):
        t = min(t, box[i * d][1])
        if t < box[i * d][0]:
            return True
    return box[0][1] + box[(n - 1) * d][1] < 0


def _contract(token: list, R2: Any) -> list:
    """Balls of one token's coordinates cut to |x_b|² <= R² − Σ_{c≠b} dist(0, [lo_c, hi_c])²
    (bounds.md #domain-contraction); the token's box meets B_R (else it was dropped)."""
    near = [max(lo, -hi, 0) for lo, hi in token]
    total, out = sum(t * t for t in near), []
    for (lo, hi), t in zip(token, near):  # noqa: B905
        r = flint.arb(R2 - total + t * t).sqrt()
        out.append(flint.arb(lo).union(flint.arb(hi)).intersection((-r).union(r)))
    return out


def _spend(budget: list, units: int, bits: int, where: str) -> None:
    """Charge, before it is done, exact work of ``units`` operations on ``bits``-bit numbers
    (ten ball operations each) to the rule's budget (``budget[0]`` ball operations left)."""
    budget[0] -= 10 * units * _parse.words(bits)
    if budget[0] < 0:
        raise Rejected(f"resource limit: {where}: beyond {MAX_DOMAIN_COST} ball operations")


def _leaves(tree: Any, R: Any, nd: int, budget: list):
    """Yield the leaf boxes of the split sequence in preorder (stack of pending boxes), with
    their depths; each split (two copies of the box, one midpoint of height at most that of R
    plus the depth) is charged to ``budget`` before it is done."""
    if not isinstance(tree, list) or not 1 <= len(tree) <= MAX_NODES:
        raise Rejected(f"hints.tree: expected an array of 1 to {MAX_NODES} integers")
    stack, pos, hR = [([(-R, R)] * nd, 0)], 0, R.height_bits() + 1
    while stack:
        box, depth = stack.pop()
        if pos >= len(tree):
            raise Rejected("hints.tree: ends before the subdivision is complete")
        s = small_integer(tree[pos], f"hints.tree[{pos}]", -1, nd - 1)
        pos += 1
        if s < 0:
            yield box, depth
            continue
        if depth >= MAX_DEPTH:
            raise Rejected(f"hints.tree: deeper than {MAX_DEPTH} splits")
        _spend(budget, 2 + nd // 16, hR + depth, f"hints.tree[{pos - 1}]")
        lo, hi = box[s]
        mid = (lo + hi) / 2
        left, right = list(box), list(box)
        left[s], right[s] = (lo, mid), (mid, hi)
        stack += [(right, depth + 1), (left, depth + 1)]  # left is visited first
    if pos != len(tree):
        raise Rejected("hints.tree: entries after the subdivision is complete")


def check_lipschitz_domain_v1(instance: Any, claim: Any, hints: Any) -> str:
    """Check a lipschitz-domain certificate; return a summary or raise Rejected."""
    inst = fields(instance, "instance", ("Q", "K", "V", "R", "n"))
    Q = matrix(inst["Q"], "instance.Q", None, None)
    k, d = len(Q), len(Q[0])
    K, V = matrix(inst["K"], "instance.K", k, d), matrix(inst["V"], "instance.V", d, d)
    R, n = positive(inst["R"], "instance.R"), small_integer(inst["n"], "instance.n", 1, 64)
    refuted = isinstance(claim, dict) and claim.get("verdict") == "REFUTED"
    lk, rk = ("lhs_lower", "rhs_upper") if refuted else ("lhs_upper", "rhs_lower")
    extra = ("X", "vector") if refuted else ()
    c = fields(claim, "claim", ("hypothesis", "verdict", "factor", lk, rk, *extra))
    hyp = string(c["hypothesis"], "claim.hypothesis", ("H1", "H2"))
    string(c["verdict"], "claim.verdict", ("REFUTED", "VERIFIED"))
    lhs, rhs = exact(c[lk], f"claim.{lk}"), exact(c[rk], f"claim.{rk}")
    factor = positive(c["factor"], "claim.factor")
    if (refuted and not lhs > rhs) or (not refuted and not 0 <= lhs <= rhs):
        raise Rejected(f"claim: need {lk} {'>' if refuted else '<='} {rk}")
    opt = ("upper",) if isinstance(hints, dict) and "upper" in hints and not refuted else ()
    h = fields(hints, "hints", ("precision", "norms", *opt, *(() if refuted else TREE)))
    prec, nd = small_integer(h["precision"], "hints.precision", 53, 4096), n * d
    Kt = [list(col) for col in zip(*K, strict=True)]
    KtQ = _parse.exact_product(Kt, Q, "instance: K^T Q").tolist()
    squares = lambda x, at: _parse.exact_sum([t * t for t in x], at)  # noqa: E731
    if refuted:
        X, v = matrix(c["X"], "claim.X", n, d), vector(c["vector"], "claim.vector", nd)
        if any(squares(x, "claim.X") > R * R for x in X) or all(t == 0 for t in v):
            raise Rejected("claim: need X in (B_R)^n and a nonzero vector")
        if nd**2 * (1 + prec // 64) > MAX_DOMAIN_COST:
            raise Rejected("resource limit: (nd)^2 (1 + precision / 64) is too large")
    else:
        bounds = h["bounds"]
        if not isinstance(bounds, list) or not isinstance(h["tree"], list):
            raise Rejected("hints: tree and bounds must be arrays")
        kept = sum(b != "drop" for b in bounds)
        budget = [MAX_DOMAIN_COST - kept * nd**3 * (1 + prec // 64)]  # charged before any work
        if budget[0] < 0:
            raise Rejected("resource limit: kept leaves * (nd)^3 * (1 + precision / 64)")
    with flint.ctx.workprec(prec):
        nv, nm = norm_bounds(h["norms"], V, KtQ, refuted)
        if hyp == "H1":
            RHS = nv * nm * flint.arb(R * R) * flint.arb(12 * n + 3).sqrt()
        else:
            RHS = (
                flint.arb(3).sqrt() * nv * (nm * nm / k * flint.arb(R**4) * (4 * n + 1) + n).sqrt()
            )
        RHS *= flint.arb(factor)
        A, Va = flint.arb_mat(KtQ) * (1 / flint.arb(k).sqrt()), flint.arb_mat(V)
        if refuted:
            Jv = _jacobian(A, Va, flint.arb_mat(X)) * flint.arb_mat([[t] for t in v])
            num = sum((Jv[r, 0] * Jv[r, 0] for r in range(nd)), flint.arb(0))
            ratio = (num / flint.arb(squares(v, "claim.vector"))).sqrt()
            if not (ratio >= flint.arb(lhs) and RHS <= flint.arb(rhs)):
                raise Rejected("claim: ‖Df(X)v‖/‖v‖ >= lhs_lower or RHS <= rhs_upper not certified")
            return f"{hyp} REFUTED on (B_R)^n: n = {n}, d = {d}, ‖Df(X)‖₂ >= {lhs}"
        if not RHS >= flint.arb(rhs):
            raise Rejected("claim: factor * RHS >= rhs_lower not certified")
        if opt:  # ‖V‖₂ <= uV, ‖KᵀQ‖₂ <= uM (exact LDLᵀ of s²I − MᵀM), for "structure" leaves
            u = fields(h["upper"], "hints.upper", ("V", "KtQ"))  # two exact eliminations:
            _parse.charge(2 * (d**3 // 3 + d), d * (4 * _parse.top() + 16), "hints.upper")
            uV, uM = (exact(u[m], f"hints.upper.{m}") for m in ("V", "KtQ"))
            ok = all(
                t >= 0 and _pd(_gram_gap(flint.fmpq_mat(M), t * t)) for t, M in ((uV, V), (uM, KtQ))
            )
            if not ok:
                raise Rejected("hints.upper: not certified >= the spectral norms of V and KtQ")
        count = 0
        hR = R.height_bits() + 1
        for box, depth in _leaves(h["tree"], R, nd, budget):
            if count >= len(bounds):
                raise Rejected("hints.bounds: fewer entries than leaves")
            b, where, count = bounds[count], f"hints.bounds[{count}]", count + 1
            # the exact tests of _dropped or _contract: 6 nd operations on squares of the ends
            _spend(budget, 6 * nd, 2 * (hR + depth) + nd.bit_length(), where)
            if b == "drop":
                if not _dropped(box, R * R, n, d):
                    raise Rejected(f"{where}: 'drop', but the leaf meets the fundamental domain")
                continue
            X = [_contract(box[i * d : i * d + d], R * R) for i in range(n)]
            if isinstance(b, dict):  # {"structure": b}: bounds.md #domain-structure
                b = exact(fields(b, where, ("structure",))["structure"], where)
                nA, nV = (flint.arb(uM) / flint.arb(k).sqrt(), flint.arb(uV)) if opt else (0, 0)
                ok = bool(opt) and 0 < b <= lhs and _structural(A, X, R, nA, nV) < flint.arb(b)
            elif isinstance(b, list):  # [bm, br]: ‖mid J‖₂ < bm, ‖rad J‖₂ < br (#domain-midrad)
                J, (bm, br) = _tight_jacobian(A, Va, X), vector(b, where, 2)
                M = [[x.mid() for x in r] for r in J.tolist()]
                ok = 0 < bm + br <= lhs and _pd(_gram_gap(flint.arb_mat(M), flint.arb(bm * bm)))
                M = [[x.rad() for x in r] for r in J.tolist()]
                ok = ok and _pd(_gram_gap(flint.arb_mat(M), flint.arb(br * br)))
            else:
                b = exact(b, where)
                ok = 0 < b <= lhs and _pd(_gram_gap(_tight_jacobian(A, Va, X), flint.arb(b * b)))
            if not ok:
                raise Rejected(f"{where}: ‖Df‖₂ < bound <= lhs_upper not certified on the leaf")
        if count != len(bounds):
            raise Rejected("hints.bounds: more entries than leaves")
    return f"{hyp} VERIFIED on (B_R)^n: n = {n}, d = {d}, {count} leaves, sup ‖Df‖₂ <= {lhs}"
