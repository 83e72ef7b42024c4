"""The reader under hostile texts (issue 11): duplicate keys are found without the parser's
lists of pairs (the dicts are built directly; fewer members in them than ``:`` outside strings
means a duplicate), and a file of many members may use only MAX_KEYS distinct keys (the parser
keeps each distinct key). Compared against Python's own parser with an explicit pairs hook."""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from certified.checker import _reader, check_bytes
from certified.checker._parse import Rejected
from certified.checker._reader import _distinct_keys, load_json

_KEYS = st.sampled_from(["a", "b", "kind", 'q"', "x:y", "[", "é", "\\"])
_JSON = st.recursive(
    st.integers(-5, 5) | st.sampled_from(["s", "t:u", '{"', "1/3"]),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(st.tuples(_KEYS, inner), max_size=4).map(lambda kv: ("OBJ", kv))
    ),
    max_leaves=12,
)


def _dump(value) -> str:
    """JSON text of ``value``, objects given as ("OBJ", pairs) so that keys may repeat."""
    if isinstance(value, tuple):
        return "{" + ", ".join(f"{json.dumps(k)}: {_dump(v)}" for k, v in value[1]) + "}"
    if isinstance(value, list):
        return "[" + ",".join(map(_dump, value)) + "]"
    return json.dumps(value)


def _first_duplicate(text: str) -> str | None:
    found: list[str] = []

    def hook(pairs):
        keys = [k for k, _ in pairs]
        if len(set(keys)) != len(keys) and not found:
            found.append(next(k for i, k in enumerate(keys) if k in keys[:i]))
        return dict(pairs)

    json.loads(text, object_pairs_hook=hook)
    return found[0] if found else None


@given(_JSON)
@example(("OBJ", [("a", 1), ("\\", ("OBJ", [("x:y", 1), ("x:y", 2)]))]))
@example([("OBJ", [("a", 1)]), ("OBJ", [("a", 1), ("b", 2), ("a", 3)])])
def test_duplicate_keys_are_found_wherever_they_are(value):
    text = _dump(value)
    duplicate = _first_duplicate(text)
    if duplicate is None:
        assert load_json(text.encode()) == json.loads(text)
    else:
        with pytest.raises(Rejected, match="duplicate key"):
            load_json(text.encode())


def test_a_duplicate_key_spelled_with_an_escape_is_named():
    with pytest.raises(Rejected, match="duplicate key 'kind'"):
        load_json(b'{"kind": 1, "k\\u0069nd": 2}')


@given(_JSON)
def test_distinct_keys_are_counted_as_spelled(value):
    text = _dump(value)
    spelled: set[str] = set()
    json.loads(text, object_pairs_hook=lambda p: spelled.update(json.dumps(k) for k, _ in p))
    assert _distinct_keys(text) == len(spelled)


def test_many_members_may_use_few_distinct_keys(monkeypatch):
    monkeypatch.setattr(_reader, "MAX_MEMBERS", 8)
    monkeypatch.setattr(_reader, "MAX_KEYS", 4)
    few = "[" + ",".join(['{"a": 1, "b": "c:d"}'] * 10) + "]"
    assert len(load_json(few.encode())) == 10
    many = "[" + ",".join(f'{{"k{i}": 1}}' for i in range(10)) + "]"
    with pytest.raises(Rejected, match="resource limit: more than 4 distinct keys"):
        load_json(many.encode())
    v = check_bytes(many.encode())
    assert not v.verified and v.reason == "resource limit: more than 4 distinct keys"
