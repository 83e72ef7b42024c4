"""The one writer: it re-checks the exact bytes it writes (size limit included), writes them
atomically, and on any failure leaves neither a partial file nor a temporary one."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import certified.certificates.writer as writer
from certified.certificates import (
    CertificateRejectedError,
    certificate_bytes,
    dumps_certificate,
    write_atomic,
    write_certificate,
    write_if_accepted,
)
from certified.checker import MAX_BYTES, check_file
from certified.cli import main
from certified.commands.records import DemoCheck
from certified.demo import write_summary
from certified.errors import CertifiedError

GOLDEN = Path(__file__).parent / "checker" / "golden_lipschitz_h1_refutation.json"


@pytest.fixture
def cert() -> dict:
    return json.loads(GOLDEN.read_text())


def _names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def test_writes_exactly_the_bytes_it_checked(tmp_path, cert, monkeypatch):
    seen = []
    real = writer.check_bytes

    def spy(data: bytes):
        seen.append(data)
        return real(data)

    monkeypatch.setattr(writer, "check_bytes", spy)
    path = write_certificate(tmp_path / "c.json", cert)
    assert seen == [path.read_bytes()] == [dumps_certificate(cert).encode()]
    assert check_file(path).verified and _names(tmp_path) == ["c.json"]


@pytest.mark.parametrize("failing", ["fsync", "replace", "write"])
def test_a_failure_mid_write_leaves_nothing(tmp_path, cert, monkeypatch, failing):
    path = tmp_path / "c.json"
    path.write_bytes(b"old")
    fresh = tmp_path / "new.json"

    def boom(*args, **kwargs):
        raise OSError(28, "No space left on device")

    if failing == "write":  # the disk fills after part of the data is written
        real_fdopen = os.fdopen

        class HalfFile:
            def __init__(self, f):
                self.f = f

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                self.f.close()

            def write(self, data):
                self.f.write(data[: len(data) // 2])
                self.f.flush()
                boom()

        monkeypatch.setattr(os, "fdopen", lambda fd, mode: HalfFile(real_fdopen(fd, mode)))
    else:
        monkeypatch.setattr(os, failing, boom)
    for target in (path, fresh):
        with pytest.raises(OSError, match="No space"):
            write_certificate(target, cert)
    monkeypatch.undo()
    assert path.read_bytes() == b"old"  # untouched
    assert _names(tmp_path) == ["c.json"]  # no new file, no temporary file


def test_an_interrupt_leaves_nothing(tmp_path, cert, monkeypatch):
    def interrupt(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupt)
    with pytest.raises(KeyboardInterrupt):
        write_certificate(tmp_path / "c.json", cert)
    monkeypatch.undo()
    assert _names(tmp_path) == []


def test_an_oversize_certificate_is_refused_with_a_clear_error(tmp_path, cert, monkeypatch):
    size = len(dumps_certificate(cert).encode())
    monkeypatch.setattr(writer, "MAX_BYTES", size - 1)
    data, verdict = certificate_bytes(cert)
    assert not verdict.verified and len(data) == size
    assert f"{size} bytes, over the checker's limit of {size - 1} bytes" in verdict.reason
    path, verdict = write_if_accepted(tmp_path / "c.json", cert)
    assert path is None and "MAX_BYTES" in verdict.reason
    with pytest.raises(CertificateRejectedError, match="over the checker's limit") as info:
        write_certificate(tmp_path / "c.json", cert)
    assert isinstance(info.value, CertifiedError) and not info.value.verdict.verified
    assert _names(tmp_path) == []
    monkeypatch.setattr(writer, "MAX_BYTES", size)  # exactly at the limit: accepted
    assert write_certificate(tmp_path / "c.json", cert).stat().st_size == size
    assert writer.MAX_BYTES <= MAX_BYTES  # the module's default is the checker's own limit


def test_a_rejected_certificate_is_not_written(tmp_path, cert):
    cert["claim"]["lhs_lower"] = "1000000"  # a false claim: the checker rejects it
    with pytest.raises(CertificateRejectedError, match="certificate not written"):
        write_certificate(tmp_path / "c.json", cert)
    path, verdict = write_if_accepted(tmp_path / "c.json", cert)
    assert path is None and not verdict.verified
    assert _names(tmp_path) == []


def test_write_atomic_replaces_a_file(tmp_path):
    path = tmp_path / "s.json"
    path.write_bytes(b"old")
    assert write_atomic(path, b"new") == path and path.read_bytes() == b"new"
    assert _names(tmp_path) == ["s.json"]


def test_a_command_refuses_an_oversize_certificate(tmp_path, monkeypatch, capsys):
    mu, nu, out = tmp_path / "mu.json", tmp_path / "nu.json", tmp_path / "w.json"
    mu.write_text(json.dumps({"points": [[0, 0], [1, 1]]}))
    nu.write_text(json.dumps({"points": [[0, 1], [2, 1]]}))
    monkeypatch.setattr(writer, "MAX_BYTES", 100)
    code = main(["wasserstein", "--mu", str(mu), "--nu", str(nu), "--out", str(out), "--json"])
    assert code == 1
    result = json.loads(capsys.readouterr().out)
    assert result["verdict"] == "UNDECIDED" and result["certificate"] is None
    assert "over the checker's limit of 100 bytes" in result["message"]
    assert _names(tmp_path) == ["mu.json", "nu.json"]


def test_demo_summary_written_all_or_nothing(tmp_path, cert, monkeypatch):
    checks = [
        DemoCheck("a", True, 0.0, "", {"a.json": cert}),
        DemoCheck("b", True, 0.0, "", {"b.json": cert}),
    ]
    out = tmp_path / "demo"
    calls = []
    real = writer.write_atomic

    def fail_third(path, data):
        calls.append(path)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        return real(path, data)

    monkeypatch.setattr("certified.certificates.write_atomic", fail_third)
    with pytest.raises(OSError):
        write_summary(checks, out)
    assert not out.exists()  # the two certificates written first were removed again
    monkeypatch.undo()
    forged = json.loads(json.dumps(cert))
    forged["claim"]["lhs_lower"] = "1000000"
    with pytest.raises(CertificateRejectedError):
        write_summary([*checks, DemoCheck("c", True, 0.0, "", {"c.json": forged})], out)
    assert not out.exists()  # checked before anything is written
    assert write_summary(checks, out) == out / "demo_summary.json"
    assert _names(out) == ["a.json", "b.json", "demo_summary.json"]
