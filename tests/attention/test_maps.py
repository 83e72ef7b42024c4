"""Attention maps and Jacobians in ball arithmetic contain 100-digit mpmath values."""

from __future__ import annotations

import flint
import numpy as np
import pytest
from attention_reference import reference_jacobian, reference_map, to_fmpq
from hypothesis import example, given, settings
from hypothesis import strategies as st
from mpmath import mp

from certified.arith.ball import contains, endpoints
from certified.attention.maps import (
    attention_jacobian,
    attention_jvp,
    attention_map,
    attention_measure_map,
)
from certified.attention.model import Attention, Head
from certified.errors import InputError, NonFiniteError, ShapeError

PREC = 300  # ~90 digits: radii far above the reference's 110-digit error

entries = st.floats(-2, 2, allow_nan=False, width=64).map(lambda x: round(x, 3))


@st.composite
def instances(draw):
    d = draw(st.integers(1, 3))
    n = draw(st.integers(1, 4))
    heads = []
    for _ in range(draw(st.integers(1, 2))):
        k = draw(st.integers(1, 3))
        dv = draw(st.integers(1, 3))
        proj = draw(st.booleans())
        dv = dv if proj else d
        mat = lambda r, c: [[draw(entries) for _ in range(c)] for _ in range(r)]  # noqa: E731
        heads.append((mat(k, d), mat(k, d), mat(dv, d), mat(d, dv) if proj else None))
    X = [[draw(entries) for _ in range(d)] for _ in range(n)]
    weighted = draw(st.booleans())
    weights = [draw(st.integers(1, 9)) for _ in range(n)] if weighted else None
    opts = {"residual": draw(st.booleans()), "causal": draw(st.booleans())}
    opts["scaled"] = draw(st.booleans())
    return heads, X, weights, opts


def _layer(heads, opts):
    return Attention(tuple(Head(*h) for h in heads), **opts)


TOL = flint.fmpq(1, 10**100)  # the references are accurate to ~110 digits


def _assert_contains(M, ref):
    """Every ball contains its 100-digit reference (up to the reference's own error)."""
    for i, row in enumerate(ref):
        for j, v in enumerate(row):
            q = to_fmpq(v)
            lo, hi = endpoints(M[i, j])
            tol = TOL * (1 + abs(q))
            assert lo - tol <= q <= hi + tol, (i, j, M[i, j], v)


CORNER = (
    [([[0.0, 0.0]], [[1.0, 0.0]], [[1.0, 2.0], [-1.0, 0.5]], None)],
    [[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0]],
    None,
    {"residual": False, "causal": False, "scaled": True},
)


@settings(max_examples=60)
@given(instances())
@example(CORNER)
def test_map_and_jacobian_contain_mpmath(inst):
    heads, X, weights, opts = inst
    layer = _layer(heads, opts)
    F = attention_map(layer, X, weights=weights, prec=PREC)
    _assert_contains(F, reference_map(heads, X, weights=weights, **opts))
    J = attention_jacobian(layer, X, weights=weights, prec=PREC)
    _assert_contains(J, reference_jacobian(heads, X, weights=weights, **opts))


def test_balls_enclose_every_point():
    rng = np.random.default_rng(1)
    layer = Attention.single(rng.standard_normal((2, 2)), rng.standard_normal((2, 2)), np.eye(2))
    X = rng.standard_normal((3, 2))
    balls = [[flint.arb(x, 1e-3) for x in row] for row in X.tolist()]
    F = attention_map(layer, balls, prec=128)
    J = attention_jacobian(layer, balls, prec=128)
    for _ in range(5):
        Y = X + rng.uniform(-1e-3, 1e-3, X.shape)
        _assert_contains(F, reference_map([(*_params(layer), None)], Y.tolist()))
        Fy = attention_jacobian(layer, Y, prec=128)
        for r in range(6):
            for c in range(6):
                assert J[r, c].contains(Fy[r, c].mid())


def _params(layer):
    h = layer.heads[0]
    return h.Q.tolist(), h.K.tolist(), h.V.tolist()


def test_measure_map_is_the_point_cloud_map_at_the_atoms():
    layer = Attention.single([[1, "1/3"]], [["1/2", 1]], [[1, 2], [0, -1]])
    pts = [["1/3", 1], [-1, "1/7"], [0, 2]]
    w = ["1/2", "1/3", "1/6"]
    A = attention_measure_map(layer, pts, w, pts, prec=200)
    B = attention_map(layer, pts, weights=w, prec=200)
    for i in range(3):
        for j in range(2):
            assert A[i, j].overlaps(B[i, j])
    ref = reference_map([(*_params(layer), None)], pts, weights=w)
    _assert_contains(A, ref)


def test_constant_scores_give_the_mean():
    # Qᵀ K = 0: every token maps to V x̄ (exactly, up to ball radius)
    layer = Attention.single([[0, 0]], [[1, 0]], [[2, 0], [0, 3]])
    F = attention_map(layer, [[1, 0], [0, 1], [2, 2]], prec=128)
    for i in range(3):
        assert contains(F[i, 0], 2) and contains(F[i, 1], 3)


def test_bad_input():
    layer = Attention.single([[1, 0]], [[0, 1]], [[1, 0], [0, 1]])
    with pytest.raises(ShapeError):
        attention_map(layer, [[1, 2, 3]])
    with pytest.raises(NonFiniteError):
        attention_map(layer, [[float("nan"), 0]])
    with pytest.raises(InputError):
        attention_map(layer, [[1, 0]], weights=[0])
    with pytest.raises(ShapeError):
        attention_map(layer, [[1, 0]], weights=[1, 1])
    with pytest.raises(ShapeError):
        Head([[1, 0]], [[1, 0, 0]], [[1, 0], [0, 1]])
    with pytest.raises(ShapeError):
        Head([[1, 0]], [[1, 0]], [[1, 0]])  # V must be d x d without W
    with pytest.raises(ShapeError):
        Head([[1, 0]], [[1, 0]], [[1, 0]], W=[[1, 0], [0, 1]])
    with pytest.raises(InputError):
        attention_measure_map(Attention(layer.heads, causal=True), [[1, 0]], None, [[0, 0]])
    with pytest.raises(ShapeError):
        attention_map(layer, [])


@settings(max_examples=25)
@given(instances(), st.integers(0, 2**32 - 1))
def test_jvp_contains_the_directional_derivative(inst, seed):
    heads, X, weights, opts = inst
    layer = _layer(heads, opts)
    U = np.random.default_rng(seed).integers(-4, 5, (len(X), len(X[0]))).tolist()
    dF = attention_jvp(layer, X, U, weights=weights, prec=PREC)
    J = reference_jacobian(heads, X, weights=weights, **opts)
    u = [v for row in U for v in row]
    with mp.workdps(110):
        ref = [
            [sum(J[i * len(U[0]) + a][c] * u[c] for c in range(len(u))) for a in range(len(U[0]))]
            for i in range(len(U))
        ]
    _assert_contains(dF, ref)
