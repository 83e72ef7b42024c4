"""Kind wasserstein v1: the golden certificate of proofs/wasserstein.md is verified; every
single-number edit is either rejected or leaves a claim that an independent exact computation
confirms (and the edits that make the claim false are all rejected); deleted or added fields,
malformed coupling entries, bad measures and the resource limit are rejected; certificates
from the producer are verified for several q, and a deliberately broken producer is caught."""

from __future__ import annotations

import copy
import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from flint import fmpq

from certified.arith.exact import to_fmpq
from certified.certificates import exact_number
from certified.checker import MAX_REPLAY_COST, check_certificate
from certified.transport import Measure, wasserstein, wasserstein_certificate

GOLDEN = {
    "kind": "wasserstein",
    "version": 1,
    "instance": {
        "mu": {"points": [[0], [1]], "weights": ["1/2", "1/2"]},
        "nu": {"points": [[0], [3]], "weights": ["1/2", "1/2"]},
        "q": 2,
    },
    "claim": {"lower_q": 2, "upper_q": 2, "lower": "707/500", "upper": "283/200"},
    "hints": {"coupling": [[0, 0, "1/2"], [1, 1, "1/2"]], "phi": [0, 1], "psi": [0, 3]},
}


def test_golden_is_the_documented_example():
    text = (Path(__file__).resolve().parents[2] / "proofs" / "wasserstein.md").read_text()
    block = text.split("```json")[1].split("```")[0]
    assert json.loads(block) == GOLDEN
    v = check_certificate(GOLDEN)
    assert v.verified, v.reason
    assert v.kind == "wasserstein"


def _truth(cert) -> bool:
    """Independent decision of the claim for 1-D instances with integer q: W_q^q is the exact
    minimum over the vertices of the transportation polytope (spanning forests of the support),
    rational here."""
    inst = cert["instance"]
    try:
        X = [to_fmpq(r[0]) for r in inst["mu"]["points"]]
        Y = [to_fmpq(r[0]) for r in inst["nu"]["points"]]
        a = [to_fmpq(w) for w in inst["mu"]["weights"]]
        b = [to_fmpq(w) for w in inst["nu"]["weights"]]
        q = to_fmpq(inst["q"])
        claim = {k: to_fmpq(v) for k, v in cert["claim"].items()}
    except Exception:
        return False
    if sum(a) != 1 or sum(b) != 1 or min(a + b) < 0 or q.q != 1 or q < 1:
        return False
    n, m, p = len(X), len(Y), int(q.p)
    cost = [[abs(x - y) ** p for y in Y] for x in X]
    best = None
    cells = [(i, j) for i in range(n) for j in range(m)]
    for support in itertools.combinations(cells, n + m - 1):
        # solve the flows on this support by exhaustive 2 x 2 systems (tiny instances only)
        for flows in _flows(support, a, b):
            value = sum(f * cost[i][j] for (i, j), f in zip(support, flows, strict=True))
            best = value if best is None else min(best, value)
    W = best
    lo, up = claim["lower"], claim["upper"]
    return (
        claim["lower_q"] <= W <= claim["upper_q"]
        and (lo <= 0 or lo**p <= W)
        and up >= 0
        and up**p >= W
    )


def _flows(support, a, b):
    # leaf elimination on a spanning forest of the 2 x 2 bipartite graph
    need = {("r", i): v for i, v in enumerate(a)} | {("c", j): v for j, v in enumerate(b)}
    edges = list(support)
    flow = {}
    remaining = set(range(len(edges)))
    while remaining:
        deg = {}
        for k in remaining:
            i, j = edges[k]
            deg.setdefault(("r", i), []).append(k)
            deg.setdefault(("c", j), []).append(k)
        leaves = [(v, ks[0]) for v, ks in deg.items() if len(ks) == 1]
        if not leaves:
            return []
        v, k = leaves[0]
        i, j = edges[k]
        flow[k] = need[v]
        other = ("c", j) if v[0] == "r" else ("r", i)
        need[other] -= need[v]
        need[v] = 0
        remaining.discard(k)
    if any(f < 0 for f in flow.values()) or any(x != 0 for x in need.values()):
        return []
    return [[flow[k] for k in range(len(edges))]]


def _numbers(obj, path=()):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _numbers(v, (*path, k))
    elif isinstance(obj, list):
        for k, v in enumerate(obj):
            yield from _numbers(v, (*path, k))
    elif path and path[0] in ("instance", "claim", "hints"):
        yield path, obj


def _set(obj, path, value):
    for k in path[:-1]:
        obj = obj[k]
    obj[path[-1]] = value


def test_truth_oracle_agrees_with_the_golden():
    assert _truth(GOLDEN)


@pytest.mark.parametrize("delta", [1, -1, fmpq(1, 7), fmpq(-1, 1000)])
def test_every_single_number_edit_is_decided_correctly(delta):
    rejected = 0
    for path, value in _numbers(GOLDEN):
        bad = copy.deepcopy(GOLDEN)
        new = to_fmpq(value) + delta
        is_index = path[-2:-1] and path[1] == "coupling" and path[-1] in (0, 1)
        if is_index or (path[-1] == "q" and new.q == 1):
            new_value = int(new) if new.q == 1 else exact_number(new)
        else:
            new_value = exact_number(new)
        _set(bad, path, new_value)
        v = check_certificate(bad)
        if v.verified:  # only acceptable if the edited claim is still true
            assert _truth(bad), (path, delta, v.reason)
        else:
            rejected += 1
    assert rejected >= 14  # the golden is tight: nearly every edit breaks it


@pytest.mark.parametrize(
    "path, value",
    [
        (("claim", "lower_q"), "2001/1000"),
        (("claim", "upper_q"), "1999/1000"),
        (("claim", "lower"), "1415/1000"),
        (("claim", "upper"), "1414/1000"),
        (("hints", "phi", 0), "1/1000000"),
        (("hints", "psi", 1), "3001/1000"),
        (("hints", "phi", 1), "9/10"),
        (("hints", "coupling", 0, 2), "1/3"),
        (("instance", "nu", "points", 1, 0), "31/10"),
        (("instance", "mu", "points", 1, 0), "11/10"),
        (
            (
                "instance",
                "q",
            ),
            3,
        ),
    ],
)
def test_false_claims_are_rejected(path, value):
    bad = copy.deepcopy(GOLDEN)
    _set(bad, path, value)
    assert not _truth(bad) or path[0] == "hints"
    assert not check_certificate(bad).verified


def _delete_each_field(obj, path=()):
    if isinstance(obj, dict):
        for k in obj:
            yield (*path, k)
            yield from _delete_each_field(obj[k], (*path, k))


@pytest.mark.parametrize("path", list(_delete_each_field(GOLDEN)))
def test_deleting_any_field_is_rejected(path):
    bad = copy.deepcopy(GOLDEN)
    target = bad
    for k in path[:-1]:
        target = target[k]
    del target[path[-1]]
    assert not check_certificate(bad).verified


@pytest.mark.parametrize("where", [(), ("instance",), ("claim",), ("hints",), ("instance", "mu")])
def test_unknown_fields_are_rejected(where):
    bad = copy.deepcopy(GOLDEN)
    target = bad
    for k in where:
        target = target[k]
    target["extra"] = 0
    assert not check_certificate(bad).verified


@pytest.mark.parametrize(
    "coupling, reason",
    [
        ([[1, 1, "1/2"], [0, 0, "1/2"]], "increase"),
        ([[0, 0, "1/2"], [0, 0, "1/2"]], "increase"),
        ([[0, 0, "1/2"], [1, 1, "1/2"], [1, 1, 0]], "increase"),
        ([[0, 0, "1/2"], [1, 2, "1/2"]], "outside"),
        ([[0, 0, "1/2"], [1, -1, "1/2"]], "outside"),
        ([[0, 0, "1/2"], [1, 1, "1/2", 0]], "expected 3"),
        ([[0, 0, "1/2"], [1, 1, 0.5]], "not an exact number"),
        ([[0, 0, "1"], [0, 1, "-1/2"], [1, 1, "1/2"]], "increase"),
        ([[0, 0, "1/2"], [1, 1, "1/4"]], "marginals"),
        ([], "at least 1"),
        ([[0, "0", "1/2"], [1, 1, "1/2"]], "JSON integer"),
        ([[0, True, "1/2"], [1, 1, "1/2"]], "JSON integer"),
    ],
)
def test_malformed_couplings_are_rejected(coupling, reason):
    bad = copy.deepcopy(GOLDEN)
    bad["hints"]["coupling"] = coupling
    v = check_certificate(bad)
    assert not v.verified
    assert reason in v.reason


@pytest.mark.parametrize(
    "edit, reason",
    [
        (lambda c: c["instance"].__setitem__("q", "1/2"), "q >= 1"),
        (lambda c: c["instance"].__setitem__("q", "1001/1000"), "denominator <= 1000"),
        (lambda c: c["instance"]["mu"].__setitem__("weights", ["1/2", "1/3"]), "sum to exactly"),
        (lambda c: c["instance"]["mu"].__setitem__("weights", ["3/2", "-1/2"]), ">= 0"),
        (lambda c: c["instance"]["mu"].__setitem__("weights", ["1"]), "expected 2"),
        (lambda c: c["instance"]["nu"].__setitem__("points", [[0, 1], [3, 1]]), "expected 1"),
        (lambda c: c["instance"]["mu"].__setitem__("points", []), "at least 1"),
        (lambda c: c["hints"].__setitem__("phi", [0]), "expected 2"),
        (lambda c: c["hints"].__setitem__("psi", [0, 3, 0]), "expected 2"),
        (lambda c: c["claim"].__setitem__("lower", "nan"), "not an exact number"),
        (lambda c: c.__setitem__("version", 2), "version"),
    ],
)
def test_bad_instances_are_rejected(edit, reason):
    bad = copy.deepcopy(GOLDEN)
    edit(bad)
    v = check_certificate(bad)
    assert not v.verified
    assert reason in v.reason


def test_resource_limit():
    n = 1600  # 1600^2 * (2 + 2) > MAX_REPLAY_COST
    assert n * n * 4 > MAX_REPLAY_COST
    bad = copy.deepcopy(GOLDEN)
    bad["instance"]["mu"] = {"points": [[0]] * n, "weights": [exact_number(fmpq(1, n))] * n}
    bad["instance"]["nu"] = bad["instance"]["mu"]
    bad["hints"]["phi"] = bad["hints"]["psi"] = [0] * n
    v = check_certificate(bad)
    assert not v.verified
    assert "resource limit" in v.reason


@pytest.mark.parametrize("q", [1, 2, 3, 4, "3/2", "5/2"])
def test_producer_certificates_are_verified(q):
    rng = np.random.default_rng(5)
    mu = Measure(rng.standard_normal((7, 2)))
    nu = Measure(rng.standard_normal((7, 2)) + 0.25)
    cert = wasserstein_certificate(wasserstein(mu, nu, q, solver="assignment"))
    v = check_certificate(json.loads(json.dumps(cert)))
    assert v.verified, v.reason


def test_producer_certificates_with_rational_points_and_weights():
    mu = Measure([["1/3", "0"], ["1", "1/7"], ["2", "0"]], ["1/2", "1/6", "1/3"])
    nu = Measure([["0", "0"], ["1", "2"]], ["1/5", "4/5"])
    for q in (1, 2, "7/3"):
        e = wasserstein(mu, nu, q)
        v = check_certificate(wasserstein_certificate(e))
        assert v.verified, v.reason


def test_a_broken_producer_is_caught(monkeypatch):
    """Costs rounded the wrong way (lower 'bounds' above the true costs) give potentials that
    violate a dual constraint: the exact checker rejects the certificate."""
    from certified.transport import _costs

    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((6, 2)), rng.standard_normal((6, 2))
    monkeypatch.setattr(_costs, "kappas", lambda d: (1.0 + 2.0**-40, 1.0 - 2.0**-40))
    cert = wasserstein_certificate(wasserstein(x, y, 2, solver="assignment"))
    v = check_certificate(cert)
    assert not v.verified
    assert "exceeds the cost" in v.reason or "below the cost" in v.reason


def test_huge_common_denominators_are_rejected_before_any_work():
    dens = [3**8000, 5**5700, 7**4700, 11**3800, 13**3580, 17**3240]  # ~13,000 bits each
    third = ["1/3"] * 3
    bad = copy.deepcopy(GOLDEN)
    bad["instance"]["mu"] = {"points": [[0], [1], [2]], "weights": third}
    bad["instance"]["nu"] = {"points": [[0], [1], [2]], "weights": third}
    bad["hints"]["phi"] = [f"1/{q}" for q in dens[:3]]
    bad["hints"]["psi"] = [f"1/{q}" for q in dens[3:]]
    v = check_certificate(bad)
    assert not v.verified
    assert "common denominator" in v.reason


def test_exponents_with_large_terms_are_charged():
    """q = 999/500 means 1000th and 999th powers of every cost: charged, so a modest instance is
    refused instead of computing numbers with millions of digits."""
    rng = np.random.default_rng(1)
    mu, nu = Measure(rng.standard_normal((30, 2))), Measure(rng.standard_normal((30, 2)))
    cert = wasserstein_certificate(wasserstein(mu, nu, "999/500", solver="assignment"))
    v = check_certificate(cert)
    assert not v.verified
    assert "resource limit" in v.reason
    small = wasserstein_certificate(wasserstein(mu, nu, "3/2", solver="assignment"))
    assert check_certificate(small).verified
