"""Measure: exact points and weights, validation with specific errors; bad input to
wasserstein() (q, dimensions, solver)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from flint import fmpq

from certified.errors import (
    DomainError,
    InputError,
    NonFiniteError,
    NumberFormatError,
    ShapeError,
)
from certified.transport import Measure, wasserstein


def test_exact_points_and_weights():
    mu = Measure([["1/3", 0.1], [1, "0.1"]], ["1/3", "2/3"])
    assert mu.points[0, 0] == fmpq(1, 3)
    assert mu.points[0, 1] == fmpq(*(0.1).as_integer_ratio())  # a float is its binary value
    assert mu.points[1, 1] == fmpq(1, 10)  # a decimal string is exact
    assert not mu.exact_float and not mu.uniform
    assert mu.points_lo[0, 0] < 1 / 3 < mu.points_hi[0, 0] or mu.points_lo[0, 0] == 1 / 3
    assert fmpq(*mu.points_lo[1, 1].as_integer_ratio()) <= fmpq(1, 10)
    assert fmpq(*mu.points_hi[1, 1].as_integer_ratio()) >= fmpq(1, 10)
    assert sum(mu.weights) == 1


def test_float_arrays_are_exact_and_uniform_by_default():
    X = np.random.default_rng(0).standard_normal((5, 2))
    mu = Measure(X)
    assert mu.exact_float and mu.uniform and (mu.n, mu.d) == (5, 2)
    assert all(w == fmpq(1, 5) for w in mu.weights)
    assert mu.points[3, 1] == fmpq(*X[3, 1].as_integer_ratio())
    X[0, 0] = 99.0  # the measure holds its own copy
    assert mu.points_lo[0, 0] != 99.0
    assert Measure(X.astype(np.float32)).exact_float
    assert "uniform" in repr(mu)


def test_normalized_and_json_roundtrip(tmp_path):
    mu = Measure.normalized([[0.0], [1.0], [2.0]], [1, 1, 2])
    assert list(mu.weights) == [fmpq(1, 4), fmpq(1, 4), fmpq(1, 2)]
    path = tmp_path / "mu.json"
    path.write_text(json.dumps(mu.to_json()))
    back = Measure.from_file(path)
    assert (back.points == mu.points).all() and (back.weights == mu.weights).all()


@pytest.mark.parametrize(
    "points, weights, error, match",
    [
        ([[0.0], [1.0]], [0.5, 0.25], InputError, "sum to 3/4"),
        ([[0.0], [1.0]], ["3/2", "-1/2"], InputError, "negative"),
        ([[0.0]] * 10, [0.1] * 10, InputError, "not exactly 1"),
        ([[0.0], [1.0]], ["1/2"], ShapeError, "expected 2 weights"),
        ([[0.0], [1.0]], ["1/2", "nan"], NonFiniteError, "weights"),
        ([[0.0], [float("nan")]], None, NonFiniteError, r"points\[1\]\[0\]"),
        ([[0.0], ["inf"]], None, NonFiniteError, "points"),
        ([[0.0, 1.0], [1.0]], None, ShapeError, "expected 2 coordinates"),
        ([], None, ShapeError, "empty"),
        ([[]], None, ShapeError, "empty"),
        ([[0.0], ["x"]], None, NumberFormatError, "points"),
        ([[True]], None, InputError, "boolean"),
        ("abc", None, ShapeError, "points"),
    ],
)
def test_bad_measures(points, weights, error, match):
    with pytest.raises(error, match=match):
        Measure(points, weights)


@pytest.mark.parametrize(
    "array, error",
    [
        (np.zeros((0, 3)), ShapeError),
        (np.zeros((3, 0)), ShapeError),
        (np.zeros(3), ShapeError),
        (np.array([[0.0, np.nan]]), NonFiniteError),
        (np.array([[np.inf]]), NonFiniteError),
    ],
)
def test_bad_arrays(array, error):
    with pytest.raises(error):
        Measure(array)
    with pytest.raises(error):
        wasserstein(array, np.zeros((1, 3)))


@pytest.mark.parametrize(
    "q, error",
    [
        ("1/2", DomainError),
        (0, DomainError),
        (-2, DomainError),
        ("1001/1000", DomainError),
        ("nan", NonFiniteError),
        ("two", NumberFormatError),
        (True, InputError),
    ],
)
def test_bad_q(q, error):
    with pytest.raises(error):
        wasserstein(np.zeros((2, 1)), np.ones((2, 1)), q)


def test_dimension_mismatch_and_solver():
    with pytest.raises(ShapeError, match="dimension"):
        wasserstein(np.zeros((2, 2)), np.zeros((2, 3)))
    with pytest.raises(InputError, match="solver"):
        wasserstein(np.zeros((2, 2)), np.zeros((2, 2)), solver="sinkhorn")
    with pytest.raises(InputError, match="uniform"):
        wasserstein(Measure([[0.0], [1.0]], ["1/4", "3/4"]), np.zeros((2, 1)), solver="assignment")
    with pytest.raises(InputError, match="mu"):
        wasserstein(None, np.zeros((2, 1)))
