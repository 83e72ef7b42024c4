"""Output lines and exit codes of ``python -m certified.checker`` and ``certified check``
(proofs/format.md section 5)."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys

import pytest
from checker_golden import golden_certificates

from certified.certificates import dumps_certificate, write_atomic, write_certificate
from certified.checker._cli import main as checker_main
from certified.cli import main as certified_main

COMMANDS = {
    "checker": [sys.executable, "-m", "certified.checker"],
    "certified": [sys.executable, "-m", "certified.cli", "check"],
}


@pytest.fixture
def files(tmp_path):
    good = write_certificate(tmp_path / "good.json", golden_certificates(5, 1)[0])
    cert = json.loads(good.read_text())
    cert["claim"]["images"][0][0] = "12345/7"
    # a forged file: the writer would refuse it (it re-checks), so the bytes go straight out
    bad = write_atomic(tmp_path / "bad.json", dumps_certificate(cert).encode())
    return {"good": str(good), "bad": str(bad), "missing": str(tmp_path / "missing.json")}


def run(command, *args):
    return subprocess.run([*COMMANDS[command], *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_exit_codes_and_lines(command, files):
    good, bad, missing = files["good"], files["bad"], files["missing"]
    r = run(command, good, good)
    assert (r.returncode, r.stdout, r.stderr) == (0, f"VERIFIED flow {good}\n" * 2, "")
    r = run(command, good, bad)
    assert r.returncode == 1
    lines = r.stdout.splitlines()
    assert lines[0] == f"VERIFIED flow {good}"
    assert (
        lines[1]
        == f"REJECTED {bad}: claim.images[0][0]: differs from the exact image "
        + (lines[1].split("exact image ")[1])
    )
    r = run(command, good, missing, bad)
    assert r.returncode == 2
    assert r.stdout.splitlines()[1] == f"REJECTED {missing}: I/O error: No such file or directory"
    assert len(r.stdout.splitlines()) == 3 and r.stderr == ""
    r = run(command)
    assert r.returncode == 2 and r.stdout == "" and "usage" in r.stderr
    r = run(command, "--frobnicate", good)
    assert r.returncode == 2


def test_console_script(files):
    exe = shutil.which("certified")
    if exe is None:
        pytest.skip("the certified console script is not on PATH")
    r = subprocess.run([exe, "check", files["good"]], capture_output=True, text=True, timeout=120)
    assert (r.returncode, r.stdout) == (0, f"VERIFIED flow {files['good']}\n")


def test_in_process_entry_points_agree(files, capsys):
    paths = [files["good"], files["bad"]]
    out = io.StringIO()
    assert checker_main(paths, out) == 1
    assert certified_main(["check", *paths]) == 1
    assert capsys.readouterr().out == out.getvalue()
    assert checker_main(["--help"], io.StringIO()) == 0
    assert checker_main([], io.StringIO()) == 2


def test_a_directory_is_an_io_error(tmp_path):
    out = io.StringIO()
    assert checker_main([str(tmp_path)], out) == 2
    assert out.getvalue() == f"REJECTED {tmp_path}: I/O error: Is a directory\n"


def test_odd_file_names_stay_on_one_ascii_line(tmp_path, files):
    for name in ["new\nline.json", "caf\u00e9.json", "tab\t.json"]:
        path = tmp_path / name
        shutil.copy(files["good"], path)
        out = io.StringIO()
        assert checker_main([str(path)], out) == 0
        line = out.getvalue()
        assert line.count("\n") == 1 and line.isascii()
        assert line.startswith("VERIFIED flow ")
    out = io.StringIO()
    checker_main([str(tmp_path / "new\nline.json")], out)
    assert "new\\x0aline.json" in out.getvalue()
