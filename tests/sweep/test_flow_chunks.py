"""Flow chunks from .csv and .json points files (read exactly by certified.io.read_points), as
from .npz: the chunks cover the rows in order, the certificates hold the exact points, bad
files are refused before any work with nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from certified.arith.exact import to_fmpq
from certified.checker import check_file
from certified.io import read_json
from certified.sweep import SpecError, load_spec
from certified.sweep.tasks import run_instance

POINTS = [["1/3", "0.25"], ["-0.5", "1/7"], ["0", "0"], ["2/5", "-1/9"], ["1e-3", "3"]]


def _spec(tmp_path, name, size=2):
    from certified.flow.examples import LAMINAR_DEMO

    (tmp_path / "s.json").write_text(json.dumps(LAMINAR_DEMO))
    chunks = {"kind": "chunks", "points": str(tmp_path / name), "size": size}
    return {"family": "flow", "options": {"schedule": str(tmp_path / "s.json")},
            "generate": [chunks]}  # fmt: skip


def _write(tmp_path, name, points=POINTS):
    path = tmp_path / name
    if name.lower().endswith(".csv"):
        path.write_text("x, y\n# exact rationals\n" + "".join(",".join(p) + "\n" for p in points))
    else:
        path.write_text(json.dumps({"X": points}))
    return path


@pytest.mark.parametrize("name", ["x.csv", "x.json", "X.CSV"])
def test_chunks_of_csv_and_json_files_are_certified_with_the_exact_points(name, tmp_path):
    _write(tmp_path, name)
    spec = load_spec(_spec(tmp_path, name))
    instances = spec.instances()
    assert [(i.params["start"], i.params["stop"]) for i in instances] == [(0, 2), (2, 4), (4, 5)]
    points = []
    for inst in instances:
        row = run_instance(spec.core, inst.key, inst.params, inst.path, str(tmp_path))
        assert row["verdict"] == "VERIFIED", row["reason"]
        cert = tmp_path / Path(row["certificate"]).name
        assert check_file(cert).verified
        points += read_json(cert)["instance"]["points"]
    assert [[to_fmpq(v) for v in p] for p in points] == [[to_fmpq(v) for v in p] for p in POINTS]


def test_the_same_points_as_csv_and_json_give_the_same_claims(tmp_path):
    claims = {}
    for name in ("x.csv", "x.json"):
        _write(tmp_path, name)
        spec = load_spec(_spec(tmp_path, name, size=5))
        [inst] = spec.instances()
        row = run_instance(spec.core, inst.key, inst.params, inst.path, str(tmp_path))
        claims[name] = read_json(tmp_path / Path(row["certificate"]).name)["claim"]
    assert claims["x.csv"] == claims["x.json"]


def test_a_file_changed_after_the_instances_were_made_fails_its_task(tmp_path):
    _write(tmp_path, "x.csv")
    spec = load_spec(_spec(tmp_path, "x.csv"))
    inst = spec.instances()[0]
    _write(tmp_path, "x.csv", [*POINTS, ["1", "1"]])
    with pytest.raises(RuntimeError, match="changed since the sweep's instances were made"):
        run_instance(spec.core, inst.key, inst.params, inst.path, str(tmp_path))


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("x.parquet", "", r"points: '.*x\.parquet'; give a points file: \.npz \(array X\), \.csv"),
        ("x", "", r"points: '.*x'; give a points file"),
        ("x.txt", "1,2\n", r"points: '.*x\.txt'; give a points file"),
        ("x.csv", "1,2\n3\n", r"x\.csv: line 2: X\[1\]: expected 2 coordinates, got 1"),
        ("x.csv", "1,nan\n", r"x\.csv"),
        ("x.csv", "", r"x\.csv: X: no points"),
        ("x.json", '{"Y": [[1, 2]]}', r"x\.json"),
        ("x.json", '{"X": [[1, 2], [3]]}', r"x\.json"),
        ("x.json", "{", r"x\.json"),
        ("missing.csv", None, r"missing\.csv"),
    ],
)
def test_bad_points_files_are_refused_before_any_work(name, content, message, tmp_path):
    from certified.sweep.run import sweep

    if content is not None:
        (tmp_path / name).write_text(content)
    raw = _spec(tmp_path, name)
    with pytest.raises(SpecError, match=message) as refused:
        load_spec(raw).instances()
    assert str(refused.value).startswith("generate[0].points: ")
    with pytest.raises(SpecError):
        sweep(raw, tmp_path / "out", workers=1)
    assert not (tmp_path / "out").exists()
