"""``certified check`` behind its backstop: every file is checked in a forked child under a
wall-clock and an address-space limit; a child over a limit is a REJECTED "resource limit" line
and the other files are still checked; the verdicts are otherwise the checker's own."""

from __future__ import annotations

import json
import time

import pytest

import certified.checker
from certified.cli import main
from certified.commands.check import limited_check

pytestmark = pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs os.fork")


@pytest.fixture
def files(tmp_path):
    from certified.interpolation.command import demo_check  # noqa: F401  (imports the family)

    good = tmp_path / "good.json"
    assert main(["interpolate", "--data", "docs/formats/examples/dataset.json", "--width", "2",
                 "--out", str(good)]) == 0  # fmt: skip
    bad = tmp_path / "bad.json"
    obj = json.loads(good.read_text())
    obj["version"] = 99
    bad.write_text(json.dumps(obj))
    return good, bad


def test_verdicts_are_the_checkers_own(files):
    good, _ = files
    for path in files:
        ours = limited_check(str(path), 60, 4096)
        theirs = certified.checker.check_file(path)
        assert (ours.verified, ours.kind, ours.reason) == (
            theirs.verified,
            theirs.kind,
            theirs.reason,
        )
    assert limited_check(str(good), 60, 4096).verified
    with pytest.raises(OSError):
        limited_check(str(good) + ".missing", 60, 4096)


def test_a_file_over_the_time_limit_is_rejected_and_the_next_checked(files, monkeypatch, capsys):
    good, _ = files
    slow = good.parent / "slow.json"
    slow.write_text("{}")
    real = certified.checker.check_file

    def check_file(path):  # the forked child inherits this
        if str(path).endswith("slow.json"):
            time.sleep(30)
        return real(path)

    monkeypatch.setattr(certified.checker, "check_file", check_file)
    t0 = time.monotonic()
    code = main(["check", "--time-limit", "0.5", str(slow), str(good)])
    assert time.monotonic() - t0 < 20
    out = capsys.readouterr().out.splitlines()
    assert code == 1
    assert out[0].startswith(f"REJECTED {slow}: resource limit: more than 0.5 s")
    assert out[1] == f"VERIFIED interpolation {good}"


def test_a_file_over_the_memory_limit_is_rejected(tmp_path, capsys):
    # 3 million empty arrays: well inside the byte and token limits, ~200 MB once parsed
    hostile = tmp_path / "hostile.json"
    hostile.write_text('{"kind": "flow", "version": 1, "instance": {}, "claim": {}, "hints": ['
                       + ",".join(["[]"] * 3_000_000) + "]}")  # fmt: skip
    code = main(["check", "--memory-limit", "160", str(hostile)])
    out = capsys.readouterr().out
    assert code == 1
    assert out.startswith(f"REJECTED {hostile}: resource limit: ")
    assert "160 MiB" in out


def test_a_dying_child_is_a_rejection(files, monkeypatch):
    good, _ = files

    def check_file(path):
        raise SystemExit(3)

    monkeypatch.setattr(certified.checker, "check_file", check_file)
    verdict = limited_check(str(good), 60, 4096)
    assert not verdict.verified and verdict.reason.startswith("resource limit")


@pytest.mark.parametrize(
    "argv", [["--time-limit", "0"], ["--time-limit", "nan"], ["--memory-limit", "10"]]
)
def test_bad_limits_are_usage_errors(files, argv, capsys):
    good, _ = files
    assert main(["check", *argv, str(good)]) == 2
    assert capsys.readouterr().out == ""


def test_no_limits_checks_in_process(files, capsys):
    good, bad = files
    assert main(["check", "--no-limits", str(good), str(bad)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"VERIFIED interpolation {good}"
    assert out[1].startswith(f"REJECTED {bad}: version")


def test_the_memory_limit_counts_from_what_the_process_already_maps(files):
    # a parent mapping more than the limit (numba, dask, thread arenas in a test process):
    # the child's limit is what the check may add, so a small file still verifies
    import mmap

    good, _ = files
    reserve = mmap.mmap(-1, 6 * 2**30)  # address space only: never touched
    try:
        assert limited_check(str(good), 60, 256).verified
    finally:
        reserve.close()
