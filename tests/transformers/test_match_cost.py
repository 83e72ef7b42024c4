"""The match producer forecasts the checker's replay charge (``certified.transformers.
match_cost``) and refuses at once when the certificate is out of reach: UNDECIDED (exit 1) with
where the forecast passes the budget and what to do, nothing written, and no certified flow
computed; after each flow its exact charge replaces the forecast (a file that turns out over
the budget stops before the next flow, or before the certificate's replays). The forecast's
quality against the checker's charge: tests/transformers/test_match_cluster.py.

CI cost: one certified flow (the two-atom instance of test_transformer_match, ~2 s); the
other tests compute schedules and forecasts only."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

import certified.flow
from certified.cli import main
from certified.transformers import match, match_cluster
from certified.transformers.instance import parse_instance
from certified.transformers.match_cost import ReplayForecast, match_budget, piece_steps

S = "0.7071067811865476"  # the symmetric pair of test_match_cluster (a barycentre flow first)
PAIR = {"measures": [{"tokens": [[1, 0, 0], [0, 1, 0]]}, {"tokens": [[S, S, 0]]}]}
PAIR_TARGETS = {"targets": [[1, 0, 0], [0, 0, 1]]}
ATOMS = {"measures": [{"tokens": [[1, 0, 0]]}, {"tokens": [[0, 0, 1]]}]}  # test_transformer_match
ATOM_TARGETS = {"targets": [["4/5", "3/5", 0], [0, "-3/5", "4/5"]]}


def _run(tmp_path, measures, targets, eps="1/100"):
    inst, tg = tmp_path / "i.json", tmp_path / "t.json"
    inst.write_text(json.dumps(measures))
    tg.write_text(json.dumps(targets))
    out = tmp_path / "c.json"
    argv = ["transformer", "match", "--instance", str(inst), "--targets", str(tg)]
    return main([*argv, "--eps", eps, "--out", str(out), "--json"]), out


def _no_flow(*args, **kwargs):
    raise AssertionError("a certified flow was computed")


def test_the_budget_is_the_checkers():
    from certified.checker import MAX_MATCH_OPS

    assert match_budget() == MAX_MATCH_OPS


def test_every_piece_has_its_phase():
    inst = parse_instance({**PAIR, "pieces": [{"duration": 1}]})
    plan = match_cluster.cluster_schedule(inst, np.array(PAIR_TARGETS["targets"], float), 1e-2)
    assert len(plan.phases) == len(plan.pieces)
    assert plan.phases[:2] == ("barycentre flow (Lemma 3.3)", "self-attention clustering")
    assert "V" in plan.pieces[0] and plan.pieces[1]["V"][0][0] == 1  # V = s aa^T, then V = I
    assert all(p.startswith("steering round") for p in plan.phases[3:])


def test_over_the_budget_refused_before_any_flow(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(match, "match_budget", lambda: 10**5)
    monkeypatch.setattr(certified.flow, "enclose_flow", _no_flow)
    code, out = _run(tmp_path, PAIR, PAIR_TARGETS)
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert code == 1 and data["verdict"] == "UNDECIDED" and data["certificate"] is None
    reason = data["reason"]
    # the fewest steps at variational order 1: a lower bound on the checker's charge
    assert reason.startswith("out of the checker's reach: the replay of the 2 flows needs at least")
    assert "(a lower bound from the fewest steps: steps of at most 1/8" in reason
    assert "variational order 1)" in reason
    assert "over the budget 1e+05 of one transformer-match file" in reason
    # the running total passes it in measures[0]'s first piece (its phase named)
    assert "measures[0]'s flow passes it in the phase 'barycentre flow (Lemma 3.3)'" in reason
    assert "no flow was computed" in reason and "fewer atoms" in reason
    assert len(captured.err.strip().splitlines()) == 1
    assert not out.exists()


def test_near_the_budget_the_predicted_steps_decide(tmp_path, capsys, monkeypatch):
    # the budget at the fewest-steps forecast (not over twice it): the first flow's steps
    # predicted in float64 (more steps than the fewest: 1.8 times on this instance) refuse
    fewest = int(_forecast(0)[0].total())
    monkeypatch.setattr(match, "match_budget", lambda: fewest)
    monkeypatch.setattr(certified.flow, "enclose_flow", _no_flow)
    code, out = _run(tmp_path, PAIR, PAIR_TARGETS)
    reason = json.loads(capsys.readouterr().out)["reason"]
    assert code == 1 and "(the first flow's steps predicted in float64: steps of at most" in reason
    assert "no flow was computed" in reason and not out.exists()


def test_atoms_over_the_budget_refused_before_any_chunk(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(match, "match_budget", lambda: 10**3)
    monkeypatch.setattr(certified.flow, "enclose_flow", _no_flow)
    code, out = _run(tmp_path, ATOMS, ATOM_TARGETS, "1/1000")
    reason = json.loads(capsys.readouterr().out)["reason"]
    assert code == 1 and "atoms 0-1's flow passes it in the phase 'steering round 1'" in reason
    assert not out.exists()


def test_a_file_over_the_budget_after_its_flow_stops_before_the_certificate(
    tmp_path, capsys, monkeypatch
):
    # the forecast fits (the budget is its total), the exact charge of the flow does not (more
    # steps than predicted): refused before the certificate's replays, nothing written
    real = ReplayForecast.refine

    def fitting(self, k=0):
        real(self, k)
        self.budget = int(self.total())  # the forecast total (predicted steps), as the budget

    monkeypatch.setattr(ReplayForecast, "refine", fitting)
    monkeypatch.setattr(match, "match_certificate", _no_flow)
    code, out = _run(tmp_path, ATOMS, ATOM_TARGETS, "1/1000")
    reason = json.loads(capsys.readouterr().out)["reason"]
    assert code == 1
    assert reason.startswith("out of the checker's reach: after atoms 0-1's flow (charged")
    assert "stopped before the certificate (its replays)" in reason
    assert not out.exists()


def _forecast(budget):
    from certified.flow import StepPolicy

    inst = parse_instance({**PAIR, "pieces": [{"duration": 1}]})
    plan = match_cluster.cluster_schedule(inst, np.array(PAIR_TARGETS["targets"], float), 1e-2)
    insts = match_cluster.measure_instances(inst, plan.pieces)
    flows = [(m.problem, m.state(), f"measures[{g}]", n) for g, (m, n) in
             enumerate(zip(insts, inst.sizes, strict=True))]  # fmt: skip
    policy = StepPolicy(max_step="1/8")
    return ReplayForecast(flows, list(plan.phases), policy, budget, True), flows, policy


def _hints(problem, policy, factor):
    steps = [[None] * (factor * s) for s in piece_steps(problem, policy)]
    orders = [[policy.jacobian_order] * len(s) for s in steps]
    return SimpleNamespace(hints={"steps": steps, "order": policy.order, "precision": 53,
                                  "jacobian_order": policy.jacobian_order,
                                  "jacobian_orders": orders})  # fmt: skip


@pytest.mark.parametrize(("factor", "refused"), [(1, False), (3, True)])
def test_the_charge_of_a_flow_rescales_the_rest(factor, refused):
    fc, flows, policy = _forecast(0)
    fc.budget = int(1.5 * fc.total())  # the forecast fits
    assert fc.refusal("the fewest steps") is None
    # flow 0 charged as forecast (fewest steps, order m): still fits; three times: the rest is
    # forecast three times as dear too, 3 x total > 1.5 x total
    reason = fc.after(0, _hints(flows[0][0], policy, factor))
    assert abs(fc.charged[0] / (factor * fc.fewest[0][-1]) - 1) < 1e-6
    assert (reason is not None) == refused
    if refused:
        assert "after measures[0]'s flow" in reason and "stopped before flow 2" in reason
