"""The public strategies of ``certified.strategies`` produce valid data: pairwise distinct rows,
finite doubles, the requested layouts and sizes, valid schedules and measures.

(Named ``test_dataset_strategies.py``: ``tests/attention/test_strategies.py`` already owns the
module name ``test_strategies`` in pytest's default import mode.)
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certified.errors import InputError
from certified.models import Activation, Schedule
from certified.strategies import (
    LAYOUTS,
    datasets,
    doubles,
    measures,
    near_degenerate_datasets,
    schedules,
)


def _distinct(a: np.ndarray) -> bool:
    return len({tuple(r) for r in a.tolist()}) == len(a)


def _rank(a: np.ndarray) -> int:
    import flint

    from certified.arith.exact import to_fmpq

    rows = [[to_fmpq(float(v)) for v in r] for r in a]
    return flint.fmpq_mat(rows).rank() if rows else 0


@given(datasets(n=(1, 40), d=(1, 6), extreme=True))
def test_datasets_distinct_finite_shapes(data):
    X, Y = data
    assert X.dtype == Y.dtype == np.float64
    assert X.shape == Y.shape and 1 <= X.shape[0] <= 40 and 1 <= X.shape[1] <= 6
    assert np.all(np.isfinite(X)) and np.all(np.isfinite(Y))
    assert _distinct(X) and _distinct(Y)


def _lowest_bit(x: float) -> Fraction:
    """The value of the lowest set bit of the double x != 0."""
    q = Fraction(abs(x))
    return Fraction(q.numerator & -q.numerator, q.denominator)


@pytest.mark.parametrize("layout", LAYOUTS)
@settings(max_examples=15)
@given(data=st.data())
def test_each_layout_is_valid(layout, data):
    X, Y = data.draw(datasets(n=(1, 25), d=(2, 5), layout=layout, extreme=True))
    assert _distinct(X) and _distinct(Y)
    if layout == "collinear" and len(X) >= 2:
        assert _rank(X[1:] - X[0]) <= 1  # exactly collinear (the scaling is a power of two)
    if layout == "lattice" and np.any(X):
        # integer points of a small cube times a power of two: with the unit the smallest
        # lowest set bit of the entries, every coordinate is an integer in [0, side]
        unit = min(_lowest_bit(x) for x in X.ravel().tolist() if x)
        side = max(2, math.ceil(len(X) ** (1 / X.shape[1])) + 1)
        assert all((Fraction(x) / unit).denominator == 1 for x in X.ravel().tolist())
        assert 0 <= X.min() and X.max() / unit <= side
    if layout == "repeated" and len(X) >= 4:
        assert any(len(set(X[:, k].tolist())) < len(X) for k in range(X.shape[1]))


def test_extreme_magnitudes_are_reached():
    """Across examples the magnitudes cover 1e-300 .. 1e300 (both ends are actually drawn)."""
    seen: list[float] = []

    @settings(max_examples=80, database=None)
    @given(datasets(n=(5, 20), d=(2, 4), layout="random", extreme=True))
    def collect(data):
        X, Y = data
        nz = np.abs(np.concatenate([X.ravel(), Y.ravel()]))
        seen.extend(nz[nz > 0].tolist())

    collect()
    assert min(seen) < 1e-250 and max(seen) > 1e250


def test_last_bit_layout_has_one_ulp_neighbours():
    found = []

    @settings(max_examples=30, database=None)
    @given(datasets(n=(6, 20), d=(2, 3), layout="last_bit"))
    def collect(data):
        X, _ = data
        for k in range(X.shape[1]):
            v = np.unique(X[:, k])
            found.append(any(math.nextafter(a, math.inf) == b for a, b in itertools.pairwise(v)))

    collect()
    assert any(found)


@given(near_degenerate_datasets(n=(2, 25), d=(1, 5)))
def test_near_degenerate_datasets_are_valid(data):
    X, Y = data
    assert X.shape == Y.shape and X.shape[0] >= 2
    assert np.all(np.isfinite(X)) and np.all(np.isfinite(Y))
    assert _distinct(X) and _distinct(Y)


@given(doubles())
def test_doubles_range(x):
    assert math.isfinite(x) and (x == 0 or 2.0**-998 < abs(x) < 2.0**998)


@settings(max_examples=40)
@given(schedules(d=(1, 4), activation="leaky_relu", pieces=(1, 3), width=(1, 3)))
def test_schedules_are_valid_and_round_trip(s):
    assert isinstance(s, Schedule) and s.activation is Activation.LEAKY_RELU
    assert 1 <= len(s.pieces) <= 3 and s.width <= 3
    assert s.is_float_exact
    assert Schedule.from_json(s.to_json()) == s


@settings(max_examples=40)
@given(schedules(d=(2, 5), laminar=True, pieces=(1, 4), width=(1, 4)))
def test_laminar_schedules_are_laminar(s):
    assert s.is_laminar()


@settings(max_examples=40)
@given(measures(n=(1, 8), d=(1, 3), extreme=True))
def test_measures_weights_sum_to_one(m):
    assert sum(m.weights) == 1 and all(w > 0 for w in m.weights)


@pytest.mark.parametrize("bad", [0, (3, 2), "5", (1.5, 3), True])
def test_bad_sizes_rejected(bad):
    with pytest.raises(InputError, match="n:"):
        datasets(n=bad)


def test_unknown_layout_rejected():
    with pytest.raises(ValueError, match="layout"):
        datasets(layout="spiral")
