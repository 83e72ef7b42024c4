"""``certified transformer match`` (Theorem 1.1, proofs/transformers.md §5): a small instance
VERIFIED with a certificate the checker accepts; moving a target or an atom so that the claim
is false is REJECTED; the float64 RK4 of the schedule lands in the certified boxes; bad input
exits 2 and writes nothing. Measures of several atoms (cluster first; shared atoms with
different targets are separated by the clustering): tests/transformers/test_match_cluster.py."""

from __future__ import annotations

import copy
import json

import flint
import numpy as np
import pytest

from certified.arith.exact import to_fmpq
from certified.checker import check_certificate, check_file
from certified.cli import main
from certified.fields.attention import attention_field
from certified.transformers.instance import parse_instance
from certified.transformers.match import parse_targets, w2_squared_upper

# each atom the nearest point to its target, far from the other's path: one round of two pulls
MEASURES = {"measures": [{"tokens": [[1, 0, 0]]}, {"tokens": [[0, 0, 1]]}]}
TARGETS = {"targets": [["4/5", "3/5", 0], [0, "-3/5", "4/5"]]}


def _float(v) -> float:
    q = to_fmpq(v)
    return int(q.p) / int(q.q)


def _write(tmp_path, obj, name):
    path = tmp_path / name
    path.write_text(json.dumps(obj))
    return path


@pytest.fixture(scope="module")
def verified(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("match")
    inst, tg, out = _write(tmp, MEASURES, "i.json"), _write(tmp, TARGETS, "t.json"), tmp / "c.json"
    argv = ["transformer", "match", "--instance", str(inst), "--targets", str(tg)]
    code = main([*argv, "--eps", "1/1000", "--out", str(out), "--json"])
    return code, out, tmp


def test_match_verified_and_checked(verified, capsys):
    code, out, _ = verified
    assert code == 0 and check_file(out).verified
    cert = json.loads(out.read_text())
    assert cert["kind"] == "transformer-match" and cert["claim"]["switches"] >= 1
    for b in cert["claim"]["w2_squared"]:
        assert to_fmpq(b) <= flint.fmpq(1, 10**6)


def test_rk4_of_the_schedule_lies_in_the_boxes(verified):
    cert = json.loads(verified[1].read_text())
    final = [row for f in cert["claim"]["flows"] for row in f["enclosures"][-1]]
    pieces = cert["instance"]["flows"][0]["pieces"]
    assert len(pieces) == cert["claim"]["switches"] + 1
    # the one-token field replayed in float64 from each atom (heuristic cross-check)
    points = [x for f in cert["instance"]["flows"] for x in f["points"]]
    for i, x0 in enumerate(points):
        d = len(x0)
        hidden = len(pieces[0]["parameters"]) // (2 * d + 1)  # W, U, b (V = 0: no heads)
        field = attention_field([1], d, heads=0, hidden=hidden, activation="sigmoid")
        x = np.array([[_float(v) for v in x0]])
        for p in pieces:
            vals = [to_fmpq(v) for v in p["parameters"]]
            h = _float(p["duration"]) / 400
            for _ in range(400):
                k1 = field.evaluate(x, vals)
                k2 = field.evaluate(x + h / 2 * k1, vals)
                k3 = field.evaluate(x + h / 2 * k2, vals)
                k4 = field.evaluate(x + h * k3, vals)
                x = x + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        for c, (lo, hi) in enumerate(final[i]):
            assert abs(x[0, c] - _float(lo)) < 1e-6 and abs(_float(hi) - x[0, c]) < 1e-6
        y = TARGETS["targets"][i]
        assert np.linalg.norm(x[0] - np.array([_float(v) for v in y])) < 1e-3


@pytest.mark.parametrize(
    "mutate",
    [
        lambda c: c["instance"]["targets"][0].__setitem__(0, "1/50"),  # target moved
        lambda c: c["instance"]["flows"][-1]["points"][-1].__setitem__(1, "4/5"),  # atom moved
        lambda c: c["instance"]["flows"][0]["pieces"][0].__setitem__("duration", "1/2"),
        lambda c: c["claim"]["w2_squared"].__setitem__(0, "0"),  # bound below the replay
        lambda c: c["claim"].__setitem__("eps", "1/10000000000"),  # eps below the bound
        lambda c: c["instance"]["weights"][0].__setitem__(0, "1/2"),  # not a probability
        lambda c: c["claim"].__setitem__("switches", 0),
    ],
)
def test_mutated_certificate_rejected(verified, mutate):
    cert = json.loads(verified[1].read_text())
    bad = copy.deepcopy(cert)
    mutate(bad)
    assert not check_certificate(bad).verified


def test_w2_bound_of_points_is_exact():
    lo = hi = [[flint.fmpq(3, 5), flint.fmpq(4, 5), 0], [0, 0, 1]]
    y = [0, 1, 0]
    w = [flint.fmpq(1, 4), flint.fmpq(3, 4)]
    exact = w[0] * (flint.fmpq(9, 25) + flint.fmpq(1, 25)) + w[1] * 2
    assert w2_squared_upper(lo, hi, w, y) == exact


@pytest.mark.parametrize(
    ("measures", "targets", "eps", "message"),
    [
        ({"measures": [{"tokens": [[1, 0]]}, {"tokens": [[0, 1]]}]}, {"targets": [[1, 0], [0, 1]]},
         "1/1000", "d >= 3"),
        ({"measures": [{"tokens": [[1, 1, 0]]}, {"tokens": [[0, 1, 0]]}]}, TARGETS, "1/1000",
         "off the unit sphere"),
        (MEASURES, {"targets": [[0, 2, 0], [0, 0, -1]]}, "1/1000", "targets[0]"),
        (MEASURES, {"targets": [[0, 1, 0]]}, "1/1000", "one per measure"),
        (MEASURES, {"targets": [[0, 1, 0], [0, 0, -1]], "omega": [1, 0, 0]}, "1/1000",
         "outside every support"),
        (MEASURES, {"targets": [[0, 1, 0], [0, 0, -1]], "omega": [0, 1, 0]}, "1/1000",
         "avoid the targets"),
        ({"measures": [{"tokens": [[1, 0, 0]]}, {"tokens": [[1, 0, 0]]}]}, TARGETS, "1/1000",
         "distinct measures"),
        (MEASURES, TARGETS, "0", "--eps"),
        (MEASURES, TARGETS, "nan", "--eps"),
    ],
)  # fmt: skip
def test_bad_input_exits_2_and_writes_nothing(tmp_path, capsys, measures, targets, eps, message):
    inst, tg = _write(tmp_path, measures, "i.json"), _write(tmp_path, targets, "t.json")
    out = tmp_path / "c.json"
    argv = ["transformer", "match", "--instance", str(inst), "--targets", str(tg)]
    assert main([*argv, "--eps", eps, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_non_finite_target_is_refused():
    inst = parse_instance({**MEASURES, "pieces": [{"duration": 1}]})
    with pytest.raises(Exception, match="targets"):
        parse_targets({"targets": [[float("nan"), 1, 0], [0, 0, -1]]}, inst)
