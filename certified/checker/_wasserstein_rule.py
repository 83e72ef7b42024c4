"""Certificate kind ``wasserstein`` v1: bounds on ``W_q(μ, ν)`` (proofs/wasserstein.md). All
exact (integers over common denominators) but the coupling's cost for q not an even integer."""

from __future__ import annotations

from math import lcm
from typing import Any

import flint

from . import _parse
from ._parse import Rejected, array, exact, fields, measure, small_integer, vector

MAX_Q_TERMS = 1000  # numerator and denominator of q
CLAIM = ("lower_q", "upper_q", "lower", "upper")


def _scaled(values: list) -> tuple[int, list[int]]:
    """A common denominator D (at most MAX_HEIGHT_BITS bits) and the integers D * v."""
    D = 1
    for v in values:  # each lcm costs about a product of D by v.q
        _parse.charge(4, max(D.bit_length(), v.height_bits()), "a common denominator")
        if (D := lcm(D, int(v.q))).bit_length() > _parse.MAX_HEIGHT_BITS:
            raise Rejected("resource limit: the common denominator has too many bits")
    return D, [int(v.p) * (D // int(v.q)) for v in values]


def check_wasserstein_v1(instance: Any, claim: Any, hints: Any) -> str:
    """Check a wasserstein v1 certificate; return a summary or raise Rejected."""
    fields(instance, "instance", ("mu", "nu", "q"))
    X, a = measure(instance["mu"], "instance.mu")
    Y, b = measure(instance["nu"], "instance.nu", len(X[0]))
    n, m, d = len(X), len(Y), len(X[0])
    q = exact(instance["q"], "instance.q")
    if q < 1 or q.p > MAX_Q_TERMS or q.q > MAX_Q_TERMS:
        raise Rejected(f"instance.q: needs q >= 1 with numerator, denominator <= {MAX_Q_TERMS}")
    p, r = int(q.p), int(q.q)
    fields(claim, "claim", CLAIM)
    lq, uq, lo, up = (exact(claim[k], f"claim.{k}") for k in CLAIM)
    fields(hints, "hints", ("coupling", "phi", "psi"))
    phi, psi = vector(hints["phi"], "hints.phi", n), vector(hints["psi"], "hints.psi", m)
    D, xy = _scaled([c for row in X + Y for c in row])
    E, pots = _scaled(phi + psi)
    h = max(abs(v).bit_length() for v in xy + pots + [D, E])
    if n * m * (p + 2 * r) * (1 + (p + 2 * r) * h // 4096) > _parse.MAX_REPLAY_COST:
        raise Rejected(f"resource limit: checking all {n} x {m} dual constraints costs too much")
    # dual feasibility phi_i + psi_j <= |x_i - y_j|^q for ALL i, j, with S_ij = D^2 |x_i - y_j|^2
    # and T_ij = E (phi_i + psi_j): T/E <= (S/D^2)^(p/2r), compared as exact integer powers
    _parse.charge(n * m * (d + 2) // 32, h, "the squared distances")  # A B^T, in C
    pts = [xy[k * d : k * d + d] for k in range(n + m)]
    A = flint.fmpz_mat([[*x, sum(c * c for c in x), 1] for x in pts[:n]])
    B = flint.fmpz_mat([[-2 * c for c in y] + [1, sum(c * c for c in y)] for y in pts[n:]])
    S = (A * B.transpose()).entries()
    k, two_p, two_r = (p // (2 * r) if p % (2 * r) == 0 else 0), D ** (2 * p), E ** (2 * r)
    Dk = D ** (2 * k)
    for i in range(n):
        for j, s in enumerate(S[i * m : i * m + m]):
            t = pots[i] + pots[n + j]
            if t > 0 and (t * Dk > s**k * E if k else t ** (2 * r) * two_p > s**p * two_r):
                raise Rejected(f"hints: phi[{i}] + psi[{j}] exceeds the cost c[{i}][{j}]")
    _parse.charge(2 * (n + m), _parse.top(), "the dual value")
    if _parse.exact_sum([w * v for w, v in zip(a + b, phi + psi, strict=True)], "hints") < lq:
        raise Rejected("claim.lower_q: exceeds sum_i a_i phi_i + sum_j b_j psi_j")
    # the coupling: distinct sorted pairs, masses >= 0, marginals exactly a and b
    rows, cols = [flint.fmpq(0)] * n, [flint.fmpq(0)] * m
    pairs, last = [], (-1, -1)
    for t, e in enumerate(array(hints["coupling"], "hints.coupling")):
        e = array(e, f"hints.coupling[{t}]", 3)
        i, j = (small_integer(e[x], f"hints.coupling[{t}][{x}]", 0, (n, m)[x] - 1) for x in (0, 1))
        w = exact(e[2], f"hints.coupling[{t}][2]")
        _parse.charge(3, max(rows[i].height_bits(), cols[j].height_bits(), h), "coupling")
        if (i, j) <= last or w < 0:
            raise Rejected(f"hints.coupling[{t}]: pairs must increase strictly, masses be >= 0")
        rows[i], cols[j], last = rows[i] + w, cols[j] + w, (i, j)
        pairs.append((w, flint.fmpq(S[i * m + j], D * D)))
    if rows != a or cols != b:
        raise Rejected("hints.coupling: its marginals are not exactly the weights of mu and nu")
    _parse.charge(len(pairs) * (k + 2), (k + 1) * 2 * h, "the coupling's cost")
    if k:  # even integer q: the cost of the coupling is rational
        ok = sum((w * s**k for w, s in pairs), flint.fmpq(0)) <= uq
    else:
        with flint.ctx.workprec(128 + min(h, 4096)):
            half = flint.arb(flint.fmpq(p, 2 * r))
            terms = (w * (half * flint.arb(s).log()).exp() for w, s in pairs if s and w)
            total = sum(terms, flint.arb(0))
            ok = total.is_finite() and total < flint.arb(uq)
    if not ok:
        raise Rejected("claim.upper_q: below the cost of the coupling")
    if up < 0 or up**p < uq**r or (lo > 0 and (lq <= 0 or lo**p > lq**r)):
        raise Rejected("claim: lower / upper are not bounds on lower_q^(1/q) / upper_q^(1/q)")
    return f"W_q, q = {q}: {n} x {m} atoms in dimension {d}, {len(pairs)} coupling entries"
