"""Rule relu-vectorised (certified/checker/_relu_vec_rule.py): certificates of the vectorised
ReLU engine contain 50-digit references (points on and near hyperplanes, leaky slopes, boxes
that cross hyperplanes, non-dyadic durations); tampered hints, claims and instances are
REJECTED; hostile plans are refused by the cost estimate before any replay."""

from __future__ import annotations

import copy
import json
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "flow"))
import references as ref
from test_relu import scenarios

from certified.arith import Interval
from certified.arith.exact import to_fmpq
from certified.certificates.flow import exact_number
from certified.checker import check_certificate
from certified.flow.api import enclose_flow, flow_certificate_for
from certified.models import Schedule

F = Fraction


def _num(v) -> str:
    q = Fraction(v)
    return str(q.numerator) if q.denominator == 1 else f"{q.numerator}/{q.denominator}"


def _schedule(Ws, As, bs, taus, activation="relu", slope=None) -> Schedule:
    spec = {
        "dimension": len(Ws[0]),
        "activation": activation,
        "pieces": [
            {
                "duration": _num(t),
                "W": [[_num(v) for v in row] for row in W],
                "A": [[_num(v) for v in row] for row in A],
                "b": [_num(v) for v in b],
            }
            for W, A, b, t in zip(Ws, As, bs, taus, strict=True)
        ],
    }
    if slope is not None:
        spec["slope"] = _num(slope)
    return Schedule.from_json(spec)


def certify(schedule: Schedule, X0):
    res = enclose_flow(schedule, X0, method="vectorised")
    cert = flow_certificate_for(schedule, X0, res)
    assert cert["hints"]["method"] == "relu-vectorised"
    verdict = check_certificate(cert)
    assert verdict.verified, verdict.reason
    return cert


def claimed(cert, n: int) -> list[tuple[Fraction, Fraction]]:
    return [
        (Fraction(str(to_fmpq(lo))), Fraction(str(to_fmpq(hi))))
        for lo, hi in cert["claim"]["enclosures"][n]
    ]


def inside(box, point) -> bool:
    for (lo, hi), v in zip(box, point, strict=True):
        if isinstance(v, Fraction):
            q = v
        else:  # an mpf: exactly +-man * 2^exp
            man, exp = v.man_exp
            q = Fraction(int(man)) * Fraction(2) ** int(exp) * (-1 if v < 0 else 1)
        slack = Fraction(1, 10**40) * (1 + abs(q))  # 50-digit references
        if not lo - slack <= q <= hi + slack:
            return False
    return True


def _random(seed, d, p, pieces):
    rng = np.random.default_rng(seed)
    Ws = [np.round(rng.normal(size=(d, p)) / np.sqrt(p), 3).tolist() for _ in range(pieces)]
    As = [np.round(rng.normal(size=(p, d)), 3).tolist() for _ in range(pieces)]
    bs = [rng.normal(size=p).tolist() for _ in range(pieces)]
    return Ws, As, bs, rng


@settings(
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    deadline=None,
    max_examples=12,
)
@given(scenarios())
@example(
    (
        [[[1.0, -1.0], [0.5, 1.0]]],
        [[[1.0, 0.5], [-1.0, 1.0]]],
        [[0.2, -0.1]],
        [F(1)],
        [[F(5, 8), F(13, 16)], [F(1, 5), F(-3, 10)]],
    )
)
def test_property_certificate_contains_references(scenario):
    """Small dyadic fields, points exactly on and within 2^-50 of a hyperplane: VERIFIED, and
    every claimed enclosure contains the 50-digit reference."""
    Ws, As, bs, taus, X = scenario
    sched = _schedule(Ws, As, bs, taus)
    cert = certify(sched, np.array([[float(v) for v in x] for x in X]))
    for n, x in enumerate(X):
        e = ref.piecewise_expm(Ws, As, bs, taus, [Fraction(v) for v in x])
        assert inside(claimed(cert, n), e), (n, e)


@pytest.mark.parametrize("activation", ["relu", "leaky_relu"])
def test_ensemble_with_crossings_and_non_dyadic_durations(activation):
    """d = p = 4, three pieces (durations 1/3 and 1/8: the tail window of a non-dyadic piece),
    crossings; every point against its reference; leaky slope 1/100 (not a double)."""
    Ws, As, bs, rng = _random(3, 4, 4, 3)
    taus = [F(1, 3), F(1, 8), F(1, 3)]
    X = rng.uniform(-1, 1, size=(3, 4))
    sched = _schedule(Ws, As, bs, taus, activation)
    cert = certify(sched, X)
    assert any("w" in s for s in cert["hints"]["steps"])  # crossings were windowed
    alpha = 0 if activation == "relu" else F(1, 100)
    for n, x in enumerate(X):
        e = ref.piecewise_expm(Ws, As, bs, taus, [Fraction(v) for v in x], alpha=alpha)
        assert inside(claimed(cert, n), e), n
    widths = [hi - lo for n in range(len(X)) for lo, hi in claimed(cert, n)]
    assert max(widths) < 1e-9


def test_boxes_crossing_hyperplanes_contain_sampled_images():
    """Boxes of side 0.05 (many meet a hyperplane): VERIFIED without splitting (window steps),
    and every sampled point's reference image lies in its box's claimed enclosure."""
    Ws, As, bs, rng = _random(9, 3, 4, 2)
    taus = [F(1, 4), F(1, 4)]
    lo = rng.uniform(-1, 1, size=(3, 3))
    hi = lo + 0.05
    cert = certify(_schedule(Ws, As, bs, taus), Interval(lo, hi))
    assert "boxes" in cert["instance"]
    for n in range(3):
        box = claimed(cert, n)
        for x in [lo[n], hi[n], rng.uniform(lo[n], hi[n])]:
            e = ref.piecewise_expm(Ws, As, bs, taus, [Fraction(v) for v in x])
            assert inside(box, e), n


@pytest.fixture(scope="module")
def good():
    Ws, As, bs, rng = _random(4, 3, 3, 2)
    X = rng.uniform(-1, 1, size=(6, 3))
    return certify(_schedule(Ws, As, bs, [F(1, 2), F(1, 2)]), X)


def _rejected(cert, *words: str) -> None:
    verdict = check_certificate(cert)
    assert not verdict.verified
    assert any(w in verdict.reason for w in words), verdict.reason


def _crossing(cert):
    """(set, piece) of a step string with a window, i.e. a crossing."""
    for q, s in enumerate(cert["hints"]["steps"]):
        for j, part in enumerate(s.split("/")):
            if "w" in part:
                return q, j
    raise AssertionError("no crossing")


def test_tampering_is_rejected(good):
    def mutate(fn):
        c = copy.deepcopy(good)
        fn(c)
        return c

    lo = good["claim"]["enclosures"][0][0][0]
    narrower = str((to_fmpq(lo) + to_fmpq(good["claim"]["enclosures"][0][0][1])) / 2)
    _rejected(
        mutate(lambda c: c["claim"]["enclosures"][0][0].__setitem__(0, narrower)),
        "does not contain",
    )
    moved = mutate(lambda c: c["instance"]["points"][1].__setitem__(0, "1/3"))
    _rejected(moved, "does not contain", "region membership not certified")
    w = mutate(lambda c: c["instance"]["schedule"]["pieces"][0]["b"].__setitem__(0, "1/2"))
    _rejected(w, "does not contain", "region membership not certified")
    q, j = _crossing(good)

    def drop_window(c):  # region steps instead of the windows around the crossing
        parts = c["hints"]["steps"][q].split("/")
        parts[j] = parts[j].replace("w", "r")
        c["hints"]["steps"][q] = "/".join(parts)

    _rejected(mutate(drop_window), "region membership not certified")

    def cut(c):
        c["hints"]["steps"][0] = c["hints"]["steps"][0].split("/")[0] + "/w1"

    _rejected(mutate(cut), "ticks before the end")
    _rejected(mutate(lambda c: c["hints"]["steps"].pop()), "expected 6 elements")
    _rejected(mutate(lambda c: c["hints"]["steps"].__setitem__(0, "R/R/R")), "2 pieces")
    _rejected(mutate(lambda c: c["hints"]["steps"].__setitem__(0, "Rw0/R")), "tokens")
    _rejected(mutate(lambda c: c["hints"]["steps"].__setitem__(0, "R x/R")), "tokens")
    big = good["hints"]["pieces"][0]["step"] * 3

    def long_step(c):
        c["hints"]["pieces"][0]["step"] = big

    _rejected(mutate(long_step), "L h > 1/2")
    _rejected(mutate(lambda c: c["hints"]["pieces"][0].__setitem__("order", 2)), "order")
    _rejected(mutate(lambda c: c["hints"]["pieces"][0].__setitem__("tick", 2)), "step")
    _rejected(mutate(lambda c: c["hints"].__setitem__("extra", 1)), "unknown field")
    _rejected(mutate(lambda c: c["hints"]["pieces"][1].pop("order")), "missing field")
    leaky = mutate(lambda c: c["instance"]["schedule"].__setitem__("activation", "tanh"))
    _rejected(leaky, "relu")


def test_hostile_plans_are_refused_by_the_cost_estimate(good):
    """Two million steps in one set (the rounds run one after the other: ~20 minutes) are
    refused from the token count, before parsing; a tick that makes a piece 2^52 ticks long
    is refused."""
    c = copy.deepcopy(good)
    c["hints"]["pieces"][0]["tick"] = 1000
    _rejected(c, "2^52 ticks")
    c = copy.deepcopy(good)
    c["hints"]["steps"][0] = "w1" * 2**21 + "/R"
    _rejected(c, "resource limit")


def test_rational_parameters_are_refused():
    """Parameters that are not doubles: rule relu-vectorised refuses (relu-regions applies)."""
    Ws, As, bs, rng = _random(4, 2, 2, 1)
    sched = _schedule(Ws, As, bs, [F(1, 2)])
    cert = certify(sched, rng.uniform(-1, 1, size=(2, 2)))
    cert["instance"]["schedule"]["pieces"][0]["W"][0][0] = "1/3"
    _rejected(cert, "doubles")


def test_certificate_round_trips_through_json(good):
    from certified.checker import check_bytes

    assert check_bytes(json.dumps(good).encode()).verified


def test_split_boxes_partition_is_checked():
    """Boxes split by the producer (hints.partition, one flat tree per box, mean-value form):
    VERIFIED, the claim of each input box contains its leaves' replays; a cut moved, a leaf
    missing, a cut outside, a partition given for points: REJECTED."""
    from certified.flow.relu._split import split_certificate

    Ws, As, bs, rng = _random(9, 3, 4, 2)
    sched = _schedule(Ws, As, bs, [F(1, 4), F(1, 4)])
    lo = rng.uniform(-1, 1, size=(3, 3))
    hi = lo + 0.2
    cert = split_certificate(sched, lo, hi, 4, refine=1)
    assert check_certificate(cert).verified
    split = [q for q, t in enumerate(cert["hints"]["partition"]) if len(t) > 1]
    if not split:
        pytest.skip("no box was split (none met a hyperplane)")
    q = split[0]
    moved = copy.deepcopy(cert)
    tree = moved["hints"]["partition"][q]
    axis, cut = tree[0], to_fmpq(tree[1])
    box = moved["instance"]["boxes"][q][axis]
    tree[1] = str((3 * to_fmpq(box[0]) + cut) / 4)  # a different (valid) cut
    _rejected(moved, "does not contain", "region membership")
    missing = copy.deepcopy(cert)
    missing["hints"]["partition"][q] = missing["hints"]["partition"][q][:-1]
    _rejected(missing, "ends early")
    outside = copy.deepcopy(cert)
    outside["hints"]["partition"][q][1] = str(to_fmpq(box[1]) + 1)  # a cut outside the box
    _rejected(outside, "strictly inside")


def test_partition_is_refused_for_points(good):
    c = copy.deepcopy(good)
    c["hints"]["partition"] = [[None]] * len(c["claim"]["enclosures"])
    _rejected(c, "unknown field")


def test_small_boxes_through_crossings_take_straddle_steps(monkeypatch):
    """Boxes of side 1e-6 whose images cross hyperplanes, in the ball form (the producer now
    writes boxes in mean-value form; the ball form's certificates stay valid, so the rule is
    kept tested): the producer writes straddle steps (token s, bounds.md#relu-vec-straddle);
    VERIFIED, sampled references inside, widths on the scale of the box (not of the Lipschitz
    window); a straddle step turned into a region step is REJECTED."""
    import certified.flow.relu._mv as mv

    monkeypatch.setattr(mv, "mean_value_result", lambda *args, **kw: None)  # the ball form
    Ws, As, bs, rng = _random(3, 4, 4, 2)
    taus = [F(1, 2)] * 2
    lo = rng.uniform(-1, 1, size=(6, 4))
    hi = lo + 1e-6
    cert = certify(_schedule(Ws, As, bs, taus), Interval(lo, hi))
    steps = cert["hints"]["steps"]
    assert any("s" in t for t in steps)
    for n in [q for q, t in enumerate(steps) if "s" in t][:2]:
        box = claimed(cert, n)
        assert max(b - a for a, b in box) < 1e-3
        for x in [lo[n]]:
            e = ref.piecewise_expm(Ws, As, bs, taus, [Fraction(v) for v in x])
            assert inside(box, e), n
    q = next(q for q, t in enumerate(steps) if "s" in t)
    c = copy.deepcopy(cert)
    c["hints"]["steps"][q] = steps[q].replace("s", "r")
    _rejected(c, "region membership", "does not contain")


def test_claims_are_compared_exactly_at_the_replayed_ends(good):
    """The claims of ``good`` are the replay's own ends (ties: the exact comparison decides,
    accepted); one ulp inside at either end is rejected, one ulp outside accepted."""
    for end, step in ((0, np.inf), (1, -np.inf)):  # lower end up / upper end down: inside
        for q in (0, len(good["claim"]["enclosures"]) - 1):
            c = copy.deepcopy(good)
            x = float(to_fmpq(c["claim"]["enclosures"][q][1][end]))
            c["claim"]["enclosures"][q][1][end] = exact_number(np.nextafter(x, step))
            _rejected(c, f"claim.enclosures[{q}][1]: does not contain")
            c["claim"]["enclosures"][q][1][end] = exact_number(np.nextafter(x, -step))
            assert check_certificate(c).verified


def test_points_read_exactly_take_the_double_path():
    """Points as exact rationals that are doubles (what read_points gives) start from the same
    balls as the float array; with a point that is not a double (the general path) it gets a
    radius covering it."""
    import flint

    from certified.flow.relu._vec import _initial_balls

    X = np.random.default_rng(3).uniform(-1, 1, size=(5, 3))
    X[0, 0], X[1, 1] = 5e-324, -(2.0**52) - 1.0
    exact = np.array([[flint.fmpq(*v.as_integer_ratio()) for v in row] for row in X])
    c, r = _initial_balls(exact, 3)
    assert np.array_equal(c, X) and not r.any()
    exact[2, 2] = flint.fmpq(1, 3)
    c, r = _initial_balls(exact, 3)
    assert r[2] > 1e-17 and (np.delete(r, 2) < 1e-150).all()  # the general path: exact rows
    gap = abs(flint.fmpq(*c[2, 2].as_integer_ratio()) - flint.fmpq(1, 3))
    assert gap <= flint.fmpq(*float(r[2]).as_integer_ratio())


@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=8))
@example([0.0, -0.0, 5e-324, -(2.0**-1074), 2.0**-32, 2.0**-31, 3 * 2.0**-33, 2.0**60, 0.75])
@example([1.7976931348623157e308, 2.2250738585072014e-308, -3.0, 1.0])
def test_double_strings_are_the_canonical_exact_strings(xs):
    from certified.certificates.flow import double_strings

    assert double_strings(np.array(xs)) == [exact_number(x) for x in xs]
    assert double_strings(np.array(xs).reshape(-1, 1)) == [[exact_number(x)] for x in xs]
