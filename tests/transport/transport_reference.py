"""Independent references for Wasserstein tests: exact (q even integer, rational arithmetic) or
50-digit mpmath values of W_q^q by brute force (all permutations for uniform measures of equal
size; all vertices of the transportation polytope for tiny general measures)."""

from __future__ import annotations

import itertools

import mpmath
from flint import fmpq

from certified.arith.exact import to_fmpq


def _q(q):
    return to_fmpq(q)


def exact_cost(x, y, q):
    """|x - y|^q: an fmpq when q is an even integer, else a 50-digit mpf."""
    q = _q(q)
    s = sum(((to_fmpq(a) - to_fmpq(b)) ** 2 for a, b in zip(x, y, strict=True)), fmpq(0))
    if q.q == 1 and q.p % 2 == 0:
        return s ** (int(q.p) // 2)
    with mpmath.workdps(50):
        ms = mpmath.mpf(int(s.p)) / int(s.q)
        return ms ** (mpmath.mpf(int(q.p)) / (2 * int(q.q))) if ms != 0 else mpmath.mpf(0)


def brute_force_permutations(X, Y, q):
    """min over permutations of (1/n) Σ c_{i σ(i)} (uniform measures of equal size n <= 7)."""
    n = len(X)
    C = [[exact_cost(X[i], Y[j], q) for j in range(n)] for i in range(n)]
    best = min(sum(C[i][p[i]] for i in range(n)) for p in itertools.permutations(range(n)))
    return best * fmpq(1, n) if isinstance(best, fmpq) else best / n


def _forest_flows(edges, a, b):
    n = len(a)
    need = list(a) + list(b)
    remaining = set(range(len(edges)))
    flow = {}
    while remaining:
        inc: dict[int, list[int]] = {}
        for k in remaining:
            i, j = edges[k]
            inc.setdefault(i, []).append(k)
            inc.setdefault(n + j, []).append(k)
        leaves = [(v, ks[0]) for v, ks in inc.items() if len(ks) == 1]
        if not leaves:
            return None
        v, k = leaves[0]
        i, j = edges[k]
        flow[k] = need[v]
        w = n + j if v == i else i
        need[w] -= need[v]
        need[v] = fmpq(0)
        remaining.discard(k)
    if any(f < 0 for f in flow.values()) or any(x != 0 for x in need):
        return None
    return [flow[k] for k in range(len(edges))]


def brute_force_lp(X, a, Y, b, q):
    """Exact LP optimum min_{π ∈ Π(a, b)} Σ π c by enumerating the vertices of the
    transportation polytope (basic solutions on spanning forests; n * m <= 12)."""
    n, m = len(X), len(Y)
    a = [to_fmpq(w) for w in a]
    b = [to_fmpq(w) for w in b]
    C = [[exact_cost(X[i], Y[j], q) for j in range(m)] for i in range(n)]
    cells = [(i, j) for i in range(n) for j in range(m)]
    best = None
    for support in itertools.combinations(cells, n + m - 1):
        flows = _forest_flows(support, a, b)
        if flows is None:
            continue
        if isinstance(C[0][0], fmpq):
            value = sum((f * C[i][j] for (i, j), f in zip(support, flows, strict=True)), fmpq(0))
        else:
            with mpmath.workdps(50):
                value = mpmath.fsum(
                    mpmath.mpf(int(f.p)) / int(f.q) * C[i][j]
                    for (i, j), f in zip(support, flows, strict=True)
                )
        best = value if best is None else min(best, value)
    return best


def inside(lo: fmpq, ref, hi: fmpq) -> bool:
    """lo <= ref <= hi, exactly for an fmpq reference, up to 1e-40 (relative to 1 + |ref|) for
    a 50-digit mpf reference."""
    if isinstance(ref, fmpq):
        return lo <= ref <= hi
    with mpmath.workdps(60):
        tol = mpmath.mpf("1e-40") * (1 + abs(ref))
        lo_m = mpmath.mpf(int(lo.p)) / int(lo.q)
        hi_m = mpmath.mpf(int(hi.p)) / int(hi.q)
        return lo_m <= ref + tol and ref - tol <= hi_m


def root_inside(lo: fmpq, ref, hi: fmpq, q) -> bool:
    """lo <= ref^(1/q) <= hi (ref a value of W_q^q)."""
    q = _q(q)
    with mpmath.workdps(60):
        r = mpmath.mpf(int(ref.p)) / int(ref.q) if isinstance(ref, fmpq) else ref
        w = r ** (mpmath.mpf(int(q.q)) / int(q.p)) if r > 0 else mpmath.mpf(0)
    return inside(lo, w, hi)
