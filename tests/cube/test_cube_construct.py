"""transport_to_cube: exact cells (volumes = atom weights, a partition of [0,1]^d), exact images
in their cells (replayed piece by piece, independently of the checker), the bound against
mpmath, and consistency with a certified W_q against a grid sample of U([0,1]^d)."""

import itertools

import flint
import mpmath
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from certified.certificates import laminar_flow_exact
from certified.cube import guillotine_partition, transport_to_cube
from certified.errors import DomainError
from certified.transport import Measure, wasserstein

Q = flint.fmpq


def _images(result):
    return laminar_flow_exact(result.schedule, result.measure.points)


def _cells_of_atoms(result):
    cell_of_unit = {u: c for c, cell in enumerate(result.partition.cells) for u in cell.units}
    return [result.partition.cells[cell_of_unit[u]] for u in result.unit_of_atom.tolist()]


def _check_partition(cells, d):
    """Sum of volumes 1, boxes inside [0,1]^d, pairwise interiors disjoint."""
    assert sum((c.volume for c in cells), Q(0)) == 1
    for c in cells:
        assert all(0 <= lo < hi <= 1 for lo, hi in zip(c.lo, c.hi, strict=True))
    for a, b in itertools.combinations(cells, 2):
        overlap = all(
            max(a.lo[k], b.lo[k]) < min(a.hi[k], b.hi[k]) for k in range(d)
        )  # open boxes meet
        assert not overlap


@settings(max_examples=25)
@given(
    n=st.integers(1, 40),
    d=st.integers(2, 3),
    counts=st.lists(st.integers(1, 5), min_size=3, max_size=3),
    seed=st.integers(0, 2**16),
)
@example(n=7, d=2, counts=[3, 3, 3], seed=0)  # 3 does not divide 7: unequal cells
def test_guillotine_cells_match_weights_exactly(n, d, counts, seed):
    rng = np.random.default_rng(seed)
    raw = rng.integers(1, 10, n)
    weights = [Q(int(w), int(raw.sum())) for w in raw]
    part = guillotine_partition(rng.random((n, d)), weights, tuple(counts[:d]))
    _check_partition(part.cells, d)
    units = sorted(u for c in part.cells for u in c.units)
    assert units == list(range(n))
    for c in part.cells:
        assert c.volume == sum((weights[u] for u in c.units), Q(0))


def _check_result(result):
    Y = _images(result)
    cells = _cells_of_atoms(result)
    worst = Q(0)
    for y, c in zip(Y, cells, strict=True):
        assert all(lo <= v <= hi for v, lo, hi in zip(y, c.lo, c.hi, strict=True))
        worst = max(
            worst,
            sum((max(v - lo, hi - v) ** 2 for v, lo, hi in zip(y, c.lo, c.hi, strict=True)), Q(0)),
        )
    assert worst == result.bound_squared
    with mpmath.workdps(60):  # the dyadic bound is above sqrt(bound_squared), within 2^-39
        root = mpmath.sqrt(mpmath.mpf(int(worst.p)) / int(worst.q))
        b = mpmath.mpf(int(result.bound.p)) / int(result.bound.q)
        assert root <= b and (b - root < mpmath.mpf(2) ** -39 or result.bound == result.epsilon)
    assert result.bound <= result.epsilon
    mass = {}
    for k, c in enumerate(cells):
        mass[c] = mass.get(c, Q(0)) + result.measure.weights[k]
    assert all(m == c.volume for c, m in mass.items())


@pytest.mark.parametrize(
    ("n", "d", "p", "eps"),
    [(60, 2, 2, "1/4"), (120, 2, 3, "0.2"), (150, 3, 3, "0.3"), (100, 3, 6, "0.35")],
)
def test_images_land_in_their_cells(n, d, p, eps):
    mu = Measure(np.random.default_rng(n).standard_normal((n, d)) * 3)
    result = transport_to_cube(mu, p, eps)
    _check_result(result)
    assert result.schedule.width <= p
    assert result.switches == 2 * -(-len(result.interpolation.X) // p) - 1


def test_repeated_and_weighted_atoms():
    points = [[0, 0], [0, 0], [1, 2], [3, -1], [1, 2], ["1/3", "2/7"]]
    weights = ["1/12", "1/12", "1/3", "1/6", "1/12", "1/4"]
    result = transport_to_cube(Measure(points, weights), 2, "0.75")
    assert len(result.interpolation.X) == 4  # equal atoms merged: a flow map cannot split them
    _check_result(result)


def test_bound_consistent_with_certified_wasserstein_to_a_grid_sample():
    # W_q(Phi#mu, U) <= bound and W_q(U_m, U) <= sqrt(d)/(2m) for the grid sample U_m of m^d cell
    # centres (the same coupling argument), so a certified lower bound on W_q(Phi#mu, U_m) must
    # not exceed bound + sqrt(d)/(2m); and the bound is not absurdly loose either
    d, m = 2, 20
    mu = Measure(np.random.default_rng(3).standard_normal((200, d)))
    result = transport_to_cube(mu, 2, "0.2")
    image = Measure(_images(result), result.measure.weights)
    grid = [[Q(2 * i + 1, 2 * m), Q(2 * j + 1, 2 * m)] for i in range(m) for j in range(m)]
    for q in (1, "3/2"):
        w = wasserstein(image, Measure(grid), q)
        assert float(w.lower) <= float(result.bound) + np.sqrt(d) / (2 * m)
        assert float(w.upper) >= float(result.bound) / 10


def test_too_few_atoms_for_epsilon_is_refused():
    with pytest.raises(DomainError, match="too few or too heavy"):
        transport_to_cube(np.random.default_rng(0).random((30, 2)), 2, "0.05")
    with pytest.raises(DomainError, match="too few or too heavy"):
        transport_to_cube(Measure([[0, 0]]), 2, "0.5")  # one atom: W = E|U - y| > 0.38


def test_one_dimensional_measures_are_refused():
    with pytest.raises(DomainError, match="d = 1"):
        transport_to_cube(np.random.default_rng(0).random((30, 1)), 1, "0.5")


def test_source_boxes_tile_the_atoms_bounding_box_and_hold_their_atoms():
    from certified.cube import source_boxes

    result = transport_to_cube(np.random.default_rng(9).standard_normal((300, 2)), 2, "0.2")
    P = result.interpolation.X.astype(float)
    boxes = source_boxes(result.partition, P)
    for cell, (lo, hi) in zip(result.partition.cells, boxes, strict=True):
        inside = P[list(cell.units)]
        assert (inside >= lo).all() and (inside <= hi).all()
    whole = sum(np.prod(hi - lo) for lo, hi in boxes)
    span = P.max(axis=0) - P.min(axis=0)
    assert np.isclose(whole, np.prod(span * 1.1))  # the tiles cover the padded box once
