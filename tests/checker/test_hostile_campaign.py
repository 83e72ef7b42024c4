"""A campaign of random malformed and hostile certificate files (issue 11): mutations of real
certificates of every kind (``hostile_seeds/``: one certificate of each kind of ``certified
demo``, and of every other kind and variant written by its command, see its README.md; all
VERIFIED, tests/checker/test_archived_certificates.py; and the golden lipschitz files).

Every mutation makes the file invalid by construction (a format rule of proofs/format.md or a
strict field check is broken, and no later mutation repairs it; names in lists, such as a
field's parameter names, are labels and never mutated), so the only right verdict is
REJECTED: asserted, for every file, through ``certified check`` with many files in one
process: exit status 1, exactly one ``REJECTED <file>: ...`` line per file in order, nothing
on stderr but the lines a terminal would show, no traceback, no hang.

The default run checks a small sample (CI); the full campaign of 10,000 files is
``pytest -m fullscale tests/checker/test_hostile_campaign.py`` or, with per-file times and the
peak memory, ``python tests/checker/test_hostile_campaign.py 10000 DIR``."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SEEDS = sorted((HERE / "hostile_seeds").glob("*.json")) + sorted(HERE.glob("golden_*.json"))

# --- mutations of a parsed certificate (each breaks a rule; markers become raw text) ---------
_RAW = "\u0000raw{}\u0000"  # a string leaf replaced by raw text after serialising


def _nodes(value, path=()):
    """Every (container, key) pair of the tree, the root's as (None, None)."""
    yield None, None, value
    stack = [value]
    while stack:
        node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for k, v in list(items):
            yield node, k, v
            if isinstance(v, (dict, list)) and v:
                stack.append(v)


_BAD_NUMBERS = ["1.5", "1e3", "-0", "NaN", "Infinity", "01", "true", "null",
                '"1.0"', '"+1"', '" 1"', '"0x10"', '"2/4"', '"1/1"', '"-0"', '"1/0"',
                '"2*2^3"', '"1*2^10001"', '"1*2^-99999"', '"1*2^ 3"', '"1/3/4"',
                '"' + "9" * 5000 + '"', "9" * 4001, '"1/' + "7" * 4001 + '"']  # fmt: skip
_BAD_CONTAINERS = ['"x"', "7", "true", "null", "1.5", "[[[[[]]]]]", '{"x": 1}']


_NUMBER = re.compile(r"-?[0-9]+(?:/[0-9]+|\*2\^-?[0-9]+)?")


def _leaf(rng: random.Random, cert: dict) -> tuple:
    """A leaf that is a number, or a word of an object's field (``"method": "laminar-exact"``);
    not a name in a list (a field's parameter names are labels: renaming one is no change)."""

    def fit(c, v) -> bool:
        if c is None or isinstance(v, (dict, list)):
            return False
        return isinstance(c, dict) or not isinstance(v, str) or bool(_NUMBER.fullmatch(v))

    leaves = [(c, k) for c, k, v in _nodes(cert) if fit(c, v)]
    return rng.choice(leaves) if leaves else (None, None)


def m_bad_number(rng, cert, raw):  # a number or word leaf -> not an exact number
    c, k = _leaf(rng, cert)
    if c is None:
        return False
    raw.append(rng.choice(_BAD_NUMBERS))
    c[k] = _RAW.format(len(raw) - 1)
    return True


def m_type_swap(rng, cert, raw):  # a container -> another type; a leaf -> a container
    nodes = [(c, k, v) for c, k, v in _nodes(cert) if c is not None]
    c, k, v = rng.choice(nodes)
    if isinstance(v, (dict, list)):
        choices = [
            x for x in _BAD_CONTAINERS if not x.startswith("[" if isinstance(v, list) else "{")
        ]
        raw.append(rng.choice(choices))
    else:
        raw.append(rng.choice(["[]", "{}", f"[{json.dumps(v)}]", f'{{"v": {json.dumps(v)}}}']))
    c[k] = _RAW.format(len(raw) - 1)
    return True


def m_deep(rng, cert, raw):  # a value wrapped in 40 arrays (MAX_DEPTH 32)
    c, k, v = rng.choice([(c, k, v) for c, k, v in _nodes(cert) if c is not None])
    raw.append("[" * 40 + json.dumps(v) + "]" * 40)
    c[k] = _RAW.format(len(raw) - 1)
    return True


def m_duplicate_key(rng, cert, raw):  # an object gets one of its keys twice
    objs = [v for _, _, v in _nodes(cert) if isinstance(v, dict) and v]
    obj = rng.choice(objs)
    key = rng.choice(list(obj))
    raw.append(f"{json.dumps(key)}: 0, {json.dumps(key)}")
    obj[_RAW.format(len(raw) - 1)] = obj.pop(key)
    return True


def m_unknown_field(rng, cert, raw):  # an object gets a field no kind knows
    objs = [v for _, _, v in _nodes(cert) if isinstance(v, dict)]
    rng.choice(objs)[rng.choice(["x", "comment", "Kind", "kind ", "hints2"])] = rng.choice([0, "1"])
    return True


def m_version(rng, cert, raw):  # a version the seed's kind does not know
    from certified.checker import KINDS

    known = {str(v) for v in KINDS.get(cert.get("kind"), {})}
    choices = ["0", "2", "3", "-1", '"1"', "1.0", "true", "null", "10" * 20, "[1]"]
    raw.append(rng.choice([v for v in choices if v not in known]))
    cert["version"] = _RAW.format(len(raw) - 1)
    return True


_SEED_KIND = [None]  # the kind of the seed being mutated (set by mutant)


def m_kind(rng, cert, raw):  # an unknown kind, or a known kind that is not the seed's
    kinds = ["flow", "separation", "lipschitz", "wasserstein", "interpolation", "entropic",
             "transport-to-cube", "gradient", "training", "stack", "lipschitz-domain",
             "transformer-cluster", "transformer-match", "Flow", "", "flow "]  # fmt: skip
    cert["kind"] = rng.choice([k for k in kinds if k not in (cert.get("kind"), _SEED_KIND[0])])
    return True


def m_giant_array(rng, cert, raw):  # an array grown to many copies of one of its elements
    arrays = [(c, k, v) for c, k, v in _nodes(cert) if c is not None and isinstance(v, list) and v]
    if not arrays:
        return False
    c, k, v = rng.choice(arrays)
    n = rng.choice([2, 3, 1000, 20000])
    raw.append("[" + ",".join([json.dumps(v[0])] * (len(v) * n + 1)) + "]")
    c[k] = _RAW.format(len(raw) - 1)
    return True  # (a longer array may still be valid: a breaking mutation always follows)


TREE: list[Callable] = [m_bad_number, m_type_swap, m_deep, m_duplicate_key, m_unknown_field,
                        m_version, m_kind]  # fmt: skip


# --- mutations of the bytes ---------------------------------------------------------------
def b_truncate(rng, data: bytes) -> bytes:
    end = data.rstrip().rfind(b"}")  # strictly before the closing brace
    return data[: rng.randrange(0, max(1, end))]


def b_byte(rng, data: bytes) -> bytes:  # a byte no certificate may hold, anywhere
    i = rng.randrange(len(data) + 1)
    return (
        data[:i] + rng.choice([b"\xff", b"\x00", b"\xc0\xaf", b"\xed\xa0\x80", b"\x1f"]) + data[i:]
    )


def b_framing(rng, data: bytes) -> bytes:  # BOM, two values, a non-object top level, nothing
    return rng.choice([b"\xef\xbb\xbf" + data, data + b" {}", b"[" + data + b"]", b"",
                       b"null", data.replace(b"{", b"[", 1), b"{" * 100000])  # fmt: skip


BYTES: list[Callable] = [b_truncate, b_byte, b_framing]


def mutant(rng: random.Random, seed: bytes) -> tuple[str, bytes]:
    """One invalid file from ``seed``: 1-3 tree mutations, then (sometimes) a byte mutation."""
    cert, raw, names = json.loads(seed), [], []
    _SEED_KIND[0] = cert.get("kind")
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        op = rng.choice([*TREE, m_giant_array])
        if op(rng, cert, raw):
            names.append(op.__name__)
    while not names or names[-1] == "m_giant_array":  # the last mutation breaks a rule
        op = rng.choice(TREE)
        if op(rng, cert, raw):
            names.append(op.__name__)
    text = json.dumps(cert, indent=rng.choice([None, 1]))
    text = re.sub(r'"\\u0000raw(\d+)\\u0000"', lambda m: raw[int(m[1])], text)
    data = text.encode()
    if rng.random() < 0.25:
        op = rng.choice(BYTES)
        data = op(rng, data)
        names.append(op.__name__)
    return "+".join(names), data


def write_campaign(n: int, out: Path, seed: int = 11) -> list[Path]:
    rng = random.Random(seed)
    seeds = [(p.stem, p.read_bytes()) for p in SEEDS]
    paths = []
    for i in range(n):
        stem, data = seeds[i % len(seeds)]
        name, data = mutant(rng, data)
        (path := out / f"{i:05d}-{stem}-{name}.json").write_bytes(data)
        paths.append(path)
    return paths


_PEAK = """
import os, resource, subprocess, sys
fd = int(sys.argv[1])
code = subprocess.run([sys.executable, *sys.argv[2:]], pass_fds=()).returncode
os.write(fd, str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss).encode())
sys.exit(code)
"""


def run_campaign(paths: list[Path]) -> dict:
    """``certified check`` on all files in one process; per-file times from the arrival of each
    line, the peak memory of any child (the backstop checks each file in a child)."""
    # through a small wrapper that reports the peak of its children (certified check and the
    # child of each file) on fd 3: this process's own children would count in ours
    peak_r, peak_w = os.pipe()
    argv = [sys.executable, "-c", _PEAK, str(peak_w), "-m", "certified.cli", "check",
            *map(str, paths)]  # fmt: skip
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            pass_fds=(peak_w,))  # fmt: skip
    os.close(peak_w)
    lines, times, last = [], [], t0
    for line in proc.stdout:
        now = time.perf_counter()
        lines.append(line.rstrip("\n"))
        times.append(now - last)
        last = now
    err = proc.stderr.read()
    code = proc.wait()
    with os.fdopen(peak_r) as f:
        peak_mib = int(f.read() or 0) / 1024
    return {"code": code, "lines": lines, "times": times, "stderr": err,
            "seconds": time.perf_counter() - t0, "peak_mib": peak_mib}  # fmt: skip


def assert_all_rejected(paths: list[Path], r: dict) -> None:
    assert r["code"] == 1, (r["code"], r["stderr"][-2000:])
    assert "Traceback" not in r["stderr"] and r["stderr"] == "", r["stderr"][-2000:]
    assert len(r["lines"]) == len(paths), (len(r["lines"]), len(paths))
    for path, line in zip(paths, r["lines"], strict=True):
        assert line.startswith(f"REJECTED {path}: "), line[:300]
        assert "internal error" not in line, line[:300]


def test_every_seed_is_a_certificate_of_a_known_kind():
    from certified.checker import KINDS

    kinds = {json.loads(p.read_bytes())["kind"] for p in SEEDS}
    assert kinds == set(KINDS), set(KINDS) ^ kinds  # every kind is mutated


@pytest.mark.parametrize("seed", SEEDS, ids=[p.stem for p in SEEDS])
def test_hints_of_the_wrong_type_are_rejected_by_name(seed):
    from certified.checker import check_certificate

    cert = json.loads(seed.read_bytes())
    for bad in (7, None, "x", [1]):
        cert["hints"] = bad
        reason = check_certificate(cert).reason
        assert "internal error" not in reason, reason
    if cert["kind"] == "transformer-match":  # campaign file 09586 (seed 11): hints.flows[0]
        cert = json.loads(seed.read_bytes())
        cert["hints"]["flows"][0] = 7
        assert check_certificate(cert).reason.startswith("hints.flows[0]: expected an object")


def test_a_sample_of_the_campaign_is_rejected_line_by_line(tmp_path):
    paths = write_campaign(60, tmp_path)
    assert_all_rejected(paths, run_campaign(paths))


@pytest.mark.slow
@pytest.mark.fullscale
def test_ten_thousand_hostile_files(tmp_path):
    paths = write_campaign(10_000, tmp_path)
    assert_all_rejected(paths, run_campaign(paths))


if __name__ == "__main__" and sys.argv[1] == "--write":  # the files, in a process of their own
    write_campaign(int(sys.argv[2]), Path(sys.argv[3]))
elif __name__ == "__main__":  # python tests/checker/test_hostile_campaign.py N DIR
    n, out = int(sys.argv[1]), Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    # written by a child: a child forked from a process that built the files would count that
    # process's memory in the peak (Linux keeps the high-water mark across exec)
    subprocess.run([sys.executable, __file__, "--write", str(n), str(out)], check=True)
    paths = sorted(out.glob("*.json"))
    r = run_campaign(paths)
    reasons = Counter(
        re.sub(r"\[\d+\]", "[i]", line.split(": ", 1)[-1])[:60] for line in r["lines"]
    )
    slow = sorted(range(len(r["times"])), key=r["times"].__getitem__)[-5:]
    print(json.dumps({"files": n, "exit": r["code"], "lines": len(r["lines"]),
                      "rejected": sum(x.startswith("REJECTED") for x in r["lines"]),
                      "verified": sum(x.startswith("VERIFIED") for x in r["lines"]),
                      "internal_errors": sum("internal error" in x for x in r["lines"]),
                      "resource_limits": sum("resource limit" in x for x in r["lines"]),
                      "tracebacks": r["stderr"].count("Traceback"), "stderr": r["stderr"][-500:],
                      "seconds": round(r["seconds"], 1), "peak_mib": round(r["peak_mib"]),
                      "slowest": [[paths[i].name, round(r["times"][i], 2)] for i in slow],
                      "bytes": sum(p.stat().st_size for p in paths)}, indent=1))  # fmt: skip
    for reason, count in reasons.most_common(25):
        print(f"{count:6d} {reason}")
    try:
        assert_all_rejected(paths, r)
        print("all rejected, one line each")
    except AssertionError as exc:
        print("FAILED:", str(exc)[:2000])
