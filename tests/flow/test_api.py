"""enclose_flow dispatches on the activation; certificates exist where a checker rule does."""

from __future__ import annotations

import json

import numpy as np
import pytest

import certified
from certified.cli import main
from certified.flow.result import FlowStatus
from certified.models import Schedule

RELU_GENERAL = {
    "dimension": 2,
    "activation": "relu",
    "pieces": [
        {"duration": "1/4", "W": [[1, -1], ["1/2", 1]], "A": [[1, 0], [1, 1]], "b": [0, "1/3"]}
    ],
}


@pytest.mark.parametrize("activation", ["relu", "leaky_relu", "tanh", "sigmoid"])
def test_every_activation_is_enclosed(activation):
    schedule = Schedule.from_json({**RELU_GENERAL, "activation": activation})
    pts = np.array([[0.25, -0.5], [1.0, 0.75]])
    res = certified.enclose_flow(schedule, pts)
    assert res.status is FlowStatus.SUCCESS
    assert res.final.shape == (2, 2)
    assert res.max_width() < 1e-10


def test_non_laminar_relu_certificate_is_verified():
    schedule = Schedule.from_json(RELU_GENERAL)
    pts = np.array([[0.25, -0.5]])
    cert = certified.flow_certificate_for(schedule, pts, certified.enclose_flow(schedule, pts))
    assert cert is not None and cert["hints"]["method"] == "relu-regions"
    assert certified.check_certificate(cert).verified


def test_non_laminar_leaky_relu_certificate_through_the_cli(tmp_path, capsys):
    spec = {**RELU_GENERAL, "activation": "leaky_relu", "slope": "1/8"}
    schedule = Schedule.from_json(spec)
    pts = np.array([[0.25, -0.5]])
    res = certified.enclose_flow(schedule, pts)
    cert = certified.flow_certificate_for(schedule, pts, res)
    assert cert["hints"]["method"] == "relu-regions"
    assert cert["instance"]["schedule"]["slope"] == "1/8"
    assert certified.check_certificate(cert).verified
    s = tmp_path / "s.json"
    s.write_text(json.dumps(spec))
    p = tmp_path / "p.csv"
    p.write_text("0.25,-0.5\n")
    out = tmp_path / "cert.json"
    assert (
        main(["flow", "--schedule", str(s), "--points", str(p), "--out", str(out), "--json"]) == 0
    )
    payload = json.loads(capsys.readouterr().out)
    assert payload["verdict"] == "VERIFIED" and payload["certificate"] == str(out)
    assert certified.check_file(out).verified


def test_laminar_relu_certificate_through_the_cli(tmp_path):
    laminar = {
        "dimension": 2,
        "activation": "relu",
        "pieces": [
            {"duration": "1/2", "W": [[0, 0], [1, -2]], "A": [[1, 0], [1, 0]], "b": ["1/2", "-1/4"]}
        ],
    }
    s = tmp_path / "s.json"
    s.write_text(json.dumps(laminar))
    p = tmp_path / "p.json"
    p.write_text(json.dumps({"X": [["1/3", "1/5"]]}))
    out = tmp_path / "cert.json"
    assert main(["flow", "--schedule", str(s), "--points", str(p), "--out", str(out)]) == 0
    cert = json.loads(out.read_text())
    assert cert["claim"] == {"images": [["1/3", "8/15"]]}  # by hand: 1/5 + (1/2)(5/6 - 1/6)
    assert certified.check_file(out).verified
