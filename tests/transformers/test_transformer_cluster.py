"""Clustering verdicts of the hemisphere theorem and their certificates (kind
transformer-cluster): VERIFIED with an exact witness, REFUTED with a certified lower bound,
never VERIFIED outside a hemisphere; mutated certificates are rejected."""

from __future__ import annotations

import copy

import flint
import numpy as np
import pytest

from certified.arith import Interval
from certified.checker import check_certificate
from certified.transformers import parse_instance
from certified.transformers.cluster import diameter_bounds, hemisphere_cluster, hemisphere_witness
from certified.transformers.cluster_certificate import cluster_certificate
from certified.verdict import Outcome

E3 = np.eye(3).tolist()


def _near(rng, n, centre, spread):
    X = np.asarray(centre, float) + spread * rng.standard_normal((n, 3))
    return (X / np.linalg.norm(X, axis=1, keepdims=True)).tolist()


def test_witness_is_exact_or_none():
    from certified.arith.exact import to_fmpq_array

    X = to_fmpq_array(_near(np.random.default_rng(1), 6, [0, 0, 1], 0.3))
    u = hemisphere_witness(X)
    assert u is not None and all(sum(a * b for a, b in zip(u, row, strict=True)) > 0 for row in X)
    octa = to_fmpq_array(np.vstack([np.eye(3), -np.eye(3)]).tolist())
    assert hemisphere_witness(octa) is None
    # a closed hemisphere is not open: e1, -e1 and e2 have no strict witness
    assert hemisphere_witness(to_fmpq_array([[1, 0, 0], [-1, 0, 0], [0, 1, 0]])) is None


def test_diameter_bounds_are_exact_bounds():
    box = Interval(np.array([[0.0, 0.0], [1.0, 0.0]]), np.array([[0.5, 0.0], [2.0, 0.0]]))
    lower, upper = diameter_bounds(box)
    assert lower == flint.fmpq(1, 4) and upper == 4


def test_verified_and_its_certificate():
    X = _near(np.random.default_rng(4), 2, [0, 0, 1], 0.2)
    inst = parse_instance({"tokens": X, "pieces": [{"duration": "1/4", "V": E3, "B": E3}]})
    eps = "1"
    v = hemisphere_cluster(inst, eps, samples=2)
    assert v.outcome is Outcome.VERIFIED and v.witness is not None
    assert v.first_time is not None
    cert = cluster_certificate(inst, eps, v)
    assert check_certificate(cert).verified
    for mutate in (
        lambda c: c["claim"].update(eps="1/1000"),  # the bound is no longer <= eps^2
        lambda c: c["claim"].update(witness=["-1", "0", "0"]),  # not a hemisphere witness
        lambda c: c["claim"].update(verdict="REFUTED"),
        lambda c: c["instance"]["flow"]["points"][0].__setitem__(0, "1/3"),  # a moved atom
    ):
        bad = copy.deepcopy(cert)
        mutate(bad)
        assert not check_certificate(bad).verified


def test_refuted_with_certified_lower_bound():
    inst = parse_instance({"tokens": [[1, 0, 0], [0, 1, 0]],
                           "pieces": [{"duration": "1/4", "V": E3, "B": E3}]})  # fmt: skip
    v = hemisphere_cluster(inst, "1/10", samples=1)
    assert v.outcome is Outcome.REFUTED and v.diameter_sq_lower > flint.fmpq(1, 100)
    cert = cluster_certificate(inst, "1/10", v)
    assert check_certificate(cert).verified
    bad = copy.deepcopy(cert)
    bad["claim"]["eps"] = "2"  # diameter <= 2 holds: REFUTED must be rejected
    assert not check_certificate(bad).verified


def test_not_in_a_hemisphere_is_never_verified():
    X = [[1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0]]  # 0 in the convex hull
    inst = parse_instance({"tokens": X, "pieces": [{"duration": "1/8", "V": E3, "B": E3}]})
    v = hemisphere_cluster(inst, "100", samples=1)  # the diameter is certainly <= 100
    assert v.outcome is Outcome.UNDECIDED and "hemisphere" in v.reason
    assert cluster_certificate(inst, "100", v) is None


def test_eps_must_be_positive():
    from certified.errors import InputError

    inst = parse_instance({"tokens": [[1, 0, 0]], "pieces": [{"duration": 1, "V": E3, "B": E3}]})
    with pytest.raises(InputError, match="eps"):
        hemisphere_cluster(inst, 0)
