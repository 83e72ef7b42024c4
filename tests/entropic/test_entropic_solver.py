"""The untrusted entropic solver: tight gaps on bench-like data at every regime it switches
between (over-relaxed sweeps, Newton with the Cholesky preconditioner, ε-scaling stages), and
its heuristics' formulas. Soundness never depends on it (see test_entropic_containment)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from certified.entropic import entropic_ot, sinkhorn_divergence
from certified.entropic._sinkhorn import _factor, _precondition, _relaxation, solve_potentials


@pytest.mark.parametrize("gamma", ["1", "1/10", "1/100"])
def test_bench_like_data_reach_a_tight_gap(gamma):
    rng = np.random.default_rng(150)
    x, y = rng.standard_normal((150, 3)), rng.standard_normal((140, 3)) + 0.5
    e = entropic_ot(x, y, gamma)
    assert e.lower <= e.upper
    assert e.relative_gap < 1e-10
    assert e.info["error"] < 1e-11


def test_divergence_of_bench_like_data():
    rng = np.random.default_rng(3)
    d = sinkhorn_divergence(rng.standard_normal((60, 2)), rng.standard_normal((50, 2)), "1/20")
    assert 0 < d.lower <= d.upper and d.relative_gap < 1e-9


def test_zero_weights_get_c_transform_potentials():
    C = np.array([[0.0, 1.0, 4.0], [1.0, 0.0, 1.0]])
    f, g, info = solve_potentials(C, np.array([0.5, 0.5]), np.array([0.5, 0.0, 0.5]), 0.1)
    assert np.all(np.isfinite(f)) and np.all(np.isfinite(g)) and info["error"] < 1e-12


def test_relaxation_follows_youngs_relation():
    # from plain sweeps (w = 1) the observed rate is the plain rate mu^2
    assert _relaxation(1.0, 0.64) == pytest.approx(2 / (1 + math.sqrt(0.36)))
    # at the optimum the rate is w - 1, and the relation gives the same w back
    w = 2 / (1 + math.sqrt(1 - 0.9))
    assert _relaxation(w, w - 1) == pytest.approx(w)
    assert _relaxation(1.3, 1.2) == 1.3  # no rate: unchanged
    assert _relaxation(1.0, 0.999999) <= 1.9


def test_preconditioner_falls_back_to_jacobi():
    S = np.array([[1.0, 2.0], [2.0, 1.0]])  # indefinite: no Cholesky factor
    cd = np.array([2.0, 4.0])
    P = _factor(S, cd)
    assert P.ndim == 1
    assert np.array_equal(_precondition(P, np.array([2.0, 2.0])), np.array([1.0, 0.5]))
    L = _factor(np.array([[4.0, 2.0], [2.0, 3.0]]), cd)
    assert np.allclose(_precondition(L, np.array([6.0, 5.0])), [1.0, 1.0])
