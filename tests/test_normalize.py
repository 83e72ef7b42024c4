"""``--normalize`` (issue 19): weights that sum to 1 only up to rounding are refused with a
message naming ``--normalize``; with it they are divided exactly by their sum, and the
certificate holds the rescaled weights and records each original sum (``normalized_from_sum``),
which ``certified check`` accepts. Offered by wasserstein, separate, sinkhorn,
transport-to-cube and lipschitz (the measures of an H3 instance)."""

from __future__ import annotations

import json
import re
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from certified.arith.exact import to_fmpq
from certified.checker import check_certificate
from certified.cli import main
from certified.errors import InputError, NumberFormatError
from certified.io import SchemaError, read_measure, read_measure_file
from certified.transport.measure import Measure

# ten doubles 0.1: their exact sum is 1 + 2^-54 + ..., not 1
TENTHS = [0.1] * 10
TENTHS_SUM = sum((Fraction(w) for w in TENTHS), Fraction(0))


def frac(text: str) -> Fraction:
    """A certificate number (integer, "p/q" or dyadic "m*2^e") as a Fraction."""
    q = to_fmpq(text)
    return Fraction(int(q.p), int(q.q))


def _write(path: Path, obj) -> Path:
    path.write_text(json.dumps(obj))
    return path


def _measure(d: int, shift: float = 0.0) -> dict:
    rng = np.random.default_rng(d)
    return {"points": (rng.random((10, d)) / 2 + shift).tolist(), "weights": TENTHS}


def _cube_measure() -> dict:
    points = np.random.default_rng(11).standard_normal((90, 2)).tolist()
    return {"points": points, "weights": [1 / 90] * 90}  # doubles: the sum is not exactly 1


def _argv(name: str, tmp_path: Path) -> tuple[list[str], list[str]]:
    """The command line and the instance keys of the measures read with weights."""
    if name == "transport-to-cube":
        f = _write(tmp_path / "m.json", _cube_measure())
        argv = ["transport-to-cube", "--measure", str(f), "--width", "3", "--epsilon", "1/4"]
        return argv, ["measure"]
    if name == "lipschitz":
        nu = {**_measure(2, 0.1), "weights": [0.25] * 4 + [0.0] * 6}  # sums to exactly 1
        inst = {"Q": [["1/2", 0]], "K": [[1, "1/3"]], "V": [[1, 0], [0, "1/2"]], "R": 1,
                "mu": _measure(2), "nu": nu}  # fmt: skip
        f = _write(tmp_path / "instance.json", inst)
        return ["lipschitz", "--instance", str(f), "--hypothesis", "H3"], ["mu"]
    mu = _write(tmp_path / "mu.json", _measure(2))
    nu = _write(tmp_path / "nu.json", _measure(2, 0.25))
    argv = [name, "--mu", str(mu), "--nu", str(nu)]
    return argv + (["--gamma", "1/2"] if name == "sinkhorn" else []), ["mu", "nu"]


NAMES = ["wasserstein", "separate", "sinkhorn", "transport-to-cube", "lipschitz"]


@pytest.mark.parametrize("name", NAMES)
def test_normalize_is_offered_refused_without_and_recorded_with(tmp_path, name, capsys) -> None:
    argv, keys = _argv(name, tmp_path)
    out = tmp_path / "c.json"
    assert main([*argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "not exactly 1" in err and "--normalize" in err and err.count("\n") == 1
    assert not out.exists()

    assert main([*argv, "--normalize", "--out", str(out), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["verdict"] == "VERIFIED" and "--normalize" in payload["scope"]
    cert = json.loads(out.read_text())
    for key in keys:
        m = cert["instance"][key]
        given = [
            Fraction(w) for w in (_cube_measure() if key == "measure" else _measure(2))["weights"]
        ]
        total = sum(given, Fraction(0))
        assert total != 1 and frac(m["normalized_from_sum"]) == total
        assert [frac(w) for w in m["weights"]] == [w / total for w in given]  # exact
    for key in {"mu", "nu", "measure"} & set(cert["instance"]) - set(keys):
        assert "normalized_from_sum" not in cert["instance"][key]  # summed to 1: not rescaled
    assert check_certificate(cert).verified
    assert main(["check", str(out)]) == 0
    assert capsys.readouterr().out.startswith("VERIFIED")


def test_normalize_is_refused_where_it_means_nothing(tmp_path, capsys) -> None:
    inst = {"schedule": {"dimension": 1, "activation": "relu",
                         "pieces": [{"duration": 1, "W": [[1]], "A": [[1]], "b": [0]}]},
            "X": [[0], [1]]}  # fmt: skip
    f = _write(tmp_path / "flow.json", inst)
    argv = ["lipschitz", "--instance", str(f), "--hypothesis", "flow", "--normalize"]
    assert main([*argv, "--out", str(tmp_path / "c.json")]) == 2
    assert "--normalize" in capsys.readouterr().err
    assert not (tmp_path / "c.json").exists()


def test_weights_summing_to_one_are_not_recorded(tmp_path) -> None:
    path = _write(tmp_path / "m.json", {"points": [[0], [1]], "weights": ["1/3", "2/3"]})
    assert read_measure_file(path, normalize=True).normalized_from is None
    assert "normalized_from_sum" not in Measure.from_file(path, normalize=True).to_json()
    uniform = _write(tmp_path / "u.json", {"points": [[0], [1]]})
    assert read_measure_file(uniform, normalize=True).normalized_from is None


def test_normalize_refuses_zero_weights_by_name(tmp_path) -> None:
    path = _write(tmp_path / "m.json", {"points": [[0], [1]], "weights": [0, 0]})
    with pytest.raises(InputError, match=r"weights: all zero; --normalize needs"):
        read_measure(path, normalize=True)
    with pytest.raises(InputError, match=r"weights: sum to 0 .*--normalize"):
        read_measure(path)


def test_measure_normalized_records_its_sum() -> None:
    m = Measure.normalized([[0], [1]], [1, 3])
    assert m.normalized_from == 4 and m.to_json()["normalized_from_sum"] == "4"
    assert [frac(str(w)) for w in m.weights] == [Fraction(1, 4), Fraction(3, 4)]
    assert Measure.normalized([[0], [1]], ["1/2", "1/2"]).normalized_from is None


@pytest.mark.parametrize(
    ("value", "reason"),
    [("0", "must be > 0"), ("-1/2", "must be > 0"), (0.5, "not an exact"), ("x", "instance.mu")],
)
def test_the_checker_parses_the_record_strictly(value, reason) -> None:
    from certified.transport import wasserstein, wasserstein_certificate

    e = wasserstein(Measure.normalized([[0], [1]], [1, 3]), Measure([[0], [2]]), 2)
    cert = wasserstein_certificate(e)
    assert cert["instance"]["mu"]["normalized_from_sum"] == "4"
    assert check_certificate(cert).verified
    cert["instance"]["mu"]["normalized_from_sum"] = value
    verdict = check_certificate(cert)
    assert not verdict.verified and reason in verdict.reason
    cert["instance"]["mu"]["normalized_from"] = "4"  # any other key stays unknown
    assert not check_certificate(cert).verified


def test_a_measure_of_a_certificate_reads_back_with_its_record(tmp_path, capsys) -> None:
    """The instance of a certificate is in the input format: its measures, record included,
    are valid measure files, and a run on them records the same original sums."""
    argv, _ = _argv("wasserstein", tmp_path)
    out = tmp_path / "c.json"
    assert main([*argv, "--normalize", "--out", str(out)]) == 0
    cert = json.loads(out.read_text())
    mu = _write(tmp_path / "mu_back.json", cert["instance"]["mu"])
    back = read_measure_file(mu)
    assert frac(str(back.normalized_from)) == TENTHS_SUM
    assert Measure.from_file(mu).to_json() == cert["instance"]["mu"]
    again = tmp_path / "again.json"
    nu = cert["instance"]["nu"]
    assert main(["wasserstein", "--mu", str(mu), "--nu", str(_write(tmp_path / "nu_back.json", nu)),
                 "--out", str(again)]) == 0  # fmt: skip
    assert json.loads(again.read_text())["instance"] == cert["instance"]
    capsys.readouterr()
    for bad, cls, message in [
        ({"points": [[0]], "normalized_from_sum": "2"}, SchemaError,
         "key 'normalized_from_sum' needs the keys weights"),
        ({"points": [[0]], "weights": [1], "normalized_from_sum": "-2"}, InputError,
         "normalized_from_sum: -2 is not > 0"),
        ({"points": [[0]], "weights": [1], "normalized_from_sum": [2]}, NumberFormatError,
         "normalized_from_sum: [2] of type list"),
    ]:  # fmt: skip
        with pytest.raises(cls, match=re.escape(message)):
            read_measure(_write(tmp_path / "bad.json", bad))


def test_the_record_of_an_h3_instance_is_kept(tmp_path) -> None:
    from certified.attention.instance import read_attention_instance

    inst = {"Q": [[1]], "K": [[1]], "V": [[1]], "R": 1,
            "mu": {"points": [[0], ["1/2"]], "weights": ["1/4", "3/4"], "normalized_from_sum": "4"},
            "nu": {"points": [[0], [1]], "weights": [0.5, 0.5000000000000001]}}  # fmt: skip
    path = _write(tmp_path / "inst.json", inst)
    with pytest.raises(InputError, match=r"nu\.weights: sum to .*--normalize"):
        read_attention_instance(path, require="measures")
    a = read_attention_instance(path, require="measures", normalize=True)
    assert a.to_json()["mu"]["normalized_from_sum"] == "4"
    assert frac(a.to_json()["nu"]["normalized_from_sum"]) == Fraction(0.5) + Fraction(
        0.5000000000000001
    )
