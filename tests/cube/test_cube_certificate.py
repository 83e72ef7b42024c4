"""transport-to-cube certificates: the checker accepts honest ones and rejects every tampering
(cells, atoms, weights, bound, switches, schedule, parameters) with the reason."""

import copy
import json
import os
import re

import flint
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from certified.arith.exact import fmpq_to_str, to_fmpq
from certified.checker import check_bytes, check_certificate
from certified.cube import cube_certificate, transport_to_cube
from certified.errors import DomainError
from certified.transport import Measure


@pytest.fixture(scope="module")
def cert():
    mu = Measure(np.random.default_rng(5).standard_normal((80, 2)))
    return cube_certificate(transport_to_cube(mu, 2, "0.25"))


@pytest.fixture(scope="module")
def cert3():
    points = np.random.default_rng(6).random((60, 3)) * 4 - 1
    weights = [f"{k}/{60 * 61 // 2}" for k in range(1, 61)]
    return cube_certificate(transport_to_cube(Measure(points, weights), 4, "0.45", "5/4"))


def test_honest_certificates_are_verified(cert, cert3):
    for c in (cert, cert3):
        v = check_certificate(c)
        assert v.verified and v.kind == "transport-to-cube", v.reason
        assert check_bytes(json.dumps(c).encode()).verified


def _first_leaf_path(node, path=()):
    if isinstance(node, list):
        return path
    return _first_leaf_path(node["parts"][0], (*path, "parts", 0))


def _get(obj, path):
    for k in path:
        obj = obj[k]
    return obj


def _mutations(cert):
    cells = cert["hints"]["cells"]
    leaf = _first_leaf_path(cells)
    yield "moved cut", lambda c: c["hints"]["cells"]["cuts"].__setitem__(0, "1/3"), "weigh"
    yield "cut outside", lambda c: c["hints"]["cells"]["cuts"].__setitem__(0, "2"), "strictly"
    yield (
        "atom twice",
        lambda c: _get(c["hints"]["cells"], leaf).append(_get(cert["hints"]["cells"], leaf)[0]),
        "two cells",
    )
    yield "atom dropped", lambda c: _get(c["hints"]["cells"], leaf).pop(), "weigh|no cell"
    yield "atoms swapped", lambda c: _swap(c, leaf), "not in the cell|weigh"
    yield "bound lowered", lambda c: c["claim"].__setitem__("bound", "1/100"), "claim.bound"
    yield "bound over eps", lambda c: c["claim"].__setitem__("bound", "1"), "claim.bound"
    yield "epsilon lowered", lambda c: c["instance"].__setitem__("epsilon", "1/100"), "claim.bound"
    yield "switches", lambda c: c["claim"].__setitem__("switches", 3), "switches"
    yield "width < d", lambda c: c["instance"].__setitem__("width", 1), "instance.width"
    yield "q too large", lambda c: c["instance"].__setitem__("q", 2), "instance.q"
    yield "q below 1", lambda c: c["instance"].__setitem__("q", "1/2"), "instance.q"
    yield "weight moved", lambda c: _move_weight(c), "weigh"
    yield (
        "point moved",
        lambda c: c["instance"]["measure"]["points"].__setitem__(0, ["100", "100"]),
        "not in the cell|from a point",
    )
    yield "schedule W", lambda c: _bump_w(c), "not in the cell|weigh|orthogonal|from a point"
    yield "extra field", lambda c: c["claim"].__setitem__("note", 1), "unknown field"
    yield "axis", lambda c: c["hints"]["cells"].__setitem__("axis", 5), "axis"


def _last_leaf(cells):
    while isinstance(cells, dict):
        cells = cells["parts"][-1]
    return cells


def _swap(c, leaf):
    a, b = _get(c["hints"]["cells"], leaf), _last_leaf(c["hints"]["cells"])
    a[0], b[0] = b[0], a[0]


def _move_weight(c):
    # atoms of the first and the last cell: the total stays 1, the two cells' masses change
    i, j = (
        _get(c["hints"]["cells"], _first_leaf_path(c["hints"]["cells"]))[0],
        _last_leaf(c["hints"]["cells"])[0],
    )
    w = c["instance"]["measure"]["weights"]
    w[i], w[j] = "0", fmpq_to_str(to_fmpq(w[i]) + to_fmpq(w[j]))


def _bump_w(c):
    # column 0 of the first piece doubled (still orthogonal to the normal): the images move
    for row in c["claim"]["schedule"]["pieces"][0]["W"]:
        row[0] = fmpq_to_str(2 * to_fmpq(row[0]))


@pytest.mark.parametrize("which", range(17))
def test_tampered_certificates_are_rejected(cert, which):
    name, mutate, reason = list(_mutations(cert))[which]
    bad = copy.deepcopy(cert)
    mutate(bad)
    v = check_certificate(bad)
    assert not v.verified, name
    assert re.search(reason, v.reason), (name, v.reason)


@settings(max_examples=20)
@given(
    n=st.integers(1, 25),
    d=st.integers(2, 3),
    extra=st.integers(0, 3),
    seed=st.integers(0, 2**16),
    repeats=st.integers(0, 3),
    eps=st.sampled_from(["1", "0.45", "0.3"]),
)
@example(n=1, d=2, extra=0, seed=0, repeats=2, eps="1")  # one point, repeated: one cell
@example(n=5, d=2, extra=0, seed=3, repeats=0, eps="0.45")
def test_certificates_of_random_weighted_measures_are_verified(n, d, extra, seed, repeats, eps):
    rng = np.random.default_rng(seed)
    points = rng.integers(-20, 20, (n, d)).tolist()
    points += points[:repeats]  # repeated atoms
    raw = rng.integers(0, 4, len(points))  # weights 0 too
    raw[0] += 1
    weights = [f"{int(w)}/{int(raw.sum())}" for w in raw]
    try:
        result = transport_to_cube(Measure(points, weights), d + extra, eps, "1")
    except DomainError as exc:  # epsilon below what these atoms allow (never for eps = 1)
        assert eps != "1" and "too few or too heavy" in str(exc)
        return
    v = check_certificate(cube_certificate(result))
    assert v.verified, v.reason
    assert result.bound <= to_fmpq(eps)


def test_atoms_of_weight_zero_join_a_cell():
    # a run of weight-0 atoms between the two halves would make a cell of volume 0
    mu = Measure([[0, 0], [1, 0], [2, 0], [3, 0], [4, 0]], ["1/2", "0", "0", "0", "1/2"])
    result = transport_to_cube(mu, 2, "0.6")
    assert len(result.partition.cells) == 2
    assert check_certificate(cube_certificate(result)).verified


CI = os.environ.get("CI", "").lower() == "true"


@pytest.mark.slow
@pytest.mark.parametrize(("d", "p"), [(2, 2), (3, 3), (3, 6)])
def test_ten_thousand_atoms_within_five_hundredths(d, p):
    # the acceptance instances of issue 14 (n = 10,000, epsilon = 0.05, ~15 s each); kept
    # small in CI: 1,000 atoms in d = 2 only
    if CI and d > 2:
        pytest.skip("the ci profile keeps this small")
    n = 1_000 if CI else 10_000
    mu = Measure(np.random.default_rng(2026).standard_normal((n, d)))
    result = transport_to_cube(mu, p, "0.05")
    v = check_certificate(cube_certificate(result))
    assert v.verified and result.bound <= flint.fmpq(1, 20), v.reason
