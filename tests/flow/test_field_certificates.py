"""`certified flow` for smooth fields at 53 bits (issue 18). Points: one pass (the float64
predictor's steps, the claims of the checker's own replay, the written bytes re-checked with
that replay reused); contained in the 50-digit references, tampered claims REJECTED by a fresh
check, and a failed pass falls back to the engine. The engine's route (boxes, or when the
pass fails): the engine's enclosures widened by ``field_flow.claim_widening`` (2.5x for tanh
fields, 4x otherwise); a miss of the checker's replay falls back to 4x claims, then to the
replayed claims, and whatever is written is VERIFIED by the checker."""

from __future__ import annotations

import contextlib
import io
import json
from fractions import Fraction

import field_reference as fref
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certified.arith.exact import to_fmpq
from certified.certificates import field_flow
from certified.checker import check_certificate
from certified.cli import main
from certified.fields import lorenz, neural_field
from certified.flow import command
from certified.models import Schedule


def _schedule(activation: str, d: int = 2, seed: int = 5) -> dict:
    return fref.random_schedule(activation, d, seed, "1/2")


def test_claim_widening_by_field():
    tanh = neural_field(Schedule.from_json(_schedule("tanh"))).field.expression
    sig = neural_field(Schedule.from_json(_schedule("sigmoid"))).field.expression
    assert field_flow.claim_widening(tanh) == 2.5
    assert field_flow.claim_widening(sig) == 4.0
    assert field_flow.claim_widening(lorenz().expression) == 4.0  # x y, x z: not linear


def _run(tmp_path, capsys, name: str = "c.json", activation: str = "tanh", seed: int = 5,
         extra: tuple = ()) -> tuple[dict, dict]:  # fmt: skip
    sched, pts, out = tmp_path / "s.json", tmp_path / "p.json", tmp_path / name
    sched.write_text(json.dumps(_schedule(activation, seed=seed)))
    X = np.random.default_rng(seed + 1).uniform(-1, 1, (3, 2))
    pts.write_text(json.dumps({"X": X.tolist()}))
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(["flow", "--schedule", str(sched), "--points", str(pts), "--out", str(out),
                     "--json", "--force", *extra])  # fmt: skip
    report = json.loads(buf.getvalue())
    assert code == 0 and report["verdict"] == "VERIFIED"
    return report, json.loads(out.read_text())


def _widths(cert: dict) -> np.ndarray:
    return np.array([[float(to_fmpq(b) - to_fmpq(a)) for a, b in row]
                     for row in cert["claim"]["enclosures"][-1]])  # fmt: skip


def test_narrow_claims_missed_fall_back_to_4x_claims(tmp_path, capsys, monkeypatch):
    """Claims a quarter of the engine's width miss the replay: the command writes the 4x
    claims instead (checked), not an unchecked or rejected file."""
    monkeypatch.setattr(field_flow, "AUTO_REPLAY_COST", 0)  # no producer replay
    monkeypatch.setattr(command, "_one_pass", lambda *a: None)  # the engine's route
    _, wide = _run(tmp_path, capsys)
    assert wide["hints"]["apriori"] == "search"
    monkeypatch.setattr(field_flow, "claim_widening", lambda field: 0.25)
    _, fallback = _run(tmp_path, capsys, "c2.json")
    assert fallback["hints"]["apriori"] == "search"
    assert np.allclose(_widths(fallback), _widths(wide) * 4 / 2.5, rtol=0.05, atol=0)
    assert check_certificate(fallback).verified


def test_tanh_claims_are_2_5x_and_tampering_is_rejected(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(field_flow, "AUTO_REPLAY_COST", 0)
    monkeypatch.setattr(command, "_one_pass", lambda *a: None)  # the engine's route
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


def _cut_claims_rejected(cert: dict) -> None:
    """Half of a claimed interval cut off (either side): REJECTED by a fresh check."""
    lo, hi = cert["claim"]["enclosures"][-1][1][0]
    mid = (to_fmpq(lo) + to_fmpq(hi)) / 2
    for moved in ([str(mid), hi], [lo, str(mid)]):
        bad = json.loads(json.dumps(cert))
        bad["claim"]["enclosures"][-1][1][0] = moved
        verdict = check_certificate(bad)
        assert not verdict.verified and "misses the replayed enclosure" in verdict.reason


def _fr(v) -> Fraction:
    q = to_fmpq(v)
    return Fraction(int(q.p), int(q.q))


def _contains_reference(cert: dict) -> None:
    inst = cert["instance"]
    pieces = [(_fr(p["duration"]), [_fr(v) for v in p["parameters"]]) for p in inst["pieces"]]
    times = [_fr(t) for t in cert["claim"]["times"]]
    for i, x0 in enumerate(inst["points"]):
        refs = fref.taylor_flow(inst["field"], pieces, [_fr(v) for v in x0], times)
        for k, ref in enumerate(refs):
            lo = [float(to_fmpq(a)) for a, _ in cert["claim"]["enclosures"][k][i]]
            hi = [float(to_fmpq(b)) for _, b in cert["claim"]["enclosures"][k][i]]
            assert not fref.outside(lo, hi, ref), (i, k, lo, hi)


@settings(max_examples=3 if settings.default.max_examples <= 100 else 40)
@given(seed=st.integers(0, 10**6), activation=st.sampled_from(["tanh", "sigmoid"]),
       save=st.booleans())  # fmt: skip
def test_one_pass_claims_contain_the_reference(tmp_path_factory, seed, activation, save):
    """The one-pass writer (predictor steps, the replay's own claims, the re-check reusing
    that replay): VERIFIED by a fresh check (no reuse), every claim contains the 50-digit
    Taylor reference, halves cut off REJECTED. Thorough profile: 40 instances."""
    tmp = tmp_path_factory.mktemp("one")
    extra = ("--save-at", "1/4,1/2") if save else ()
    _, cert = _run(tmp, None, activation=activation, seed=seed, extra=extra)
    assert cert["hints"]["apriori"] == "search" and "jacobian_orders" in cert["hints"]
    assert len(cert["claim"]["times"]) == (3 if save else 1)
    assert check_certificate(cert).verified
    _contains_reference(cert)
    _cut_claims_rejected(cert)


def test_a_failed_pass_falls_back_to_the_engine(tmp_path, capsys, monkeypatch):
    """Predicted hints the checker refuses (variational orders above hints.jacobian_order):
    the pass writes nothing and the engine's route writes a VERIFIED file."""
    fref.refuse_predicted_orders(monkeypatch)
    _, cert = _run(tmp_path, capsys)
    assert all(q <= 8 for qs in cert["hints"].get("jacobian_orders", []) for q in qs)
    assert check_certificate(cert).verified
