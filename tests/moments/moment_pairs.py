"""Pairs of discrete measures for the moment / separation tests, and independent references.

Hard pairs share their first m moments: Prouhet-Tarry-Escott (PTE) solutions and the
Prouhet-Thue-Morse split of {0, ..., 2^{m+1} - 1}; affine maps x -> a x + c, embeddings on a
line of R^d and mixing with a common part keep "first m moments equal" (along every direction,
for a line embedding).
"""

from __future__ import annotations

import mpmath
from flint import fmpq
from hypothesis import strategies as st

PTE_2 = ([0, 4, 5], [1, 2, 6])
PTE_5 = ([0, 4, 9, 17, 22, 26], [1, 2, 12, 14, 24, 25])


def thue_morse(m: int) -> tuple[list[int], list[int]]:
    """Split {0, ..., 2^{m+1} - 1} by the parity of the binary digit sum: equal k-th power
    sums for k = 1..m (Prouhet)."""
    n = 2 ** (m + 1)
    even = [i for i in range(n) if bin(i).count("1") % 2 == 0]
    odd = [i for i in range(n) if bin(i).count("1") % 2 == 1]
    return even, odd


def power_sums_equal(a, b, m: int) -> bool:
    return all(
        sum(fmpq(x) ** k for x in a) == sum(fmpq(x) ** k for x in b) for k in range(1, m + 1)
    )


def uniform(xs, d_line=None, offset=None):
    """Uniform measure on xs (1-D), or on c + x v in R^d when a line is given."""
    if d_line is None:
        return ([[fmpq(x)] for x in xs], None)
    return (
        [[fmpq(c) + fmpq(x) * fmpq(v) for v, c in zip(d_line, offset, strict=True)] for x in xs],
        None,
    )


small_rationals = st.builds(
    lambda p, q: fmpq(p, q), st.integers(-20, 20), st.sampled_from([1, 2, 3, 4, 8])
)


@st.composite
def measures(draw, d=None, max_atoms=6):
    """Weighted discrete measure with small rational atoms (repeats possible)."""
    d = draw(st.integers(1, 10)) if d is None else d
    n = draw(st.integers(1, max_atoms))
    pts = [[draw(small_rationals) for _ in range(d)] for _ in range(n)]
    raw = draw(st.lists(st.integers(0, 5), min_size=n, max_size=n).filter(lambda w: sum(w) > 0))
    total = sum(raw)
    return pts, [fmpq(w, total) for w in raw]


@st.composite
def distinct_pairs(draw):
    """Two measures in the same dimension, distinct as measures."""
    from certified.moments import merged_atoms
    from certified.moments.measure import discrete_measure

    d = draw(st.integers(1, 10))
    mu = draw(measures(d=d))
    nu = draw(measures(d=d))
    a, b = discrete_measure(mu), discrete_measure(nu)
    if merged_atoms(*a) == merged_atoms(*b):
        # move a little mass to a new atom: now distinct
        pts, w = nu
        nu = (pts + [[fmpq(1, 7)] * d], [x * fmpq(9, 10) for x in w] + [fmpq(1, 10)])
        a, b = discrete_measure(mu), discrete_measure(nu)
        if merged_atoms(*a) == merged_atoms(*b):  # pragma: no cover - mu had that atom too
            nu = (pts + [[fmpq(-31, 3)] * d], [x * fmpq(9, 10) for x in w] + [fmpq(1, 10)])
    return mu, nu


@st.composite
def five_moment_pairs(draw):
    """Pairs sharing their first 5 moments (along every direction when embedded in R^d)."""
    base = draw(st.sampled_from(["pte5", "thue-morse5"]))
    a, b = PTE_5 if base == "pte5" else thue_morse(5)
    scale = draw(st.sampled_from([fmpq(1), fmpq(-1, 3), fmpq(5, 2), fmpq(1, 16)]))
    shift = draw(small_rationals)
    a = [scale * x + shift for x in a]
    b = [scale * x + shift for x in b]
    d = draw(st.integers(1, 10))
    if d == 1:
        mu, nu = uniform(a), uniform(b)
    else:
        v = [draw(st.integers(-3, 3)) for _ in range(d)]
        if not any(v):
            v[0] = 1
        c = [draw(small_rationals) for _ in range(d)]
        mu, nu = uniform(a, v, c), uniform(b, v, c)
    if draw(st.booleans()):  # mix with a common part: moments of the mixture still agree
        common = draw(measures(d=d, max_atoms=3))
        lam = fmpq(draw(st.integers(1, 3)), 4)

        def mix(m):
            pts, w = m
            n = len(pts)
            w = [fmpq(1, n)] * n if w is None else w
            return (pts + common[0], [(1 - lam) * x for x in w] + [lam * x for x in common[1]])

        mu, nu = mix(mu), mix(nu)
    return mu, nu


def reference_gradient(measure, q, digits: int = 60):
    """G_mu(q) with mpmath at ``digits`` digits (a reference for containment tests only)."""
    pts, w = measure
    n = len(pts)
    w = [fmpq(1, n)] * n if w is None else w
    with mpmath.workdps(digits):

        def mp(x):
            x = fmpq(x)
            return mpmath.mpf(int(x.p)) / int(x.q)

        e = [
            mp(wi) * mpmath.exp(sum(mp(a) * mp(c) for a, c in zip(q, y, strict=True)))
            for y, wi in zip(pts, w, strict=True)
        ]
        z = mpmath.fsum(e)
        return [
            mpmath.fsum(ei * mp(y[k]) for ei, y in zip(e, pts, strict=True)) / z
            for k in range(len(q))
        ]


def mp_inside(value, lo, hi, digits: int = 60) -> bool:
    """[value - tol, value + tol] inside [lo, hi]: the reference's error margin counts against
    the enclosure, so a pass proves containment of the true value (tol >> mpmath's error); an
    enclosure narrower than 2 tol (exact values) is only checked to lie within tol."""
    with mpmath.workdps(digits):
        lo = mpmath.mpf(int(fmpq(lo).p)) / int(fmpq(lo).q)
        hi = mpmath.mpf(int(fmpq(hi).p)) / int(fmpq(hi).q)
        tol = mpmath.mpf(10) ** (-(digits - 10)) * (1 + abs(value))
        if hi - lo < 2 * tol:  # narrower than the reference's error: consistency only
            return lo - tol <= value <= hi + tol
        return lo <= value - tol and value + tol <= hi
