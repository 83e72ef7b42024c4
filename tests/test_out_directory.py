"""``--out`` in a directory that does not exist (issue 15): exit 2 with one line naming that
directory (it used to name the writer's internal temporary file), no traceback, nothing
created; the writer checks before creating any temporary file."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from certified.certificates import write_atomic
from certified.cli import main
from certified.io import OutputFileError

LAMINAR = {
    "dimension": 2,
    "activation": "relu",
    "pieces": [{"duration": "1/2", "W": [[0], [1]], "A": [[1, 0]], "b": ["1/4"]}],
}


def _inputs(tmp_path):
    (tmp_path / "schedule.json").write_text(json.dumps(LAMINAR))
    (tmp_path / "points.csv").write_text("0.1,0.2\n-0.5,1\n")
    rng = np.random.default_rng(3)
    X, Y = rng.random((4, 3)), rng.random((4, 3))
    (tmp_path / "data.json").write_text(json.dumps({"X": X.tolist(), "Y": Y.tolist()}))


COMMANDS = {
    "flow": ["flow", "--schedule", "schedule.json", "--points", "points.csv"],
    "interpolate": ["interpolate", "--data", "data.json", "--width", "2"],
    "interpolate --float": ["interpolate", "--data", "data.json", "--width", "2", "--float"],
}


@pytest.mark.parametrize("name", sorted(COMMANDS))
@pytest.mark.parametrize("out", ["nodir/x.json", "nodir/deeper/x.json"])
def test_missing_out_directory_exits_2_naming_it(tmp_path, monkeypatch, capsys, name, out):
    _inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    before = sorted(os.listdir(tmp_path))
    assert main([*COMMANDS[name], "--out", out]) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    directory = os.path.dirname(out)
    assert f"the directory {directory!r} does not exist" in lines[0]
    assert ".tmp" not in lines[0]  # not the internal temporary file any more
    assert sorted(os.listdir(tmp_path)) == before  # nothing created


def test_out_under_a_file_names_it(tmp_path, monkeypatch, capsys):
    _inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main([*COMMANDS["flow"], "--out", "points.csv/x.json"]) == 2
    err = capsys.readouterr().err
    assert "'points.csv' is not a directory" in err and ".tmp" not in err
    assert (tmp_path / "points.csv").read_text() == "0.1,0.2\n-0.5,1\n"


def test_write_atomic_checks_the_directory_before_any_temporary_file(tmp_path, monkeypatch):
    opened = []
    real_open = os.open
    monkeypatch.setattr(os, "open", lambda *a, **k: opened.append(a[0]) or real_open(*a, **k))
    with pytest.raises(OutputFileError, match=r"the directory .*nodir.* does not exist"):
        write_atomic(tmp_path / "nodir" / "x.json", b"{}")
    assert opened == [] and os.listdir(tmp_path) == []
    assert write_atomic(tmp_path / "x.json", b"{}").read_bytes() == b"{}"  # an existing one
