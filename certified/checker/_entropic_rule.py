"""Certificate kind ``entropic`` v1: bounds on entropic OT or the Sinkhorn divergence
(proofs/entropic.md). Hints: per problem, potentials (f, g) and a scale t; the rule re-derives
both bounds from them in arb at PREC bits (proofs/bounds.md#eot-dual, #eot-primal)."""

from __future__ import annotations

from typing import Any

import flint

from . import _parse
from ._parse import Rejected, array, exact, fields, measure, positive, string, vector
from ._wasserstein_rule import MAX_Q_TERMS, _scaled

PREC = 128
MAX_POTENTIAL = 2**48  # largest |f_i| / gamma and |g_j| / gamma


def _costs(X: list, Y: list, q: flint.fmpq):
    """The exact squared distances D^2 |x_i - y_j|^2 (row-major integers), D, the height."""
    n, d = len(X), len(X[0])
    D, xy = _scaled([c for row in X + Y for c in row])
    h = max(abs(v).bit_length() for v in xy + [D])
    _parse.charge(n * len(Y) * (d + 2) // 32, h, "the squared distances")  # A B^T, in C
    pts = [xy[k * d : k * d + d] for k in range(n + len(Y))]
    A = flint.fmpz_mat([[*x, sum(c * c for c in x), 1] for x in pts[:n]])
    B = flint.fmpz_mat([[-2 * c for c in y] + [1, sum(c * c for c in y)] for y in pts[n:]])
    S = (A * B.transpose()).entries()
    return S, D, h


def _cost(s, k2: flint.arb, half: flint.arb | None) -> flint.arb:
    """``|x_i - y_j|^q`` from ``s = D^2 |x_i - y_j|^2`` (``k2 = 1 / D^2``)."""
    if half is None:
        return flint.arb(s) * k2
    return (half * (flint.arb(s) * k2).log()).exp() if s else flint.arb(0)


def _problem(X, Y, a, b, gamma, q, hint, where: str):
    """(lower, upper) arb balls for OT_gamma(mu, nu) from one hint {"f", "g", "scale"}."""
    n, m = len(X), len(Y)
    fields(hint, where, ("f", "g", "scale"))
    f, g = vector(hint["f"], f"{where}.f", n), vector(hint["g"], f"{where}.g", m)
    t = positive(hint["scale"], f"{where}.scale")
    if any(abs(v) > MAX_POTENTIAL * gamma for v in f + g):
        raise Rejected(f"{where}: a potential exceeds {MAX_POTENTIAL} * gamma in magnitude")
    unit = 2 if q == 2 else 4  # replay cost per entry and 256-bit word of the costs' height
    if n * m * unit > _parse.MAX_REPLAY_COST:
        raise Rejected(f"resource limit: {n} x {m} exponentials cost too much to replay")
    S, D, h = _costs(X, Y, q)
    if n * m * unit * (1 + h // 256) > _parse.MAX_REPLAY_COST:
        raise Rejected(f"resource limit: {n} x {m} exponentials cost too much to replay")
    ga = flint.arb(gamma)
    k2 = flint.arb(flint.fmpq(1, D * D))
    half = None if q == 2 else flint.arb(q / 2)
    F = [flint.arb(v / gamma) for v in f]
    G = [flint.arb(v / gamma) for v in g]
    kg = k2 / ga if half is None else None
    A, B = [flint.arb(w) for w in a], [flint.arb(w) for w in b]
    rows, cols = [], [flint.arb(0)] * m
    for i in range(n):
        Fi, Si, row, col = F[i], S[i * m : i * m + m], flint.arb(0), []
        if half is None:  # q = 2: the cost is s / D^2, one exponential per entry
            es = [(Fi + Gj - flint.arb(s) * kg).exp() for Gj, s in zip(G, Si, strict=True)]
        else:
            es = [(Fi + Gj - _cost(s, k2, half) / ga).exp() for Gj, s in zip(G, Si, strict=True)]
        for e, bj in zip(es, B, strict=True):
            row += e * bj
        Ai = A[i]
        col = [c + e * Ai for c, e in zip(cols, es, strict=True)]
        cols = col
        rows.append(row * Ai)
    cols = [c * bj for c, bj in zip(cols, B, strict=True)]
    M = sum(rows, flint.arb(0))
    # proof: proofs/bounds.md#eot-dual (weak duality of the unconstrained dual)
    lower = sum((w * v for w, v in zip(a + b, f + g, strict=True)), flint.fmpq(0))
    lower = flint.arb(lower) - ga * (M - 1)
    # proof: proofs/bounds.md#eot-primal (Y = P / t has marginals <= a, b; repaired plan)
    ta = flint.arb(t)
    for k, (r, w) in enumerate(zip(rows + cols, a + b, strict=True)):
        if not r <= ta * w:
            side = f"row {k}" if k < n else f"column {k - n}"
            raise Rejected(f"{where}.scale: the Gibbs plan's {side} sum exceeds scale * weight")
    live_i = [i for i in range(n) if a[i] > 0]
    live_j = [j for j in range(m) if b[j] > 0]
    smax = max(S[i * m + j] for i in live_i for j in live_j)
    cmax = _cost(smax, k2, half)
    wmin = max(min(a[i] for i in live_i), min(b[j] for j in live_j))
    H = cmax + ga * (1 - flint.arb(wmin).log())
    mass = sum((v * r for v, r in zip(f + g, rows + cols, strict=True)), flint.arb(0))
    upper = (mass - ga * ta.log() * M) / ta + (1 - M / ta) * H
    if not (lower.is_finite() and upper.is_finite()):
        raise Rejected(f"{where}: the bounds are not finite")
    return lower, upper


def check_entropic_v1(instance: Any, claim: Any, hints: Any) -> str:
    """Check an entropic v1 certificate; return a summary or raise Rejected."""
    fields(instance, "instance", ("mu", "nu", "gamma", "q", "quantity"))
    X, a = measure(instance["mu"], "instance.mu")
    Y, b = measure(instance["nu"], "instance.nu", len(X[0]))
    gamma = positive(instance["gamma"], "instance.gamma")
    q = exact(instance["q"], "instance.q")
    if q < 1 or q.p > MAX_Q_TERMS or q.q > MAX_Q_TERMS:
        raise Rejected(f"instance.q: needs q >= 1 with numerator, denominator <= {MAX_Q_TERMS}")
    div = string(instance["quantity"], "instance.quantity", ("ot", "divergence")) == "divergence"
    fields(claim, "claim", ("lower", "upper"))
    lo, up = exact(claim["lower"], "claim.lower"), exact(claim["upper"], "claim.upper")
    fields(hints, "hints", ("potentials",))
    pairs = [(X, Y, a, b), (X, X, a, a), (Y, Y, b, b)] if div else [(X, Y, a, b)]
    pots = array(hints["potentials"], "hints.potentials", len(pairs))
    if div and sum(len(P) * len(Q) for P, Q, _, _ in pairs) * 2 > _parse.MAX_REPLAY_COST:
        raise Rejected("resource limit: the three problems cost too much to replay")
    with flint.ctx.workprec(PREC):
        bounds = [
            _problem(*p, gamma, q, h, f"hints.potentials[{k}]")
            for k, (p, h) in enumerate(zip(pairs, pots, strict=True))
        ]
        if div:  # S = OT(mu, nu) - OT(mu, mu) / 2 - OT(nu, nu) / 2
            (l0, u0), (l1, u1), (l2, u2) = bounds
            lower, upper = l0 - (u1 + u2) / 2, u0 - (l1 + l2) / 2
        else:
            lower, upper = bounds[0]
        if not flint.arb(lo) <= lower:
            raise Rejected("claim.lower: not below the certified lower bound")
        if not flint.arb(up) >= upper:
            raise Rejected("claim.upper: not above the certified upper bound")
    what = "Sinkhorn divergence" if div else "entropic OT"
    return f"{what}, gamma = {gamma}, q = {q}: {len(X)} x {len(Y)} atoms in dimension {len(X[0])}"
