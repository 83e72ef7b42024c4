"""Certified descent (issue 21 item 2): every recorded step decreases J with certainty, the
trace is a training certificate the checker re-verifies, mutations are rejected, a step that
cannot be certified stops the descent with its reason, bad learning rates are refused."""

from __future__ import annotations

import copy
import json

import pytest

from certified.arith.exact import to_fmpq
from certified.checker import check_certificate
from certified.cli import main
from certified.errors import InputError
from certified.models import Schedule
from certified.training.certificate import training_certificate
from certified.training.descent import certified_descent
from certified.training.examples import small_problem


def _one_piece():
    schedule, X, Y = small_problem()
    obj = schedule.to_json()
    return Schedule.from_json({**obj, "pieces": obj["pieces"][:1]}), X[:1], Y[:1]


def test_every_step_is_a_certified_decrease_and_the_trace_checks():
    schedule, X, Y = _one_piece()
    trace = certified_descent(schedule, X, Y, lr="1/2", steps=2, eps="1/10")
    assert trace.steps == 2 and trace.stopped == "steps"
    for a, b in zip(trace.results, trace.results[1:], strict=False):
        assert b.loss[1] < a.loss[0]
    cert = training_certificate(trace)
    assert check_certificate(cert).verified
    bad = copy.deepcopy(cert)  # the losses in the wrong order: no certified decrease
    bad["claim"]["losses"][1], bad["claim"]["losses"][2] = (
        cert["claim"]["losses"][2],
        cert["claim"]["losses"][1],
    )
    assert not check_certificate(bad).verified
    bad = copy.deepcopy(cert)  # an iterate of another problem
    bad["instance"]["iterates"][1]["targets"][0][0] = "3"
    assert not check_certificate(bad).verified
    bad = copy.deepcopy(cert)  # a gradient norm bound that is too small
    bad["claim"]["gradient_norms"][0][1] = bad["claim"]["gradient_norms"][0][0]
    assert not check_certificate(bad).verified


def test_a_step_that_cannot_be_certified_stops_the_descent():
    schedule, X, Y = _one_piece()
    trace = certified_descent(schedule, X, Y, lr="1000", steps=3)
    assert trace.steps == 0 and trace.stopped.startswith("step 1: the decrease is not certified")


def test_bad_learning_rates_and_steps_are_refused():
    schedule, X, Y = _one_piece()
    for lr in ("0", "-1/10", "nan"):
        with pytest.raises(InputError):
            certified_descent(schedule, X, Y, lr=lr, steps=1)
    with pytest.raises(InputError, match="steps"):
        certified_descent(schedule, X, Y, lr="1/10", steps=0)
    relu, _, _ = small_problem("relu")
    with pytest.raises(InputError, match="relu"):
        certified_descent(relu, X, Y, lr="1/10", steps=1)


def _files(tmp_path):
    schedule, X, Y = _one_piece()
    (tmp_path / "s.json").write_text(json.dumps(schedule.to_json()))
    (tmp_path / "x.json").write_text(json.dumps({"X": [[str(v) for v in r] for r in X.tolist()]}))
    (tmp_path / "y.json").write_text(json.dumps({"X": [[str(v) for v in r] for r in Y.tolist()]}))
    return ["--schedule", str(tmp_path / "s.json"), "--points", str(tmp_path / "x.json"),
            "--targets", str(tmp_path / "y.json")]  # fmt: skip


def test_cli_train_and_gradient(tmp_path, capsys):
    argv = _files(tmp_path)
    out = tmp_path / "trace.json"
    assert main(["train", *argv, "--lr", "1/2", "--steps", "1", "--out", str(out), "--json"]) == 0
    js = json.loads(capsys.readouterr().out)
    assert js["verdict"] == "VERIFIED" and js["steps"] == 1 and len(js["losses"]) == 2
    assert check_certificate(json.loads(out.read_text())).verified
    g = tmp_path / "g.json"
    assert main(["gradient", *argv, "--eps", "1/10", "--out", str(g), "--json"]) == 0
    js = json.loads(capsys.readouterr().out)
    assert set(js["gradient"][0]) == {"W", "A", "b"} and len(js["loss"]) == 2
    assert len(js["gradient"][0]["W"]) == 2 and len(js["gradient"][0]["W"][0][0]) == 2


@pytest.mark.parametrize(
    "extra",
    [["train", "--lr", "0", "--steps", "1"], ["train", "--lr", "1/2", "--steps", "1",
     "--stationary", "-1"], ["gradient", "--eps", "-1"]],
)  # fmt: skip
def test_cli_bad_input_exits_2_and_writes_nothing(tmp_path, capsys, extra):
    argv = _files(tmp_path)
    out = tmp_path / "c.json"
    assert main([extra[0], *argv, *extra[1:], "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not out.exists()


def test_cli_targets_of_the_wrong_shape(tmp_path, capsys):
    argv = _files(tmp_path)
    (tmp_path / "y.json").write_text(json.dumps({"X": [[1, 2, 3]]}))
    out = tmp_path / "c.json"
    assert main(["gradient", *argv, "--out", str(out)]) == 2
    assert "targets" in capsys.readouterr().err and not out.exists()


def test_cli_stationary_not_met_exits_1_and_writes_nothing(tmp_path, capsys):
    argv = _files(tmp_path)
    out = tmp_path / "trace.json"
    code = main(["train", *argv, "--lr", "1/2", "--steps", "1", "--stationary", "1/1000000",
                 "--out", str(out), "--json"])  # fmt: skip
    assert code == 1 and not out.exists()
    js = json.loads(capsys.readouterr().out)
    assert js["verdict"] == "UNDECIDED" and to_fmpq(js["final_gradient_norm_upper"]) > 0
