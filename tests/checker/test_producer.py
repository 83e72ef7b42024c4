"""Producer side: ``certified.certificates`` builds canonical certificates, replays laminar
schedules exactly and writes atomically."""

from __future__ import annotations

import json
import os
import random
from fractions import Fraction

import numpy as np
import pytest
from checker_golden import random_laminar_instance
from flint import fmpq
from hypothesis import given
from hypothesis import strategies as st

from certified.certificates import (
    dumps_certificate,
    exact_number,
    flow_certificate,
    laminar_flow_exact,
    write_certificate,
)
from certified.checker import check_certificate, check_file
from certified.errors import InputError, ShapeError

SCHEDULE = {
    "dimension": 2,
    "activation": "relu",
    "pieces": [
        {"duration": 0.5, "W": [[0, 0], [1, "-0.5"]], "A": [[1, 0], [1, 0]], "b": [0, -1]},
        {"duration": "1", "W": [["3/4"], [0]], "A": [[0, 1]], "b": ["0.25"]},
    ],
}
POINTS = [[2, 0], ["-1/3", 1], [0.5, "1*2^-2"]]


def test_input_file_numbers_become_canonical_exact_strings():
    cert = flow_certificate(SCHEDULE, POINTS)
    assert cert["instance"]["schedule"]["pieces"][0]["duration"] == "1/2"
    assert cert["instance"]["schedule"]["pieces"][1]["b"] == ["1/4"]
    assert cert["instance"]["points"][2] == ["1/2", "1/4"]
    assert cert["instance"]["time"] == "3/2"
    assert cert["claim"] == {"images": [["11/4", "3/4"], ["29/48", "1"], ["17/16", "1/2"]]}
    assert check_certificate(cert).verified


def test_exact_number_spellings():
    assert exact_number(fmpq(3)) == "3"
    assert exact_number(fmpq(-6, 4)) == "-3/2"
    assert exact_number(fmpq(3, 2**31)) == f"3/{2**31}"
    assert exact_number(fmpq(3, 2**32)) == "3*2^-32"
    assert exact_number(0.1) == "3602879701896397*2^-55"  # the double, exactly
    assert exact_number("0.1") == "1/10"


@given(
    st.integers(-(10**40), 10**40),
    st.sampled_from([1, 2, 3, 2**31, 2**32, 2**33, 3 * 2**60, 2**70, 10**20 + 7]),
)
def test_exact_number_fast_path_spells_as_the_general_path(p, q):
    """fmpq inputs take a fast path; Fractions take the general one: same strings."""
    x = fmpq(p, q)
    assert exact_number(x) == exact_number(Fraction(int(x.p), int(x.q)))


def test_the_producer_replay_agrees_with_an_independent_one():
    rng = random.Random(3)
    for _ in range(20):
        schedule, points, images = random_laminar_instance(
            rng, rng.randint(2, 5), rng.randint(1, 4), rng.randint(1, 5), rng.randint(1, 6)
        )
        assert laminar_flow_exact(schedule, points).tolist() == images


def test_float_points_from_numpy_are_read_exactly():
    pts = np.array([[0.1, 0.2]])
    cert = flow_certificate(SCHEDULE, pts)
    assert cert["instance"]["points"][0][0] == "3602879701896397*2^-55"
    assert check_certificate(cert).verified


def test_enclosure_claims():
    images = laminar_flow_exact(SCHEDULE, POINTS)
    boxes = [[[v - fmpq(1, 8), v] for v in row] for row in images]
    cert = flow_certificate(SCHEDULE, POINTS, enclosures=boxes)
    assert cert["claim"]["enclosures"][0][0] == ["21/8", "11/4"]
    assert check_certificate(cert).verified
    with pytest.raises(InputError, match="lower end"):
        flow_certificate(SCHEDULE, POINTS, enclosures=[[[v, v - 1] for v in r] for r in images])
    with pytest.raises(ShapeError):
        flow_certificate(SCHEDULE, POINTS, enclosures=boxes[:2])


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        (lambda s: s.update(activation="tanh"), InputError, "needs 'relu'"),
        (lambda s: s.update(activation="swish"), InputError, "activation"),
        (lambda s: s["pieces"][0].update(A=[[1, 0], [0, 1]]), InputError, "not laminar"),
        (lambda s: s["pieces"][0].update(W=[[1, 0], [1, 0]]), InputError, "not laminar"),
        (lambda s: s["pieces"][0].update(duration=0), InputError, "not positive"),
        (lambda s: s["pieces"][0].update(b=[0]), ShapeError, "b"),
        (lambda s: s["pieces"][0].update(extra=1), InputError, "unknown key"),
        (lambda s: s.pop("pieces"), InputError, "missing key"),
        (lambda s: s.update(dimension=3), ShapeError, "W"),
        (lambda s: s["pieces"][1].update(b=["nan"]), InputError, "not finite"),
    ],
)
def test_bad_schedules_raise_specific_errors(change, error, match):
    schedule = json.loads(json.dumps(SCHEDULE))
    change(schedule)
    with pytest.raises(error, match=match):
        laminar_flow_exact(schedule, POINTS)


def test_bad_arguments():
    with pytest.raises(InputError, match="method"):
        flow_certificate(SCHEDULE, POINTS, method="taylor")
    with pytest.raises(InputError, match="at most one"):
        flow_certificate(SCHEDULE, POINTS, images=POINTS, enclosures=[])
    with pytest.raises(ShapeError, match="points"):
        flow_certificate(SCHEDULE, [[1, 2, 3]])


def test_dumps_round_trips_and_refuses_floats():
    cert = flow_certificate(SCHEDULE, POINTS)
    assert json.loads(dumps_certificate(cert)) == cert
    assert dumps_certificate(cert).isascii()
    with pytest.raises(InputError, match="float"):
        dumps_certificate({**cert, "version": 1.0})
    # flat rows are written in one call: same text as item by item, and still no floats/bools
    assert dumps_certificate({"r": ["1", 2, "-3/4"]}) == '{\n  "r": ["1", 2, "-3/4"]\n}\n'
    for bad in (["1", 0.5], ["1", True]):
        with pytest.raises(InputError):
            dumps_certificate({"r": bad})


def test_write_is_atomic_and_leaves_nothing_on_failure(tmp_path, monkeypatch):
    cert = flow_certificate(SCHEDULE, POINTS)
    path = write_certificate(tmp_path / "c.json", cert)
    assert check_file(path).verified
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.json"]
    before = path.read_bytes()
    with pytest.raises(InputError):
        write_certificate(path, {**cert, "version": 1.5})
    assert path.read_bytes() == before

    def failing_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="No space"):
        write_certificate(path, {**cert, "kind": "flow"})
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.json"]
    from certified.io import OutputFileError

    with pytest.raises(OutputFileError, match=r"the directory .*missing-dir.* does not exist"):
        write_certificate(tmp_path / "missing-dir" / "c.json", cert)
    assert not (tmp_path / "missing-dir").exists()


def test_write_if_accepted_writes_only_accepted_certificates(tmp_path):
    from certified.certificates import write_if_accepted

    cert = flow_certificate(SCHEDULE, POINTS)
    path, check = write_if_accepted(tmp_path / "ok.json", cert)
    assert check.verified and path is not None and check_file(path).verified
    forged = json.loads(json.dumps(cert))
    forged["claim"]["images"][0][0] = "0"
    path, check = write_if_accepted(tmp_path / "bad.json", forged)
    assert path is None and not check.verified and not (tmp_path / "bad.json").exists()
    assert os.listdir(tmp_path) == ["ok.json"]  # no temporary file left behind
