"""``certified transformer match`` on measures of several atoms (cluster first, then steer the
clusters; proofs/transformers.md §6b): two measures whose clusters coincide by symmetry are
separated by a barycentre flow V = s aaᵀ (Lemma 3.3, the step of Prop 3.1), then VERIFIED with
a certificate the checker accepts (one coupled flow per measure), the switch count below d*N;
moving a target or an atom so that the claim is false, or changing one measure's schedule, is
REJECTED; when no barycentre flow tried separates the clusters the verdict is UNDECIDED naming
Prop 3.1; nothing is written unless VERIFIED.

CI cost: one certified instance (the fixture) and one mutation per property; the thorough
profile (HYPOTHESIS_PROFILE=thorough) adds the mutations that repeat a property (targets
swapped, an atom of the other measure moved), each a full replay of both flows."""

from __future__ import annotations

import copy
import json
import os

import flint
import numpy as np
import pytest

from certified.arith.exact import to_fmpq
from certified.checker import check_certificate, check_file
from certified.cli import main
from certified.transformers import match_cluster
from certified.transformers.instance import parse_instance

THOROUGH = os.environ.get("HYPOTHESIS_PROFILE") == "thorough"

# {e1, e2} and {(e1 + e2)/sqrt 2}: both in an open hemisphere, but the self-attention clusters
# of the two coincide by symmetry (no cap separates them); a barycentre flow does
S = "0.7071067811865476"
MEASURES = {"measures": [{"tokens": [[1, 0, 0], [0, 1, 0]]}, {"tokens": [[S, S, 0]]}]}
TARGETS = {"targets": [[1, 0, 0], [0, 0, 1]]}


def _write(tmp_path, obj, name):
    path = tmp_path / name
    path.write_text(json.dumps(obj))
    return path


def _run(tmp, measures, targets, eps="1/100"):
    inst, tg = _write(tmp, measures, "i.json"), _write(tmp, targets, "t.json")
    out = tmp / "c.json"
    argv = ["transformer", "match", "--instance", str(inst), "--targets", str(tg)]
    return main([*argv, "--eps", eps, "--out", str(out), "--json"]), out


@pytest.fixture(scope="module")
def verified(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("match_cluster"), MEASURES, TARGETS)


def _schedule():
    inst = parse_instance({**MEASURES, "pieces": [{"duration": 1}]})
    Y = np.array(TARGETS["targets"], dtype=float)
    return match_cluster.cluster_schedule(inst, Y, 1e-2)


def test_the_schedule_separates_the_clusters_by_a_barycentre_flow():
    plan = _schedule()
    assert plan.failure is None
    V = np.array(plan.pieces[0]["V"])  # the first piece: V = s a a^T of rank one, B = 0
    assert np.linalg.matrix_rank(V) == 1 and np.allclose(V, V.T)
    assert "B" not in plan.pieces[0] and "W" not in plan.pieces[0]


@pytest.mark.parametrize("seed", range(4))
def test_random_measures_get_gates_the_flow_can_afford(seed):
    # 4 measures of 8 random atoms in d = 3 (none in a hemisphere: Lemma 3.2's pull first):
    # the expansion spreads the clusters, so the caps need gates of beta <= 1e4 (before it:
    # up to 5e5, and the coupled flows went over the checker's replay limit); float only
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((4, 8, 3))
    X /= np.linalg.norm(X, axis=2, keepdims=True)
    Y = rng.standard_normal((4, 3))
    Y /= np.linalg.norm(Y, axis=1, keepdims=True)
    inst = parse_instance({"measures": [{"tokens": m.tolist()} for m in X],
                           "pieces": [{"duration": 1}]})  # fmt: skip
    plan = match_cluster.cluster_schedule(inst, Y, 1e-3)
    assert plan.failure is None
    assert max(abs(b) for p in plan.pieces for b in p.get("b", ())) <= 1e4
    assert len(plan.pieces) - 1 <= 2 * 3 * 4  # switches: O(dN)


def test_clustered_match_verified_and_checked(verified):
    code, out = verified
    assert code == 0 and check_file(out).verified
    cert = json.loads(out.read_text())
    flows = cert["instance"]["flows"]
    assert len(flows) == 2  # one coupled flow per measure
    assert [len(f["points"][0]) for f in flows] == [2 * 3, 3]
    assert 1 <= cert["claim"]["switches"] <= 3 * 2 + 2  # O(dN)
    for b in cert["claim"]["w2_squared"]:
        assert to_fmpq(b) <= flint.fmpq(1, 10**4)


def test_the_replay_forecast_is_near_the_checkers_charge(verified):
    # match_cost's forecasts (the fewest steps at the engine's largest variational order; the
    # steps and orders predicted in float64) against what the checker charges each flow of the
    # certificate (its steps, its mean order); measured ratios: proofs/transformers.md §6c
    from certified.certificates.field_flow import replay_charge
    from certified.flow import StepPolicy
    from certified.transformers.match_cost import ReplayForecast, match_budget

    cert = json.loads(verified[1].read_text())
    inst = parse_instance({**MEASURES, "pieces": [{"duration": 1}]})
    plan = _schedule()
    insts = match_cluster.measure_instances(inst, plan.pieces)

    def exact(pieces):
        return [(to_fmpq(p["duration"]), [to_fmpq(v) for v in p["parameters"]]) for p in pieces]

    mine = [exact(m.problem.to_json()["pieces"]) for m in insts]
    assert mine == [exact(f["pieces"]) for f in cert["instance"]["flows"]]  # the same schedule
    h = match_cluster.cluster_steps(2)[0]
    steps = [to_fmpq(s) for f in cert["hints"]["flows"] for piece in f["steps"] for s in piece]
    assert max(steps) <= to_fmpq(h)  # certified at the first attempt's largest step
    flows = [(m.problem, m.state(), f"measures[{g}]", n)
             for g, (m, n) in enumerate(zip(insts, [2, 1], strict=True))]  # fmt: skip
    fc = ReplayForecast(flows, list(plan.phases), StepPolicy(max_step=h), match_budget(), True)
    for k, ((problem, *_), hints) in enumerate(zip(flows, cert["hints"]["flows"], strict=True)):
        charge = replay_charge(problem.field.expression, 1, hints)
        fc.refine(k)
        assert fc.lowest[k][-1] <= charge  # the fewest steps at variational order 1: a bound
        assert 0.4 <= fc.fewest[k][-1] / charge <= 1.0
        assert 0.6 <= fc.better[k][-1] / charge <= 1.5


def _point(k, c):
    return lambda cert: cert["instance"]["flows"][k]["points"][0].__setitem__(c, "1/3")


_MUTATIONS = [
    lambda c: c["instance"]["targets"][1].__setitem__(2, "1/2"),  # target moved
    _point(0, 0),  # an atom of measure 0 moved
    lambda c: c["instance"]["flows"][1]["pieces"][0].__setitem__("duration", "1/2"),
    lambda c: c["instance"]["sizes"].__setitem__(0, 1),  # a flow split across measures
    lambda c: c["claim"]["w2_squared"].__setitem__(1, "0"),
]
if THOROUGH:  # the same properties again, each a full replay
    _MUTATIONS += [
        lambda c: c["instance"]["targets"].reverse(),  # targets swapped
        _point(1, 1),  # the atom of measure 1 moved
    ]


@pytest.mark.parametrize("mutate", _MUTATIONS)
def test_mutated_clustered_certificate_rejected(verified, mutate):
    cert = json.loads(verified[1].read_text())
    bad = copy.deepcopy(cert)
    mutate(bad)
    assert not check_certificate(bad).verified


def test_clusters_not_separated_are_undecided_naming_prop_3_1(tmp_path, capsys, monkeypatch):
    # without the barycentre flows of Lemma 3.3 the two clusters coincide: no cap separates them
    monkeypatch.setattr(match_cluster, "_barycentre_candidates", lambda *a: iter(()))
    code, out = _run(tmp_path, MEASURES, TARGETS)
    data = json.loads(capsys.readouterr().out)
    assert code == 1 and data["verdict"] == "UNDECIDED"
    assert "Prop 3.1" in data["reason"] and "measures[1]" in data["reason"]
    assert not out.exists()
