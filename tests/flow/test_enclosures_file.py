"""Enclosures without a certificate (``certified flow`` without ``--out``, ``--no-certificate``,
``--enclosures FILE``; ``FlowEnclosure.save``): every number written bounds the engine's
enclosure in its direction, read exactly or as the nearest double; the files are refused before
any work when they would overwrite an input, exist without --force, or have an unknown suffix."""

from __future__ import annotations

import csv
import json
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from certified.cli import main
from certified.errors import InputError
from certified.fields import lorenz
from certified.flow import SaveAt, enclose_flow
from certified.flow.enclosures_file import _DOWN, _UP, _decimal, write_enclosures
from certified.models import Schedule


@given(st.floats(allow_nan=False, allow_infinity=False))
@example(0.1)
@example(-0.1)
@example(5e-324)
@example(1.7976931348623157e308)
@example(2.0**-1074 * 3)
def test_decimals_are_rounded_outward(x):
    lo, hi = _decimal(x, _DOWN), _decimal(x, _UP)
    assert Fraction(Decimal(lo)) <= Fraction(x) <= Fraction(Decimal(hi))
    assert float(lo) <= x <= float(hi)  # the nearest double of each is still a bound


def _lorenz_result():
    X0 = np.array([[15.0, 15.0, 36.0], [1.0, 1.0, 1.0]])
    return enclose_flow(lorenz(), X0, save_at=SaveAt(t1="1/2", ts=["1/4"]))


def _read(path: Path):
    """(times, lo, hi) as exact Fractions from any of the three formats."""
    if path.suffix == ".npz":
        with np.load(path) as z:
            conv = np.vectorize(Fraction, otypes=[object])
            return list(z["times"]), conv(z["lo"]), conv(z["hi"])
    if path.suffix == ".json":
        doc = json.loads(path.read_text())
        conv = np.vectorize(lambda s: Fraction(Decimal(s)), otypes=[object])
        return doc["times"], conv(np.array(doc["lo"])), conv(np.array(doc["hi"]))
    rows = list(csv.reader(path.open()))
    assert rows[0][:2] == ["t", "set"]
    times = list(dict.fromkeys(r[0] for r in rows[1:]))
    n = len(rows[1:]) // len(times)
    d = (len(rows[0]) - 2) // 2
    lo = np.empty((len(times), n, d), dtype=object)
    hi = np.empty_like(lo)
    for r in rows[1:]:
        k, i = times.index(r[0]), int(r[1])
        for q in range(d):
            lo[k, i, q] = Fraction(Decimal(r[2 + 2 * q]))
            hi[k, i, q] = Fraction(Decimal(r[3 + 2 * q]))
    return times, lo, hi


@pytest.mark.parametrize("suffix", [".csv", ".npz", ".json"])
def test_saved_enclosures_contain_the_engines(tmp_path, suffix):
    res = _lorenz_result()
    path = res.save(tmp_path / f"e{suffix}")
    times, lo, hi = _read(path)
    assert [str(t) for t in times] == list(res.times)
    enc = res.enclosures
    for index in np.ndindex(enc.shape):
        assert lo[index] <= Fraction(float(enc.lo[index]))
        assert hi[index] >= Fraction(float(enc.hi[index]))
        assert hi[index] - lo[index] <= 2 * Fraction(float(enc.hi[index] - enc.lo[index])) + 1e-12


def test_write_enclosures_refuses_bad_suffix_and_shapes(tmp_path):
    with pytest.raises(InputError, match=r"\.csv, \.npz or \.json"):
        write_enclosures(tmp_path / "e.txt", ["1"], np.zeros((1, 1, 1)), np.zeros((1, 1, 1)))
    with pytest.raises(InputError, match="shape"):
        write_enclosures(tmp_path / "e.csv", ["1", "2"], np.zeros((1, 1, 1)), np.zeros((1, 1, 1)))
    assert list(tmp_path.iterdir()) == []


def _points(tmp_path: Path) -> Path:
    p = tmp_path / "x.json"
    p.write_text(json.dumps({"X": [[15.0, 15.0, 36.0], [1.0, 2.0, 3.0]]}))
    return p


def test_cli_without_out_prints_enclosures_and_writes_no_certificate(tmp_path, capsys):
    x = _points(tmp_path)
    code = main(["flow", "--field", "lorenz", "--time", "1/2", "--points", str(x), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["verdict"] == "VERIFIED" and out["certificate"] is None
    assert "no certificate" in out["scope"]
    assert len(out["enclosures"]) == 2 and float(out["max_width"]) < 1e-9
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.json"]


def test_cli_enclosures_file_with_and_without_certificate(tmp_path, capsys):
    x = _points(tmp_path)
    base = ["flow", "--field", "lorenz", "--time", "1/4", "--points", str(x)]
    assert main([*base, "--no-certificate", "--enclosures", str(tmp_path / "a.csv")]) == 0
    cert, b = tmp_path / "c.json", tmp_path / "b.npz"
    assert main([*base, "--out", str(cert), "--enclosures", str(b)]) == 0
    capsys.readouterr()
    assert main(["check", str(cert)]) == 0
    _, lo_a, hi_a = _read(tmp_path / "a.csv")
    _, lo_b, hi_b = _read(b)
    assert lo_a.shape == (1, 2, 3) and lo_b.shape == (1, 2, 3)
    for index in np.ndindex(lo_a.shape):  # both enclose the same true value, tightly
        assert max(lo_a[index], lo_b[index]) <= min(hi_a[index], hi_b[index])
        assert hi_a[index] - lo_a[index] < 1e-9 and hi_b[index] - lo_b[index] < 1e-9


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--enclosures", "{x}"], "is the --points input"),
        (["--enclosures", "{dir}/e.txt"], "must end in .csv, .npz or .json"),
        (["--enclosures", "{dir}/missing/e.csv"], "does not exist"),
        (["--enclosures", "{dir}/old.csv"], "exists; pass --force"),
        (["--no-certificate", "--out", "{dir}/c.json"], "a certificate or none"),
        (["--out", "{dir}/e.csv", "--enclosures", "{dir}/e.csv"], "name the same file"),
        (["--out", "{dir}/new.json", "--enclosures", "{dir}/./new.json"], "name the same file"),
    ],
)
def test_cli_bad_outputs_are_refused_before_any_work(tmp_path, capsys, extra, message):
    x = _points(tmp_path)
    (tmp_path / "old.csv").write_text("keep")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    args = [a.format(x=x, dir=tmp_path) for a in extra]
    if "{dir}/e.csv" in extra and "--out" in extra:  # both options name one existing file
        (tmp_path / "e.csv").write_text("keep")
        before["e.csv"] = b"keep"
        args.append("--force")
    if "{dir}/new.json" in extra:
        args.append("--force")
    code = main(["flow", "--field", "lorenz", "--time", "1/4", "--points", str(x), *args])
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err
    after = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    assert after == before


def test_cli_relu_enclosures_only(tmp_path, capsys):
    rng = np.random.default_rng(5)
    sched = {
        "dimension": 3,
        "activation": "relu",
        "pieces": [
            {
                "duration": "1/2",
                "W": rng.standard_normal((3, 4)).round(3).tolist(),
                "A": rng.standard_normal((4, 3)).round(3).tolist(),
                "b": rng.standard_normal(4).round(3).tolist(),
            }
        ],
    }
    s = tmp_path / "s.json"
    s.write_text(json.dumps(sched))
    x = tmp_path / "x.json"
    X = rng.uniform(-1, 1, (20, 3))
    x.write_text(json.dumps({"X": X.tolist()}))
    e = tmp_path / "e.json"
    code = main(["flow", "--schedule", str(s), "--points", str(x), "--enclosures", str(e)])
    assert code == 0, capsys.readouterr().err
    _, lo, hi = _read(e)
    ref = enclose_flow(Schedule.from_json(sched), X).final
    for index in np.ndindex(ref.shape):
        assert lo[(0, *index)] <= Fraction(float(ref.hi[index]))
        assert hi[(0, *index)] >= Fraction(float(ref.lo[index]))
