"""``certified transformer match`` on measures of several atoms (cluster first, then steer the
clusters; proofs/transformers.md §6b): VERIFIED with a certificate the checker accepts (one
coupled flow per measure), the switch count below d*N; moving a target or an atom so that the
claim is false, or changing one measure's schedule, is REJECTED; clusters too close for the
caps give UNDECIDED naming Prop 3.1; nothing is written unless VERIFIED."""

from __future__ import annotations

import copy
import json

import flint
import pytest

from certified.arith.exact import to_fmpq
from certified.checker import check_certificate, check_file
from certified.cli import main

# two measures of two atoms each in one octant of S^2 (each in an open hemisphere)
MEASURES = {
    "measures": [
        {"tokens": [["3/5", "4/5", 0], ["4/5", "3/5", 0]]},
        {"tokens": [[0, "3/5", "4/5"], [0, "4/5", "3/5"]]},
    ]
}
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


def test_clustered_match_verified_and_checked(verified):
    code, out = verified
    assert code == 0 and check_file(out).verified
    cert = json.loads(out.read_text())
    flows = cert["instance"]["flows"]
    assert len(flows) == 2  # one coupled flow per measure
    assert all(len(f["points"]) == 1 and len(f["points"][0]) == 2 * 3 for f in flows)
    assert 1 <= cert["claim"]["switches"] <= 3 * 2  # O(dN): below d*N here
    for b in cert["claim"]["w2_squared"]:
        assert to_fmpq(b) <= flint.fmpq(1, 10**4)


def _point(k, c):
    return lambda cert: cert["instance"]["flows"][k]["points"][0].__setitem__(c, "1/3")


@pytest.mark.parametrize(
    "mutate",
    [
        lambda c: c["instance"]["targets"][1].__setitem__(2, "1/2"),  # target moved
        lambda c: c["instance"]["targets"].reverse(),  # targets swapped
        _point(0, 0),  # an atom of measure 0 moved
        _point(1, 4),  # an atom of measure 1 moved
        lambda c: c["instance"]["flows"][1]["pieces"][0].__setitem__("duration", "1/2"),
        lambda c: c["instance"]["sizes"].__setitem__(0, 1),  # a flow split across measures
        lambda c: c["claim"]["w2_squared"].__setitem__(1, "0"),
    ],
)
def test_mutated_clustered_certificate_rejected(verified, mutate):
    cert = json.loads(verified[1].read_text())
    bad = copy.deepcopy(cert)
    mutate(bad)
    assert not check_certificate(bad).verified


def test_clusters_too_close_are_undecided_naming_prop_3_1(tmp_path, capsys):
    # the clusters of {e1, e2} and {(e1 + e2)/sqrt 2} coincide by symmetry: no cap separates them
    s = "0.7071067811865476"
    close = {"measures": [{"tokens": [[1, 0, 0], [0, 1, 0]]}, {"tokens": [[s, s, 0]]}]}
    code, out = _run(tmp_path, close, TARGETS)
    data = json.loads(capsys.readouterr().out)
    assert code == 1 and data["verdict"] == "UNDECIDED"
    assert "Prop 3.1" in data["reason"] and "measures[1]" in data["reason"]
    assert not out.exists()
