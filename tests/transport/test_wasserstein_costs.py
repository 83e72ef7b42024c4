"""Rigorous cost bounds (proofs/bounds.md#w-sqdist, #w-power), the dual repair (#w-dual), exact
sums and exact couplings (#w-coupling): containment against exact rationals, property tests,
and a deliberately broken rounding allowance that the tests catch."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from flint import fmpq
from hypothesis import example, given
from hypothesis import strategies as st
from transport_reference import exact_cost, inside

from certified.arith.exact import to_fmpq
from certified.errors import RangeOverflowError
from certified.transport import Measure, _costs
from certified.transport._costs import CostBounds, squared_distances
from certified.transport.wasserstein import exact_coupling, exact_float_sum

wide = st.one_of(
    st.floats(-1e150, 1e150, allow_nan=False),
    st.floats(-1e-150, 1e-150, allow_nan=False),
    st.sampled_from([0.0, 5e-324, -5e-324, 2.0**-1022, 1e-160, 0.1, 1 / 3]),
)


def _numpy_reference(X, Y):
    s = np.subtract(X[:, 0, None], Y[None, :, 0])
    s = s * s
    for k in range(1, X.shape[1]):
        t = np.subtract(X[:, k, None], Y[None, :, k])
        s = s + t * t
    return s


def _exact_s(x, y):
    return sum((fmpq(*float(a).as_integer_ratio()) - fmpq(*float(b).as_integer_ratio())) ** 2
               for a, b in zip(x, y, strict=True))  # fmt: skip


@st.composite
def clouds(draw):
    d = draw(st.integers(1, 4))
    n, m = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    X = np.array([[draw(wide) for _ in range(d)] for _ in range(n)])
    Y = np.array([[draw(wide) for _ in range(d)] for _ in range(m)])
    return X, Y


@given(clouds())
def test_kernel_is_the_numpy_evaluation_bit_for_bit(pair):
    X, Y = pair
    assert np.array_equal(squared_distances(X, Y), _numpy_reference(X, Y))


@given(clouds())
@example((np.array([[0.1, 0.2, 0.3]]), np.array([[0.3, 0.1, -0.2]])))
@example((np.array([[5e-324]]), np.array([[-5e-324]])))
@example((np.array([[1e-160, 1e-160]]), np.array([[0.0, -1e-160]])))
def test_squared_distance_bounds_contain_the_exact_value(pair):
    X, Y = pair
    mu, nu = Measure(X), Measure(Y)
    cb = CostBounds(mu, nu, fmpq(2))
    lo = cb.lower_block(0, len(X))
    rows, cols = np.divmod(np.arange(len(X) * len(Y)), len(Y))
    hi = cb.upper_pairs(rows, cols).reshape(len(X), len(Y))
    for i in range(len(X)):
        for j in range(len(Y)):
            s = _exact_s(X[i], Y[j])
            assert fmpq(*lo[i, j].as_integer_ratio()) <= s <= fmpq(*hi[i, j].as_integer_ratio())


def test_broken_allowance_is_caught(monkeypatch):
    """Without the rounding allowance (κ = K = 1) the 'bounds' miss exact values: the
    containment test above has teeth."""
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((30, 3)), rng.standard_normal((30, 3))
    monkeypatch.setattr(_costs, "kappas", lambda d: (1.0, 1.0))
    cb = CostBounds(Measure(X), Measure(Y), fmpq(2))
    lo = cb.lower_block(0, 30)
    misses = sum(
        fmpq(*lo[i, j].as_integer_ratio()) > _exact_s(X[i], Y[j])
        for i in range(30)
        for j in range(30)
    )
    assert misses > 0


@pytest.mark.parametrize("q", [1, 2, 3, 4, "3/2", "7/3", "1001/1000"])
def test_rational_points_interval_path(q):
    """Points that are not doubles go through interval arithmetic; costs of every q."""
    X = [["1/3", "0"], ["-2/7", "5"], ["0", "0"]]
    Y = [["1/10", "1/10"], ["0", "0"], ["4", "-1/3"]]
    cb = CostBounds(Measure(X), Measure(Y), to_fmpq(q))
    lo = cb.lower_block(0, 3)
    rows, cols = np.divmod(np.arange(9), 3)
    hi = cb.upper_pairs(rows, cols).reshape(3, 3)
    for i in range(3):
        for j in range(3):
            ref = exact_cost(X[i], Y[j], q)
            assert inside(
                fmpq(*lo[i, j].as_integer_ratio()), ref, fmpq(*hi[i, j].as_integer_ratio())
            )


def test_overflow_is_reported():
    with pytest.raises(RangeOverflowError):
        CostBounds(Measure(np.array([[1e200]])), Measure(np.array([[-1e200]])), fmpq(2))


@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), max_size=30))
@example([5e-324, -5e-324, 1e308, 1e308, -1e308])
def test_exact_float_sum(values):
    assert exact_float_sum(np.array(values, dtype=float)) == fmpq(
        *_frac(sum((Fraction(v) for v in values), Fraction(0)))
    )


def _frac(f: Fraction):
    return f.numerator, f.denominator


@given(st.integers(1, 6), st.integers(1, 6), st.integers(0, 2**32), st.floats(0, 1e-3))
def test_exact_coupling_has_exact_marginals(n, m, seed, noise):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 4, n) + (np.arange(n) == 0)
    b = rng.integers(0, 4, m) + (np.arange(m) == 0)
    A = [fmpq(int(v), int(a.sum())) for v in a]
    B = [fmpq(int(v), int(b.sum())) for v in b]
    G = np.outer(a / a.sum(), b / b.sum()) * (1 + noise * rng.standard_normal((n, m)))
    G[rng.random((n, m)) < 0.3] = 0.0
    r, c = np.nonzero(G > 0)
    rows, cols, masses = exact_coupling(r, c, G[r, c], A, B)
    assert all(w > 0 for w in masses)
    assert list(zip(rows.tolist(), cols.tolist(), strict=True)) == sorted(
        set(zip(rows.tolist(), cols.tolist(), strict=True))
    )
    for i in range(n):
        assert sum((w for k, w in enumerate(masses) if rows[k] == i), fmpq(0)) == A[i]
    for j in range(m):
        assert sum((w for k, w in enumerate(masses) if cols[k] == j), fmpq(0)) == B[j]


@given(clouds(), st.integers(0, 2**32))
def test_dual_repair_is_feasible_for_any_psi(pair, seed):
    """φ = pred(min_j (c_lo - ψ_j)) is feasible whatever ψ is (here: garbage)."""
    X, Y = pair
    X = np.clip(X, -1e100, 1e100)
    Y = np.clip(Y, -1e100, 1e100)
    psi = np.random.default_rng(seed).standard_normal(len(Y)) * 10.0 ** float(seed % 7)
    cb = CostBounds(Measure(X), Measure(Y), fmpq(2))
    phi = np.nextafter(cb.row_min_minus(psi), -math.inf)
    for i in range(len(X)):
        for j in range(len(Y)):
            t = fmpq(*phi[i].as_integer_ratio()) + fmpq(*psi[j].as_integer_ratio())
            assert t <= _exact_s(X[i], Y[j])
