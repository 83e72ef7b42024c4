"""Sweeps on a real Dask LocalCluster: rows and certificates, reproducibility on 1 and 2
workers, a worker killed mid-sweep, an interrupted sweep resumed, a tampered certificate
redone, bad input refused before any work with nothing written."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
from pathlib import Path

import pytest

pytest.importorskip("dask.distributed")

import pandas as pd

from certified.arith.exact import to_fmpq
from certified.checker import check_file
from certified.errors import InputError
from certified.io import read_json
from certified.sweep import load_spec
from certified.sweep.run import SchedulerError, sweep
from certified.sweep.table import read_parts

H2 = {
    "family": "lipschitz",
    "statement": "H2",
    "run": {"batch": 2},
    "generate": [{"kind": "random", "seed": 11, "count": 24, "n": [1, 5], "d": 2, "k": 2}],
}
INTERP = {
    "family": "interpolate",
    "run": {"batch": 2},
    "generate": [{"kind": "grid", "repeat": 2, "grid": {"N": [3, 5, 8], "d": [2], "p": [1, 2]}}],
}


@pytest.fixture(scope="module")
def reference(client2, tmp_path_factory):
    """The H2 sweep, uninterrupted, on 2 workers."""
    return sweep(H2, tmp_path_factory.mktemp("ref") / "out", client=client2)


def _comparable(table):
    return table.drop(columns=["seconds"]).reset_index(drop=True)


def _assert_complete_and_verified(table, out, spec):
    keys = [i.key for i in load_spec(spec).instances()]
    assert list(table["key"]) == keys  # every instance exactly once, in order
    for row in table.itertuples():
        assert row.certificate is not None, row
        path = out / row.certificate
        assert hashlib.sha256(path.read_bytes()).hexdigest() == row.certificate_sha256
        verdict = check_file(path)
        assert verdict.verified, (row.key, verdict.reason)


def test_h2_rows_state_exactly_what_their_certificates_claim(reference):
    out = Path(reference.attrs["out"])
    _assert_complete_and_verified(reference, out, H2)
    assert set(reference["verdict"]) <= {"VERIFIED", "REFUTED"}
    for row in reference.itertuples():
        claim = read_json(out / row.certificate)["claim"]
        assert claim["verdict"] == row.verdict and claim["hypothesis"] == "H2"
        if row.verdict == "VERIFIED":
            assert to_fmpq(claim["lhs_upper"]) == to_fmpq(row.lhs_upper)
            assert to_fmpq(claim["rhs_lower"]) == to_fmpq(row.rhs_lower)
            assert to_fmpq(row.lhs_upper) <= to_fmpq(row.rhs_lower)
    on_disk = pd.read_parquet(out / "results.parquet")
    pd.testing.assert_frame_equal(on_disk, reference)


def test_interpolation_rows_and_theorem_a_switch_counts(client2, tmp_path):
    out = tmp_path / "out"
    table = sweep(INTERP, out, client=client2)
    _assert_complete_and_verified(table, out, INTERP)
    assert set(table["verdict"]) == {"VERIFIED"} and table["exact"].all()
    for row in table.itertuples():  # theorem A (d = 2 <= N): L = 2 ceil(N/p) - 1
        assert row.switches == 2 * -(-row.N // row.p) - 1


def test_same_table_on_1_and_on_2_workers(client1, reference, tmp_path):
    one = sweep(H2, tmp_path / "one", client=client1)
    pd.testing.assert_frame_equal(_comparable(one), _comparable(reference))


def test_a_killed_worker_loses_nothing_and_duplicates_nothing(client2, reference, tmp_path):
    pids = client2.run(os.getpid)
    victim = sorted(pids.values())[0]
    killed = []

    def kill_once(done, total):
        if not killed:
            os.kill(victim, signal.SIGKILL)
            killed.append(done)

    out = tmp_path / "out"
    table = sweep(H2, out, client=client2, on_batch=kill_once)
    assert killed and killed[0] < len(table)  # killed while work remained
    assert not table.attrs["failed"]
    _assert_complete_and_verified(table, out, H2)
    pd.testing.assert_frame_equal(_comparable(table), _comparable(reference))
    client2.wait_for_workers(2, timeout=60)
    assert victim not in client2.run(os.getpid).values()


def test_an_interrupted_sweep_resumes_without_redoing_finished_work(client2, reference, tmp_path):
    out = tmp_path / "out"

    def interrupt(done, total):
        if done >= 6:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        sweep(H2, out, client=client2, on_batch=interrupt)
    finished = len(read_parts(out))
    assert 6 <= finished < 24
    table = sweep(H2, out, client=client2)
    assert table.attrs["computed"] == 24 - finished and table.attrs["skipped"] == finished
    _assert_complete_and_verified(table, out, H2)
    pd.testing.assert_frame_equal(_comparable(table), _comparable(reference))
    again = sweep(H2, out, client=client2)
    assert again.attrs["computed"] == 0


def test_a_tampered_certificate_drops_its_row_and_the_instance_is_redone(client2, tmp_path):
    out = tmp_path / "out"
    table = sweep(INTERP, out, client=client2)
    victim = out / table["certificate"].iloc[3]
    good = victim.read_bytes()
    victim.write_bytes(good.replace(b'"version": 1', b'"version": 2'))
    assert len(read_parts(out)) == len(table) - 1
    redone = sweep(INTERP, out, client=client2)
    assert redone.attrs["computed"] == 1 and victim.read_bytes() == good
    assert check_file(victim).verified


def test_budget_rows_are_final_until_redo_and_then_equal_an_unbudgeted_run(
    client2, reference, tmp_path
):
    out = tmp_path / "out"
    tiny = {**H2, "options": {"time_budget": 0.001}}
    table = sweep(tiny, out, client=client2)
    assert list(table["key"]) == list(reference["key"]) and not table.attrs["failed"]
    assert set(table["reason"]) == {"time budget of 0.001 s exceeded"}
    assert set(table["verdict"]) == {"UNDECIDED"} and table["certificate"].isna().all()
    assert not list((out / "certificates").iterdir())
    assert sweep(tiny, out, client=client2).attrs["computed"] == 0
    redone = sweep({**H2, "options": {"time_budget": 600}}, out, client=client2,
                   redo_exceeded=True)  # fmt: skip
    assert redone.attrs["computed"] == len(reference) and redone.attrs["skipped"] == 0
    _assert_complete_and_verified(redone, out, H2)
    pd.testing.assert_frame_equal(_comparable(redone), _comparable(reference))
    assert len(read_parts(out)) == len(reference)  # the undecided rows are gone from the parts


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_scheduler_is_refused_before_anything_is_written(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(SchedulerError, match="cannot reach the Dask scheduler"):
        sweep(H2, out, scheduler=f"tcp://127.0.0.1:{_closed_port()}")
    with pytest.raises(SchedulerError, match="missing port"):
        sweep(H2, out, scheduler="localhost")
    assert not out.exists()


def test_bad_output_directories_are_refused_before_any_work(client2, tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match="is not a directory"):
        sweep(H2, tmp_path / "file", client=client2)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("x")
    with pytest.raises(InputError, match="holds no sweep"):
        sweep(H2, tmp_path / "other", client=client2)
    assert sorted(p.name for p in (tmp_path / "other").iterdir()) == ["notes.txt"]
    sweep(INTERP, tmp_path / "interp", client=client2)
    before = sorted(p.name for p in (tmp_path / "interp").rglob("*"))
    with pytest.raises(InputError, match="another family, statement or options"):
        sweep({**INTERP, "options": {"time": "2"}}, tmp_path / "interp", client=client2)
    assert sorted(p.name for p in (tmp_path / "interp").rglob("*")) == before
    with pytest.raises(InputError, match="give an output directory"):
        sweep(H2, None, client=client2)
    with pytest.raises(InputError, match="--workers: 0"):
        sweep(H2, tmp_path / "w", workers=0)
    assert not (tmp_path / "w").exists()


def test_recheck_on_the_cluster_finds_a_tampered_certificate(client2, tmp_path):
    from certified.sweep.recheck import recheck

    out = tmp_path / "out"
    table = sweep(INTERP, out, client=client2)
    checked = recheck(out, client=client2, batch=3)
    assert len(checked) == len(table) and checked["verified"].all()
    assert set(checked["kind"]) == {"interpolation"}
    victim = out / table["certificate"].iloc[0]
    cert = read_json(victim)
    cert["claim"]["switches"] = cert["claim"].get("switches", 0) + 1
    victim.write_text(json.dumps(cert))
    checked = recheck(out, client=client2)
    rejected = checked[~checked["verified"]]
    assert list(rejected["file"]) == [str(victim)] and rejected["reason"].iloc[0]
