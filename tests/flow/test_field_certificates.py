"""`certified flow` for smooth schedules without a producer replay (issue 18): the claims are
the engine's enclosures widened by ``field_flow.claim_widening`` (2.5x for tanh fields, 4x
otherwise); a miss of the checker's replay falls back to 4x claims, then to the replayed
claims, and whatever is written is VERIFIED by the checker; tampered claims are REJECTED."""

from __future__ import annotations

import json

import numpy as np
import pytest

from certified.arith.exact import to_fmpq
from certified.certificates import field_flow
from certified.checker import check_certificate
from certified.cli import main
from certified.fields import lorenz, neural_field
from certified.models import Schedule


def _schedule(activation: str, d: int = 2) -> dict:
    rng = np.random.default_rng(5)
    pieces = [{"duration": "1/2", "W": np.round(rng.standard_normal((d, d)) / 2, 3).tolist(),
               "A": np.round(rng.standard_normal((d, d)) / 2, 3).tolist(),
               "b": np.round(rng.standard_normal(d), 3).tolist()} for _ in range(2)]  # fmt: skip
    return {"dimension": d, "activation": activation, "pieces": pieces}


def test_claim_widening_by_field():
    tanh = neural_field(Schedule.from_json(_schedule("tanh"))).field.expression
    sig = neural_field(Schedule.from_json(_schedule("sigmoid"))).field.expression
    assert field_flow.claim_widening(tanh) == 2.5
    assert field_flow.claim_widening(sig) == 4.0
    assert field_flow.claim_widening(lorenz().expression) == 4.0  # x y, x z: not linear


def _run(tmp_path, capsys, name: str = "c.json") -> tuple[dict, dict]:
    sched, pts, out = tmp_path / "s.json", tmp_path / "p.json", tmp_path / name
    sched.write_text(json.dumps(_schedule("tanh")))
    X = np.random.default_rng(6).uniform(-1, 1, (3, 2))
    pts.write_text(json.dumps({"X": X.tolist()}))
    code = main(["flow", "--schedule", str(sched), "--points", str(pts), "--out", str(out),
                 "--json"])  # fmt: skip
    got = capsys.readouterr()
    assert got.out, got.err
    report = json.loads(got.out)
    assert code == 0 and report["verdict"] == "VERIFIED"
    return report, json.loads(out.read_text())


def _widths(cert: dict) -> np.ndarray:
    return np.array([[float(to_fmpq(b) - to_fmpq(a)) for a, b in row]
                     for row in cert["claim"]["enclosures"][-1]])  # fmt: skip


def test_narrow_claims_missed_fall_back_to_4x_claims(tmp_path, capsys, monkeypatch):
    """Claims a quarter of the engine's width miss the replay: the command writes the 4x
    claims instead (checked), not an unchecked or rejected file."""
    monkeypatch.setattr(field_flow, "AUTO_REPLAY_COST", 0)  # no producer replay
    _, wide = _run(tmp_path, capsys)
    assert wide["hints"]["apriori"] == "search"
    monkeypatch.setattr(field_flow, "claim_widening", lambda field: 0.25)
    _, fallback = _run(tmp_path, capsys, "c2.json")
    assert fallback["hints"]["apriori"] == "search"
    assert np.allclose(_widths(fallback), _widths(wide) * 4 / 2.5, rtol=1e-6)
    assert check_certificate(fallback).verified


def test_tanh_claims_are_2_5x_and_tampering_is_rejected(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(field_flow, "AUTO_REPLAY_COST", 0)
    _, cert = _run(tmp_path, capsys)
    assert check_certificate(cert).verified
    lo, hi = cert["claim"]["enclosures"][-1][1][0]
    mid = (to_fmpq(lo) + to_fmpq(hi)) / 2
    for moved in ([str(mid), hi], [lo, str(mid)]):  # half of the claim cut off
        bad = json.loads(json.dumps(cert))
        bad["claim"]["enclosures"][-1][1][0] = moved
        verdict = check_certificate(bad)
        assert not verdict.verified and "misses the replayed enclosure" in verdict.reason


@pytest.mark.parametrize("factor", [2.5])
def test_widened_claims_are_factor_times_the_engine(factor):
    class R:
        class enclosures:  # noqa: N801 - a stand-in for FlowEnclosure.enclosures
            lo = np.array([[[1.0, -2.0]]])
            hi = np.array([[[1.5, -1.0]]])

    out = field_flow._widened(R, factor)
    (a, b), (c, d) = out[0][0]
    assert float(to_fmpq(b) - to_fmpq(a)) >= 0.5 * factor
    assert float(to_fmpq(d) - to_fmpq(c)) >= 1.0 * factor
    assert float(to_fmpq(b) - to_fmpq(a)) <= 0.5 * factor * (1 + 1e-12)
