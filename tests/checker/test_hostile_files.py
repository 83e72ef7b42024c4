"""Hostile certificate files (issue 11): each variant is built as a hostile author would write it
(maximal precision, huge dyadic exponents, coprime giant denominators, maximal dimensions,
deep and wide nesting, duplicate keys at scale; for stack, gradient, training,
lipschitz-domain, transformer-match and transformer-cluster also the most heads, layers, steps,
iterates, leaves, atoms, tokens, pieces and flows, built on the archived certificates of
hostile_seeds/) for every kind and rule, and checked in a fresh process of its
own. Asserted: the verdict is REJECTED (with "resource limit" where the variant
aims at a limit), one line, no traceback, and the time and peak memory stay inside the bounds
that proofs/format.md section 1 ("Bounds of a check") promises, with a factor 10 of slack (these
are bounds checks of a promise, not speed benchmarks).

Each file is checked as ``certified check`` checks it: in a forked child under the backstop's
default limits (``certified.commands.check.limited_check``), whose peak resident memory is
promised to stay under 2 GB whatever the file.

The default run builds every variant at a small scale (kilobytes to a few megabytes; but
transformer_match_flows, whose replays use the whole budget of the file: minutes, checked with a
small budget by test_hostile_charges.py); the
``fullscale`` marker (deselected by default, ``pytest -m fullscale``) builds them at the byte
limit (minutes, up to 2 GB), and checks the honest 100,000-point interpolation certificate
(219 MB) under the same limits: VERIFIED, under 2 GB."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from fractions import Fraction
from math import isqrt
from pathlib import Path

import pytest

from certified.checker import MAX_BYTES, MAX_TOKENS

MB = 1024 * 1024
# proofs/format.md section 1, "Bounds of a check": what a user may rely on
PROMISED_SECONDS = lambda size: 30 + 2 * size / MB  # noqa: E731 (plus the rule's replay budget)
GB_MIB = 2e9 / MB  # the bar: 2 GB whatever the file (1907 MiB)
PROMISED_MIB = lambda size: min(400 + 24 * size / MB, GB_MIB)  # noqa: E731
SLACK = 10

# One worker process: reads each file, checks it in a forked child (which checks it in a child
# of its own under the backstop's default limits, as `certified check` does) and reports the
# wall-clock seconds, CPU seconds and peak resident memory (ru_maxrss of wait4: the child and
# its descendants, KiB on Linux).
_WORKER = r"""
import json, os, sys, time
import certified.checker  # loaded before the forks, as in `certified check` (limited_check)
from certified.commands.check import DEFAULT_MEMORY_MB, DEFAULT_TIME_LIMIT, limited_check
for path in sys.argv[1:]:
    r, w = os.pipe()
    t = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        v = limited_check(path, DEFAULT_TIME_LIMIT, DEFAULT_MEMORY_MB)
        os.write(w, json.dumps([v.verified, v.reason]).encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    _, status, usage = os.wait4(pid, 0)
    verified, reason = json.loads(data) if data else (None, f"child status {status}")
    print(json.dumps({"path": path, "verified": verified, "reason": reason,
                      "seconds": time.perf_counter() - t, "mib": usage.ru_maxrss / 1024,
                      "cpu": usage.ru_utime + usage.ru_stime}))
"""


def check_in_children(paths: list[Path]) -> dict[str, dict]:
    r = subprocess.run([sys.executable, "-c", _WORKER, *map(str, paths)],
                       capture_output=True, text=True, timeout=7200)  # fmt: skip
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
    return {Path(d["path"]).name: d for d in map(json.loads, r.stdout.splitlines())}


# --- the hostile variants ----------------------------------------------------------------------
# Each builder takes the target size in bytes and returns the file's bytes.


def _giant(i: int, digits: int = 3990) -> str:
    """1 / (10^digits + i): pairwise coprime-ish giant denominators (their lcm grows)."""
    return f'"1/1{"0" * (digits - 6)}{i:06d}"'


def _dyadics(size: int) -> str:
    return ",".join(['"1*2^-10000"'] * max(2, min(size // 15, MAX_TOKENS // 5)))


def _flow(points: str, pieces: str, d: int, method: str = "laminar-exact", extra: str = "",
          claim: str = "images") -> bytes:  # fmt: skip
    n = points.count("]")  # a claim of the right shape, so that the replay runs
    one = "[" + ",".join(['"0"' if claim == "images" else '["0", "0"]'] * d) + "]"
    claim = f'{{"{claim}": [{",".join([one] * n)}]}}'
    return (f'{{"kind": "flow", "version": 1, "instance": {{"schedule": {{"dimension": {d}, '
            f'"activation": "relu", "pieces": [{pieces}]}}, "points": [{points}], "time": "1"}},'
            f' "claim": {claim}, "hints": {{"method": "{method}"{extra}}}}}').encode()  # fmt: skip


def _laminar_piece(d: int, duration: str = '"1"') -> str:
    row = ",".join(['"1"'] + ['"0"'] * (d - 1))
    w = ",".join(f'["{"0" if k == 0 else "1"}"]' for k in range(d))
    return f'{{"duration": {duration}, "W": [{w}], "A": [[{row}]], "b": ["1/3"]}}'


def _measure(atoms: int, d: int, weight: Callable[[int], str], coord: str = '"1/2"') -> str:
    pts = ",".join(["[" + ",".join([coord] * d) + "]"] * atoms)
    return f'{{"points": [{pts}], "weights": [{",".join(weight(i) for i in range(atoms))}]}}'


def reader_dyadic_exponents(size: int) -> bytes:  # 12 bytes that stand for 1250 bytes each
    return _flow(",".join(f"[{x}]" for x in _dyadics(size).split(",")), _laminar_piece(1), 1)


def reader_giant_digits(size: int) -> bytes:  # 4000-digit rationals with coprime denominators
    n = max(8, size // 4000)
    return _flow(",".join(f"[{_giant(i)}]" for i in range(n)), _laminar_piece(1), 1)


def parser_deep_nesting(size: int) -> bytes:  # at most MAX_TOKENS brackets: the depth decides
    n = min(size // 2, MAX_TOKENS - 8)
    return b"[" * n + b"]" * n


def parser_wide_nesting(size: int) -> bytes:
    n = min(size // 5, MAX_TOKENS // 3 - 4)  # three tokens [ [ , per element
    return b'{"kind": "flow", "version": 1, "instance": [' + b"[[]]," * n + b'[]], "x": 1}'


def parser_duplicate_keys(size: int) -> bytes:
    n = max(2, min(size // 12, MAX_TOKENS - 8))
    keys = ",".join(f'"k{i:x}": 0' for i in range(n))
    return f'{{"kind": "flow", "version": 1, {keys}, "k0": 1}}'.encode()


def parser_number_tokens(size: int) -> bytes:  # the most values per byte the limits allow
    n = min(size // 2, MAX_TOKENS - 8)
    return b'{"kind": "flow", "version": 1, "instance": [' + b"0," * n + b'0], "x": 1}'


def flow_laminar_heights(size: int) -> bytes:  # every coordinate 4000 digits, many pieces
    n = max(4, size // 8000)
    pts = ",".join(f"[{_giant(i)}, {_giant(i + n)}]" for i in range(n))
    return _flow(pts, ",".join([_laminar_piece(2, '"1/64"')] * 64), 2)


def flow_laminar_dimension(size: int) -> bytes:  # the largest dimension the file can hold
    d = max(8, min(size // 8, MAX_TOKENS // 6))  # point, W, A and claim: 5 tokens a coordinate
    pts = "[" + ",".join(['"1/3"'] * d) + "]"
    return _flow(pts, _laminar_piece(d), d)


def flow_relu_regions_precision(size: int) -> bytes:
    n = max(4, size // 8000)
    pts = ",".join(f"[{_giant(i)}, {_giant(i + n)}]" for i in range(n))
    entry = '{"kind": "regions", "segments": [], "crossings": []}'
    hp = ",".join(["[" + ",".join([entry] * 8) + "]"] * n)
    extra = f', "order": 100, "precision": 4096, "grid": 64, "points": [{hp}]'
    return _flow(pts, ",".join([_laminar_piece(2, '"1/8"')] * 8), 2, "relu-regions", extra,
                 "enclosures")  # fmt: skip


def flow_relu_vectorised_giant(size: int) -> bytes:
    n = max(4, size // 8000)
    pts = ",".join(f"[{_giant(i)}, {_giant(i + n)}]" for i in range(n))
    return _flow(pts, _laminar_piece(2), 2, "relu-vectorised", "", "enclosures")


def flow_taylor_precision(size: int) -> bytes:  # precision 4096, order 60, many steps
    steps = max(64, min(size // 8, MAX_TOKENS - 64))
    field = ('{"dimension": 1, "parameters": [], "nodes": [["x", 0], ["sin", 0]], '
             '"outputs": [1]}')  # fmt: skip
    hints = (f'{{"method": "taylor-lohner", "order": 60, "jacobian_order": 60, '
             f'"precision": 4096, "steps": [[{",".join([_giant(1)] * 2)}{",1" * steps}]], '
             f'"boxes": []}}')  # fmt: skip
    return (f'{{"kind": "flow", "version": 1, "instance": {{"field": {field}, "pieces": '
            f'[{{"duration": "1", "parameters": []}}], "points": [["1/2"]], "time": "1"}}, '
            f'"claim": {{"times": ["1"], "enclosures": [[[["0", "1"]]]]}}, "hints": {hints}}}'
            ).encode()  # fmt: skip


def separation_precision(size: int) -> bytes:
    atoms = max(8, min(size // 40, MAX_TOKENS // 8 - 64))
    m = _measure(atoms, 1, lambda i: f'"1/{atoms}"')
    return (f'{{"kind": "separation", "version": 1, "instance": {{"mu": {m}, "nu": {m}}}, '
            f'"claim": {{"q": ["1/16"], "coordinate": 0, "mu": ["0", "1"], "nu": ["2", "3"]}}, '
            f'"hints": {{"precision": 16384}}}}').encode()  # fmt: skip


def _measure_kind(kind: str, body: Callable[[str], str], size: int) -> bytes:
    m = _measure(max(16, size // 4000), 2, _giant)
    return f'{{"kind": "{kind}", "version": 1, {body(m)}}}'.encode()


def wasserstein_giant_weights(size: int) -> bytes:
    return _measure_kind("wasserstein", lambda m: f'"instance": {{"mu": {m}, "nu": {m}, "q": 2}}, '
                         '"claim": {}, "hints": {}', size)  # fmt: skip


def wasserstein_dimension(size: int) -> bytes:  # coordinates with distinct denominators
    d = max(64, min(size // 40, MAX_TOKENS // 4 - 64))
    pt = "[" + ",".join(f'"1/{1000003 + 2 * k}"' for k in range(d)) + "]"
    m = f'{{"points": [{pt}, {pt}], "weights": ["1/2", "1/2"]}}'
    return (f'{{"kind": "wasserstein", "version": 1, "instance": {{"mu": {m}, "nu": {m}, '
            f'"q": 2}}, "claim": {{"lower_q": 0, "upper_q": 0, "lower": 0, "upper": 0}}, '
            f'"hints": {{"coupling": [], "phi": [0, 0], "psi": [0, 0]}}}}').encode()  # fmt: skip


def entropic_giant_weights(size: int) -> bytes:
    return _measure_kind("entropic", lambda m: f'"instance": {{"mu": {m}, "nu": {m}, '
                         '"gamma": "1/10", "q": 2, "quantity": "ot"}, "claim": {}, "hints": {}',
                         size)  # fmt: skip


def transport_to_cube_giant_weights(size: int) -> bytes:
    return _measure_kind(
        "transport-to-cube",
        lambda m: (
            f'"instance": {{"measure": {m}, '
            '"width": 2, "epsilon": "1/5", "q": 1}, "claim": {}, "hints": {}'
        ),
        size,
    )


def lipschitz_h3_giant_weights(size: int) -> bytes:
    return _measure_kind(
        "lipschitz",
        lambda m: (
            '"instance": {"Q": [["1", "0"]], "K": [["1", '
            '"0"]], "V": [["1", "0"], ["0", "1"]], "R": "1", "mu": '
            + m
            + ', "nu": '
            + m
            + '}, "claim": {"hypothesis": "H3", "verdict": '
            '"VERIFIED", "lhs_upper": 0, "rhs_lower": 0}, "hints": {}'
        ),
        size,
    )


def lipschitz_refuted_dimension(size: int) -> bytes:  # exact elimination of a d x d matrix
    d = max(8, min(256, int((size / 40) ** 0.5)))

    def rows(val: Callable[[int, int], str]) -> str:
        return "[" + ",".join("[" + ",".join(val(i, j) for j in range(d)) + "]"
                              for i in range(d)) + "]"  # fmt: skip

    V = rows(lambda i, j: f'"1/{i + j + 3}"' if i != j else f'"{7 * i + 5}"')
    X = "[" + ",".join(['"0"'] * d) + "]"
    return (f'{{"kind": "lipschitz", "version": 1, "instance": {{"Q": [{X}], "K": [{X}], '
            f'"V": {V}, "R": "1", "X": [{X}]}}, "claim": {{"hypothesis": "H1", "verdict": '
            f'"REFUTED", "lhs_lower": "1", "rhs_upper": "0", "X_prime": [[{"1/2"!r}' +
            ',"0"' * (d - 1) + ']]}, "hints": {"precision": 4096, "norms": {"V": {"upper": '
            '"1000000"}, "KtQ": {"upper": "0"}}}}').replace("'", '"').encode()  # fmt: skip


def lipschitz_domain_precision(size: int) -> bytes:
    n = max(4, min(64, int((size / 20) ** 0.5)))
    X = "[" + ",".join(["[" + ",".join(['"1/7"'] * n) + "]"] * n) + "]"
    return (f'{{"kind": "lipschitz-domain", "version": 1, "instance": {{"Q": {X}, "K": {X}, '
            f'"V": {X}, "R": "1", "n": {n}}}, "claim": {{}}, "hints": {{"precision": 4096, '
            f'"norms": {{}}}}}}').encode()  # fmt: skip


def interpolation_giant(size: int) -> bytes:
    n = max(4, size // 8000)
    X = ",".join(f"[{_giant(i)}, {_giant(i + n)}]" for i in range(n))
    piece = '{"duration": "1", "W": [["1"], ["-1"]], "A": [["1", "1"]], "b": ["1/3"]}'
    return (f'{{"kind": "interpolation", "version": 1, "instance": {{"X": [{X}], "Y": [{X}], '
            f'"schedule": {{"dimension": 2, "activation": "relu", "pieces": '
            f'[{",".join([piece] * 8)}]}}}}, "claim": {{"result": "exact", '
            f'"max_error_squared": "0", "switches": 0, "formula_switches": 0, '
            f'"variant": "general"}}, "hints": {{"phases": [{{"pieces": [0, 8], '
            f'"normal": ["1", "1"]}}]}}}}').encode()  # fmt: skip


def gradient_precision(size: int) -> bytes:  # the kinds of other modules: reader-level bounds
    pts = ",".join(f"[{_giant(i)}]" for i in range(max(4, size // 4000)))
    return (f'{{"kind": "gradient", "version": 1, "instance": {{"points": [{pts}]}}, '
            f'"claim": {{}}, "hints": {{"precision": 4096}}}}').encode()  # fmt: skip


# --- the kinds stack, gradient (ReLU), training, lipschitz-domain: built on the archived
# certificates of hostile_seeds/ (tests/checker/test_archived_certificates.py) -----------------
SEEDS = Path(__file__).parent / "hostile_seeds"


def _seed(name: str) -> dict:
    return json.loads((SEEDS / name).read_text())


def _ones(rows: int, cols: int) -> list:
    return [[1] * cols for _ in range(rows)]


def _stack(d: int, heads: list, tokens: list, prec: int = 53, layers: list | None = None,
           boxes: list | None = None, out: list | None = None) -> bytes:  # fmt: skip
    layers = layers or [{"type": "attention", "heads": heads}]
    out = [[["0", "0"]] * d] * len(tokens) if out is None else out
    return json.dumps({"kind": "stack", "version": 2,
                       "instance": {"model": {"dimension": d, "layers": layers}, "tokens": tokens},
                       "claim": {"output": out}, "hints": {"prec": prec, "layers": boxes or []}},
                      separators=(",", ":")).encode()  # fmt: skip


def stack_dimension(size: int) -> bytes:  # K^T Q, W V: d^3 exact products at the largest d
    d = max(8, min(4096, isqrt(size // 8), isqrt(MAX_TOKENS // 4) - 8))
    head = {"Q": _ones(d, d), "K": _ones(d, d), "V": _ones(d, d), "W": _ones(d, d)}
    return _stack(d, [head], [[1] * d])


def stack_giant_heads(size: int) -> bytes:  # K^T Q of coprime giant denominators
    d = max(2, isqrt(size // 8200))
    giants = [[_giant(d * i + j)[1:-1] for j in range(d)] for i in range(d)]
    return _stack(d, [{"Q": giants, "K": giants, "V": _ones(d, d)}], [[1] * d])


def stack_precision(size: int) -> bytes:  # 4096 tokens at 4096 bits, giant coordinates
    n, d = 4096, 8
    digits = max(1, min(3990, size // (n * d + 1) - 6))
    x = f"1/{10**digits + 1}" if digits > 1 else "1/3"
    head = {"Q": _ones(d, d), "K": _ones(d, d), "V": _ones(d, d)}
    return _stack(d, [head], [[x] * d] * n, prec=4096, out=[])  # (claim read after the cost)


def stack_layers(size: int) -> bytes:  # the most layers the file can hold, each box right but
    L = max(2, min(size // 46, MAX_TOKENS // 9))  # the claim's (8 of [ { , a layer)
    layer = {"type": "layernorm", "eps": 1}
    boxes = [[[[0, 0]]]] * (L - 1)
    return _stack(1, [], [[1]], layers=[layer] * L, boxes=boxes, out=[[[1, 1]]])


def gradient_relu_giant(size: int) -> bytes:  # the exact signs of A_k B + b_k, giant A, b
    cert, p, steps = _seed("gradient_relu.json"), 64, max(2, min(size // 40, 4000))
    digits = max(60, min(3990, size // 800))
    theta = [f"1/{10**digits + 2 * i + 1}" for i in range(3 * p)]
    cert["instance"]["relu"]["width"] = p
    cert["instance"]["pieces"][0]["parameters"] = theta
    h = cert["hints"]
    h.update(order=2, jacobian_order=1, relu_patterns=[[[1] * p]])
    h["steps"] = [[[f"1/{2 * steps}"] * steps]]
    h["boxes"] = [[[[[["-1", "1"]]]] * steps]]
    return json.dumps(cert).encode()


def training_iterates(size: int) -> bytes:  # the most iterates (the same one: no decrease)
    cert = _seed("training.json")
    it, h = cert["instance"]["iterates"][0], cert["hints"][0]
    k = max(2, size // (len(json.dumps(it)) + len(json.dumps(h)) + 200))
    cert["instance"]["iterates"], cert["hints"] = [it] * k, [h] * k
    for key in ("losses", "gradient_norms"):
        cert["claim"][key] = [cert["claim"][key][0]] * k
    return json.dumps(cert).encode()


def lipschitz_domain_tree(size: int) -> bytes:  # 2^D leaves, every one a valid drop, large nd
    n, d = 64, 64 if size > 16 * MB else 4
    D = max(4, min(20, (size // 96).bit_length() - 1))  # 2^(D+1) + 5 <= MAX_NODES
    cert = _seed("lipschitz_domain_verified.json")
    inst = cert["instance"]
    inst.update(n=n, Q=_ones(1, d), K=_ones(1, d), V=_ones(d, d))

    def bushy(level: int) -> list:  # preorder of a full tree splitting token 1's coordinates
        if level == D:
            return [-1]
        return [d + level % d, *bushy(level + 1), *bushy(level + 1)]

    # token 0 coordinate 0 in [-R, -R/2], token n-1 coordinate 0 in [-R, 0]: outside the
    # fundamental domain (bounds.md #domain-symmetry), so every leaf below is dropped
    tree = [0, 0, (n - 1) * d, *bushy(0), -1, -1, -1]
    cert["hints"].update(tree=tree, bounds=["drop"] * (2**D + 3))
    cert["hints"].pop("upper")
    cert["hints"]["norms"] = {"V": {"vector": [1] * d}, "KtQ": {"vector": [1] * d}}
    return json.dumps(cert).encode()


# --- transformer-match and transformer-cluster: built on their archived certificates ----------
def _match(atoms_per_flow: int, flows: int = 1, hints: dict | None = None, pieces: int = 0,
           weight: Callable[[int], str] | None = None) -> dict:  # fmt: skip
    """The archived match certificate (one-token flows of the field of d = 3) with ``flows``
    flows of ``atoms_per_flow`` atoms each (every atom the seed's first one, one measure each
    unless ``weight`` puts all of them in one measure of those weights), ``pieces`` pieces of
    one step each if given, the hints of every flow updated by ``hints``."""
    cert = _seed("transformer_match.json")
    flow, fc, fh = (cert[k]["flows"][0] for k in ("instance", "claim", "hints"))
    # claims [-2, 2]: short, and they contain every replayed enclosure (the flows go on)
    flow["points"] = [flow["points"][0]] * atoms_per_flow
    fc["enclosures"] = [[[["-2", "2"]] * 3] * atoms_per_flow]
    if pieces:  # (short numbers: the pieces are the bulk)
        piece = {"duration": f"1/{pieces}", "parameters": ["1", "0", "0", "4", "3", "0", "-2"]}
        flow["pieces"] = [piece] * pieces
        fh.update(steps=[[f"1/{pieces}"]] * pieces, jacobian_orders=[[8]] * pieces,
                  apriori=[["1/128"]] * pieces)  # fmt: skip
        flow["time"] = fc["times"][0] = "1"
        cert["claim"]["switches"] = pieces - 1
    fh.update(hints or {})
    cert["claim"]["eps"] = "1"  # the bounds "1" below pass the checks made before the replays
    total = atoms_per_flow * flows
    inst = cert["instance"]
    inst["flows"], cert["claim"]["flows"] = [flow] * flows, [fc] * flows
    cert["hints"]["flows"] = [fh] * flows
    if weight is None:
        inst["sizes"], inst["weights"] = [1] * total, [["1"]] * total
        inst["targets"] = [inst["targets"][0]] * total
        cert["claim"]["w2_squared"] = ["1"] * total  # (short; <= eps^2)
    else:
        inst["sizes"], inst["weights"] = [total], [[weight(i) for i in range(total)]]
        inst["targets"], cert["claim"]["w2_squared"] = inst["targets"][:1], ["1"]
    return cert


def transformer_match_atoms(size: int) -> bytes:  # one flow of the most atoms: its replay's cost
    n = max(6000, min(size // 100, MAX_TOKENS // 24))
    return json.dumps(_match(n)).encode()  # (measures of one atom: at most 100,000 a measure)


def transformer_match_giant_weights(size: int) -> bytes:  # coprime giant weights of one measure
    n = max(8, min(size // 4020, 100_000))
    return json.dumps(_match(n, weight=lambda i: _giant(i)[1:-1])).encode()


def transformer_match_precision(size: int) -> bytes:  # 4096 bits, order 60, arb: the cost
    n = max(2, min(size // 2000, MAX_TOKENS // 1024))  # (80 steps of 3 boxes an atom)
    boxes = [[[["-1", "1"]] * 3] * n]
    hints = {
        "precision": 4096,
        "order": 60,
        "jacobian_order": 60,
        "arithmetic": "arb",
        "jacobian_orders": [[60] * 41, [60] * 39],
        "boxes": [[boxes] * 41, [boxes] * 39],
    }
    cert = _match(n, weight=lambda i: f"1/{n}", hints=hints)
    cert["hints"]["flows"][0].pop("apriori")
    return json.dumps(cert).encode()


def transformer_match_pieces(size: int) -> bytes:  # the most pieces (one step each), 1000 atoms
    return json.dumps(_match(1000, pieces=max(800, min(size // 100, MAX_TOKENS // 40)))).encode()


def transformer_match_dimension(size: int) -> bytes:  # the linear field of the largest d
    d = max(600, min(10_000, size // 60))
    cert = _match(1)
    flow, fc = cert["instance"]["flows"][0], cert["claim"]["flows"][0]
    flow["field"] = {"dimension": d, "parameters": flow["field"]["parameters"],
                     "nodes": [["x", k] for k in range(d)], "outputs": list(range(d))}  # fmt: skip
    flow["points"], fc["enclosures"] = [["1/2"] * d], [[[["0", "1"]] * d]]
    cert["instance"].update(dimension=d, targets=[["1/2"] * d])
    return json.dumps(cert).encode()


def transformer_match_flows(size: int) -> bytes:  # many flows, each under the budget of one
    flows = max(3, min(size // 50_000, MAX_TOKENS // 12_000))  # ~10,500 values a flow
    return json.dumps(_match(500, flows=flows)).encode()


def transformer_cluster_tokens(size: int) -> bytes:  # n tokens of R^d: a field of dimension n d
    cert = _seed("transformer_cluster.json")
    d = 4
    n = max(150, min(10_000 // d, size // (60 * d)))  # (a field of at most 10,000 dimensions)
    flow, fc = cert["instance"]["flow"], cert["claim"]["flow"]
    nodes = [["x", k] for k in range(n * d)]
    flow["field"] = {"dimension": n * d, "parameters": [], "nodes": nodes,
                     "outputs": list(range(n * d))}  # fmt: skip
    flow["pieces"] = [{"duration": "1/4", "parameters": []}]
    flow["points"] = [[f"1/{k + 2}" for k in range(n * d)]]
    fc["enclosures"] = [[[["0", "1"]] * (n * d)]] * 2
    cert["instance"].update(tokens=n, dimension=d)
    cert["claim"]["witness"] = ["1"] * d
    return json.dumps(cert).encode()


def transformer_cluster_giant(size: int) -> bytes:  # giant coprime ends, witness, eps, pieces
    cert = _seed("transformer_cluster.json")
    flow, fc, h = cert["instance"]["flow"], cert["claim"]["flow"], cert["hints"]
    P = max(1, size // 80_000)  # pieces of giant parameters (the field's values + 1 / giant)
    params = flow["pieces"][0]["parameters"]

    def giant(i: int, base: str = "0") -> str:  # base - 1/G_i (coprime giants), exactly
        g = 10**3940 + 2 * i + 1
        q = Fraction(base) - Fraction(1, g)
        return f"{q.numerator}/{q.denominator}"

    if P > 1:
        flow["pieces"] = [{"duration": f"1/{4 * P}", "parameters": [
            giant(P * j + k, _exact(v)) for k, v in enumerate(params)]} for j in range(P)
        ]  # fmt: skip
        h.update(steps=[[f"1/{4 * P}"]] * P, jacobian_orders=[[8]] * P, apriori=[["1/8"]] * P)
        fc["times"] = ["1/4"]
        fc["enclosures"] = fc["enclosures"][-1:]
    last = fc["enclosures"][-1][0]
    fc["enclosures"][-1][0] = [[giant(2 * k, _exact(lo)), _exact(hi)]
                               for k, (lo, hi) in enumerate(last)]  # fmt: skip
    cert["claim"]["witness"] = [giant(7 + k, "1") for k in range(3)]
    cert["claim"]["eps"] = giant(11, "2")
    return json.dumps(cert).encode()


def _exact(v: str) -> str:
    """An exact number of the file as a Fraction's string (p/q or p)."""
    if "*2^" in v:
        m, e = v.split("*2^")
        q = Fraction(int(m)) * Fraction(2) ** int(e)
        return f"{q.numerator}/{q.denominator}" if q.denominator > 1 else str(q.numerator)
    return v


# name -> (builder, from which size the verdict must be a "resource limit" rejection)
NEVER = 2 * MAX_BYTES
VARIANTS: dict[str, tuple[Callable[[int], bytes], int]] = {
    "reader_dyadic_exponents": (reader_dyadic_exponents, 0),
    "reader_giant_digits": (reader_giant_digits, NEVER),
    "parser_deep_nesting": (parser_deep_nesting, NEVER),
    "parser_wide_nesting": (parser_wide_nesting, NEVER),
    "parser_duplicate_keys": (parser_duplicate_keys, 16 * MB),  # MAX_KEYS distinct keys
    "parser_number_tokens": (parser_number_tokens, NEVER),
    "flow_laminar_heights": (flow_laminar_heights, NEVER),
    "flow_laminar_dimension": (flow_laminar_dimension, NEVER),
    "flow_relu_regions_precision": (flow_relu_regions_precision, NEVER),
    "flow_relu_vectorised_giant": (flow_relu_vectorised_giant, NEVER),
    "flow_taylor_precision": (flow_taylor_precision, 0),
    "separation_precision": (separation_precision, 0),
    "wasserstein_giant_weights": (wasserstein_giant_weights, 0),
    "wasserstein_dimension": (wasserstein_dimension, 0),
    "entropic_giant_weights": (entropic_giant_weights, 0),
    "transport_to_cube_giant_weights": (transport_to_cube_giant_weights, 0),
    "lipschitz_h3_giant_weights": (lipschitz_h3_giant_weights, 0),
    "lipschitz_refuted_dimension": (lipschitz_refuted_dimension, 0),
    "lipschitz_domain_precision": (lipschitz_domain_precision, NEVER),
    "interpolation_giant": (interpolation_giant, NEVER),
    "gradient_precision": (gradient_precision, NEVER),
    "transformer_cluster_giant": (transformer_cluster_giant, NEVER),
    "transformer_cluster_tokens": (transformer_cluster_tokens, 0),
    "transformer_match_atoms": (transformer_match_atoms, 0),
    "transformer_match_giant_weights": (transformer_match_giant_weights, 0),
    "transformer_match_precision": (transformer_match_precision, 0),
    "transformer_match_pieces": (transformer_match_pieces, 0),
    "transformer_match_dimension": (transformer_match_dimension, 0),
    "transformer_match_flows": (transformer_match_flows, 0),
    "stack_dimension": (stack_dimension, 4 * MB),
    "stack_giant_heads": (stack_giant_heads, 4 * MB),
    "stack_precision": (stack_precision, 0),
    "stack_layers": (stack_layers, 32 * MB),
    "gradient_relu_giant": (gradient_relu_giant, 0),
    "training_iterates": (training_iterates, NEVER),
    "lipschitz_domain_tree": (lipschitz_domain_tree, 16 * MB),
}


# Built at (at least) this size in the default run: below it the variant is not over its limit
MIN_SIZE = {"transformer_match_atoms": 2 * MB}  # (20,000 atoms: 4e9 > MAX_MATCH_OPS)
# Only in the fullscale run: files whose replays use their rule's whole budget (minutes each;
# in the default run test_hostile_charges.py checks that budget with a small one)
FULLSCALE_ONLY = {"transformer_match_flows"}


def build_at(build: Callable[[int], bytes], size: int) -> bytes:
    """The variant at most ``size`` bytes long (the builders' sizes are estimates)."""
    data, target = build(size), size
    for _ in range(64):
        if len(data) <= size:
            return data
        target = int(target * size / len(data) * 0.97)
        data = build(target)
    raise AssertionError(f"{build.__name__}: its smallest file is over {size} bytes")


def _run(tmp_path: Path, size: int) -> None:
    paths, full = [], size >= MAX_BYTES // 2
    names = [name for name in VARIANTS if full or name not in FULLSCALE_ONLY]
    for name in names:
        data = build_at(VARIANTS[name][0], max(size, MIN_SIZE.get(name, 0)))
        assert len(data) <= MAX_BYTES, name
        (path := tmp_path / f"{name}.json").write_bytes(data)
        paths.append(path)
    results = check_in_children(paths)
    for name in names:
        threshold = VARIANTS[name][1]
        r, size = results[f"{name}.json"], (tmp_path / f"{name}.json").stat().st_size
        resource = size >= threshold
        assert r["verified"] is False, (name, r)
        assert "\n" not in r["reason"] and "Traceback" not in r["reason"], (name, r)
        assert not resource or r["reason"].startswith("resource limit"), (name, r)
        assert r["seconds"] <= SLACK * PROMISED_SECONDS(size), (name, r)
        assert r["mib"] <= min(SLACK * PROMISED_MIB(size), GB_MIB), (name, r)


def test_hostile_variants_small(tmp_path):
    _run(tmp_path, 256 * 1024)


@pytest.mark.slow
@pytest.mark.fullscale
def test_hostile_variants_at_the_byte_limit(tmp_path):
    _run(tmp_path, MAX_BYTES - 4096)


_HONEST = r"""
import sys
import numpy as np
from pathlib import Path
from certified.certificates import dumps_certificate, write_atomic
from certified.checker import gc_paused
from certified.interpolation import construct_interpolation, verify_interpolation
from certified.interpolation.certificate import interpolation_certificate
rng = np.random.default_rng(240109902)  # the instance of `certified bench interpolation`
X, Y = rng.random((100_000, 16)), rng.random((100_000, 16))
with gc_paused():
    interp = construct_interpolation(X, Y, 16)
    cert = interpolation_certificate(interp, verdict=verify_interpolation(X, Y, interp.schedule))
    write_atomic(Path(sys.argv[1]), dumps_certificate(cert).encode("utf-8"))
"""


@pytest.mark.slow
@pytest.mark.fullscale
def test_the_honest_100000_point_interpolation_certificate_under_2_gb(tmp_path):
    path = tmp_path / "interpolation.json"
    subprocess.run([sys.executable, "-c", _HONEST, str(path)], check=True, timeout=3600)
    r = check_in_children([path])[path.name]
    assert r["verified"] is True, r
    assert r["mib"] <= GB_MIB, r


if __name__ == "__main__":  # measure: python tests/checker/test_hostile_files.py SIZE DIR
    size, out = int(sys.argv[1]), Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, (build, _) in VARIANTS.items():
        if size >= MAX_BYTES // 2 or name not in FULLSCALE_ONLY:
            (p := out / f"{name}.json").write_bytes(
                build_at(build, max(size, MIN_SIZE.get(name, 0)))
            )
            paths.append(p)
    for name, r in check_in_children(paths).items():
        print(f"{name:36s} {Path(out / name).stat().st_size / MB:8.2f} MB {r['seconds']:8.2f} s "
              f"{r['mib']:8.0f} MiB {r['verified']} {r['reason'][:90]}")  # fmt: skip
