"""10,000 malformed certificate files: each is REJECTED (exit 1) or unreadable (exit 2), fast,
without a traceback and without an internal error. Seeded, so every run checks the same files."""

from __future__ import annotations

import io
import json
import random
import subprocess
import sys
import time

import pytest
from checker_golden import containers, get, golden_certificates, leaves, replaced

from certified.arith.exact import to_fmpq
from certified.certificates import dumps_certificate, laminar_flow_exact
from certified.checker import check_bytes
from certified.checker._cli import main
from certified.errors import InputError

GOLDENS = golden_certificates(seed=99, count=6) + golden_certificates(99, 2, enclosures=True)
TEXTS = [dumps_certificate(c).encode() for c in GOLDENS]

BAD_TOKENS = [
    b"NaN", b"Infinity", b"-Infinity", b"1.5", b"1e5", b"-0", b"1E-3", b"0.0", b"01", b"true",
    b"null", b"[]", b"{}", b'""', b'"1*2^99999999"', b'"1e5"', b'"0.5"', b'" 1"', b'"+1"',
    b'"1/0"', b'"2/4"', b'"4*2^-1"', b'"-0"', b'"00"', b'"1/1"', b'"0/3"', b'"\\u0661"',
    b'"1_000"', b'"1*2^-99999"', b'"0x10"', b'"inf"', b'"nan"', b"9" * 5000,
    b'"' + b"9" * 5000 + b'"', b'"1*2^' + b"9" * 5000 + b'"', b"-" + b"1" * 100000,
    b"[" * 40 + b"]" * 40, b"[" * 100000, b'"\\ud800"', b'"\x01"', b"1 2",
]  # fmt: skip
WRONG_VALUES = [None, True, False, 0, -1, 1.5, "", "x", "relu", "1/2", [], [[]], {}, {"a": 1}]


def _same_number(a, b) -> bool:
    if type(a) is type(b) and a == b:
        return True
    try:
        return not isinstance(a, (list, dict, bool)) and to_fmpq(a) == to_fmpq(b)
    except (InputError, TypeError):
        return False


def _mutants(rng: random.Random):
    """Yield (category, bytes, must_reject)."""
    text = rng.choice(TEXTS)
    kind = rng.randrange(12)
    if kind == 0:
        yield "truncate", text[: rng.randrange(len(text))], False
    elif kind == 1:
        i = rng.randrange(len(text))
        yield "replace byte", text[:i] + bytes([rng.randrange(256)]) + text[i + 1 :], False
    elif kind == 2:
        i = rng.randrange(len(text))
        yield "insert byte", text[:i] + bytes([rng.randrange(256)]) + text[i:], False
    elif kind == 3:
        i = rng.randrange(len(text))
        yield "delete byte", text[:i] + text[i + 1 :], False
    elif kind == 4:
        yield "random bytes", rng.randbytes(rng.randrange(300)), True
    elif kind == 5:
        # a number token (quoted or not) replaced by a bad token
        starts = [i for i in range(len(text)) if text[i : i + 1] == b'"' and text[i + 1 : i + 2]
                  in b"-0123456789"]  # fmt: skip
        i = rng.choice(starts)
        j = text.index(b'"', i + 1) + 1
        yield "bad token", text[:i] + rng.choice(BAD_TOKENS) + text[j:], True
    elif kind == 6:
        # exact-image goldens: every single edit of them is rejected (test_flow_rule.py), so
        # only a respelling of the same number could pass, and those are skipped
        cert = rng.choice(GOLDENS[:6])
        paths = [p for p, _ in leaves(cert)] + [p for p, _ in containers(cert) if p]
        path = rng.choice(paths)
        value = rng.choice(WRONG_VALUES)
        if not _same_number(get(cert, path), value):
            yield "wrong type", json.dumps(replaced(cert, path, value)).encode(), True
    elif kind == 7:
        depth = rng.choice([33, 34, 100, 1000, 10**5])
        opener, closer = rng.choice([(b"[", b"]"), (b'{"a":', b"}")])
        yield "deep", opener * depth + b"0" + closer * depth, True
    elif kind == 8:
        # a key duplicated inside its own object
        keys = [b'"kind"', b'"version"', b'"instance"', b'"claim"', b'"hints"', b'"points"',
                b'"schedule"', b'"duration"', b'"W"', b'"method"']  # fmt: skip
        key = rng.choice(keys)
        i = text.index(key)
        yield "duplicate key", text[:i] + key + b": 0, " + text[i:], True
    elif kind == 9:
        bad = rng.choice([b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\x80"])
        i = rng.randrange(len(text))
        yield "not UTF-8", text[:i] + bad + text[i:], True
    elif kind == 10:
        yield "not an object", rng.choice([b"", b" ", b"[]", b"1", b'"flow"', b"null", b"{}"]), True
    else:
        yield "BOM", b"\xef\xbb\xbf" + text, True


def malformed(n: int, seed: int = 12345):
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        out.extend(_mutants(rng))
    return out[:n]


CASES = malformed(10_000)


def _content_preserved_or_claim_still_true(cert, originals) -> bool:
    """A byte edit may pass only if it left the content unchanged (whitespace), or moved an
    enclosure end of an enclosure certificate so that the claim is still true."""
    if cert in originals:
        return True
    for original in originals:
        if "enclosures" in original["claim"] and {**cert, "claim": None} == {
            **original,
            "claim": None,
        }:
            inst = original["instance"]
            images = laminar_flow_exact(inst["schedule"], inst["points"])
            boxes = cert["claim"]["enclosures"]
            return all(
                to_fmpq(lo) <= images[i, k] <= to_fmpq(hi)
                for i, row in enumerate(boxes)
                for k, (lo, hi) in enumerate(row)
            )
    return False


def test_ten_thousand_malformed_files_are_rejected_fast_and_cleanly():
    originals = [json.loads(t) for t in TEXTS]
    slowest = 0.0
    start = time.perf_counter()
    categories: dict[str, int] = {}
    for category, data, must_reject in CASES:
        t0 = time.perf_counter()
        verdict = check_bytes(data)
        slowest = max(slowest, time.perf_counter() - t0)
        assert not verdict.reason.startswith("internal error"), (category, data[:200], verdict)
        assert "\n" not in verdict.reason
        if verdict.verified:
            assert not must_reject, (category, data[:200])
            assert _content_preserved_or_claim_still_true(json.loads(data), originals)
        categories[category] = categories.get(category, 0) + 1
    assert len(categories) == 12
    assert slowest < 2.0
    assert time.perf_counter() - start < 60


def test_malformed_files_through_the_command_line_entry_point(tmp_path):
    paths = []
    for k, (_, data, must_reject) in enumerate(CASES[:300]):
        if must_reject:
            path = tmp_path / f"bad{k}.json"
            path.write_bytes(data)
            paths.append(str(path))
    out = io.StringIO()
    assert main(paths, out) == 1
    lines = out.getvalue().splitlines()
    assert len(lines) == len(paths)
    for line, path in zip(lines, paths, strict=True):
        assert line.startswith(f"REJECTED {path}: ")


@pytest.mark.parametrize("index", [4, 5, 6, 7, 8, 9, 11])
def test_a_few_malformed_files_through_the_real_cli(tmp_path, index):
    category, data, _ = next(c for c in CASES if c[0] == _CATEGORIES[index])
    path = tmp_path / "bad.json"
    path.write_bytes(data)
    r = subprocess.run(
        [sys.executable, "-m", "certified.checker", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 1, (category, r.stdout, r.stderr)
    assert r.stderr == ""
    assert r.stdout.startswith(f"REJECTED {path}: ") and r.stdout.count("\n") == 1


_CATEGORIES = [
    "truncate", "replace byte", "insert byte", "delete byte", "random bytes", "bad token",
    "wrong type", "deep", "duplicate key", "not UTF-8", "not an object", "BOM",
]  # fmt: skip
