"""One instance at a time, without a cluster: every family adapter's rows and certificates,
refused instances, a certificate the checker rejects never written, the progress bar."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
from pathlib import Path

import numpy as np
import pytest

from certified.arith.exact import to_fmpq
from certified.checker import check_file
from certified.io import read_json
from certified.sweep import families as fam_module
from certified.sweep import load_spec
from certified.sweep.families import Result, attention_instance_json
from certified.sweep.report import ProgressBar, summary_lines
from certified.sweep.tasks import run_instance
from certified.verdict import Outcome

SPECS = [
    {"family": "wasserstein", "generate": [
        {"kind": "random", "seed": 1, "count": 2, "n": [3, 6], "m": [3, 6], "d": 2}]},
    {"family": "separate", "generate": [
        {"kind": "random", "seed": 1, "count": 2, "n": [2, 4], "d": [1, 2]}]},
    {"family": "lipschitz", "statement": "H1", "generate": [
        {"kind": "random", "seed": 1, "count": 3, "n": [2, 4], "d": 2, "k": 2}]},
    {"family": "lipschitz", "statement": "H3", "generate": [
        {"kind": "random", "seed": 1, "count": 2, "n": [2, 3], "d": 2, "k": 2}]},
]  # fmt: skip
KINDS = {"wasserstein": "wasserstein", "separate": "separation", "lipschitz": "lipschitz"}


def _rows(raw, tmp_path):
    spec = load_spec(raw)
    return spec, [
        run_instance(spec.core, i.key, i.params, i.path, str(tmp_path)) for i in spec.instances()
    ]


@pytest.mark.parametrize("raw", SPECS, ids=lambda r: f"{r['family']}-{r.get('statement')}")
def test_every_family_writes_certificates_the_checker_verifies(raw, tmp_path):
    spec, rows = _rows(raw, tmp_path)
    for row in rows:
        assert row["verdict"] in ("VERIFIED", "REFUTED"), row["reason"]
        path = tmp_path / Path(row["certificate"]).name
        assert hashlib.sha256(path.read_bytes()).hexdigest() == row["certificate_sha256"]
        verdict = check_file(path)
        assert verdict.verified and verdict.kind == KINDS[spec.family], verdict.reason
        cert = read_json(path)
        if spec.family == "wasserstein":
            assert to_fmpq(row["lower"]) <= to_fmpq(row["upper"])
        if spec.family == "lipschitz":
            assert cert["claim"]["verdict"] == row["verdict"]
            assert cert["claim"]["hypothesis"] == spec.statement


def test_generated_attention_instances_lie_in_the_ball_of_radius_r():
    from certified.attention import parse_attention_instance
    from certified.sweep.draw import hypothesis_version

    for n, d in [(1, 1), (5, 2), (9, 7)]:
        params = {"n": n, "d": d, "k": 2, "seed": n * d, "hypothesis": hypothesis_version()}
        obj = attention_instance_json(params, "H2")
        assert len(obj["X"]) == n and len(obj["Q"]) == 2 and len(obj["V"]) == d
        for row in obj["X"]:
            assert sum(to_fmpq(x) ** 2 for x in row) <= to_fmpq(obj["R"]) ** 2
        parse_attention_instance(obj, require="X")
        h3 = attention_instance_json(params, "H3")
        assert len(h3["mu"]["points"]) == len(h3["nu"]["points"]) == n
        parse_attention_instance(h3, require="measures")


def test_file_instances_run_from_their_files(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    from certified.sweep.draw import hypothesis_version

    params = {"n": 3, "d": 2, "k": 2, "seed": 4, "hypothesis": hypothesis_version()}
    inst = attention_instance_json(params, "H2")
    (data / "a.json").write_text(json.dumps(inst))
    (tmp_path / "s.json").write_text(json.dumps({"family": "lipschitz", "statement": "H2",
        "generate": [{"kind": "files", "paths": ["data/*.json"]}]}))  # fmt: skip
    spec = load_spec(tmp_path / "s.json")
    [i] = spec.instances()
    row = run_instance(spec.core, i.key, i.params, i.path, str(tmp_path))
    assert row["file"] == "data/a.json" and row["verdict"] in ("VERIFIED", "REFUTED")
    assert check_file(tmp_path / Path(row["certificate"]).name).verified


def test_an_instance_the_family_refuses_gives_an_undecided_row(tmp_path):
    # N = 1 and p = 1 with identical random draws is fine; a dataset file with a duplicate
    # point is what the construction refuses (DuplicatePointError)
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "dup.json").write_text(json.dumps({"X": [[0, 0], [0, 0]],
                                                         "Y": [[1, 1], [2, 2]]}))  # fmt: skip
    pattern = str(tmp_path / "d" / "*.json")
    spec = load_spec({"family": "interpolate", "generate": [{"kind": "files", "paths": [pattern]}]})
    [i] = spec.instances()
    row = run_instance(spec.core, i.key, i.params, i.path, str(tmp_path))
    assert row["verdict"] == "UNDECIDED" and row["reason"].startswith("input: ")
    assert "duplicate" in row["reason"].lower() or "equal" in row["reason"].lower()
    assert row["certificate"] is None and not list(tmp_path.glob("*.json"))


def test_a_certificate_the_checker_rejects_is_never_written(tmp_path, monkeypatch):
    real = fam_module.LIPSCHITZ

    def tampered(params, path, statement, options):
        result = real.run(params, path, statement, options)
        cert = json.loads(json.dumps(result.certificate))
        claim = cert["claim"]
        claim["verdict"] = "REFUTED" if claim["verdict"] == "VERIFIED" else "VERIFIED"
        return Result(result.verdict, cert, "", result.columns)

    monkeypatch.setattr(fam_module, "LIPSCHITZ", dataclasses.replace(real, run=tampered))
    spec = load_spec({"family": "lipschitz", "generate": [
        {"kind": "random", "seed": 2, "count": 2, "n": 2, "d": 2, "k": 2}]})  # fmt: skip
    for i in spec.instances():
        row = run_instance(spec.core, i.key, i.params, i.path, str(tmp_path))
        assert row["verdict"] == Outcome.UNDECIDED.value
        assert row["reason"].startswith("the checker did not accept the certificate")
        assert row["certificate"] is None and row["certificate_sha256"] is None
    assert list(tmp_path.iterdir()) == []


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_progress_bar_shows_eta_on_a_terminal_only(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    tty, pipe = _Tty(), io.StringIO()
    for stream in (tty, pipe):
        bar = ProgressBar(stream)
        bar(0, 10)
        bar(5, 10)
        bar(10, 10)
    assert "ETA" in tty.getvalue() and "5/10 50.0%" in tty.getvalue()
    assert tty.getvalue().endswith("\n") and pipe.getvalue() == ""
    monkeypatch.setenv("CI", "true")
    quiet = _Tty()
    ProgressBar(quiet)(3, 10)
    assert quiet.getvalue() == ""


def test_summary_counts_verdicts_and_reasons():
    pd = pytest.importorskip("pandas")
    table = pd.DataFrame({
        "index": [0, 1, 2], "instance": ["a", "b", "c"], "seconds": [0.1, 0.3, 0.2],
        "verdict": ["VERIFIED", "UNDECIDED", "UNDECIDED"], "reason": ["", "why", "why"],
    })  # fmt: skip
    table.attrs.update(computed=3, skipped=0, failed=[])
    lines = summary_lines(table, 1.0, slowest=1)
    assert "UNDECIDED 2, VERIFIED 1" in lines[0]
    assert lines[1].startswith("slowest: #1 b 0.300 s")
    assert lines[2] == "UNDECIDED x2: why"


def _flow_spec(tmp_path, X, size, schedule=None):
    from certified.flow.examples import LAMINAR_DEMO

    (tmp_path / "s.json").write_text(json.dumps(schedule or LAMINAR_DEMO))
    np.savez(tmp_path / "x.npz", X=X)
    chunks = {"kind": "chunks", "points": str(tmp_path / "x.npz"), "size": size}
    return {"family": "flow", "options": {"schedule": str(tmp_path / "s.json")},
            "generate": [chunks]}  # fmt: skip


def test_flow_chunks_cover_the_points_in_order_and_are_certified(tmp_path):
    from certified.sweep.flow_family import gather_enclosures

    pd = pytest.importorskip("pandas")
    X = np.random.default_rng(3).uniform(-1, 1, (23, 2))
    spec = load_spec(_flow_spec(tmp_path, X, 10))
    instances = spec.instances()
    assert [(i.params["start"], i.params["stop"]) for i in instances] == [(0, 10), (10, 20),
                                                                           (20, 23)]  # fmt: skip
    rows = [run_instance(spec.core, i.key, i.params, i.path, str(tmp_path)) for i in instances]
    for k, row in enumerate(rows):
        assert row["verdict"] == "VERIFIED", row["reason"]
        verdict = check_file(tmp_path / Path(row["certificate"]).name)
        assert verdict.verified and verdict.kind == "flow"
        row["index"], row["certificate"] = k, Path(row["certificate"]).name
    table = pd.DataFrame(rows)
    claims = gather_enclosures(table, tmp_path)
    assert sum(len(c["images"]) for c in claims) == len(X)
    points = [p for r in rows for p in read_json(tmp_path / r["certificate"])["instance"]["points"]]
    assert [[to_fmpq(v) for v in p] for p in points] == [[to_fmpq(v) for v in x] for x in X]


def test_flow_keys_follow_the_schedule_content(tmp_path):
    from certified.flow.examples import LAMINAR_DEMO

    X = np.zeros((4, 2))
    a = load_spec(_flow_spec(tmp_path, X, 2)).instances()
    other = json.loads(json.dumps(LAMINAR_DEMO))
    other["pieces"][0]["duration"] = "1/4"
    b = load_spec(_flow_spec(tmp_path, X, 2, other)).instances()
    assert not {i.key for i in a} & {i.key for i in b}


@pytest.mark.parametrize(
    ("X", "size", "message"),
    [
        (np.zeros((4, 2)), 0, r"size: 0 is not an integer"),
        (np.array([[0.0, np.nan]]), 1, r"X\[0\] is not finite"),
        (np.zeros((0, 2)), 1, "non-empty"),
    ],
)
def test_bad_flow_chunks_are_refused(tmp_path, X, size, message):
    from certified.sweep import SpecError

    with pytest.raises(SpecError, match=message):
        load_spec(_flow_spec(tmp_path, X, size)).instances()
    with pytest.raises(SpecError, match=r"options\.schedule: give a schedule file"):
        load_spec({"family": "flow", "generate": [{"kind": "chunks"}]})
