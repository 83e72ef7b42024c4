"""Long runs show progress on a terminal and stay quiet otherwise (design.md, command line)."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from certified._progress import Progress
from certified.cli import main


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_stages_print_on_a_terminal_only():
    tty, pipe = _Terminal(), io.StringIO()
    for stream in (tty, pipe):
        with Progress("demo", stream).stage("working"):
            pass
    assert tty.getvalue().startswith("certified demo: working ...") and " s\n" in tty.getvalue()
    assert pipe.getvalue() == ""


def test_a_failing_stage_still_ends_its_line():
    tty = _Terminal()
    with pytest.raises(ZeroDivisionError), Progress("x", tty).stage("dividing"):
        1 / 0  # noqa: B018
    assert tty.getvalue().endswith(" s\n")


def test_interpolate_shows_stages_on_a_terminal_and_keeps_stdout_json(
    tmp_path, monkeypatch, capsys
):
    rng = np.random.default_rng(0)
    data = tmp_path / "pairs.json"
    data.write_text(
        json.dumps({"X": rng.random((6, 2)).tolist(), "Y": rng.random((6, 2)).tolist()})
    )
    tty = _Terminal()
    monkeypatch.setattr("sys.stderr", tty)
    args = ["interpolate", "--data", str(data), "--width", "2", "--out", str(tmp_path / "c.json")]
    assert main([*args, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"] == "VERIFIED"  # stdout: JSON only
    stages = tty.getvalue().splitlines()
    assert [line.split(":")[0] for line in stages] == ["certified interpolate"] * 4
    assert "constructing (N = 6, d = 2, p = 2)" in stages[1]


def test_interpolate_is_quiet_when_stderr_is_not_a_terminal(tmp_path, capsys):
    rng = np.random.default_rng(1)
    data = tmp_path / "pairs.json"
    data.write_text(
        json.dumps({"X": rng.random((6, 2)).tolist(), "Y": rng.random((6, 2)).tolist()})
    )
    assert (
        main(
            ["interpolate", "--data", str(data), "--width", "2", "--out", str(tmp_path / "c.json")]
        )
        == 0
    )
    assert capsys.readouterr().err == ""


def test_the_checker_names_the_file_on_a_terminal_only(tmp_path, monkeypatch, capsys):
    from certified.checker._cli import main as check_main

    bad = tmp_path / "x.json"
    bad.write_text("{}")
    assert check_main([str(bad)]) == 1
    assert capsys.readouterr().err == ""  # not a terminal: quiet
    tty = _Terminal()
    monkeypatch.setattr("sys.stderr", tty)
    assert check_main([str(bad)]) == 1
    assert tty.getvalue() == f"checking {bad} ...\n"
    assert capsys.readouterr().out.startswith(f"REJECTED {bad}")
