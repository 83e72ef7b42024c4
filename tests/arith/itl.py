"""Strict, exact parser of the ITL test-vector language of ITF1788 (IEEE Std 1788-2015).

This module is the *independent reference* of the IEEE 1788 test harness: it uses only the
standard library (no ``certified``, no numpy) and ``fractions.Fraction`` for exactness.

Grammar (what the files in ``shared/ieee1788`` actually contain)::

    file      := testcase*
    testcase  := "testcase" NAME "{" statement* "}"
    statement := OP value* "=" value+ ["signal" NAME+] ";"
    value     := interval | number | string | list | NAME
    interval  := "[" body "]" ["_" DECORATION]     # body: "a, b" | "a" | "empty" | "entire"
                                                    #       | "nai" | "" (empty)
    list      := "{" number ("," number)* "}"
    number    := decimal | hexfloat | ["+"|"-"] ("infinity"|"inf") | "NaN"

Comments are ``// ...`` and ``/* ... */``. Keywords inside brackets (``empty``, ``entire``,
``nai``, ``infinity``) are case-insensitive, as in IEEE 1788 text. Numbers are decimal
(``0.1``, ``-1.5e-3``, ``.5``, ``1.``) or hexadecimal floating point (``0x1.99999AP-4``,
``-0X1P+2``, ``0x10p0``; the binary exponent is optional). Anything else is a syntax error
naming the file and line.

Interval literal endpoints are converted to binary64 with *outward* directed rounding,
performed exactly with integer arithmetic (:func:`round_down`, :func:`round_up`): the lower
endpoint becomes the largest double ``<=`` the exact value, the upper endpoint the smallest
double ``>=`` it, so a literal denotes the tightest double interval containing the real
interval it spells (the IEEE 1788 reading of a literal such as ``[13.1, 13.1]``). Negative
zero does not exist in the interval model: ``-0.0`` is 0 and every zero endpoint is ``+0.0``.
An endpoint whose exact value lies beyond the largest double rounds outward to an infinity.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

__all__ = [
    "DECORATIONS",
    "MAX_DOUBLE",
    "MIN_SUBNORMAL",
    "IntervalLiteral",
    "ItlSyntaxError",
    "Name",
    "Number",
    "NumberList",
    "Statement",
    "String",
    "parse_dir",
    "parse_file",
    "parse_interval",
    "parse_number",
    "parse_text",
    "round_down",
    "round_up",
]

DECORATIONS = ("com", "dac", "def", "trv", "ill")

_PRECISION = 53  # significand bits of binary64, hidden bit included
_EMIN = -1022  # exponent of the smallest normal number
_QMIN = _EMIN - _PRECISION + 1  # -1074: exponent of the least significant subnormal bit
_EMAX = 1023
MAX_DOUBLE = math.ldexp(2**_PRECISION - 1, _EMAX - _PRECISION + 1)
MIN_SUBNORMAL = math.ldexp(1.0, _QMIN)
# Decimal exponents beyond this are refused instead of building gigantic integers; every
# literal in the vectors stays far below it (|e| <= 400 or so).
_MAX_DECIMAL_EXPONENT = 100_000


class ItlSyntaxError(ValueError):
    """A malformed ITL construct; the message names the source file and line."""


# --------------------------------------------------------------------------------------------
# Directed rounding of exact rationals to binary64
# --------------------------------------------------------------------------------------------


def _round_positive(q: Fraction, up: bool) -> float:
    """Round ``q > 0`` to binary64, towards +infinity if ``up`` else towards 0 (= down)."""
    n, d = q.numerator, q.denominator
    # e = floor(log2(q)): start from the bit-length estimate and correct it by one.
    e = n.bit_length() - d.bit_length()
    if (n << -e if e < 0 else n) < (d << e if e > 0 else d):
        e -= 1
    if e > _EMAX:  # q >= 2**1024: beyond every finite double
        return math.inf if up else MAX_DOUBLE
    qe = max(e - _PRECISION + 1, _QMIN)  # exponent of the unit in the last place
    num, den = (n << -qe, d) if qe < 0 else (n, d << qe)
    m, r = divmod(num, den)  # q = (m + r/den) * 2**qe with 0 <= r < den
    if up and r:
        m += 1
    # m <= 2**53; m * 2**qe >= 2**1024 only when rounding 1 ulp below 2**1024 upwards.
    if m.bit_length() + qe > _EMAX + 1:
        return math.inf if up else MAX_DOUBLE
    return math.ldexp(float(m), qe)  # exact: m has at most 53 significant bits


def round_down(q: Fraction | int) -> float:
    """Largest binary64 number ``<= q`` (``-inf`` below ``-MAX_DOUBLE``); zero gives +0.0."""
    q = Fraction(q)
    if q > 0:
        return _round_positive(q, up=False)
    if q < 0:
        return -_round_positive(-q, up=True) + 0.0
    return 0.0


def round_up(q: Fraction | int) -> float:
    """Smallest binary64 number ``>= q`` (``+inf`` above ``MAX_DOUBLE``); zero gives +0.0."""
    q = Fraction(q)
    if q > 0:
        return _round_positive(q, up=True)
    if q < 0:
        return -_round_positive(-q, up=False) + 0.0  # + 0.0 turns -0.0 into +0.0
    return 0.0


# --------------------------------------------------------------------------------------------
# Numbers
# --------------------------------------------------------------------------------------------

_DEC_RE = re.compile(r"([+-]?)(?:(\d+)(?:\.(\d*))?|\.(\d+))(?:[eE]([+-]?\d+))?")
_HEX_RE = re.compile(
    r"([+-]?)0[xX](?:([0-9a-fA-F]+)(?:\.([0-9a-fA-F]*))?|\.([0-9a-fA-F]+))(?:[pP]([+-]?\d+))?"
)
_INF_RE = re.compile(r"([+-]?)(?:infinity|inf)", re.IGNORECASE)
_NAN_RE = re.compile(r"nan", re.IGNORECASE)


def parse_number(text: str) -> Fraction | float:
    """The exact value of a number literal: a ``Fraction``, ``±math.inf`` or ``math.nan``.

    Raises ``ValueError`` for anything that is not a decimal, hex-float, infinity or NaN
    literal. ``-0.0`` and every other spelling of zero give ``Fraction(0)``.
    """
    if m := _DEC_RE.fullmatch(text):
        sign, ipart, fpart, fonly, exp = m.groups()
        if fonly is not None:
            ipart, fpart = "", fonly
        fpart = fpart or ""
        e = int(exp or 0) - len(fpart)
        if abs(e) > _MAX_DECIMAL_EXPONENT:
            raise ValueError(f"decimal exponent out of the supported range: {text!r}")
        digits = int((ipart or "") + fpart or "0")
        value = Fraction(digits) * Fraction(10) ** e
        return -value if sign == "-" else value
    if m := _HEX_RE.fullmatch(text):
        sign, ipart, fpart, fonly, exp = m.groups()
        if fonly is not None:
            ipart, fpart = "", fonly
        fpart = fpart or ""
        e = int(exp or 0) - 4 * len(fpart)
        if abs(e) > 4 * _MAX_DECIMAL_EXPONENT:
            raise ValueError(f"binary exponent out of the supported range: {text!r}")
        value = Fraction(int((ipart or "") + fpart, 16)) * Fraction(2) ** e
        return -value if sign == "-" else value
    if m := _INF_RE.fullmatch(text):
        return -math.inf if m.group(1) == "-" else math.inf
    if _NAN_RE.fullmatch(text):
        return math.nan
    raise ValueError(f"not a number literal: {text!r}")


# --------------------------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Number:
    """A bare number argument or result (pown exponents, ``inf [x] = 1.0``, ...)."""

    text: str
    value: Fraction | float  # exact Fraction, or ±inf / nan

    @property
    def is_integer(self) -> bool:
        return isinstance(self.value, Fraction) and self.value.denominator == 1

    def as_int(self) -> int:
        if not self.is_integer:
            raise ValueError(f"not an integer: {self.text!r}")
        return int(self.value)


@dataclass(frozen=True)
class IntervalLiteral:
    """An interval literal. ``lo_exact``/``hi_exact`` are the exact endpoints (``Fraction``
    or ``±inf``); ``lo``/``hi`` are the outward-rounded binary64 endpoints. An empty interval
    or NaI has ``lo = +inf, hi = -inf`` and ``None`` exact endpoints."""

    text: str
    kind: str  # "bounds" | "empty" | "nai"  ([entire] is kind "bounds" with infinite ends)
    lo_exact: Fraction | float | None
    hi_exact: Fraction | float | None
    lo: float
    hi: float
    decoration: str | None = None

    @property
    def is_empty(self) -> bool:
        return self.kind == "empty"

    @property
    def is_nai(self) -> bool:
        return self.kind == "nai"

    @property
    def is_decorated(self) -> bool:
        return self.decoration is not None or self.kind == "nai"

    @property
    def is_bounded(self) -> bool:
        """Non-empty with two finite binary64 endpoints (after outward rounding)."""
        return self.kind == "bounds" and math.isfinite(self.lo) and math.isfinite(self.hi)

    def contains_zero(self) -> bool:
        return self.kind == "bounds" and self.lo <= 0.0 <= self.hi


@dataclass(frozen=True)
class Name:
    """A bare word: ``true``, ``false``, a decoration (``com``), an overlap state, ..."""

    text: str


@dataclass(frozen=True)
class String:
    text: str  # without the quotes


@dataclass(frozen=True)
class NumberList:
    items: tuple[Number, ...]


Value = IntervalLiteral | Number | Name | String | NumberList


@dataclass(frozen=True)
class Statement:
    path: str  # file name as given
    line: int  # 1-based line of the operation name
    testcase: str
    op: str
    args: tuple[Value, ...]
    results: tuple[Value, ...]
    signals: tuple[str, ...] = field(default=())
    source: str = ""  # the statement text, whitespace-normalised

    @property
    def where(self) -> str:
        return f"{Path(self.path).name}:{self.line}"


# --------------------------------------------------------------------------------------------
# Interval literals
# --------------------------------------------------------------------------------------------

_KEYWORD_KIND = {"empty": "empty", "entire": "entire", "nai": "nai"}


def parse_interval(text: str) -> IntervalLiteral:
    """Parse an interval literal such as ``[1, 0x1p-3]_com``; raises ``ValueError``."""
    m = re.fullmatch(r"\[([^\[\]]*)\](?:_([A-Za-z]+))?", text)
    if not m:
        raise ValueError(f"not an interval literal: {text!r}")
    body, deco = m.group(1).strip(), m.group(2)
    if deco is not None and deco not in DECORATIONS:  # lower case only, as in the vectors
        raise ValueError(f"unknown decoration {deco!r} in {text!r}")
    keyword = _KEYWORD_KIND.get(body.lower())
    if keyword == "nai":
        if deco is not None:
            raise ValueError(f"NaI takes no decoration: {text!r}")
        return IntervalLiteral(text, "nai", None, None, math.inf, -math.inf)
    if deco == "ill":
        raise ValueError(f"decoration ill belongs to NaI only, write [nai]: {text!r}")
    if keyword == "empty" or body == "":
        if deco not in (None, "trv"):
            raise ValueError(f"the empty interval can only be decorated trv: {text!r}")
        return IntervalLiteral(text, "empty", None, None, math.inf, -math.inf, deco)
    if keyword == "entire":
        if deco == "com":
            raise ValueError(f"an unbounded interval cannot be decorated com: {text!r}")
        return IntervalLiteral(text, "bounds", -math.inf, math.inf, -math.inf, math.inf, deco)
    parts = [p.strip() for p in body.split(",")]
    if len(parts) == 1:
        parts = parts * 2  # point interval [a]
    if len(parts) != 2 or not all(parts):
        raise ValueError(f"an interval needs one or two endpoints: {text!r}")
    lo_x, hi_x = (parse_number(p) for p in parts)
    for x in (lo_x, hi_x):
        if isinstance(x, float) and math.isnan(x):
            raise ValueError(f"NaN endpoint in {text!r}")
    if lo_x == math.inf or hi_x == -math.inf:
        raise ValueError(f"infinite endpoint on the wrong side in {text!r}")
    if lo_x > hi_x:
        raise ValueError(f"lower endpoint above the upper one in {text!r}")
    if deco == "com" and (math.isinf(lo_x) or math.isinf(hi_x)):
        raise ValueError(f"an unbounded interval cannot be decorated com: {text!r}")
    lo = -math.inf if lo_x == -math.inf else round_down(lo_x)
    hi = math.inf if hi_x == math.inf else round_up(hi_x)
    return IntervalLiteral(text, "bounds", lo_x, hi_x, lo, hi, deco)


# --------------------------------------------------------------------------------------------
# Tokenizer and statement parser
# --------------------------------------------------------------------------------------------

_TOKEN_RE = re.compile(
    r"""
      (?P<ws>[ \t\r\f\v]+)
    | (?P<nl>\n)
    | (?P<lcomment>//[^\n]*)
    | (?P<bcomment>/\*.*?\*/)
    | (?P<string>"[^"\n]*")
    | (?P<interval>\[[^\[\]\n]*\](?:_[A-Za-z]+)?)
    | (?P<punct>[{};=,])
    | (?P<word>[^\s\[\]{};=,"/]+)
    """,
    re.VERBOSE | re.DOTALL,
)

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")


def _tokenize(text: str, path: str) -> list[tuple[str, str, int]]:
    tokens: list[tuple[str, str, int]] = []
    pos, line = 0, 1
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        if not m:
            snippet = text[pos : pos + 30].split("\n")[0]
            raise ItlSyntaxError(f"{path}:{line}: unexpected text {snippet!r}")
        kind, tok = m.lastgroup, m.group()
        if kind not in ("ws", "nl", "lcomment", "bcomment"):
            tokens.append((kind, tok, line))
        line += tok.count("\n")
        pos = m.end()
    return tokens


def _word_value(tok: str) -> Number | Name:
    try:
        return Number(tok, parse_number(tok))
    except ValueError:
        pass
    if _NAME_RE.fullmatch(tok):
        return Name(tok)
    raise ValueError(f"neither a number nor a name: {tok!r}")


class _Parser:
    def __init__(self, text: str, path: str) -> None:
        self.path = path
        self.toks = _tokenize(text, path)
        self.i = 0

    def error(self, msg: str, line: int | None = None) -> ItlSyntaxError:
        if line is None:
            line = self.toks[min(self.i, len(self.toks) - 1)][2] if self.toks else 1
        return ItlSyntaxError(f"{self.path}:{line}: {msg}")

    def peek(self) -> tuple[str, str, int] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self) -> tuple[str, str, int]:
        tok = self.peek()
        if tok is None:
            raise self.error("unexpected end of file")
        self.i += 1
        return tok

    def expect(self, text: str) -> tuple[str, str, int]:
        tok = self.take()
        if tok[1] != text:
            raise self.error(f"expected {text!r}, found {tok[1]!r}", tok[2])
        return tok

    def parse(self) -> list[Statement]:
        out: list[Statement] = []
        while self.peek() is not None:
            self.expect("testcase")
            kind, name, line = self.take()
            if kind != "word" or not _NAME_RE.fullmatch(name):
                raise self.error(f"bad testcase name {name!r}", line)
            self.expect("{")
            while True:
                tok = self.peek()
                if tok is None:
                    raise self.error(f"testcase {name!r} is not closed")
                if tok[1] == "}":
                    self.take()
                    break
                out.append(self.statement(name))
        return out

    def statement(self, testcase: str) -> Statement:
        kind, op, line = self.take()
        if kind != "word" or not _NAME_RE.fullmatch(op):
            raise self.error(f"expected an operation name, found {op!r}", line)
        start = self.i - 1
        args: list[Value] = []
        while (tok := self.peek()) is not None and tok[1] != "=":
            args.append(self.value())
        self.expect("=")
        results: list[Value] = []
        signals: list[str] = []
        while (tok := self.peek()) is not None and tok[1] not in (";", "signal"):
            results.append(self.value())
        if not results:
            raise self.error(f"{op}: no result after '='", line)
        if (tok := self.peek()) is not None and tok[1] == "signal":
            self.take()
            while (tok := self.peek()) is not None and tok[1] != ";":
                k, s, sline = self.take()
                if k != "word" or not _NAME_RE.fullmatch(s):
                    raise self.error(f"bad signal name {s!r}", sline)
                signals.append(s)
            if not signals:
                raise self.error("'signal' without a name", line)
        self.expect(";")
        source = " ".join(t[1] for t in self.toks[start : self.i]).replace(" ;", ";")
        return Statement(
            self.path,
            line,
            testcase,
            op,
            tuple(args),
            tuple(results),
            tuple(signals),
            source,
        )

    def value(self) -> Value:
        kind, tok, line = self.take()
        try:
            if kind == "interval":
                return parse_interval(tok)
            if kind == "string":
                return String(tok[1:-1])
            if kind == "word":
                return _word_value(tok)
            if tok == "{":
                items: list[Number] = []
                while True:
                    k, t, _line = self.take()
                    v = _word_value(t) if k == "word" else None
                    if not isinstance(v, Number):
                        raise ValueError(f"expected a number in a list, found {t!r}")
                    items.append(v)
                    sep = self.take()[1]
                    if sep == "}":
                        return NumberList(tuple(items))
                    if sep != ",":
                        raise ValueError(f"expected ',' or '}}' in a list, found {sep!r}")
        except ValueError as exc:
            raise self.error(str(exc), line) from None
        raise self.error(f"unexpected {tok!r}", line)


def parse_text(text: str, path: str = "<string>") -> list[Statement]:
    """Parse ITL source text; raises :class:`ItlSyntaxError` on anything malformed."""
    return _Parser(text, path).parse()


def parse_file(path: str | Path) -> list[Statement]:
    path = Path(path)
    return parse_text(path.read_text(encoding="utf-8"), str(path))


def parse_dir(directory: str | Path) -> dict[str, list[Statement]]:
    """Every ``*.itl`` file of ``directory``, by file name, in sorted order."""
    return {p.name: parse_file(p) for p in sorted(Path(directory).glob("*.itl"))}
