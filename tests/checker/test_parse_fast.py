"""The checker's fast paths decide exactly as the reference paths do.

``_quick`` (exact numbers) and the skeleton path of ``_outside_strings`` (JSON shape limits)
exist for speed only (the 100,000-point interpolation certificate): each must either defer to
the reference (``exact``, the string pattern) or return what the reference returns.
"""

from __future__ import annotations

import flint
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from certified.checker._parse import (
    MAX_DIGITS,
    MAX_EXPONENT,
    Rejected,
    _quick,
    _Slow,
    exact,
    exact_row,
)
from certified.checker._reader import _NOT_BRACKET, _STRING, _outside_strings, load_json


def _reference(text: str):
    try:
        return exact(text, "x")
    except Rejected:
        return None


def _fast(text: str):
    try:
        return _quick(text)
    except _Slow:
        return "slow"


_NOISE = st.text(alphabet="0123456789-/*^2 +e.x\n", max_size=24)


@st.composite
def _numbers(draw) -> str:
    """Valid and almost-valid number strings (zeros, signs, non-lowest terms, exponents at and
    beyond the limits, digit runs near MAX_DIGITS)."""
    sign = draw(st.sampled_from(["", "-"]))
    big = draw(st.integers(0, 10**40) | st.integers(0, 10 ** (MAX_DIGITS - 1)))
    form = draw(st.sampled_from(["int", "rat", "dy"]))
    if form == "int":
        return f"{sign}{big}"
    if form == "rat":
        return f"{sign}{big}/{draw(st.integers(0, 10**30))}"
    e = draw(st.integers(-MAX_EXPONENT - 2, MAX_EXPONENT + 2) | st.sampled_from(["00", "-0"]))
    return f"{sign}{big}*2^{e}"


@given(_numbers() | _NOISE)
@example("6/8")
@example("3/1")
@example("-0")
@example("0/5")
@example(f"1*2^{MAX_EXPONENT}")
@example(f"1*2^{-MAX_EXPONENT - 1}")
@example("1" * MAX_DIGITS)
@example("1" * (MAX_DIGITS + 1))
@example("4*2^3")
@example("3\n")
def test_quick_agrees_with_exact(text):
    fast, ref = _fast(text), _reference(text)
    if fast != "slow":
        assert ref is not None and fast == ref and isinstance(fast, flint.fmpq)


@given(st.integers(-(10**50), 10**50), st.integers(2, 10**30), st.integers(-300, 300))
def test_quick_takes_every_canonical_number(n, q, e):
    """Canonical numbers of moderate size never fall back (the fast path is really used)."""
    r = flint.fmpq(n, q)
    for text in (str(n), str(r), f"{2 * n + 1}*2^{e}"):
        assert _quick(text) == exact(text, "x")


def test_exact_row_names_the_bad_element():
    assert exact_row(["1", "2/3", "5*2^-1"], "W") == [1, flint.fmpq(2, 3), flint.fmpq(5, 2)]
    with pytest.raises(Rejected, match=r"W\[1\]"):
        exact_row(["1", "4/6", "5"], "W")
    with pytest.raises(Rejected, match=r"W\[2\]"):
        exact_row(["1", "2", 2.5], "W")


# --- shape limits ------------------------------------------------------------------------------

_PIECES = ['"', "\\", "\\\\", '\\"', "[", "]", "{", "}", ",", "a", '"[",', '""', "é", ":", "1"]
_PIECES += ['"a:",', '":"']  # strings holding ":" (kept outside strings since issue 11)


@given(st.lists(st.sampled_from(_PIECES), max_size=40).map("".join))
@example('["[", "]", {"a": "\\\\"}]')
@example('["a" "b" "c"')
@example('"""')
@example('["\\"]", 1]')
@example('["\\"[\\""]')  # escaped quotes that pair up when the backslashes are ignored
def test_outside_strings_matches_the_string_pattern(text):
    expected = _NOT_BRACKET.sub("", _STRING.sub("", text)) + ""
    got = _outside_strings(text.encode(), text)
    outside = _STRING.sub("", text)
    assert [c for c in got if c in "[]{},:"] == [c for c in outside if c in "[]{},:"]
    assert _NOT_BRACKET.sub("", got) == expected


def test_load_json_still_limits_depth_and_values():
    deep = b"[" * 40 + b"]" * 40
    with pytest.raises(Rejected, match="nesting deeper"):
        load_json(deep)
    # brackets inside strings do not count, with or without escapes
    assert load_json(b'["' + b"[" * 40 + b'"]') == ["[" * 40]
    assert load_json(b'["\\"' + b"[" * 40 + b'"]') == ['"' + "[" * 40]
