"""The compiled enclosures of certified.entropic._gibbs against exact rational arithmetic."""

from __future__ import annotations

import math

import numpy as np
from flint import fmpq
from hypothesis import example, given, settings
from hypothesis import strategies as st

from certified.entropic._gibbs import _exponent, gibbs_sums, gibbs_sums_s, gibbs_sums_sq


def _q(v: float) -> fmpq:
    return fmpq(*float(v).as_integer_ratio())


_double = st.one_of(
    st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False),
    st.floats(-1e-140, 1e-140, allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, 1.0, -1.0, 0.1, 1 / 3, 2.0**-460, 3 * 2.0**-470]),
)


@given(st.lists(_double, min_size=8, max_size=8))
@example([0.1, 0.2, 1 / 3, 0.0, 2.0**-460, -1.0, 1.0, 0.3])  # a tiny difference (no Dekker)
@example([1e6, -1e6, 1e6, 1e6, 1e6, 1e6 - 1, 1e6 + 1, 1e6])  # cancellation f + g - cost
def test_exponent_encloses_the_exact_numerator(v):
    f, g = v[0], v[1]
    X = np.array([v[2:5]])
    YT = np.array([v[5:8]]).T
    zlo, zhi = _exponent(f, g, X, YT, 0, 0)
    z = (
        _q(f)
        + _q(g)
        - sum(((_q(a) - _q(b)) ** 2 for a, b in zip(v[2:5], v[5:8], strict=True)), fmpq(0))
    )
    assert _q(zlo) <= z <= _q(zhi)
    scale = abs(z) + abs(_q(f)) * fmpq(1, 2**50) + fmpq(1, 2**800)
    assert _q(zhi) - _q(zlo) <= scale * fmpq(1, 2**48)  # about an ulp of the numerator


@given(st.integers(0, 2**32 - 1), st.sampled_from([0.05, 0.5, 3.0]))
def test_both_kernels_enclose_the_same_sums(seed, gamma):
    rng = np.random.default_rng(seed)
    X, Y = rng.standard_normal((3, 2)), rng.standard_normal((4, 2))
    f, g = rng.standard_normal(3), rng.standard_normal(4)
    a, b = np.full(3, 1 / 4), np.full(4, 1 / 4)  # exact doubles, any non-negative weights
    S = ((X[:, None, :] - Y[None, :, :]) ** 2).sum(-1)
    clo, chi = S * (1 - 2.0**-48), S * (1 + 2.0**-48)  # generous valid cost bounds
    inv = (1 / gamma * (1 - 2.0**-50), 1 / gamma * (1 + 2.0**-50))
    plain = gibbs_sums(f, g, clo, chi, inv, (a, a), (b, b))
    sq = gibbs_sums_sq(f, g, X, Y, inv, (a, a), (b, b))
    assert plain[-1] and sq[-1]
    import mpmath

    with mpmath.workdps(40):

        def e(i, j):
            c = sum((mpmath.mpf(X[i, k]) - mpmath.mpf(Y[j, k])) ** 2 for k in range(2))
            return mpmath.exp((mpmath.mpf(f[i]) + mpmath.mpf(g[j]) - c) / mpmath.mpf(gamma))

        E = [[e(i, j) for j in range(4)] for i in range(3)]
        rows = [mpmath.fsum(E[i]) / 4 for i in range(3)]
        cols = [mpmath.fsum(E[i][j] for i in range(3)) / 4 for j in range(4)]
        for lo_r, hi_r, lo_c, hi_c, _ in (plain, sq):
            assert all(lo_r[i] <= rows[i] <= hi_r[i] for i in range(3))
            assert all(lo_c[j] <= cols[j] <= hi_c[j] for j in range(4))


# --- the vectorised kernels (row buffers, four directed partial sums, entry-wise cost bounds,
# the exponent of a whole row at once) against 50-digit mpmath sums ---------------------------

_coord = st.one_of(
    st.floats(-8, 8, allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, 0.1, 1 / 3, -2.5, 2.0**-460, -(2.0**-470), 1e-200]),
)


@st.composite
def _gibbs_instance(draw):
    n, m, d = draw(st.integers(1, 6)), draw(st.integers(1, 9)), draw(st.integers(1, 4))
    X = np.array([[draw(_coord) for _ in range(d)] for _ in range(n)]).reshape(n, d)
    Y = np.array([[draw(_coord) for _ in range(d)] for _ in range(m)]).reshape(m, d)
    if draw(st.booleans()):  # near-coincident points: tiny differences, no Dekker product
        Y[0] = X[0] + np.array([draw(st.sampled_from([0.0, 2.0**-480, 1e-300])) for _ in range(d)])
    gamma = draw(st.sampled_from([0.003, 0.05, 0.5, 1.0, 7.0]))
    pot = st.floats(-300, 300, allow_nan=False, allow_infinity=False)  # (f + g)/γ <= 600
    f = np.array([gamma * draw(pot) for _ in range(n)])
    g = np.array([gamma * draw(pot) for _ in range(m)])
    w = st.floats(0.0, 1.0, allow_nan=False)
    a, b = np.array([draw(w) for _ in range(n)]), np.array([draw(w) for _ in range(m)])
    return X, Y, f, g, a, b, gamma


def _reference(X, Y, f, g, a, b, gamma):
    import mpmath

    with mpmath.workdps(50):

        def e(i, j):
            c = sum((mpmath.mpf(X[i, k]) - mpmath.mpf(Y[j, k])) ** 2 for k in range(X.shape[1]))
            return mpmath.exp((mpmath.mpf(f[i]) + mpmath.mpf(g[j]) - c) / mpmath.mpf(gamma))

        E = [[e(i, j) for j in range(len(g))] for i in range(len(f))]
        rows = [
            mpmath.fsum(mpmath.mpf(b[j]) * E[i][j] for j in range(len(g))) for i in range(len(f))
        ]
        cols = [
            mpmath.fsum(mpmath.mpf(a[i]) * E[i][j] for i in range(len(f))) for j in range(len(g))
        ]
    return rows, cols


@given(_gibbs_instance())
@settings(max_examples=60, deadline=None)
def test_vectorised_kernels_enclose_the_gibbs_sums(inst):
    from certified.transport._costs import TINY, kappas, squared_distances

    X, Y, f, g, a, b, gamma = inst
    S = squared_distances(X, Y)
    kappa, K = kappas(X.shape[1])
    clo, chi = np.where(S >= TINY, S * kappa, 0.0), np.where(S >= TINY, S * K, 2 * TINY)
    inv = (_q(1) / _q(gamma), _q(1) / _q(gamma))
    inv = (float(inv[0]) * (1 - 2.0**-52), float(inv[1]) * (1 + 2.0**-52))  # 1/γ inside
    assert _q(inv[0]) <= 1 / _q(gamma) <= _q(inv[1])
    # weights known only up to a few ulps: the kernels must use lo for lower, hi for upper
    a_iv, b_iv = (a * (1 - 2.0**-50), a * (1 + 2.0**-50)), (b * (1 - 2.0**-50), b * (1 + 2.0**-50))
    rows, cols = _reference(X, Y, f, g, a, b, gamma)
    results = [
        gibbs_sums(f, g, clo, chi, inv, a_iv, b_iv),
        gibbs_sums_s(f, g, S, (kappa, K), inv, a_iv, b_iv),
        gibbs_sums_sq(f, g, X, Y, inv, a_iv, b_iv),
    ]
    for row_lo, row_hi, col_lo, col_hi, ok in results:
        assert ok
        for i, r in enumerate(rows):  # mpf against a double: an exact comparison
            assert row_lo[i] <= r <= row_hi[i]
        for j, c in enumerate(cols):
            assert col_lo[j] <= c <= col_hi[j]
    # the cost-bound kernels agree bit for bit (same cost bounds, same operations)
    assert all(np.array_equal(u, v) for u, v in zip(results[0][:4], results[1][:4], strict=True))


def test_overflowing_exponentials_are_flagged():
    f, g = np.array([800.0]), np.array([0.0, 1.0])
    X, Y = np.zeros((1, 2)), np.zeros((2, 2))
    one = (np.ones(1), np.ones(1))
    two = (np.ones(2), np.ones(2))
    S = np.zeros((1, 2))
    assert not gibbs_sums_sq(f, g, X, Y, (1.0, 1.0), one, two)[-1]
    assert not gibbs_sums_s(f, g, S, (1.0, 1.0), (1.0, 1.0), one, two)[-1]
    assert gibbs_sums_sq(f - 100, g, X, Y, (1.0, 1.0), one, two)[-1]


@given(
    st.floats(-800, 720, allow_nan=False, allow_infinity=False),
    st.one_of(st.just(0.0), st.floats(0, 2, allow_nan=False), st.floats(0, 1e-12)),
)
@example(-745.0, 0.0)  # the subnormal range of exp
@example(709.5, 0.0)
@example(-1.0, 1.5)  # w >= 1: lower end 0
def test_enclosed_exponential(thi, width):
    import mpmath

    from certified.entropic._gibbs import _enclose_exp

    tlo = thi - width
    elo, ehi, bad = _enclose_exp(tlo, thi)
    if bad:
        assert thi > 709  # only overflow is flagged
        return
    with mpmath.workdps(40):  # mpf of a double is exact; the comparisons are exact
        assert 0 <= elo <= mpmath.exp(mpmath.mpf(tlo))
        assert mpmath.exp(mpmath.mpf(thi)) <= ehi
    assert ehi <= 1.01 * math.exp(thi) + 2.0**-1070  # not vacuous


_any_double = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(-1e-300, 1e-300, allow_nan=False),
    st.sampled_from([0.0, -0.0, 2.0**-1074, 1.7976931348623157e308]),
)


@given(st.lists(st.tuples(_any_double, _any_double), max_size=12))
def test_exact_dot_is_exact(pairs):
    from certified.entropic.entropic import _exact_dot

    x = np.array([p[0] for p in pairs], dtype=np.float64)
    y = np.array([p[1] for p in pairs], dtype=np.float64)
    assert _exact_dot(x, y) == sum((_q(u) * _q(v) for u, v in pairs), fmpq(0))


def test_the_fast_math_solver_leaves_the_fpu_state_alone():
    # the untrusted passes are compiled with fastmath; the rigorous kernels rely on
    # round-to-nearest with gradual underflow, checked again after a solve
    from certified.arith.fpu import check_fpu_state
    from certified.entropic._sinkhorn import solve_potentials

    rng = np.random.default_rng(0)
    C = rng.random((30, 20)) * 5
    f, g, info = solve_potentials(C, np.full(30, 1 / 30), np.full(20, 1 / 20), 0.05)
    assert np.all(np.isfinite(f)) and np.all(np.isfinite(g)) and info["error"] < 1e-10
    check_fpu_state()
