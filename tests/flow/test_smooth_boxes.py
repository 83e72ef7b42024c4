"""Boxes of smooth flows (issue 18 item 3): doubleton sets, adaptive splitting, hints.partition.

References: the 50-digit Taylor integrator of field_reference (longdouble screen, mpmath where a
sample is close to a face). CI keeps the instances small (d = 3); the user scale (d = 8) is
measured with ``certified flow --boxes`` (README), not here."""

from __future__ import annotations

import copy
import json

import field_reference as fref
import numpy as np
import pytest
from flint import arb, ctx, fmpq
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from certified.arith.exact import to_fmpq_array
from certified.checker import check_certificate
from certified.checker.lohner import LohnerSet, lohner_step, replay_flow
from certified.checker.taylor import field_jets
from certified.fields import field, neural_field
from certified.flow.taylor.boxes import box_hulls, smooth_box_certificate, split_smooth_boxes
from certified.models import Schedule

_DEFAULT = settings.default.max_examples  # dev 60, ci 100, thorough 2000
_SAMPLES = 1000 if _DEFAULT >= 1000 else 120


def _spec(act: str, d: int, seed: int, pieces: int = 3, duration: str = "1/2") -> dict:
    """Issue 18's shape, smaller: W, A ~ N(0, 1/d) rounded to 3 decimals, b ~ N(0, 1)."""
    rng = np.random.default_rng(seed)
    out = {"dimension": d, "activation": act, "pieces": []}
    for _ in range(pieces):
        W = np.round(rng.standard_normal((d, d)) / np.sqrt(d), 3)
        A = np.round(rng.standard_normal((d, d)) / np.sqrt(d), 3)
        b = np.round(rng.standard_normal(d), 3)
        out["pieces"].append({"duration": duration, "W": W.tolist(), "A": A.tolist(),
                              "b": b.tolist()})  # fmt: skip
    return out


def _samples(lo, hi, n, rng):
    """The corners (up to 2^d), the centre, then uniform samples of [lo, hi]."""
    d = lo.size
    corners = [np.where(np.array([(k >> j) & 1 for j in range(d)], bool), hi, lo)
               for k in range(min(2**d, n // 2))]  # fmt: skip
    rest = lo + (hi - lo) * rng.uniform(0, 1, (max(0, n - len(corners) - 1), d))
    return np.clip(np.vstack([*corners, 0.5 * (lo + hi), rest]), lo, hi)


def _contains(problem, lo, hi, enc_lo, enc_hi, n, seed=0):
    samples = _samples(lo, hi, n, np.random.default_rng(seed))
    misses, _ = fref.box_misses(problem.field.to_json(), problem, samples,
                                [problem.total_time], enc_lo[None], enc_hi[None])  # fmt: skip
    return [samples[s] for _, s in misses]


@pytest.fixture(scope="module")
def split_case():
    """Three tanh boxes of side 0.2 in d = 3 (1.5 time units), split under a budget of 4
    (quadratic sets: 1 split brings the widths from 1.16-1.78x to 1.16-1.35x their linear part),
    and their certificate (built once)."""
    P = neural_field(Schedule.from_json(_spec("tanh", 3, seed=4)))
    c = np.random.default_rng(1).uniform(-1, 1, (3, 3))
    lo, hi = c - 0.1, c + 0.1
    split = split_smooth_boxes(P, lo, hi, max_splits=4)
    return P, lo, hi, split, smooth_box_certificate(P, lo, hi, split)


def test_split_boxes_come_back_verified_and_contain_sampled_images(split_case):
    P, lo, hi, split, cert = split_case
    assert split.failed == {} and split.splits > 0 and len(split.trees) == 3
    assert cert["hints"]["order"] <= 12  # box steps: order at most 12 (boxes.BOX_ORDER)
    verdict = check_certificate(json.loads(json.dumps(cert)))
    assert verdict.verified, verdict.reason
    claims = cert["claim"]["enclosures"][0]
    hulls = box_hulls(split)
    for i in range(3):
        c_lo = np.array([float(fmpq_of(a)) for a, _ in claims[i]])
        c_hi = np.array([float(fmpq_of(b)) for _, b in claims[i]])
        assert np.all(c_lo <= hulls[i][0] + 1e-12) and np.all(c_hi >= hulls[i][1] - 1e-12)
        assert _contains(P, lo[i], hi[i], hulls[i][0], hulls[i][1], _SAMPLES, seed=i) == []


def fmpq_of(s: str) -> fmpq:
    if "*2^" in s:
        m, e = s.split("*2^")
        return fmpq(int(m)) * fmpq(2) ** int(e) if int(e) >= 0 else fmpq(int(m), 2 ** -int(e))
    return fmpq(*map(int, s.split("/"))) if "/" in s else fmpq(int(s))


def _tampered(cert, fn):
    out = copy.deepcopy(cert)
    fn(out["hints"])
    return check_certificate(json.loads(json.dumps(out)))


def test_certify_flow_takes_the_box_route_for_boxes(split_case):
    """The Python API on boxes of a smooth field at 53 bits: the same sub-boxes and claims as
    the command's route (split_smooth_boxes + smooth_box_certificate), VERIFIED, containing the
    sampled images; a box that does not come back raises NoCertificateError naming it; a bad
    budget is refused."""
    from certified import NoCertificateError, certify_flow
    from certified.arith import Interval
    from certified.errors import InputError

    P, lo, hi, _, cert = split_case
    res, api_cert = certify_flow(P, Interval(lo, hi), max_splits=4)
    assert api_cert["claim"] == cert["claim"] and api_cert["hints"]["sets"] == "quadratic"
    assert check_certificate(json.loads(json.dumps(api_cert))).verified
    for i in range(3):
        assert _contains(P, lo[i], hi[i], res.final.lo[i], res.final.hi[i], 60, seed=i) == []
    big = Interval(np.full((1, 3), -0.25), np.full((1, 3), 0.25))
    with pytest.raises(NoCertificateError, match="box 0, sub-box 0 of 1"):
        certify_flow(P, big, max_splits=0)
    with pytest.raises(InputError, match="max_splits"):
        certify_flow(P, Interval(lo, hi), max_splits=-1)


def test_tampered_partition_is_rejected(split_case):
    _, _, hi, _, cert = split_case
    i = next(k for k, t in enumerate(cert["hints"]["partition"]) if len(t) > 1)
    tree = cert["hints"]["partition"][i]

    def missing(h):  # a piece missing: the tree ends early
        h["partition"][i] = tree[:-1]

    def outside(h):  # a cut outside the box: a piece outside it
        h["partition"][i] = [tree[0], "1000", *tree[2:]]

    def moved(h):  # a cut moved: the leaves are other boxes (a gap between the claimed ones)
        q = fmpq_of(tree[1])
        h["partition"][i] = [tree[0], str(q + (fmpq(to_fmpq_array(hi[i], "h")[tree[0]]) - q) / 2),
                             *tree[2:]]  # fmt: skip

    def unsplit(h):  # the partition dropped: the whole box is replayed, wider than the claim
        h["partition"][i] = [None]

    for fn, why in ((missing, "ends early"), (outside, "not strictly inside"), (moved, ""),
                    (unsplit, "misses")):  # fmt: skip
        verdict = _tampered(cert, fn)
        assert not verdict.verified and why in verdict.reason, (fn.__name__, verdict.reason)
    verdict = _tampered(cert, lambda h: h.update(sets="tripleton"))
    assert not verdict.verified and "hints.sets" in verdict.reason
    assert cert["hints"]["sets"] == "quadratic"
    verdict = _tampered(cert, lambda h: h.update(arithmetic="arb"))
    assert not verdict.verified and "float64 intervals only" in verdict.reason


def test_a_failing_box_is_named_while_the_others_come_back():
    """x' = x^2 blows up at t = 1/x0: from [0.1, 0.2] not before t = 1; from [0.8, 1.05] its
    sub-boxes fail at every split (named: sub-box and reason); from [1, 1.1] already the
    centre's flow fails (named); the first box comes back. Regression (2 splits): a sub-box of
    the first box was named in the second's place when the batch failed the Picard inclusion
    together at the largest a priori factor (each set now gets its own factor)."""
    P = field(1, lambda x, p: [x[0] * x[0]]).for_time(1)
    lo, hi = np.array([[0.1], [0.8], [1.0]]), np.array([[0.2], [1.05], [1.1]])
    split = split_smooth_boxes(P, lo, hi, max_splits=2)
    assert list(split.trees) == [0] and sorted(split.failed) == [1, 2]
    assert split.failed[1].startswith("box 1, sub-box") and "piece 0, step" in split.failed[1]
    assert split.failed[2].startswith("box 2: the flow from its centre fails")
    cert = smooth_box_certificate(P, lo, hi, split)
    assert len(cert["instance"]["boxes"]) == 1
    assert check_certificate(json.loads(json.dumps(cert))).verified
    a, b = box_hulls(split)[0]
    assert a[0] <= 1 / (1 / 0.1 - 1) and 1 / (1 / 0.2 - 1) <= b[0]


# --- doubleton replays against the 50-digit reference ------------------------------------------


def _arb_apriori(field, params, S: LohnerSet, h: fmpq):
    """An a priori box for one arb step by inflation (untrusted: lohner_step checks it)."""
    X = S.hull(with_centre=True)
    box = [(x.lower() - 1, x.upper() + 1) for x in X]
    for _ in range(30):
        B = [arb(a).union(arb(b)) for a, b in box]
        F = field_jets(field, params, B, None, 1)[1]
        T = [(x.lower() + arb(h) * min(arb(0), f[0].lower()), x.upper() + arb(h) *
              max(arb(0), f[0].upper())) for x, f in zip(X, F, strict=True)]  # fmt: skip
        box = [(arb(t0.lower() - 0.01 * (t1 - t0).upper() - 2.0**-30).mid(),
                arb(t1.upper() + 0.01 * (t1 - t0).upper() + 2.0**-30).mid())
               for t0, t1 in T]  # fmt: skip
        ok = all(t0.lower() > arb(a) and t1.upper() < arb(b) for (t0, t1), (a, b) in
                 zip(T, [(arb(a), arb(b)) for a, b in box], strict=True))  # fmt: skip
        if ok:
            break
    return [(_q(a), _q(b)) for a, b in box]


def _q(a: arb) -> fmpq:
    m, e = a.mid().man_exp()
    return fmpq(int(m)) * fmpq(2) ** int(e) if int(e) >= 0 else fmpq(int(m), 2 ** -int(e))


@settings(max_examples=_DEFAULT // 20 if _DEFAULT >= 1000 else 2, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
@given(st.sampled_from(["tanh", "sigmoid"]), st.integers(0, 10**6),
       st.sampled_from([1e-6, 1e-2, 0.1]),
       st.sampled_from(["arb", "doubleton", "zonotope", "quadratic"]))  # fmt: skip
@example("tanh", 4, 0.1, "arb")  # the arb doubleton step, a wide box
@example("sigmoid", 7, 1e-2, "doubleton")  # the float64 replay
@example("tanh", 4, 0.1, "zonotope")  # float64 zonotope: 64 generators boxed down to 32
@example("tanh", 4, 0.1, "quadratic")  # quadratic sets, their generators reduced likewise
@example("sigmoid", 11, 1e-6, "quadratic")  # a tiny box: the rounding terms dominate
def test_box_replays_contain_the_reference(act, seed, side, path):
    """The checker's doubleton replay (arb step, or the float64 replay with the factors it
    picks), its zonotope replay and its quadratic replay (float64, steps of 1/64: the
    generators pass 16 d and are reduced) of a small box contain the 50-digit images of its
    corners and samples. CI: the five pinned examples and two drawn; the thorough profile draws
    100 (every activation, side and path many times over)."""
    spec = _spec(act, 2, seed, pieces=2, duration="1/4")
    P = neural_field(Schedule.from_json(spec))
    c = np.random.default_rng(seed).uniform(-1, 1, 2)
    lo, hi = c - side / 2, c + side / 2
    start = [list(zip(to_fmpq_array(lo, "lo"), to_fmpq_array(hi, "hi"), strict=True))]
    per = 16 if path in ("zonotope", "quadratic") else 4
    steps = [[fmpq(1, 4 * per)] * per for _ in P.pieces]
    field = P.field.expression
    with ctx.workprec(53):
        pieces = [(p.duration, [arb(v) for v in p.values]) for p in P.pieces]
        if path == "arb":
            S = LohnerSet.box(*map(list, zip(*start[0], strict=True)), doubleton=True)
            for _, params in pieces:
                for h in steps[0]:
                    S = lohner_step(field, params, S, h, _arb_apriori(field, params, S, h), 12, 6)
            out = S.hull()
        else:
            apriori = [[None] * per for _ in pieces]
            out = replay_flow(field, pieces, start, steps, None, 12, 6, [P.total_time], None,
                              "float64", apriori, path)[0][0]  # fmt: skip
        e_lo = np.array([float(arb(b.lower()).lower()) for b in out])
        e_hi = np.array([float(arb(b.upper()).upper()) for b in out])
    assert _contains(P, lo, hi, e_lo, e_hi, 24, seed) == []


def test_doubleton_is_tighter_than_lohner_sets_for_boxes():
    """In the linear regime the box is not wrapped: the doubleton's width is near the linear
    hull's, the plain Lohner set's several times wider (issue 18's d = 8, 4 pieces; steps of
    1/8: 2.8x, steps of 1/16: 3.3x)."""
    P = neural_field(Schedule.from_json(_spec("tanh", 8, seed=2, pieces=4)))
    c = np.random.default_rng(3).uniform(-1, 1, 8)
    start = [list(zip(to_fmpq_array(c - 1e-4, "lo"), to_fmpq_array(c + 1e-4, "hi"), strict=True))]
    steps = [[fmpq(1, 8)] * 4 for _ in P.pieces]
    widths = {}
    with ctx.workprec(53):
        pieces = [(p.duration, [arb(v) for v in p.values]) for p in P.pieces]
        for sets in ("lohner", "doubleton"):
            out = replay_flow(P.field.expression, pieces, start, steps, None, 12, 6,
                              [P.total_time], None, "float64", [[None] * 4 for _ in pieces],
                              sets)[0][0]  # fmt: skip
            widths[sets] = max(float(2 * b.rad()) for b in out)
    assert widths["doubleton"] < widths["lohner"] / 2, widths


def _users_size_ratios(monkeypatch, side: float, kinds) -> dict:
    """Issue 18's instance (d = 8, eight pieces of 1/2, tanh), three boxes of the given side, no
    splits: each box's width over its linear part, per kind of sets."""
    from certified.flow.bench_certificates import instance
    from certified.flow.taylor import boxes

    spec, X = instance("tanh", 0, 3)
    P = neural_field(Schedule.from_json(spec))
    ratios = {}
    for kind in kinds:
        monkeypatch.setattr(boxes, "SETS", kind)
        split = split_smooth_boxes(P, X - side / 2, X + side / 2, max_splits=0)
        assert split.sets == kind
        ratios[kind] = [split.ratio(i) if i in split.trees else np.inf for i in range(3)]
    return ratios


def test_zonotope_is_tighter_than_the_doubleton_at_the_users_size(monkeypatch):
    """Boxes of side 0.01: the doubleton's error part C r is wrapped at every step (1.2-1.3x)
    and feeds the spread of J, one box fails and the others are 5.4x and 19.5x their linear
    part; the zonotope's error generators are carried by point matrices: all three within 1.5x."""
    ratios = _users_size_ratios(monkeypatch, 0.01, ("doubleton", "zonotope"))
    assert max(ratios["zonotope"]) < 1.5 and min(ratios["doubleton"]) > 3, ratios


def test_quadratic_sets_are_tighter_than_the_zonotope_at_the_users_size(monkeypatch):
    """Boxes of side 0.03: the zonotope's first-order spread term makes them 2.8-5.6x their
    linear part, the quadratic sets carry the curvature as a point tensor and leave third-order
    errors: 1.07-1.11x (measured)."""
    ratios = _users_size_ratios(monkeypatch, 0.03, ("zonotope", "quadratic"))
    assert max(ratios["quadratic"]) < 1.25 and min(ratios["zonotope"]) > 2.5, ratios


def test_fields_with_logsumexp_take_the_zonotope():
    """The second-order replay has no logsumexp: boxes of such fields are zonotopes (and a
    quadratic certificate of one is refused by the replay, not trusted)."""
    from certified.checker.lohner64 import Sets
    from certified.checker.taylor import ReplayError
    from certified.fields import logsumexp, read_field
    from certified.flow.taylor.boxes import sets_for

    lse = field(2, lambda x, p: [logsumexp([x[0], x[1]]) - x[0], x[0] - x[1]])
    assert sets_for(lse.expression) == "zonotope"
    assert sets_for(read_field("lorenz", time="1/8").field.expression) == "quadratic"
    start = [[(fmpq(0), fmpq(1, 100)), (fmpq(1, 2), fmpq(51, 100))]]
    with ctx.workprec(53), pytest.raises(ReplayError, match="logsumexp"):
        replay_flow(lse.expression, [(fmpq(1, 8), [])], start, [[fmpq(1, 8)]], None, 8, 4,
                    [fmpq(1, 8)], None, "float64", [[None]], "quadratic")  # fmt: skip
    assert Sets.boxes(start, "quadratic").Q.shape == (1, 2, 2, 2)


def test_cli_boxes_verified_and_bad_budget_refused(tmp_path, capsys):
    from certified.cli import main

    spec = _spec("sigmoid", 3, seed=5, pieces=2)
    (tmp_path / "s.json").write_text(json.dumps(spec))
    c = np.random.default_rng(0).uniform(-1, 1, (2, 3))
    boxes = {"lo": (c - 0.05).tolist(), "hi": (c + 0.05).tolist()}
    (tmp_path / "b.json").write_text(json.dumps(boxes))
    args = ["flow", "--schedule", str(tmp_path / "s.json"), "--boxes", str(tmp_path / "b.json")]
    out = tmp_path / "c.json"
    assert main([*args, "--max-splits", "-1", "--out", str(out)]) == 2
    assert "--max-splits" in capsys.readouterr().err and not out.exists()
    assert main([*args, "--max-splits", "4", "--out", str(out), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["verdict"] == "VERIFIED" and res["failed"] == {} and len(res["enclosures"]) == 2
    assert check_certificate(json.loads(out.read_text())).verified


def test_a_box_still_too_wide_after_the_budget_fails_named(monkeypatch):
    """Side 0.5 in d = 3 without splits: over 100x its linear part, named, not certified, and
    the advice is a larger budget; when the file's sub-box limit (the checker's replay limit,
    made 3 here) stops the splits instead, the advice says so."""
    from certified.flow.taylor import boxes

    P = neural_field(Schedule.from_json(_spec("tanh", 3, seed=4)))
    lo, hi = np.full((1, 3), -0.25), np.full((1, 3), 0.25)
    split = split_smooth_boxes(P, lo, hi, max_splits=0)
    assert (
        split.trees == {} and "times as wide as its linear part after 0 splits" in split.failed[0]
    )
    assert split.limit == 0 and "raise --max-splits" in split.advice()
    monkeypatch.setattr(boxes, "_most_leaves", lambda *args: 3)
    split = split_smooth_boxes(P, lo, hi, max_splits=50)
    assert split.trees == {} and split.splits == 2 and split.limit == 3
    assert "fewer boxes per file" in split.advice()
