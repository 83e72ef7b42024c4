"""Certified W_q enclosures contain independent values: brute force over permutations, the exact
optimum of tiny LPs (vertex enumeration), POT's exact LP value; both producers agree; the
general case without POT raises a clear error, uniform measures of equal size still work."""

from __future__ import annotations

import importlib
import sys

import numpy as np
import pytest
from flint import fmpq
from hypothesis import assume, example, given
from hypothesis import strategies as st
from transport_reference import brute_force_lp, brute_force_permutations, inside, root_inside

from certified.errors import MissingDependencyError
from certified.transport import Measure, wasserstein
from certified.transport.wasserstein import exact_coupling

ot = pytest.importorskip("ot")

coord = st.one_of(
    st.floats(-8, 8, allow_nan=False, width=64),
    st.sampled_from([0.0, 1.0, -1.0, 0.5, 1e-300, 3.0]),  # ties and duplicate points
)
Q = st.sampled_from([2, 1, 3, 4, "3/2", "5/2", "7/3"])


@st.composite
def cloud(draw, n, d):
    return np.array([[draw(coord) for _ in range(d)] for _ in range(n)])


@st.composite
def uniform_pair(draw, max_n=5):
    n = draw(st.integers(1, max_n))
    d = draw(st.integers(1, 3))
    return draw(cloud(n, d)), draw(cloud(n, d))


@st.composite
def weights(draw, n):
    w = [draw(st.integers(0, 6)) for _ in range(n)]
    if sum(w) == 0:
        w[0] = 1
    return [fmpq(x, sum(w)) for x in w]


@st.composite
def weighted_pair(draw, max_n=3):
    n, m = draw(st.integers(1, max_n)), draw(st.integers(1, max_n))
    d = draw(st.integers(1, 2))
    return (draw(cloud(n, d)), draw(weights(n)), draw(cloud(m, d)), draw(weights(m)))


@given(uniform_pair(), Q, st.sampled_from(["assignment", "pot"]))
@example((np.zeros((1, 1)), np.zeros((1, 1))), 2, "assignment")
@example((np.array([[0.0], [1.0]]), np.array([[1.0], [0.0]])), 1, "pot")
@example((np.array([[1e-300, 0.0]]), np.array([[0.0, 0.0]])), 2, "assignment")
def test_contains_brute_force_over_permutations(pair, q, solver):
    X, Y = pair
    e = wasserstein(Measure(X), Measure(Y), q, solver=solver)
    ref = brute_force_permutations(X.tolist(), Y.tolist(), q)
    assert inside(e.lower_q, ref, e.upper_q)
    assert root_inside(e.lower, ref, e.upper, q)
    assert e.lower <= e.upper


@given(weighted_pair(), Q)
@example((np.array([[0.0], [1.0]]), [fmpq(1, 3), fmpq(2, 3)], np.array([[0.5]]), [fmpq(1)]), "3/2")
@example((np.array([[0.0], [0.0]]), [fmpq(1, 2), fmpq(1, 2)], np.array([[0.0]]), [fmpq(1)]), 2)
def test_contains_the_exact_optimum_of_tiny_lps(case, q):
    X, a, Y, b = case
    e = wasserstein(Measure(X, a), Measure(Y, b), q)
    ref = brute_force_lp(X.tolist(), a, Y.tolist(), b, q)
    assert inside(e.lower_q, ref, e.upper_q)
    assert root_inside(e.lower, ref, e.upper, q)


@given(st.integers(2, 40), st.integers(2, 40), st.integers(1, 4), st.integers(0, 2**32))
def test_contains_pots_lp_value(n, m, d, seed):
    """POT's float emd2 lies in the enclosure up to its own float rounding (relative 1e-12), and
    the exact cost of POT's coupling, made exact, is at least the certified lower bound."""
    rng = np.random.default_rng(seed)
    X, Y = rng.standard_normal((n, d)), rng.uniform(-1, 2, (m, d))
    a = rng.integers(0, 5, n) + (np.arange(n) == 0)
    b = rng.integers(0, 5, m) + (np.arange(m) == 0)
    wa = [fmpq(int(v), int(a.sum())) for v in a]
    wb = [fmpq(int(v), int(b.sum())) for v in b]
    mu, nu = Measure(X, wa), Measure(Y, wb)
    e = wasserstein(mu, nu, 2)
    M = ((X[:, None, :] - Y[None, :, :]) ** 2).sum(-1)
    value = ot.emd2(mu.weights_float, nu.weights_float, M)
    assert float(e.lower_q) * (1 - 1e-12) - 1e-300 <= value <= float(e.upper_q) * (1 + 1e-12)
    G = ot.emd(mu.weights_float, nu.weights_float, M)
    r, c = np.nonzero(G > 0)
    rows, cols, masses = exact_coupling(r, c, G[r, c], mu.weights, nu.weights)
    exact = sum(
        (
            w * sum((fmpq(*X[i, k].as_integer_ratio()) - fmpq(*Y[j, k].as_integer_ratio())) ** 2
                    for k in range(d))
            for i, j, w in zip(rows.tolist(), cols.tolist(), masses.tolist(), strict=True)
        ),
        fmpq(0),
    )  # fmt: skip
    assert exact >= e.lower_q


@pytest.mark.parametrize("q", [2, 1])
def test_large_uniform_cross_check_and_gap(q):
    rng = np.random.default_rng(11)
    X, Y = rng.standard_normal((300, 3)), rng.standard_normal((300, 3)) + 0.5
    e_pot = wasserstein(X, Y, q, solver="pot")
    e_lap = wasserstein(X, Y, q, solver="assignment")
    assert e_pot.method == "permutation/pot" and e_lap.method == "permutation/assignment"
    assert max(e_pot.lower, e_lap.lower) <= min(e_pot.upper, e_lap.upper)
    assert e_pot.relative_gap <= 1e-12 and e_lap.relative_gap <= 1e-12
    metric = "sqeuclidean" if q == 2 else "euclidean"
    a = np.full(300, 1 / 300)
    value = ot.emd2(a, a, ot.dist(X, Y, metric=metric), numItermax=10**7)
    assert float(e_pot.lower_q) * (1 - 1e-12) <= value <= float(e_pot.upper_q) * (1 + 1e-12)


def test_enclosure_object():
    X = np.array([[0.0], [1.0]])
    Y = np.array([[0.0], [3.0]])
    e = wasserstein(X, Y, 2, solver="assignment")
    assert e.coupling == [(0, 0, fmpq(1, 2)), (1, 1, fmpq(1, 2))]
    assert all(isinstance(v, fmpq) for v in e.phi) and all(isinstance(v, fmpq) for v in e.psi)
    assert e.lower_q <= 2 <= e.upper_q
    assert e.gap == e.upper - e.lower >= 0
    phi, psi = e.phi, e.psi
    C = [[fmpq(0), fmpq(9)], [fmpq(1), fmpq(4)]]
    assert all(phi[i] + psi[j] <= C[i][j] for i in range(2) for j in range(2))
    assert sum(phi) / 2 + sum(psi) / 2 == e.lower_q
    assert "relative gap" in repr(e)


def test_identical_measures_give_zero_lower_bound_and_tiny_upper():
    X = np.random.default_rng(0).standard_normal((20, 2))
    e = wasserstein(X, X.copy(), 2)
    assert e.lower == 0
    assert e.upper_q <= fmpq(1, 2**890)


def test_without_pot(monkeypatch):
    monkeypatch.setitem(sys.modules, "ot", None)  # "import ot" now raises ImportError
    X, Y = np.eye(3), np.zeros((3, 3))
    e = wasserstein(X, Y, 2)  # uniform, equal sizes: the built-in assignment solver
    assert e.method == "permutation/assignment"
    assert e.lower_q <= 1 <= e.upper_q
    with pytest.raises(MissingDependencyError, match=r"certified\[ot\]"):
        wasserstein(Measure(X, ["1/2", "1/4", "1/4"]), Measure(Y), 2)
    with pytest.raises(MissingDependencyError, match=r"certified\[ot\]"):
        wasserstein(X, Y[:2], 2)
    with pytest.raises(MissingDependencyError):
        wasserstein(X, Y, 2, solver="pot")


@given(uniform_pair(max_n=4))
def test_solvers_agree(pair):
    X, Y = pair
    assume(len(X) >= 1)
    e1 = wasserstein(X, Y, 2, solver="assignment")
    e2 = wasserstein(X, Y, 2, solver="pot")
    assert max(e1.lower_q, e2.lower_q) <= min(e1.upper_q, e2.upper_q)


def test_a_stopped_or_bad_producer_gives_valid_looser_bounds(monkeypatch):
    """Heuristics propose, rigour decides: POT stopped after 3 pivots, or a producer returning
    the independent coupling and NaN duals, still gives enclosures of the exact optimum."""
    wmod = importlib.import_module("certified.transport.wasserstein")

    rng = np.random.default_rng(2)
    X, Y = rng.standard_normal((3, 2)), rng.standard_normal((3, 2))
    a, b = [fmpq(1, 2), fmpq(1, 3), fmpq(1, 6)], [fmpq(1, 4), fmpq(1, 4), fmpq(1, 2)]
    ref = brute_force_lp(X.tolist(), a, Y.tolist(), b, 2)
    monkeypatch.setattr(wmod, "pot_iterations", lambda n, m: 3)
    e = wasserstein(Measure(X, a), Measure(Y, b), 2)
    assert inside(e.lower_q, ref, e.upper_q)
    assert "numItermax" in e.message or "iteration" in e.message.lower()

    def garbage(wa, wb, M):
        return np.outer(wa, wb), None, np.full(len(wb), np.nan), "garbage"

    monkeypatch.setattr(wmod, "_pot_emd", garbage)
    e = wasserstein(Measure(X, a), Measure(Y, b), 2)
    assert inside(e.lower_q, ref, e.upper_q)
    assert e.relative_gap > 1e-6  # looser, still valid
