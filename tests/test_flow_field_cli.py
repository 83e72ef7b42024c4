"""``certified flow --field FILE|NAME``: the --json contract, certificates re-checked by
``certified check``, field files with pieces, --save-at, --boxes, and bad input (exit 2, one
line on stderr, no traceback, nothing written)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import flint
import mpmath
import pytest

from certified.arith.exact import to_fmpq
from certified.cli import main
from certified.fields import field, sin, sphere_neural_field, vanderpol

CONTRACT = {"command", "verdict", "certificate", "seconds", "enclosures", "max_width"}


def write(path: Path, obj) -> str:
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return str(path)


def run_json(capsys, *args: str) -> tuple[int, dict]:
    code = main(["flow", *args, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out)


def forced_pendulum_file(tmp_path: Path, **extra) -> str:
    pend = field(
        2,
        lambda x, p: [x[1], -sin(x[0]) - p.gamma * x[1] + p.torque],
        parameters=["gamma", "torque"],
    )
    obj = {
        "field": pend.to_json(),
        "pieces": [
            {"duration": "1/4", "parameters": ["0.1", "0.5"]},
            {"duration": "1/4", "parameters": ["0.1", "-1/4"]},
        ],
        **extra,
    }
    return write(tmp_path / "pendulum.json", obj)


def _mp(v) -> mpmath.mpf:
    q = to_fmpq(v)
    return mpmath.mpf(int(q.p)) / int(q.q)


def _exact_pairs(enclosures) -> list[list[tuple[flint.fmpq, flint.fmpq]]]:
    rows = []
    for row in enclosures:
        pairs = []
        for lo, hi in row:
            assert isinstance(lo, str) and isinstance(hi, str)
            a, b = to_fmpq(lo), to_fmpq(hi)  # exact strings
            assert a <= b
            pairs.append((a, b))
        rows.append(pairs)
    return rows


# --- the contract -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lorenz_run(tmp_path_factory) -> tuple[int, dict, Path]:
    """``certified flow --field lorenz --points F --time 1 --out C --json``, run once."""
    tmp = tmp_path_factory.mktemp("lorenz")
    points = write(tmp / "points.json", {"X": [[15, 15, 36], [1, -1, 20]]})
    out = tmp / "lorenz.json"
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = main(
            ["flow", "--field", "lorenz", "--points", points, "--time", "1"]
            + ["--out", str(out), "--json"]
        )
    return code, json.loads(buffer.getvalue()), out


def test_lorenz_points_json_contract_and_check(lorenz_run, capsys):
    code, payload, out = lorenz_run
    assert code == 0
    assert set(payload) >= CONTRACT
    assert payload["command"] == "flow" and payload["verdict"] == "VERIFIED"
    assert payload["certificate"] == str(out) and out.exists()
    assert isinstance(payload["seconds"], float) and payload["seconds"] >= 0
    enc = _exact_pairs(payload["enclosures"])
    assert len(enc) == 2 and all(len(row) == 3 for row in enc)
    cert = json.loads(out.read_text())
    assert cert["claim"]["times"][-1] == "1"
    assert cert["hints"]["method"] == "taylor-lohner"
    # the printed enclosures are the certificate's claims at the final time
    assert enc == _exact_pairs(cert["claim"]["enclosures"][-1])
    width = max(b - a for row in enc for a, b in row)
    assert 0 < width < flint.fmpq(1, 10**8)
    assert float(payload["max_width"]) >= float(width)
    assert main(["check", str(out)]) == 0
    assert capsys.readouterr().out == f"VERIFIED flow {out}\n"


def test_max_width_read_exactly_is_an_upper_bound(lorenz_run):
    # design.md: bounds in --json output are exact strings; read as the exact decimal it spells
    # (as input strings are read), "max_width" must bound every printed width from above
    _, payload, _ = lorenz_run
    width = max(b - a for row in _exact_pairs(payload["enclosures"]) for a, b in row)
    assert to_fmpq(payload["max_width"]) >= width, (payload["max_width"], width)


def test_field_file_with_pieces(tmp_path, capsys):
    f = forced_pendulum_file(tmp_path)
    points = write(tmp_path / "p.csv", "0.5,0\n-1,0.25\n")
    out = tmp_path / "cert.json"
    code, payload = run_json(capsys, "--field", f, "--points", points, "--out", str(out))
    assert code == 0 and payload["verdict"] == "VERIFIED"
    cert = json.loads(out.read_text())
    assert cert["instance"]["time"] == "1/2" and len(cert["instance"]["pieces"]) == 2
    assert cert["instance"]["pieces"][0]["parameters"] == ["1/10", "1/2"]
    # --time equal to the total duration is accepted too
    out2 = tmp_path / "cert2.json"
    code, _ = run_json(
        capsys, "--field", f, "--points", points, "--time", "1/2", "--out", str(out2)
    )
    assert code == 0
    assert main(["check", str(out), str(out2)]) == 0
    assert capsys.readouterr().out.count("VERIFIED flow") == 2


def test_save_at(tmp_path, capsys):
    points = write(tmp_path / "p.json", {"X": [[1, "1/2"]]})
    out = tmp_path / "vdp.json"
    code, payload = run_json(
        capsys,
        "--field",
        "vanderpol",
        "--points",
        points,
        "--time",
        "1/2",
        "--save-at",
        "1/8, 1/4",
        "--out",
        str(out),
    )
    assert code == 0 and payload["verdict"] == "VERIFIED"
    cert = json.loads(out.read_text())
    assert cert["claim"]["times"] == ["1/8", "1/4", "1/2"]
    assert len(cert["claim"]["enclosures"]) == 3
    # the final enclosures are printed, and they contain a 40-digit reference
    enc = _exact_pairs(payload["enclosures"])
    assert enc == _exact_pairs(cert["claim"]["enclosures"][-1])
    with mpmath.workdps(40):
        sol = mpmath.odefun(
            lambda t, u: [u[1], (1 - u[0] ** 2) * u[1] - u[0]],
            0,
            [mpmath.mpf(1), mpmath.mpf(1) / 2],
            degree=30,
        )
        for k, t in enumerate(["1/8", "1/4", "1/2"]):
            q = to_fmpq(t)
            ref = sol(_mp(q))
            for (lo, hi), r in zip(cert["claim"]["enclosures"][k][0], ref, strict=True):
                assert _mp(lo) <= r <= _mp(hi)
    assert main(["check", str(out)]) == 0


def test_boxes(tmp_path, capsys):
    boxes = write(tmp_path / "b.json", {"lo": [["0.999", "0.499"]], "hi": [["1.001", "0.501"]]})
    out = tmp_path / "box.json"
    code, payload = run_json(
        capsys, "--field", "vanderpol", "--boxes", boxes, "--time", "1/2", "--out", str(out)
    )
    assert code == 0 and payload["verdict"] == "VERIFIED"
    cert = json.loads(out.read_text())
    assert "boxes" in cert["instance"] and "points" not in cert["instance"]
    (box,) = cert["instance"]["boxes"]
    # the certified box contains the given one (outward to doubles)
    assert to_fmpq(box[0][0]) <= flint.fmpq(999, 1000) and to_fmpq(box[0][1]) >= 1 + flint.fmpq(
        1, 1000
    )
    (row,) = _exact_pairs(payload["enclosures"])
    assert all(flint.fmpq(1, 10**4) < b - a < flint.fmpq(1, 10) for a, b in row)
    assert main(["check", str(out)]) == 0
    assert capsys.readouterr().out.startswith("VERIFIED flow")


def test_sphere_field_file_on_the_sphere(tmp_path, capsys):
    pf = sphere_neural_field([("1/8", [[0, 1], [-1, 0]], [[1, 0], [0, 1]], [0, "1/4"])])
    f = write(tmp_path / "sphere.json", {**pf.to_json(), "sphere": True})
    points = write(tmp_path / "p.json", {"X": [["3/5", "4/5"]]})
    code, payload = run_json(
        capsys, "--field", f, "--points", points, "--out", str(tmp_path / "c.json")
    )
    assert code == 0 and payload["verdict"] == "VERIFIED"


# --- bad input: exit 2, one line on stderr, nothing written -----------------------------------


def expect_exit_2(capsys, tmp_path: Path, args: list[str], *needles: str) -> str:
    out = tmp_path / "never.json"
    code = main(["flow", *args, "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 2, (code, captured.err)
    err = captured.err
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert "Traceback" not in err
    assert err.startswith("certified flow: ")
    for needle in needles:
        assert needle in err, (needle, err)
    assert not out.exists(), "nothing may be written on bad input"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
    return err


def _graph_file(tmp_path: Path, nodes, outputs, name: str = "g.json") -> str:
    g = {"dimension": 2, "parameters": [], "nodes": nodes, "outputs": outputs}
    return write(tmp_path / name, {"field": g, "values": []})


@pytest.fixture
def points2(tmp_path) -> str:
    return write(tmp_path / "points2.json", {"X": [[1, 0]]})


def test_unknown_operator_in_the_file(tmp_path, capsys, points2):
    f = _graph_file(tmp_path, [["x", 0], ["x", 1], ["cube", 0]], [1, 2])
    expect_exit_2(
        capsys,
        tmp_path,
        ["--field", f, "--points", points2, "--time", "1"],
        "field.nodes[2]",
        "unknown operation 'cube'",
    )


def test_wrong_arity_in_the_file(tmp_path, capsys, points2):
    f = _graph_file(tmp_path, [["x", 0], ["x", 1], ["mul", 0]], [1, 2])
    expect_exit_2(
        capsys,
        tmp_path,
        ["--field", f, "--points", points2, "--time", "1"],
        "field.nodes[2]",
        "mul takes 2 arguments",
    )


@pytest.mark.parametrize("constant", ['"nan"', "NaN", '"inf"', "1e400"])
def test_non_finite_constant_in_the_file(tmp_path, capsys, points2, constant):
    text = (
        '{"field": {"dimension": 2, "parameters": [], "nodes": [["x", 0], ["x", 1], '
        f'["c", {constant}], ["mul", 0, 2]], "outputs": [1, 3]}}, "values": []}}'
    )
    f = write(tmp_path / "nan.json", text)
    expect_exit_2(capsys, tmp_path, ["--field", f, "--points", points2, "--time", "1"], "nan.json")


def test_dimension_mismatch_between_field_and_points(tmp_path, capsys):
    points3 = write(tmp_path / "p3.json", {"X": [[1, 0, 0]]})
    expect_exit_2(
        capsys,
        tmp_path,
        ["--field", "vanderpol", "--points", points3, "--time", "1"],
        "3 coordinates",
        "dimension is 2",
    )
    boxes3 = write(tmp_path / "b3.json", {"lo": [[0, 0, 0]], "hi": [[1, 1, 1]]})
    expect_exit_2(
        capsys,
        tmp_path,
        ["--field", "vanderpol", "--boxes", boxes3, "--time", "1"],
        "3 coordinates",
    )


def test_a_point_off_the_sphere_for_a_sphere_field(tmp_path, capsys):
    pf = sphere_neural_field([("1/8", [[0, 1], [-1, 0]], [[1, 0], [0, 1]], [0, "1/4"])])
    f = write(tmp_path / "sphere.json", {**pf.to_json(), "sphere": True})
    off = write(tmp_path / "off.json", {"X": [["3/5", "4/5"], [1, 1]]})
    expect_exit_2(capsys, tmp_path, ["--field", f, "--points", off], "X0[1]", "sphere")


def test_time_missing_for_an_autonomous_field(tmp_path, capsys, points2):
    expect_exit_2(capsys, tmp_path, ["--field", "vanderpol", "--points", points2], "--time")
    f = write(tmp_path / "auto.json", {"field": vanderpol().to_json(), "values": [1]})
    expect_exit_2(capsys, tmp_path, ["--field", f, "--points", points2], "--time")


def test_time_not_positive(tmp_path, capsys, points2):
    # exit 2 and nothing written; the message must name the option the user gave (--time)
    auto = write(tmp_path / "auto.json", {"field": vanderpol().to_json(), "values": [1]})
    for source in ("vanderpol", auto):
        for bad in ("0", "-1", "-1/2", "0.0"):
            expect_exit_2(
                capsys,
                tmp_path,
                ["--field", source, "--points", points2, f"--time={bad}"],
                "--time",
            )


def test_time_not_a_number(tmp_path, capsys, points2):
    for bad in ("nan", "inf", "abc"):
        expect_exit_2(
            capsys, tmp_path, ["--field", "vanderpol", "--points", points2, f"--time={bad}"], "time"
        )


def test_time_disagreeing_with_the_pieces(tmp_path, capsys):
    f = forced_pendulum_file(tmp_path)
    points = write(tmp_path / "p.json", {"X": [[0, 0]]})
    expect_exit_2(
        capsys,
        tmp_path,
        ["--field", f, "--points", points, "--time", "1"],
        "--time",
        "1/2",
    )


def test_unknown_example_name(tmp_path, capsys, points2):
    expect_exit_2(
        capsys,
        tmp_path,
        ["--field", "duffing", "--points", points2, "--time", "1"],
        "'duffing'",
        "lorenz",
    )


def test_missing_field_file(tmp_path, capsys, points2):
    expect_exit_2(
        capsys,
        tmp_path,
        ["--field", str(tmp_path / "missing.json"), "--points", points2, "--time", "1"],
        "missing.json",
    )


def test_unknown_keys_in_the_field_file(tmp_path, capsys, points2):
    f = write(tmp_path / "k.json", {"field": vanderpol().to_json(), "values": [1], "mu": 2})
    expect_exit_2(
        capsys, tmp_path, ["--field", f, "--points", points2, "--time", "1"], "k.json", "'mu'"
    )


def test_schedule_together_with_field(tmp_path, capsys, points2):
    schedule = write(
        tmp_path / "s.json",
        {
            "dimension": 2,
            "activation": "tanh",
            "pieces": [{"duration": 1, "W": [[1], [0]], "A": [[0, 1]], "b": [0]}],
        },
    )
    out = tmp_path / "never.json"
    with pytest.raises(SystemExit) as info:
        main(
            ["flow", "--schedule", schedule, "--field", "vanderpol", "--points", points2]
            + ["--time", "1", "--out", str(out)]
        )
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    # argparse prints its usage, then one error line naming both options
    last = err.strip().splitlines()[-1]
    assert last.startswith("certified: error:") and "--schedule" in last and "--field" in last
    assert not out.exists()


@pytest.mark.parametrize("spelling", ["same", "dot", "symlink"])
def test_out_naming_an_input_is_refused_and_the_input_kept(tmp_path, capsys, spelling):
    field_file = tmp_path / "f.json"
    field_file.write_text(json.dumps({"field": vanderpol().to_json(), "values": [1]}))
    points = tmp_path / "p.json"
    points.write_text(json.dumps({"X": [[1.4, 2.4]]}))
    before = field_file.read_bytes()
    out = {"same": field_file, "dot": tmp_path / "." / "f.json", "symlink": tmp_path / "l.json"}
    if spelling == "symlink":
        out["symlink"].symlink_to(field_file)
    argv = ["flow", "--field", str(field_file), "--points", str(points), "--time", "1"]
    assert main([*argv, "--out", str(out[spelling])]) == 2
    assert "is the --field input" in capsys.readouterr().err
    assert field_file.read_bytes() == before


def test_claims_the_replay_misses_fall_back_to_the_replayed_claims(tmp_path, capsys, monkeypatch):
    # `certified flow` claims the engine's enclosures widened (no producer replay); when the
    # writer's re-check rejects them it replays as the checker does and claims that instead
    import certified.certificates.field_flow as field_flow

    def unwidened(result, factor):  # points as claims: the checker's replay cannot fall within them
        lo = result.enclosures.lo.astype(float)
        return [[[[repr(a), repr(a)] for a in row] for row in L] for L in lo.tolist()]

    monkeypatch.setattr(field_flow, "_widened", unwidened)
    monkeypatch.setattr(field_flow, "AUTO_REPLAY_COST", 0)  # the widened claims even when small
    points = write(tmp_path / "points.json", {"X": [[1.0, 0.5], [-0.5, 0.25]]})
    out = tmp_path / "c.json"
    code, payload = run_json(capsys, "--field", "vanderpol", "--points", points, "--time", "1/2",
                             "--out", str(out))  # fmt: skip
    assert code == 0 and payload["verdict"] == "VERIFIED"
    cert = json.loads(out.read_text())
    assert isinstance(cert["hints"]["apriori"], list)  # the replay's factors
    assert main(["check", str(out)]) == 0


def test_tight_claims_are_the_replayed_enclosures(tmp_path, capsys, monkeypatch):
    import certified.certificates.field_flow as field_flow
    import certified.flow.command as flow_command

    monkeypatch.setattr(field_flow, "AUTO_REPLAY_COST", 0)  # else small files replay anyway
    # the engine's route (widened claims), not the one-pass writer (the replay's own claims)
    monkeypatch.setattr(flow_command, "_one_pass", lambda *a: None)
    points = write(tmp_path / "points.json", {"X": [[1.0, 0.5], [-0.5, 0.25]]})
    out, tight = tmp_path / "c.json", tmp_path / "t.json"
    args = ["--field", "vanderpol", "--points", points, "--time", "1/2"]
    assert run_json(capsys, *args, "--out", str(out))[1]["verdict"] == "VERIFIED"
    assert (
        run_json(capsys, *args, "--out", str(tight), "--tight-claims")[1]["verdict"] == "VERIFIED"
    )
    wide, narrow = json.loads(out.read_text()), json.loads(tight.read_text())
    assert wide["hints"]["apriori"] == "search" and isinstance(narrow["hints"]["apriori"], list)
    for (a, b), (c, e) in zip(
        wide["claim"]["enclosures"][-1][0], narrow["claim"]["enclosures"][-1][0], strict=True
    ):
        assert to_fmpq(e) - to_fmpq(c) < to_fmpq(b) - to_fmpq(a)  # tighter
    assert main(["check", str(tight)]) == 0


def test_cheap_certificates_claim_the_replay_by_default(lorenz_run):
    # a replay under AUTO_REPLAY_COST costs little: the tight claims, not the widened ones
    _, _, out = lorenz_run
    assert isinstance(json.loads(out.read_text())["hints"]["apriori"], list)
