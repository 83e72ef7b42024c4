"""Particles of the Gaussian PDE by Taylor steps vectorised over the particles
(certified/transformers/particle_taylor.py, proofs/particles.md): containment of 20-digit mpmath
references (the particle ODE written from the formula in transformer_reference.py; 50 digits
cost ~2 minutes per example), the first Taylor coefficients and the Jacobian-norm bound against
50-digit references, agreement with the generic engine's path at n = 10, bad input."""

from __future__ import annotations

import os

import mpmath
import numpy as np
import pytest
import transformer_reference as ref
from hypothesis import example, given, settings
from hypothesis import strategies as st

from certified.arith.interval import Interval
from certified.errors import InputError
from certified.transformers.gaussian_particles import particle_moments, sampled_tokens
from certified.transformers.gaussian_pde import parse_params
from certified.transformers.particle_taylor import (
    _heads_of,
    jacobian_norm_bound,
    particle_taylor_flow,
    taylor_coefficients,
)

THOROUGH = os.environ.get("HYPOTHESIS_PROFILE") == "thorough"
ONE_D = {"mean": ["1/2"], "cov": [["1/2"]], "Q": [[1]], "K": [["1/2"]], "V": [["1/2"]]}


def _matrix(draw, d, scale):
    return [[draw(st.integers(-8, 8)) * scale / 8 for _ in range(d)] for _ in range(d)]


@st.composite
def particle_problems(draw):
    """d in {1, 2}, n in {2, 3} (2 when d = 2 outside the thorough profile), one or two heads,
    one or two pieces, entries of size <= 1."""
    d = draw(st.integers(1, 2))
    n = draw(st.integers(2, 3 if d == 1 or THOROUGH else 2))
    pieces = []
    for _ in range(draw(st.integers(1, 2))):
        heads = [{"A": _matrix(draw, d, 1.0), "V": _matrix(draw, d, 1.0)}
                 for _ in range(draw(st.integers(1, 2)))]  # fmt: skip
        pieces.append({"duration": draw(st.sampled_from(["1/8", "1/16", "3/32"])), "heads": heads})
    tokens = [[draw(st.integers(-16, 16)) / 8 for _ in range(d)] for _ in range(n)]
    weights = None
    if draw(st.booleans()):
        raw = [draw(st.integers(1, 4)) for _ in range(n)]
        weights = [f"{r}/{sum(raw)}" for r in raw]
    return d, pieces, tokens, weights


def _pde(d, pieces):
    eye = [[1 if r == c else 0 for c in range(d)] for r in range(d)]
    return parse_params({"mean": [0] * d, "cov": eye, "pieces": pieces})


def _reference(d, pieces, tokens, weights):
    inst = {"tokens": tokens, "geometry": "euclidean", "normalisation": "softmax",
            "pieces": [{"duration": p["duration"],
                        "heads": [{"V": h["V"], "B": h["A"]} for h in p["heads"]]}
                       for p in pieces]}  # fmt: skip
    if weights is not None:
        inst["weights"] = weights
    # 20 digits: mpmath.odefun at 50 digits takes ~2 minutes per example; the enclosures' widths
    # (~1e-12) are far above the reference's error (~1e-20)
    return ref.flow(inst, dps=20)


@settings(max_examples=40 if THOROUGH else 2, deadline=None)
@given(particle_problems())
@example((2, [{"duration": "1/8", "heads": [{"A": [[1, 0.5], [0, 1]], "V": [[1, 0], [0.5, 1]]}]}],
          [[1, 0], [0, 1], [-1, 0.5]], None))  # fmt: skip
def test_enclosure_contains_the_20_digit_flow(problem):
    d, pieces, tokens, weights = problem
    enc = particle_taylor_flow(_pde(d, pieces), tokens, weights, terms=8)
    box = enc.box()
    assert enc.radius < 1e-6
    assert ref.contains(box.lo, box.hi, _reference(d, pieces, tokens, weights)) == []


def test_coefficients_contain_the_50_digit_derivatives():
    """X_1 = f(x) and X_2 = J(x) f(x) / 2 (the solution's first two Taylor coefficients) against
    the 50-digit field and its 50-digit directional derivative."""
    heads = [
        {"A": [[1, 0.5], [-0.25, 1]], "V": [[1, 0], [0.5, 1]]},
        {"A": [[0, 1], [1, 0]], "V": [[0.5, 0], [0, -1]]},
    ]
    tokens = [[1, 0], [0, 1], [-1, 0.5]]
    pde = _pde(2, [{"duration": "1/8", "heads": heads}])
    w = Interval.from_exact(["1/6", "1/3", "1/2"])
    X = taylor_coefficients(
        Interval(np.array(tokens, dtype=float)), _heads_of(pde.pieces[0]), w, 3
    )[0]
    inst = {"tokens": tokens, "weights": ["1/6", "1/3", "1/2"], "geometry": "euclidean",
            "normalisation": "softmax"}  # fmt: skip
    f = ref.field(inst, {"heads": [{"V": h["V"], "B": h["A"]} for h in heads]})
    with mpmath.workdps(50):
        x0 = ref.state(inst)
        f0 = f(x0)
        jf = [mpmath.diff(lambda t, c=c: f([a + t * b for a, b in zip(x0, f0, strict=True)])[c], 0)
              for c in range(6)]  # fmt: skip
    assert ref.contains(X[1].lo, X[1].hi, f0) == []
    assert ref.contains(X[2].lo, X[2].hi, [v / 2 for v in jf]) == []
    assert float(np.max(X[2].hi - X[2].lo)) < 1e-13


def test_jacobian_bound_dominates_the_50_digit_jacobian():
    heads = [
        {"A": [[1, 0.5], [-0.25, 1]], "V": [[1, 0], [0.5, 1]]},
        {"A": [[0, 1], [1, 0]], "V": [[0.5, 0], [0, -1]]},
    ]
    pieces = [{"duration": "1/8", "heads": heads}]
    tokens = [[1, 0], [0, 1], [-1, 0.5]]
    pde = _pde(2, pieces)
    heads = _heads_of(pde.pieces[0])
    w = Interval.from_exact(["1/3"] * 3)
    box = Interval(np.array(tokens, dtype=float))
    _, level0 = taylor_coefficients(box, heads, w, 2)
    L = jacobian_norm_bound(box, level0, heads)
    inst = {"tokens": tokens, "geometry": "euclidean", "normalisation": "softmax"}
    f = ref.field(inst, {"heads": [{"V": h["V"], "B": h["A"]} for h in pieces[0]["heads"]]})
    with mpmath.workdps(50):
        x0 = ref.state(inst)

        def moved(t, c):
            return [v + (t if i == c else 0) for i, v in enumerate(x0)]

        J = [[mpmath.diff(lambda t, r=r, c=c: f(moved(t, c))[r], 0) for c in range(6)]
             for r in range(6)]  # fmt: skip
        norm = max(sum(abs(v) for v in row) for row in J)
    assert norm <= L <= 10 * norm


def test_agrees_with_the_generic_engine_at_n_10():
    """The two certified paths (rule taylor-lohner's Lohner sets; Taylor steps vectorised over
    the particles) enclose the same empirical moments: the enclosures intersect, and the
    vectorised one is at least as tight as 1e-6."""
    pde = parse_params(ONE_D, time="1/2")
    X = sampled_tokens(pde, 10, seed=3)
    a = particle_moments(pde, X)
    b = particle_moments(pde, X, method="vectorised")
    for (l1, h1), (l2, h2) in zip(a.mean + a.cov[0], b.mean + b.cov[0], strict=True):
        assert l1 <= h2 and l2 <= h1
        assert float(h2 - l2) < 1e-6


@pytest.mark.parametrize(
    ("tokens", "weights", "message"),
    [
        ([[1, 2]], None, "tokens"),
        ([[float("nan")]], None, "tokens"),
        ([[1], [2]], ["1/2", "1/3"], "weights"),
        ([[1], [2]], [0.5, float("inf")], "weights"),
        ([[1], [2]], ["1", "0"], "weights"),
        ([[1], [2]], ["1"], "weights"),
    ],
)
def test_bad_input(tokens, weights, message):
    pde = parse_params(ONE_D, time="1/4")
    with pytest.raises(InputError, match=message):
        particle_taylor_flow(pde, tokens, weights)


def test_unknown_method():
    pde = parse_params(ONE_D, time="1/4")
    with pytest.raises(InputError, match="method"):
        particle_moments(pde, [[0.5]], method="fast")
