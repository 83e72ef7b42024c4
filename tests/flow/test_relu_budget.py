"""``certified flow`` on ReLU schedules refuses at once when the checker's budget of rule
relu-regions cannot admit the certificate: the producer's lower bound
(:func:`certified.certificates.flow.relu_regions_min_ops`) never exceeds what the checker charges
(a certificate is rejected for "resource limit" once the budget is set just below the bound),
and the CLI then writes nothing, exits 1 and says why, without running the region engine."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import certified.checker._relu_rule as relu_rule
from certified.certificates.flow import RELU_REGIONS_MAX_OPS, relu_regions_min_ops
from certified.checker import check_certificate
from certified.cli import main
from certified.flow.api import enclose_flow, flow_certificate_for
from certified.models import Schedule


def _schedule(seed: int, d: int, p: int, pieces: int, laminar_head: bool = False) -> dict:
    rng = np.random.default_rng(seed)
    out = [
        {
            "duration": "1/4",
            "W": (rng.standard_normal((d, p)) / 2).tolist(),
            "A": rng.standard_normal((p, d)).tolist(),
            "b": (rng.standard_normal(p) / 2).tolist(),
        }
        for _ in range(pieces)
    ]
    if laminar_head:  # normal e_1, motion orthogonal to it
        out.insert(0, {"duration": "1/8", "W": [[0]] + [[1]] * (d - 1), "A": [[1] + [0] * (d - 1)],
                       "b": ["1/4"]})  # fmt: skip
    return {"dimension": d, "activation": "relu", "pieces": out}


def test_the_producer_budget_is_the_checker_budget():
    assert RELU_REGIONS_MAX_OPS == relu_rule.MAX_RELU_OPS


@pytest.mark.parametrize(
    ("seed", "d", "p", "pieces", "laminar_head", "boxes"),
    [(0, 2, 3, 2, False, False), (1, 3, 2, 3, True, False), (2, 2, 3, 2, True, True)],
)
def test_lower_bound_never_exceeds_the_checkers_charge(
    monkeypatch, seed, d, p, pieces, laminar_head, boxes
):
    schedule = Schedule.from_json(_schedule(seed, d, p, pieces, laminar_head))
    rng = np.random.default_rng(seed + 7)
    X = rng.uniform(-1, 1, (3, d))
    if boxes:
        from certified.arith import Interval

        start = Interval(X, X + 2.0**-20)
    else:
        start = X
    cert = flow_certificate_for(schedule, start, enclose_flow(schedule, start, method="regions"))
    assert cert is not None and cert["hints"]["method"] == "relu-regions"
    assert check_certificate(cert).verified
    bound = relu_regions_min_ops(schedule, len(start), boxes, 128)
    monkeypatch.setattr(relu_rule, "MAX_RELU_OPS", bound - 1)
    verdict = check_certificate(cert)
    assert not verdict.verified and "resource limit" in verdict.reason


def test_an_exact_equilibrium_is_charged_no_more_than_the_bound(monkeypatch):
    """A point that is an exact equilibrium of the first general piece gets an "equilibrium"
    entry there (no series cost): the bound subtracts one general piece per point."""
    spec = _schedule(4, 2, 2, 1)
    for piece in spec["pieces"]:
        piece["b"] = [0, -1]  # x = 0 lies on the first plane, f(0) = 0 exactly
    schedule = Schedule.from_json(spec)
    start = np.zeros((1, 2))
    res = enclose_flow(schedule, start, method="regions")
    cert = flow_certificate_for(schedule, start, res)
    kinds = [e["kind"] for e in cert["hints"]["points"][0]]
    assert kinds[0] == "equilibrium" and check_certificate(cert).verified
    bound = relu_regions_min_ops(schedule, 1, False, 128)
    monkeypatch.setattr(relu_rule, "MAX_RELU_OPS", bound - 1)
    assert "resource limit" in check_certificate(cert).reason


def _bench_shape(tmp_path, n: int, pieces: int = 64):
    """The flow bench's ReLU ensemble (d = p = 16, pieces of 1/64), its first n points."""
    rng = np.random.default_rng(0)
    d = p = 16
    W = [rng.normal(size=(d, p)) / np.sqrt(p) for _ in range(pieces)]
    A = [rng.normal(size=(p, d)) for _ in range(pieces)]
    b = [rng.normal(size=p) for _ in range(pieces)]
    X = rng.uniform(-1, 1, size=(n, d))
    spec = {"dimension": d, "activation": "relu", "pieces": [
        {"duration": f"1/{pieces}", "W": W[j].tolist(), "A": A[j].tolist(), "b": b[j].tolist()}
        for j in range(pieces)]}  # fmt: skip
    s, x = tmp_path / "schedule.json", tmp_path / "points.json"
    s.write_text(json.dumps(spec))
    x.write_text(json.dumps({"X": X.tolist()}))
    return s, x


@pytest.mark.parametrize("prec", ["128", "256"])
def test_cli_refuses_at_once_over_the_budget(tmp_path, capsys, prec):
    """--prec above 53: the region engine, rule relu-regions, refused from its lower bound."""
    s, x = _bench_shape(tmp_path, 4)
    out = tmp_path / "cert.json"
    args = ["flow", "--schedule", str(s), "--points", str(x), "--out", str(out), "--json"]
    assert main([*args, "--prec", prec]) == 1
    payload = json.loads(capsys.readouterr().out)
    assert payload["verdict"] == "UNDECIDED" and payload["certificate"] is None
    assert "checker's limit" in payload["message"]
    most = int(re.search(r"at most (\d+) points", payload["message"]).group(1))
    schedule = Schedule.from_json(json.loads(s.read_text()))
    bits = int(prec)
    assert relu_regions_min_ops(schedule, most, False, bits) <= RELU_REGIONS_MAX_OPS
    assert relu_regions_min_ops(schedule, most + 1, False, bits) > RELU_REGIONS_MAX_OPS
    assert not out.exists()
    assert "enclosures" not in payload


def test_cli_default_certifies_the_bench_shape_by_rule_relu_vectorised(tmp_path, capsys):
    """The same 4 points at the default precision: the vectorised engine, VERIFIED."""
    s, x = _bench_shape(tmp_path, 4)
    out = tmp_path / "cert.json"
    assert main(["flow", "--schedule", str(s), "--points", str(x), "--out", str(out)]) == 0
    assert "VERIFIED" in capsys.readouterr().out
    assert json.loads(out.read_text())["hints"]["method"] == "relu-vectorised"


def test_cli_refuses_relu_vectorised_at_once_over_its_limit(tmp_path, capsys, monkeypatch):
    """With the checker's limit below the producer's lower bound for 4 points, certified flow
    refuses before running the engine, with the number of points per file that fit."""
    import certified.checker._relu_vec_plan as rule
    from certified.certificates.flow import relu_vectorised_min_cost

    s, x = _bench_shape(tmp_path, 4)
    schedule = Schedule.from_json(json.loads(s.read_text()))
    monkeypatch.setattr(rule, "MAX_RELU_VEC_COST", relu_vectorised_min_cost(schedule, 2))
    import certified.flow.api as api

    def no_engine(*args, **kwargs):
        raise AssertionError("the engine ran before the refusal")

    monkeypatch.setattr(api, "enclose_flow", no_engine)
    out = tmp_path / "cert.json"
    args = ["flow", "--schedule", str(s), "--points", str(x), "--out", str(out), "--json"]
    assert main(args) == 1
    payload = json.loads(capsys.readouterr().out)
    assert payload["verdict"] == "UNDECIDED" and not out.exists()
    message = payload["message"]
    assert "checker's limit" in message
    most = int(re.search(r"files of at most about (\d+)", message).group(1))
    assert 1 <= most < 4 and relu_vectorised_min_cost(schedule, most) <= rule.MAX_RELU_VEC_COST


def test_cli_still_certifies_within_the_budget(tmp_path, capsys):
    s, x = _bench_shape(tmp_path, 1, pieces=2)
    out = tmp_path / "cert.json"
    assert main(["flow", "--schedule", str(s), "--points", str(x), "--out", str(out)]) == 0
    assert "VERIFIED" in capsys.readouterr().out and out.exists()


def test_cli_refusal_only_for_rule_relu_regions(tmp_path, capsys, monkeypatch):
    """With the producer's budget set to 0, a laminar ReLU schedule (rule laminar-exact, its
    own budget) is still certified; a general one is refused, its file not written."""
    import certified.certificates.flow as producer

    monkeypatch.setattr(producer, "RELU_REGIONS_MAX_OPS", 0)
    laminar = {"dimension": 2, "activation": "relu", "pieces": [
        {"duration": "1/2", "W": [[0], [1]], "A": [[1, 0]], "b": ["1/4"]}]}  # fmt: skip
    general = _schedule(5, 2, 2, 1)
    for spec, code in ((laminar, 0), (general, 1)):
        s, x = tmp_path / "schedule.json", tmp_path / "points.json"
        s.write_text(json.dumps(spec))
        x.write_text(json.dumps({"X": [[0.25, -0.5], [0.5, 0.125]]}))
        out = tmp_path / f"cert{code}.json"
        args = ["flow", "--schedule", str(s), "--points", str(x), "--out", str(out)]
        assert main([*args, "--prec", "128"]) == code
        text = capsys.readouterr().out
        assert out.exists() == (code == 0)
        assert ("VERIFIED" if code == 0 else "checker's limit") in text


def test_cli_falls_back_to_the_replayed_claims(tmp_path, capsys, monkeypatch):
    """certified flow claims the engine's enclosures first (no replay before the writer's
    check); when the checker rejects them (here: a claim narrowed on purpose), it writes the
    checker's own replayed enclosures instead."""
    import certified.flow.api as api

    original = api.flow_certificate_for
    calls = []

    def narrowed(field, points, result, *, precision=None, replay=True):
        calls.append(replay)
        cert = original(field, points, result, precision=precision, replay=replay)
        if not replay:
            hi = cert["claim"]["enclosures"][0][0][1]
            cert["claim"]["enclosures"][0][0] = [hi, hi]
        return cert

    monkeypatch.setattr(api, "flow_certificate_for", narrowed)
    s, x = _bench_shape(tmp_path, 3, pieces=4)
    out = tmp_path / "cert.json"
    assert main(["flow", "--schedule", str(s), "--points", str(x), "--out", str(out)]) == 0
    assert calls == [False, True] and "VERIFIED" in capsys.readouterr().out
    assert json.loads(out.read_text())["hints"]["method"] == "relu-vectorised"
