"""Strict reading of certificate files: bytes -> JSON value (proofs/format.md section 1,
"Encoding" and "Bounds of a check"). Every limit on the shape of the text (bytes, values,
nesting, distinct keys) is checked on the raw text before the JSON parser runs, and the bytes,
the text and the parsed values are never all alive at once."""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

from ._parse import MAX_BYTES, MAX_DEPTH, MAX_DIGITS, MAX_TOKENS, Rejected, show

# A JSON string, or an unterminated one to the end: a linear scan (possessive loops) tokenising
# as a JSON parser does up to its first error, so every bracket it would enter is counted.
_STRING = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+\\?(?:"|\Z)', re.DOTALL)
_PLAIN_STRING = re.compile(rb'"[^"]*+"')  # a JSON string when the text holds no backslash
_NOT_BRACKET = re.compile(r"[^\[\]{}]++")
_DEPTH_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
# Every byte but the seven structural ones (UTF-8 multibyte sequences hold no ASCII byte, so
# deleting bytes never forms or splits one of the seven).
_NON_STRUCTURAL = bytes(c for c in range(256) if c not in b'"[]{},:')
# From a position outside strings: the strings that are not keys and the text between them,
# then the next key (a string followed by ":"), matched at that position only (linear).
_JSTRING = r'"[^"\\]*+(?:\\.[^"\\]*+)*+"'
_NEXT_KEY = re.compile(
    rf"(?:{_JSTRING}(?![ \t\r\n]*+:)|[^\"]++)*+({_JSTRING})(?=[ \t\r\n]*+:)", re.DOTALL
)
# A file of more than MAX_MEMBERS object members may use at most MAX_KEYS distinct keys (as
# spelled): the parser keeps each distinct key (its memo, the objects, the string), about 200
# bytes each. Every kind uses fewer than 100.
MAX_MEMBERS, MAX_KEYS = 2**20, 2**16


def _outside_strings(data: bytes, text: str) -> str:
    """The characters ``[ ] { } , :`` of ``text`` outside JSON strings, in order. Fast path (no
    backslash, so every ``"`` delimits a string): keep the seven structural bytes and delete the
    strings (adjacent ``""`` pairs, then any left). Otherwise the string pattern above is applied
    to ``text`` (the result then also holds the other characters outside strings)."""
    if b"\\" not in data:
        skeleton = data.translate(None, _NON_STRUCTURAL).replace(b'""', b"")
        if b'"' in skeleton:  # a string holding one of []{},: (quotes still pair up in order)
            skeleton = _PLAIN_STRING.sub(b"", skeleton)
        if b'"' not in skeleton:  # (an odd quote: the JSON parser rejects the text)
            return skeleton.decode("ascii")
    return _STRING.sub("", text)


def _distinct_keys(text: str) -> int:
    """The number of distinct keys (as spelled) of ``text``, counted up to MAX_KEYS + 1."""
    seen: set[str] = set()
    pos = 0
    while len(seen) <= MAX_KEYS and (m := _NEXT_KEY.match(text, pos)) is not None:
        seen.add(m[1])
        pos = m.end()
    return len(seen)


def _check_shape(data: bytes, text: str) -> int:
    """Bound the number of values, the nesting depth and the distinct keys before the
    (recursive) JSON parser runs; return the number of object members (``:`` outside strings)."""
    outside_strings = _outside_strings(data, text)
    tokens = sum(outside_strings.count(c) for c in "[{,")
    if tokens > MAX_TOKENS:
        raise Rejected(f"too many JSON values: more than {MAX_TOKENS} of [ {{ , outside strings")
    members = outside_strings.count(":")
    brackets = _NOT_BRACKET.sub("", outside_strings)
    del outside_strings
    depth = max(accumulate(map(_DEPTH_STEP.__getitem__, brackets)), default=0)
    if depth > MAX_DEPTH:
        raise Rejected(f"nesting deeper than {MAX_DEPTH} levels")
    if members > MAX_MEMBERS and _distinct_keys(text) > MAX_KEYS:
        raise Rejected(f"resource limit: more than {MAX_KEYS} distinct keys")
    return members


_JSON_INTEGER = re.compile(r"-?(?:0|[1-9][0-9]*)", re.ASCII)


def _json_integer(token: str) -> int:
    if _JSON_INTEGER.fullmatch(token) is None or token == "-0":
        raise Rejected(f"integer {show(token)} is not canonical (no -0, no leading zeros)")
    if len(token.lstrip("-")) > MAX_DIGITS:
        raise Rejected(f"integer with more than {MAX_DIGITS} digits")
    return int(token)


def _json_float(token: str) -> Any:
    raise Rejected(f'number {show(token)} has a fraction or exponent: write "p/q" or "m*2^e"')


def _json_constant(token: str) -> Any:
    raise Rejected(f"{token} is not allowed: certificates hold only finite exact numbers")


def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):  # the first key seen twice
        del obj
        seen: set[str] = set()
        key = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise Rejected(f"duplicate key {show(key)}")
    return obj


_HOOKS = {"parse_int": _json_integer, "parse_float": _json_float,
          "parse_constant": _json_constant}  # fmt: skip


def load_json(data: bytes) -> Any:
    """Parse the bytes of a certificate file as strict JSON (proofs/format.md section 1)."""
    return load_json_from([data])


def load_json_from(holder: list) -> Any:
    """``load_json(holder.pop())``, dropping the bytes once decoded (the caller keeps no other
    reference to them: the file's bytes, its text and the parsed values are never all alive)."""
    data: Any = holder.pop()
    if len(data) > MAX_BYTES:
        raise Rejected(f"file larger than {MAX_BYTES} bytes")
    try:
        text = data.decode("utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        raise Rejected(f"not UTF-8: invalid byte at offset {exc.start}") from None
    if text.startswith("\ufeff"):
        raise Rejected("not valid JSON: byte order mark at the start")
    members = _check_shape(data, text)
    del data
    # Objects are built as dicts directly (no list of pairs): duplicate keys show as fewer
    # members in the dicts than ``:`` outside strings; the text is then parsed again, keeping
    # the pairs, to name the first duplicate key.
    seen = [0]

    def count(obj: dict) -> dict:
        seen[0] += len(obj)
        return obj

    try:
        value = json.loads(text, object_hook=count, **_HOOKS)
        if seen[0] != members:
            del value
            json.loads(text, object_pairs_hook=_json_object, **_HOOKS)
            raise Rejected("duplicate key")  # not reached: the parse above names the key
        return value
    except json.JSONDecodeError as e:
        raise Rejected(f"not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
