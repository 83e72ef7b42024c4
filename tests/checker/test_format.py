"""The certificate format (proofs/format.md): number grammar, strict JSON, resource limits,
and the worked example."""

from __future__ import annotations

import json
import re
import time
from fractions import Fraction
from pathlib import Path

import pytest
from checker_golden import golden_certificates, single_number_edits, structural_edits
from flint import fmpq
from hypothesis import example, given
from hypothesis import strategies as st

from certified.certificates import dumps_certificate, exact_number
from certified.checker import (
    MAX_BYTES,
    MAX_DEPTH,
    MAX_DIGITS,
    MAX_EXPONENT,
    MAX_TOKENS,
    Verdict,
    check_bytes,
    check_certificate,
)
from certified.checker._parse import Rejected, exact

FORMAT_MD = Path(__file__).resolve().parents[2] / "proofs" / "format.md"

VALID = [
    ("0", fmpq(0)),
    ("7", fmpq(7)),
    ("-12", fmpq(-12)),
    ("1/2", fmpq(1, 2)),
    ("-22/7", fmpq(-22, 7)),
    ("1*2^-1", fmpq(1, 2)),
    ("3*2^0", fmpq(3)),
    ("-5*2^3", fmpq(-40)),
    ("1*2^-10000", fmpq(1, 2**10000)),
    ("9" * MAX_DIGITS, fmpq(int("9" * MAX_DIGITS))),
    ("1/" + "9" * MAX_DIGITS, fmpq(1, int("9" * MAX_DIGITS))),
]
INVALID = [
    "",
    " 1",
    "1 ",
    "+1",
    "-0",
    "00",
    "01",
    "0.5",
    ".5",
    "1e3",
    "1E3",
    "0x10",
    "1_000",
    "\u0661",  # ARABIC-INDIC DIGIT ONE: int() would accept it
    "１",  # FULLWIDTH DIGIT ONE
    "nan",
    "NaN",
    "inf",
    "-Infinity",
    "1/0",
    "0/3",
    "2/4",
    "3/1",
    "-1/-2",
    "1/-2",
    "1/+2",
    "1 / 2",
    "2*2^1",
    "0*2^0",
    "1*2^+1",
    "1*2^-0",
    "1*2^01",
    "1*2^",
    "*2^1",
    "1*3^1",
    "1*2**1",
    "1*2^99999999",
    f"1*2^{MAX_EXPONENT + 1}",
    f"1*2^-{MAX_EXPONENT + 1}",
    "9" * (MAX_DIGITS + 1),
    "1/" + "9" * (MAX_DIGITS + 1),
    "1*2^" + "1" * 10**6,
    "1" * 10**6,
    "1/2/3",
    "p/q",
]


@pytest.mark.parametrize(("text", "value"), VALID)
def test_valid_number_strings(text, value):
    assert exact(text, "x") == value


@pytest.mark.parametrize("text", INVALID)
def test_invalid_number_strings_are_rejected(text):
    t0 = time.perf_counter()
    with pytest.raises(Rejected, match=r"^x: "):
        exact(text, "x")
    assert time.perf_counter() - t0 < 0.5


@pytest.mark.parametrize("value", [1.0, 0.5, float("nan"), True, False, None, [1], {"a": 1}])
def test_non_numbers_are_rejected(value):
    with pytest.raises(Rejected):
        exact(value, "x")


def test_python_integers_are_capped_like_json_integers():
    assert exact(10**MAX_DIGITS - 1, "x") == 10**MAX_DIGITS - 1
    with pytest.raises(Rejected, match="digits"):
        exact(10**MAX_DIGITS, "x")
    with pytest.raises(Rejected, match="digits"):
        exact(-(10**MAX_DIGITS), "x")


@given(
    st.integers(min_value=-(10**30), max_value=10**30),
    st.integers(min_value=1, max_value=10**30),
    st.integers(min_value=0, max_value=200),
)
@example(0, 1, 0)
@example(-1, 2**64, 0)
def test_canonical_producer_strings_read_back_exactly(p, q, shift):
    value = fmpq(p, q) / 2**shift
    text = exact_number(value)
    assert exact(text, "x") == value


@given(st.text(alphabet="0123456789-+/*^.eE xX_", max_size=30))
def test_the_grammar_never_raises_anything_but_rejected_and_agrees_with_fractions(text):
    try:
        value = exact(text, "x")
    except Rejected:
        return
    if "*" in text:
        m, e = text.split("*2^")
        assert Fraction(int(value.p), int(value.q)) == Fraction(int(m)) * Fraction(2) ** int(e)
    else:
        assert Fraction(int(value.p), int(value.q)) == Fraction(text)
        assert str(Fraction(text)) == text  # Fraction's str is the canonical p/q


def _cert_bytes() -> bytes:
    return dumps_certificate(golden_certificates(1, 1)[0]).encode()


GOLDEN = _cert_bytes()


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "not valid JSON"),
        (b"\xef\xbb\xbf" + GOLDEN, "byte order mark"),
        (GOLDEN.replace(b'"kind"', b'"kind": "flow", "kind"', 1), "duplicate key"),
        (GOLDEN.replace(b'"version": 1', b'"version": 1.0', 1), "fraction or exponent"),
        (GOLDEN.replace(b'"version": 1', b'"version": 1e0', 1), "fraction or exponent"),
        (GOLDEN.replace(b'"version": 1', b'"version": NaN', 1), "NaN is not allowed"),
        (GOLDEN.replace(b'"version": 1', b'"version": -Infinity', 1), "-Infinity is not"),
        (GOLDEN.replace(b'"version": 1', b'"version": -0', 1), "not canonical"),
        (GOLDEN.replace(b'"version": 1', b'"version": "1"', 1), "version"),
        (GOLDEN.replace(b'"version": 1', b'"version": true', 1), "version"),
        (GOLDEN.replace(b'"dimension": ', b'"dimension": 0', 1), "not valid JSON"),
        (b"\xff" + GOLDEN, "not UTF-8"),
        (GOLDEN + b"\xc0\x80", "not UTF-8"),
        (GOLDEN[:-3], "not valid JSON"),
        (GOLDEN + b"{}", "not valid JSON"),
        (b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1), "nesting deeper"),
        (b"[" * 10**6 + b"]" * 10**6, "nesting deeper"),
        (b"[" * 10**6, "nesting deeper"),
        (b"[" * 10 + b"}" * 10, "not valid JSON"),
        (b"]" * 10**6, "not valid JSON"),
        (b"[" + b"[]," * MAX_TOKENS + b"[]]", "too many JSON values"),
        (b"[" + b"1" * (MAX_DIGITS + 1) + b"]", "more than"),
        (b" " * (MAX_BYTES + 1), "larger than"),
        (b"[]", "expected an object"),
        (b'"flow"', "expected an object"),
        (b"null", "expected an object"),
    ],
)
def test_strict_json(data, reason):
    t0 = time.perf_counter()
    verdict = check_bytes(data)
    assert not verdict.verified
    assert reason in verdict.reason, verdict.reason
    assert time.perf_counter() - t0 < 5


def test_nesting_up_to_the_limit_is_parsed_and_judged_on_its_content():
    data = b'{"a":' + b"[" * (MAX_DEPTH - 1) + b"]" * (MAX_DEPTH - 1) + b"}"
    assert check_bytes(data).reason == "certificate: missing field 'kind'"


def test_brackets_inside_strings_do_not_count_and_escaped_quotes_do_not_end_strings():
    deep_string = json.dumps("[" * 1000 + '\\"' * 10).encode()
    assert "missing field" in check_bytes(b'{"x": ' + deep_string + b"}").reason
    # an unterminated string full of escaped quotes is scanned in linear time
    t0 = time.perf_counter()
    assert not check_bytes(b'["' + b'\\"' * 10**6).verified
    assert time.perf_counter() - t0 < 2


def test_a_golden_file_is_verified_and_whitespace_does_not_matter():
    assert check_bytes(GOLDEN).verified
    compact = json.dumps(json.loads(GOLDEN), separators=(",", ":")).encode()
    assert check_bytes(compact).verified
    assert check_bytes(b"\n\t " + compact + b"\r\n").verified


def test_verdict_is_a_validated_frozen_dataclass():
    v = Verdict(True, "flow", "")
    with pytest.raises(AttributeError):
        v.verified = False  # type: ignore[misc]
    with pytest.raises(ValueError):
        Verdict(True, None, "")
    with pytest.raises(ValueError):
        Verdict(False, None, "")
    with pytest.raises(TypeError):
        Verdict(1, "flow", "")  # type: ignore[arg-type]


def test_unexpected_exceptions_become_rejections(monkeypatch):
    from certified.checker import flow

    def boom(*args):
        raise ZeroDivisionError("deliberate")

    monkeypatch.setattr(flow, "_laminar_step", boom)
    verdict = check_certificate(json.loads(GOLDEN))
    assert not verdict.verified
    assert verdict.reason == "internal error: ZeroDivisionError: ZeroDivisionError('deliberate')"


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=8)
    | st.sampled_from(["flow", "relu", "laminar-exact", "1/2", "1*2^-3", "0"]),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(["kind", "version", "instance", "claim", "hints", "x"]), children
        )
    ),
    max_leaves=20,
)


@given(json_values)
def test_arbitrary_values_are_rejected_without_internal_errors(value):
    verdict = check_certificate(value)
    assert not verdict.verified
    assert not verdict.reason.startswith("internal error"), verdict.reason


# --- the worked example of proofs/format.md ---------------------------------------------------


def worked_example() -> bytes:
    text = FORMAT_MD.read_text(encoding="utf-8")
    m = re.search(r"<!-- worked-example -->\s*```json\n(.*?)```", text, re.DOTALL)
    assert m is not None, "proofs/format.md lost its worked example"
    return m.group(1).encode()


def test_the_worked_example_of_format_md_is_verified():
    verdict = check_bytes(worked_example())
    assert verdict == Verdict(True, "flow", "rule laminar-exact: 3 points, 2 pieces, exact images")


def test_every_edit_of_the_worked_example_is_rejected():
    cert = json.loads(worked_example())
    edits = [(str(p), c) for p, _, c in single_number_edits(cert)]
    edits += [(str(p), c) for _, p, c in structural_edits(cert)]
    for where, c in edits:
        assert not check_certificate(c).verified, where


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_check_file_reads_a_bounded_prefix_of_an_endless_file():
    from certified.checker import check_file

    t0 = time.perf_counter()
    verdict = check_file("/dev/zero")
    assert not verdict.verified and "larger than" in verdict.reason
    assert time.perf_counter() - t0 < 5
