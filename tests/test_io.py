"""Tests of certified.io: strict JSON, exact reading of points / datasets / measures, errors that
name the file and the field, atomic writing. Expected values come from ``fractions.Fraction``."""

from __future__ import annotations

import json
import os
import re
import stat
from fractions import Fraction
from pathlib import Path
from typing import Any

import flint
import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from certified.errors import (
    CertifiedError,
    InputError,
    NonFiniteError,
    NumberFormatError,
    ShapeError,
)
from certified.io import (
    InputFileError,
    OutputFileError,
    SchemaError,
    parse_json,
    prefixed_errors,
    read_dataset,
    read_json,
    read_measure,
    read_points,
    write_json_atomic,
)


def fracs(a: np.ndarray) -> list:
    assert a.dtype == object
    assert all(isinstance(q, flint.fmpq) for q in a.flat)
    return np.vectorize(lambda q: Fraction(int(q.p), int(q.q)), otypes=[object])(a).tolist()


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def raises_named(cls: type, path: Path, message: str) -> Any:
    """``pytest.raises`` of exactly ``cls`` whose message is ``"<path>: <message>..."``."""
    return pytest.raises(cls, match="^" + re.escape(f"{path}: {message}"))


# --- strict JSON ---------------------------------------------------------------------------------


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_json_rejects_non_finite_tokens(tmp_path: Path, token: str) -> None:
    path = write(tmp_path, "p.json", f'{{"X": [[1, {token}]]}}')
    with raises_named(NonFiniteError, path, f"{token} is not allowed in JSON input"):
        read_json(path)
    with raises_named(NonFiniteError, path, f"{token} is not allowed"):
        read_points(path)


def test_json_rejects_numbers_overflowing_binary64(tmp_path: Path) -> None:
    path = write(tmp_path, "p.json", '{"X": [[1e400]]}')
    with raises_named(NonFiniteError, path, "the JSON number 1e400 overflows binary64"):
        read_points(path)
    # written as a string, the same number is read exactly
    path = write(tmp_path, "q.json", '{"X": [["1e400"]]}')
    assert fracs(read_points(path)) == [[Fraction(10) ** 400]]


def test_json_rejects_duplicate_keys_at_any_depth(tmp_path: Path) -> None:
    path = write(tmp_path, "p.json", '{"X": [[1]], "X": [[2]]}')
    with raises_named(InputFileError, path, "duplicate key 'X'"):
        read_json(path)
    path = write(tmp_path, "q.json", '{"a": {"b": 1, "b": 1}}')
    with raises_named(InputFileError, path, "duplicate key 'b'"):
        read_json(path)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"X": [[1, 2]]', "not valid JSON: Expecting ',' delimiter at line 1 column 15"),
        (b"", "not valid JSON: Expecting value at line 1 column 1"),
        (b'{"X": [[1, 2]]} x', "not valid JSON: Extra data"),
        (b"{'X': 1}", "not valid JSON: Expecting property name"),
        (b'{"X": [[0x10]]}', "not valid JSON"),
        (b'{"X": "\xff"}', "not UTF-8 text (invalid byte at offset 7)"),
        (b"[" * 100_000 + b"]" * 100_000, "JSON nested too deeply"),
        (b'{"X": [[' + b"9" * 5000 + b"]]}", "not valid JSON"),
    ],
)
def test_malformed_json_is_an_input_file_error(
    tmp_path: Path, content: bytes, message: str
) -> None:
    path = write(tmp_path, "bad.json", content)
    with raises_named(InputFileError, path, message) as info:
        read_json(path)
    assert "\n" not in str(info.value)


def test_json_accepts_a_byte_order_mark_and_keeps_integers_exact(tmp_path: Path) -> None:
    path = write(tmp_path, "p.json", b'\xef\xbb\xbf{"X": [[12345678901234567891, 0.1, "0.1"]]}')
    assert read_json(path) == {"X": [[12345678901234567891, 0.1, "0.1"]]}
    assert fracs(read_points(path)) == [[12345678901234567891, Fraction(0.1), Fraction(1, 10)]]
    assert parse_json('\ufeff{"a": -0}') == {"a": 0}


def test_missing_unreadable_and_oversized_files(tmp_path: Path) -> None:
    missing = tmp_path / "missing.json"
    with raises_named(InputFileError, missing, "no such file"):
        read_json(missing)
    with raises_named(InputFileError, missing, "no such file"):
        read_points(missing)
    with raises_named(InputFileError, missing, "no such file"):
        read_measure(missing)
    directory = tmp_path / "dir.json"
    directory.mkdir()
    with raises_named(InputFileError, directory, "is a directory"):
        read_json(directory)
    big = write(tmp_path, "big.json", '{"X": [[1, 2]]}')
    with raises_named(InputFileError, big, "larger than the limit of 10 bytes"):
        read_json(big, max_bytes=10)
    assert read_json(big, max_bytes=15) == {"X": [[1, 2]]}
    with raises_named(InputFileError, big, "larger than the limit"):
        read_points(big, max_bytes=10)
    if os.name == "posix" and os.geteuid() != 0:
        locked = write(tmp_path, "locked.json", "{}")
        locked.chmod(0)
        with raises_named(InputFileError, locked, "permission denied"):
            read_json(locked)


def test_unsupported_extension(tmp_path: Path) -> None:
    path = write(tmp_path, "points.txt", "1,2\n")
    with raises_named(
        InputFileError, path, "unsupported file type '.txt'; use .json, .npz or .csv"
    ):
        read_points(path)
    with raises_named(InputFileError, path, "unsupported file type '.txt'; use .json"):
        read_measure(path)


# --- points and datasets: JSON -------------------------------------------------------------------


def test_points_json_is_exact(tmp_path: Path) -> None:
    path = write(tmp_path, "p.json", '{"X": [[0.1, "0.1"], [3, "-22/7"], ["3*2^-1074", 1e-300]]}')
    X = read_points(path)
    assert X.shape == (3, 2)
    assert fracs(X) == [
        [Fraction(0.1), Fraction(1, 10)],
        [3, Fraction(-22, 7)],
        [Fraction(3, 2**1074), Fraction(1e-300)],
    ]
    assert Fraction(0.1) != Fraction(1, 10)


def test_dataset_json(tmp_path: Path) -> None:
    path = write(tmp_path, "d.json", '{"X": [[0, 1], [1, 0]], "Y": [["1/2", 0], [0, "1/3"]]}')
    X, Y = read_dataset(path)
    assert fracs(X) == [[0, 1], [1, 0]] and fracs(Y) == [[Fraction(1, 2), 0], [0, Fraction(1, 3)]]
    assert fracs(read_points(path)) == fracs(X)  # a dataset file is also a points file


@pytest.mark.parametrize(
    ("content", "cls", "message"),
    [
        (
            '{"X": [[1, 2], [3, 4], [5, 6], [7, 8, 9]]}',
            ShapeError,
            "X[3]: expected 2 coordinates, got 3",
        ),
        ('{"X": [[1, 2], [3]]}', ShapeError, "X[1]: expected 2 coordinates, got 1"),
        ('{"X": []}', ShapeError, "X: empty; give at least one row"),
        ('{"X": [[]]}', ShapeError, "X[0]: empty; give at least one number"),
        ('{"X": [1, 2]}', ShapeError, "X[0]: expected a list of numbers, got a number"),
        (
            '{"X": "1,2"}',
            ShapeError,
            "X: expected a list of rows, each a list of numbers, got a string",
        ),
        ('{"X": [[1, "abc"]]}', NumberFormatError, "X[0][1]: 'abc' is not a number"),
        ('{"X": [[1, "nan"]]}', NonFiniteError, "X[0][1]: 'nan' is not finite"),
        ('{"X": [[1, null]]}', NumberFormatError, "X[0][1]: None of type NoneType is not a number"),
        ('{"X": [[1, true]]}', InputError, "X[0][1]: True is a boolean"),
        ('{"X": [[1, 2]], "Z": 1}', SchemaError, "unknown key 'Z'; allowed keys: X, Y"),
        ('{"Y": [[1, 2]]}', SchemaError, "missing key 'X'"),
        ("[[1, 2]]", SchemaError, "expected a JSON object with keys X, Y, got an array"),
        ('{"X": [[1, 2]], "Y": [[1, 2, 3]]}', ShapeError, "Y[0]: expected 2 coordinates, got 3"),
        (
            '{"X": [[1, 2]], "Y": [[1, 2], [3, 4]]}',
            ShapeError,
            "Y: expected 1 points (as many as X), got 2",
        ),
    ],
)
def test_bad_points_json(tmp_path: Path, content: str, cls: type, message: str) -> None:
    path = write(tmp_path, "points.json", content)
    with raises_named(cls, path, message) as info:
        read_points(path)
    assert type(info.value) is cls and "\n" not in str(info.value)


def test_bad_dataset(tmp_path: Path) -> None:
    path = write(tmp_path, "d.json", '{"X": [[1, 2]]}')
    with raises_named(SchemaError, path, "missing key 'Y'; required keys: X, Y"):
        read_dataset(path)
    path = write(tmp_path, "d2.json", '{"X": [[1, 2]], "Y": [[1, 2]], "Z": 0}')
    with raises_named(SchemaError, path, "unknown key 'Z'; allowed keys: X, Y"):
        read_dataset(path)
    path = write(tmp_path, "d.csv", "1,2\n")
    with raises_named(SchemaError, path, "a .csv file holds the points X alone"):
        read_dataset(path)


# --- CSV -----------------------------------------------------------------------------------------


def test_csv_is_read_as_text_exactly(tmp_path: Path) -> None:
    content = "# x, y\n0.1, 1/3\n\n-2.5e-1,7\r\n  3*2^-2 ,  -0 \n"
    X = read_points(write(tmp_path, "p.csv", content))
    assert fracs(X) == [
        [Fraction(1, 10), Fraction(1, 3)],
        [Fraction(-1, 4), 7],
        [Fraction(3, 4), 0],
    ]
    assert fracs(read_points(write(tmp_path, "bom.csv", b"\xef\xbb\xbf1,2\n"))) == [[1, 2]]


def test_csv_header_row_of_names_is_skipped(tmp_path: Path) -> None:
    content = "x1, x_2 ,theta (rad)\n1,2,3\n1/2,0.25,-1\n"
    assert fracs(read_points(write(tmp_path, "h.csv", content))) == [
        [1, 2, 3],
        [Fraction(1, 2), Fraction(1, 4), -1],
    ]
    # the header fixes the width: a row of another length is refused
    message = "line 2: X[0]: expected 2 coordinates, got 3"
    with raises_named(ShapeError, tmp_path / "w.csv", message):
        read_points(write(tmp_path, "w.csv", "a,b\n1,2,3\n"))


@pytest.mark.parametrize(
    ("content", "cls", "message"),
    [
        ("1,2\n3,x\n", NumberFormatError, "line 2: X[1][1]: 'x' is not a number"),
        # a first row of names is a header (test above); rows mixing names and numbers, a
        # second header and a first row of NaNs are data, refused as such
        ("x,1\n1,2\n", NumberFormatError, "line 1: X[0][0]: 'x' is not a number"),
        ("x,y\nx,y\n1,2\n", NumberFormatError, "line 2: X[0][0]: 'x' is not a number"),
        ("nan,inf\n1,2\n", NonFiniteError, "line 1: X[0][0]: 'nan' is not finite"),
        ("1,2\n\n3,4,5\n", ShapeError, "line 3: X[1]: expected 2 coordinates, got 3"),
        ("1,,2\n", NumberFormatError, "line 1: X[0][1]: '' is not a number"),
        ("1,nan\n", NonFiniteError, "line 1: X[0][1]: 'nan' is not finite"),
        ("1 2\n", NumberFormatError, "line 1: X[0][0]: '1 2' is not a number"),
        ("\n# only a comment\n", ShapeError, "X: no points"),
    ],
)
def test_bad_csv(tmp_path: Path, content: str, cls: type, message: str) -> None:
    path = write(tmp_path, "points.csv", content)
    with raises_named(cls, path, message) as info:
        read_points(path)
    assert type(info.value) is cls
    path = write(tmp_path, "bad.csv", b"1,\xff\n")
    with raises_named(InputFileError, path, "not UTF-8 text"):
        read_points(path)


# --- NPZ -----------------------------------------------------------------------------------------


def test_npz_float_int_and_string_arrays_are_exact(tmp_path: Path) -> None:
    path = tmp_path / "d.npz"
    X = np.array([[0.1, -2.0], [1e-310, 3.0]])
    Y = np.array([[1, 2], [3, 2**62]], dtype=np.int64)
    np.savez(path, X=X, Y=Y)
    X_read, Y_read = read_dataset(path)
    assert fracs(X_read) == [[Fraction(0.1), -2], [Fraction(1e-310), 3]]
    assert fracs(Y_read) == [[1, 2], [3, 2**62]]
    np.savez_compressed(path, X=np.array([["0.1", "1/3"]]))
    assert fracs(read_points(path)) == [[Fraction(1, 10), Fraction(1, 3)]]
    np.savez(path, X=np.array([[0.1]], dtype=np.float32))
    assert fracs(read_points(path)) == [[Fraction(float(np.float32(0.1)))]]


def test_bad_npz(tmp_path: Path) -> None:
    path = tmp_path / "p.npz"
    np.savez(path, X=np.array([[1.0, np.nan]]))
    with raises_named(NonFiniteError, path, "X[0][1]: nan is not finite"):
        read_points(path)
    np.savez(path, X=np.array([1.0, 2.0]))
    with raises_named(ShapeError, path, "X: expected a 2-dimensional array"):
        read_points(path)
    np.savez(path, X=np.ones((2, 2)), Z=np.ones(2))
    with raises_named(SchemaError, path, "unknown array 'Z'; allowed arrays: X, Y"):
        read_points(path)
    np.savez(path, Y=np.ones((2, 2)))
    with raises_named(SchemaError, path, "missing array 'X'"):
        read_points(path)
    np.savez(path, X=np.ones((2, 2)))
    with raises_named(SchemaError, path, "missing array 'Y'"):
        read_dataset(path)
    np.savez(path, X=np.ones((2, 2)), Y=np.ones((3, 2)))
    with raises_named(ShapeError, path, "Y: expected 2 points (as many as X), got 3"):
        read_dataset(path)
    np.savez(path, X=np.array([[{"a": 1}]], dtype=object))  # needs pickle to load
    with raises_named(InputFileError, path, "cannot load the arrays"):
        read_points(path)
    np.savez(path, X=np.array([[True, False]]))
    with raises_named(InputError, path, "X[0][0]: True is a boolean"):
        read_points(path)
    path.write_bytes(b"not a zip file")
    with raises_named(InputFileError, path, "not a valid .npz file"):
        read_points(path)
    np.savez_compressed(path, X=np.zeros((1000, 100)))
    with raises_named(InputFileError, path, "arrays larger than the limit of 100000 bytes"):
        read_points(path, max_bytes=100_000)


# --- round trips ---------------------------------------------------------------------------------

rationals = st.fractions(max_denominator=10**12).filter(lambda q: abs(q) < 10**15)
doubles = st.floats(allow_nan=False, allow_infinity=False, allow_subnormal=True)


@given(
    st.integers(1, 4).flatmap(
        lambda d: st.lists(st.lists(rationals, min_size=d, max_size=d), min_size=1, max_size=6)
    )
)
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_rational_points_round_trip_through_json_and_csv(tmp_path: Path, rows: list) -> None:
    as_strings = [[f"{q.numerator}/{q.denominator}" for q in row] for row in rows]
    path = write(tmp_path, "p.json", json.dumps({"X": as_strings}))
    assert fracs(read_points(path)) == rows
    path = write(tmp_path, "p.csv", "\n".join(",".join(r) for r in as_strings) + "\n")
    assert fracs(read_points(path)) == rows


@given(
    st.integers(1, 4).flatmap(
        lambda d: st.lists(st.lists(doubles, min_size=d, max_size=d), min_size=1, max_size=6)
    )
)
@example([[5e-324, -1.7976931348623157e308, 0.1, -0.0]])
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_double_points_round_trip_through_json_npz_and_csv(tmp_path: Path, rows: list) -> None:
    expected = [[Fraction(x) for x in row] for row in rows]
    path = write(tmp_path, "p.json", json.dumps({"X": rows}))
    assert fracs(read_points(path)) == expected
    np.savez(tmp_path / "p.npz", X=np.array(rows))
    assert fracs(read_points(tmp_path / "p.npz")) == expected
    # repr is the shortest decimal that reads back as the same double, but a CSV field is the
    # decimal it spells: equal to the double only when the double is that decimal
    path = write(tmp_path, "p.csv", "\n".join(",".join(map(repr, r)) for r in rows) + "\n")
    got = fracs(read_points(path))
    for row_got, row in zip(got, rows, strict=True):
        for q, x in zip(row_got, row, strict=True):
            assert float(q) == x and q == Fraction(repr(x))


# --- measures ------------------------------------------------------------------------------------


def test_measure_uniform_weights_are_exact(tmp_path: Path) -> None:
    path = write(tmp_path, "mu.json", '{"points": [[0, 0], [1, 0], [0, "1/3"]]}')
    points, weights = read_measure(path)
    assert fracs(points) == [[0, 0], [1, 0], [0, Fraction(1, 3)]]
    assert fracs(weights) == [Fraction(1, 3)] * 3 and sum(fracs(weights)) == 1


def test_measure_given_weights(tmp_path: Path) -> None:
    path = write(tmp_path, "mu.json", '{"points": [[0], [1], [1]], "weights": ["1/3", 0.5, "1/6"]}')
    points, weights = read_measure(path)
    assert fracs(weights) == [Fraction(1, 3), Fraction(1, 2), Fraction(1, 6)]
    assert points.shape == (3, 1)
    path = write(tmp_path, "nu.json", '{"points": [[0], [1]], "weights": [0, 1]}')
    assert fracs(read_measure(path)[1]) == [0, 1]


@pytest.mark.parametrize(
    ("content", "cls", "message"),
    [
        (
            '{"points": [[0], [1]], "weights": [0.5, 0.25]}',
            InputError,
            "weights: sum to 3/4 = 1 - 1/4 (about -0.25), not exactly 1",
        ),
        (
            '{"points": [[0], [1]], "weights": ["1/2", "0.50001"]}',
            InputError,
            "weights: sum to 100001/100000 = 1 + 1/100000 (about +1e-05)",
        ),
        (
            '{"points": [[0], [1]], "weights": [1.5, -0.5]}',
            InputError,
            "weights[1]: -1/2 is negative",
        ),
        (
            '{"points": [[0], [1]], "weights": [1]}',
            ShapeError,
            "weights: expected 2 weights (one per point), got 1",
        ),
        (
            '{"points": [[0], [1]], "weights": 1}',
            ShapeError,
            "weights: expected a list of numbers, got a number",
        ),
        ('{"points": [[0], [1]], "weights": [1, NaN]}', NonFiniteError, "NaN is not allowed"),
        (
            '{"points": [[0], [1]], "weights": [1, "x"]}',
            NumberFormatError,
            "weights[1]: 'x' is not a number",
        ),
        ('{"points": [], "weights": []}', ShapeError, "points: empty"),
        ('{"points": [[0]], "weights": ["1e400"]}', InputError, "weights: sum to 1000000000000"),
        ('{"points": [[0, 1], [1]]}', ShapeError, "points[1]: expected 2 coordinates, got 1"),
        (
            '{"points": [[0]], "mass": [1]}',
            SchemaError,
            "unknown key 'mass'; allowed keys: points, weights",
        ),
        ('{"weights": [1]}', SchemaError, "missing key 'points'"),
        (
            '{"points": [[0]], "weights": [1], "weights": [1]}',
            InputFileError,
            "duplicate key 'weights'",
        ),
    ],
)
def test_bad_measure(tmp_path: Path, content: str, cls: type, message: str) -> None:
    path = write(tmp_path, "mu.json", content)
    with raises_named(cls, path, message) as info:
        read_measure(path)
    assert type(info.value) is cls and "\n" not in str(info.value)


def test_ten_double_tenths_do_not_sum_to_one(tmp_path: Path) -> None:
    points = [[k] for k in range(10)]
    path = write(tmp_path, "mu.json", json.dumps({"points": points, "weights": [0.1] * 10}))
    exact_sum = 10 * Fraction(0.1)
    message = f"weights: sum to {exact_sum} = 1 + {exact_sum - 1} (about +5.55e-17), not exactly"
    with raises_named(InputError, path, message):
        read_measure(path)
    path = write(tmp_path, "nu.json", json.dumps({"points": points, "weights": ["0.1"] * 10}))
    assert sum(fracs(read_measure(path)[1])) == 1


# --- error naming --------------------------------------------------------------------------------


def test_prefixed_errors_names_the_source_once() -> None:
    with pytest.raises(ShapeError, match=r"^f\.json: X: bad$"), prefixed_errors("f.json"):
        raise ShapeError("X: bad")
    with pytest.raises(ShapeError, match=r"^f\.json: X: bad$"), prefixed_errors("outer"):
        with prefixed_errors("f.json"):
            raise ShapeError("X: bad")
    with pytest.raises(KeyError), prefixed_errors("f.json"):
        raise KeyError("not an input error: untouched")


def test_every_reader_error_is_a_certified_error(tmp_path: Path) -> None:
    for content in ["", "{", "[]", '{"X": 1}', '{"X": [[1]], "Y": 2}', "null", '"x"', "1e999"]:
        path = write(tmp_path, "p.json", content)
        for reader in (read_points, read_dataset, read_measure):
            with pytest.raises(CertifiedError, match="^" + re.escape(str(path))):
                reader(path)


# --- atomic writing ------------------------------------------------------------------------------


def leftovers(directory: Path, keep: set[str]) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name not in keep)


def test_write_json_atomic_writes_and_overwrites(tmp_path: Path) -> None:
    path = tmp_path / "out.json"
    write_json_atomic(path, {"a": [1, "1/3"], "é": None})
    assert json.loads(path.read_text(encoding="utf-8")) == {"a": [1, "1/3"], "é": None}
    write_json_atomic(str(path), [2], indent=2)
    assert path.read_text() == "[\n  2\n]\n"
    assert leftovers(tmp_path, {"out.json"}) == []
    if os.name == "posix":
        umask = os.umask(0o022)
        os.umask(umask)
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask


@pytest.mark.parametrize("failing", ["os.replace", "os.fsync", "os.fdopen"])
def test_write_json_atomic_leaves_nothing_behind_on_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    path = tmp_path / "out.json"
    path.write_text('{"old": true}')

    def boom(*args: Any, **kwargs: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(failing, boom)
    with raises_named(OutputFileError, path, "cannot write (No space left on device)"):
        write_json_atomic(path, {"new": True})
    monkeypatch.undo()
    assert json.loads(path.read_text()) == {"old": True}
    assert leftovers(tmp_path, {"out.json"}) == []


def test_write_json_atomic_cleans_up_on_interrupt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "out.json"

    def interrupt(*args: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("os.replace", interrupt)
    with pytest.raises(KeyboardInterrupt):
        write_json_atomic(path, {"new": True})
    monkeypatch.undo()
    assert leftovers(tmp_path, set()) == []


def test_write_json_atomic_rejects_bad_objects_and_paths(tmp_path: Path) -> None:
    path = tmp_path / "out.json"
    with raises_named(NonFiniteError, path, "cannot write Out of range float values"):
        write_json_atomic(path, {"x": float("nan")})
    with pytest.raises(TypeError):
        write_json_atomic(path, {"x": flint.fmpq(1, 3)})
    assert leftovers(tmp_path, set()) == []
    missing = tmp_path / "no" / "such" / "dir" / "out.json"
    with raises_named(OutputFileError, missing, "cannot write (No such file or directory)"):
        write_json_atomic(missing, {})
    directory = tmp_path / "d"
    directory.mkdir()
    with raises_named(OutputFileError, directory, "cannot write"):
        write_json_atomic(directory, {})
    assert leftovers(tmp_path, {"d"}) == [] and leftovers(directory, set()) == []
