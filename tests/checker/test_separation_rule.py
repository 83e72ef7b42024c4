"""Kind separation v1: golden certificates produced by certified.moments are verified by the
independent checker; every single-number edit is decided as an independent 100-digit
evaluation decides it; structural edits, bad measures, limits and non-finite balls are
rejected (fail closed)."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import mpmath
import pytest
from flint import fmpq

from certified.arith.exact import to_fmpq
from certified.certificates import exact_number
from certified.checker import check_certificate
from certified.checker._separation_rule import MAX_SEPARATION_COST
from certified.moments.separation import separation_witness

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "moments"))
from moment_pairs import PTE_2, PTE_5, uniform


def _golden(mu, nu):
    result = separation_witness(mu, nu)
    assert result.certificate is not None, result.reason
    return result.certificate


@pytest.fixture(
    scope="module",
    params=["pte-1d", "pte5-3d", "weighted-2d"],
)
def golden(request):
    if request.param == "pte-1d":
        return _golden(uniform(PTE_2[0]), uniform(PTE_2[1]))
    if request.param == "pte5-3d":
        return _golden(
            uniform(PTE_5[0], [1, -2, 3], [0, "1/2", 1]),
            uniform(PTE_5[1], [1, -2, 3], [0, "1/2", 1]),
        )
    mu = ([[0, 1], [1, 0], [0, 1]], ["1/4", "1/2", "1/4"])
    nu = ([[1, 1], [0, 0]], ["1/2", "1/2"])
    return _golden(mu, nu)


def _reference_verdict(cert) -> bool:
    """Independent decision of the statement (not the checker's code): validity of the
    measures in exact arithmetic, G by mpmath at 100 digits, containment and disjointness."""
    inst, claim = cert["instance"], cert["claim"]
    ms = {}
    for s in ("mu", "nu"):
        pts = [[to_fmpq(c) for c in row] for row in inst[s]["points"]]
        w = [to_fmpq(c) for c in inst[s]["weights"]]
        if len(w) != len(pts) or any(x < 0 for x in w) or sum(w, fmpq(0)) != 1:
            return False
        ms[s] = (pts, w)
    d = len(ms["mu"][0][0])
    q = [to_fmpq(c) for c in claim["q"]]
    k = claim["coordinate"]
    if len(q) != d or len(ms["nu"][0][0]) != d or not 0 <= k < d:
        return False
    box = {s: [to_fmpq(c) for c in claim[s]] for s in ("mu", "nu")}
    if not (box["mu"][1] < box["nu"][0] or box["nu"][1] < box["mu"][0]):
        return False
    with mpmath.workdps(100):

        def mp(x):
            return mpmath.mpf(int(x.p)) / int(x.q)

        for s, (pts, w) in ms.items():
            e = [
                mp(wi) * mpmath.exp(mpmath.fsum(mp(a) * mp(c) for a, c in zip(q, y, strict=True)))
                for y, wi in zip(pts, w, strict=True)
            ]
            g = mpmath.fsum(ei * mp(y[k]) for ei, y in zip(e, pts, strict=True)) / mpmath.fsum(e)
            lo, hi = box[s]
            if not (mp(lo) < g < mp(hi)):  # the goldens' margins are far above 1e-90
                return False
    return True


def _number_paths(node, path=()):
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _number_paths(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _number_paths(value, (*path, i))
    elif isinstance(node, str):
        yield path


def _edit(cert, path, fn):
    c = copy.deepcopy(cert)
    node = c
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = fn(node[path[-1]])
    return c


def test_golden_is_verified(golden):
    v = check_certificate(golden)
    assert v.verified, v.reason
    assert v.kind == "separation" and "rule separation" in v.reason
    assert _reference_verdict(golden)


@pytest.mark.parametrize("delta", ["1/1000", "-1/3", "1"])
def test_every_single_number_edit_is_decided_like_the_reference(golden, delta):
    paths = [p for p in _number_paths(golden) if p[0] in ("instance", "claim")]
    assert len(paths) >= 10
    rejected = 0
    for path in paths:
        bad = _edit(golden, path, lambda s: exact_number(to_fmpq(s) + to_fmpq(delta)))
        v = check_certificate(bad)
        assert v.verified == _reference_verdict(bad), (path, v.reason)
        rejected += not v.verified
    # a weight edit breaks sum = 1; other edits may leave a true claim (the intervals have margins)
    assert rejected >= sum(1 for p in paths if p[-2] == "weights")


def test_moving_weight_between_atoms_keeps_sum_and_is_rejected(golden):
    w = golden["instance"]["mu"]["weights"]
    if len(w) < 2:
        pytest.skip("one atom")
    bad = copy.deepcopy(golden)
    a, b = to_fmpq(w[0]), to_fmpq(w[1])
    t = a / 2
    bad["instance"]["mu"]["weights"][0] = exact_number(a - t)
    bad["instance"]["mu"]["weights"][1] = exact_number(b + t)
    assert check_certificate(bad).verified == _reference_verdict(bad)


def test_swapped_claims_and_tightened_claims_are_rejected(golden):
    swapped = copy.deepcopy(golden)
    swapped["claim"]["mu"], swapped["claim"]["nu"] = golden["claim"]["nu"], golden["claim"]["mu"]
    assert not check_certificate(swapped).verified
    for s in ("mu", "nu"):
        lo, hi = (to_fmpq(x) for x in golden["claim"][s])
        for end in ((hi, hi), (lo, lo), (hi - (hi - lo) / 1000, hi), (lo, lo + (hi - lo) / 1000)):
            bad = copy.deepcopy(golden)
            bad["claim"][s] = [exact_number(x) for x in end]
            assert not check_certificate(bad).verified


def test_overlapping_and_reversed_intervals_are_rejected(golden):
    bad = copy.deepcopy(golden)
    lo = min(to_fmpq(golden["claim"]["mu"][0]), to_fmpq(golden["claim"]["nu"][0]))
    hi = max(to_fmpq(golden["claim"]["mu"][1]), to_fmpq(golden["claim"]["nu"][1]))
    bad["claim"]["mu"] = bad["claim"]["nu"] = [exact_number(lo), exact_number(hi)]
    assert "intersect" in check_certificate(bad).reason
    rev = copy.deepcopy(golden)
    rev["claim"]["mu"] = rev["claim"]["mu"][::-1]
    assert "lo > hi" in check_certificate(rev).reason


@pytest.mark.parametrize("where", ["instance", "claim", "hints", "instance.mu", "instance.nu"])
def test_missing_and_unknown_fields_are_rejected(golden, where):
    parts = where.split(".")
    for op in ("delete", "add"):
        bad = copy.deepcopy(golden)
        node = bad
        for p in parts:
            node = node[p]
        if op == "delete":
            del node[next(iter(node))]
        else:
            node["extra"] = "1"
        assert not check_certificate(bad).verified


@pytest.mark.parametrize(
    "path, value, text",
    [
        (("hints", "precision"), 52, "outside"),
        (("hints", "precision"), 16385, "outside"),
        (("hints", "precision"), "96", "JSON integer"),
        (("hints", "precision"), True, "JSON integer"),
        (("claim", "coordinate"), -1, "outside"),
        (("claim", "coordinate"), 10, "outside"),
        (("claim", "q"), [], "expected"),
        (("claim", "mu"), ["0"], "expected 2"),
        (("instance", "mu", "points"), [], "at least 1"),
        (
            ("instance", "mu", "weights"),
            ["1/2", "1/2", "1/2", "1/2", "1/2", "1/2", "1/2"],
            "expected",
        ),
        (("claim", "q", 0), "0.5", "not an exact number"),
    ],
)
def test_malformed_values_are_rejected(golden, path, value, text):
    bad = _edit(golden, path, lambda _: value)
    v = check_certificate(bad)
    assert not v.verified and text in v.reason, v.reason


def test_dimension_mismatch_is_rejected(golden):
    bad = copy.deepcopy(golden)
    d = len(golden["claim"]["q"])
    bad["instance"]["nu"] = {"points": [["0"] * (d + 1)], "weights": ["1"]}
    assert "dimension" in check_certificate(bad).reason


def test_negative_weight_and_bad_sum_are_rejected():
    cert = _golden(([[0], [1]], ["1/4", "3/4"]), ([[0], [1]], ["3/4", "1/4"]))
    neg = copy.deepcopy(cert)
    neg["instance"]["nu"]["weights"] = ["5/4", "-1/4"]
    assert "negative" in check_certificate(neg).reason
    s = copy.deepcopy(cert)
    s["instance"]["nu"]["weights"] = ["3/4", "1/2"]
    assert "sum to exactly 1" in check_certificate(s).reason


def test_resource_limit_is_charged_before_work(golden):
    bad = copy.deepcopy(golden)
    d = len(golden["claim"]["q"])
    n = 1 + MAX_SEPARATION_COST // ((d + 1) * (16384 + 512))
    bad["instance"]["mu"]["points"] = [["0"] * d] * n
    bad["instance"]["mu"]["weights"] = ["0"] * (n - 1) + ["1"]
    bad["hints"]["precision"] = 16384
    assert "resource limit" in check_certificate(bad).reason


def test_non_finite_balls_are_rejected():
    """exp(10^4000) overflows arb to an infinite ball: fail closed, whatever the claim."""
    cert = _golden(uniform(PTE_2[0]), uniform(PTE_2[1]))
    bad = copy.deepcopy(cert)
    bad["claim"]["q"] = ["1" + "0" * 3999]
    bad["claim"]["mu"], bad["claim"]["nu"] = ["-100", "3"], ["4", "100"]
    assert not check_certificate(bad).verified


def test_precision_restored_after_rejection_and_acceptance(golden):
    import flint

    before = flint.ctx.prec
    check_certificate(golden)
    bad = copy.deepcopy(golden)
    bad["claim"]["mu"] = [golden["claim"]["mu"][0]] * 2
    check_certificate(bad)
    assert flint.ctx.prec == before
