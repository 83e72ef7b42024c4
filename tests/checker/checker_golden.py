"""Golden flow certificates and single-edit tampering, shared by the checker tests.

Golden instances are built so that *every number matters* (proofs/checker_soundness.md,
"Which edits a checker must notice"): every coordinate of every normal ``a`` is nonzero, every
``w_i`` is orthogonal to ``a`` with all coordinates nonzero, and every neuron is strictly
active (``a.x + b_i > 0``) for at least one point when its piece starts.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Iterator
from typing import Any

from flint import fmpq

from certified.arith.exact import to_fmpq
from certified.certificates import exact_number, flow_certificate

Path = tuple[Any, ...]

WORDS = {  # the non-numeric string leaves and other values of their field
    "kind": ["Flow", "flows", "interpolation", ""],
    "activation": ["tanh", "sigmoid", "leaky_relu", "ReLU", "relu "],
    "method": ["laminar", "laminar-exact ", "taylor", ""],
}


def random_rational(rng: random.Random, nonzero: bool = False) -> fmpq:
    """Small rationals, dyadics with large exponents (written "m*2^e"), and integers."""
    while True:
        kind = rng.random()
        if kind < 0.5:
            q = fmpq(rng.randint(-9, 9), rng.randint(1, 9))
        elif kind < 0.8:
            q = fmpq(rng.randint(-(2**40), 2**40), 2 ** rng.randint(0, 45))
        else:
            q = fmpq(rng.randint(-5, 5))
        if q != 0 or not nonzero:
            return q


def dot(u: list[fmpq], v: list[fmpq]) -> fmpq:
    return sum((x * y for x, y in zip(u, v, strict=True)), fmpq(0))


def laminar_step(x: list[fmpq], tau: fmpq, a: list[fmpq], W: list[list[fmpq]], b: list[fmpq]):
    """The closed form of theorems.md section 2 (third implementation, for cross-checks)."""
    s = dot(a, x)
    out = list(x)
    for i, b_i in enumerate(b):
        z = s + b_i
        if z > 0:
            for k in range(len(x)):
                out[k] += tau * W[k][i] * z
    return out


def random_laminar_instance(
    rng: random.Random, d: int, p: int, n_pieces: int, n_points: int
) -> tuple[dict[str, Any], list[list[fmpq]], list[list[fmpq]]]:
    """A laminar ReLU schedule, points, and their exact images; every number matters."""
    points = [[random_rational(rng) for _ in range(d)] for _ in range(n_points)]
    x = [list(pt) for pt in points]
    pieces = []
    for _ in range(n_pieces):
        a = [random_rational(rng, nonzero=True) for _ in range(d)]
        columns = []
        while len(columns) < p:
            r = [random_rational(rng) for _ in range(d)]
            w = [r_k - dot(a, r) / dot(a, a) * a_k for r_k, a_k in zip(r, a, strict=True)]
            if all(c != 0 for c in w):
                columns.append(w)
        b = []
        for _ in range(p):  # neuron i is strictly active at some point when the piece starts
            n_star = rng.randrange(n_points)
            delta = fmpq(rng.randint(1, 9), rng.randint(1, 9))
            b.append(delta - dot(a, x[n_star]))
        tau = fmpq(rng.randint(1, 9), rng.randint(1, 9))
        W = [[columns[i][k] for i in range(p)] for k in range(d)]
        x = [laminar_step(pt, tau, a, W, b) for pt in x]
        pieces.append({"duration": tau, "W": W, "A": [list(a) for _ in range(p)], "b": b})
    schedule = {
        "dimension": d,
        "activation": "relu",
        "pieces": [
            {
                "duration": exact_number(pc["duration"]),
                "W": [[exact_number(v) for v in row] for row in pc["W"]],
                "A": [[exact_number(v) for v in row] for row in pc["A"]],
                "b": [exact_number(v) for v in pc["b"]],
            }
            for pc in pieces
        ],
    }
    return schedule, points, x


def golden_certificates(seed: int, count: int, enclosures: bool = False) -> list[dict[str, Any]]:
    """``count`` golden certificates (exact images, or tight-to-loose enclosures)."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        d, p = rng.randint(2, 5), rng.randint(1, 4)
        schedule, points, images = random_laminar_instance(
            rng, d, p, rng.randint(1, 5), rng.randint(1, 5)
        )
        if not enclosures:
            cert = flow_certificate(schedule, points)
            assert [[to_fmpq(v) for v in row] for row in cert["claim"]["images"]] == images
        else:
            radii = [fmpq(0), fmpq(1, 2**50), fmpq(1, 1000), fmpq(3)]
            boxes = [
                [[v - rng.choice(radii), v + rng.choice(radii)] for v in row] for row in images
            ]
            cert = flow_certificate(schedule, points, enclosures=boxes)
        out.append(cert)
    return out


def leaves(obj: Any, path: Path = ()) -> Iterator[tuple[Path, Any]]:
    """Every scalar leaf (path, value), depth first."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield from leaves(value, (*path, key))
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            yield from leaves(value, (*path, i))
    else:
        yield path, obj


def containers(obj: Any, path: Path = ()) -> Iterator[tuple[Path, Any]]:
    """Every dict and list (path, value)."""
    if isinstance(obj, (dict, list)):
        yield path, obj
        items = obj.items() if isinstance(obj, dict) else enumerate(obj)
        for key, value in items:
            yield from containers(value, (*path, key))


def get(obj: Any, path: Path) -> Any:
    for key in path:
        obj = obj[key]
    return obj


def replaced(obj: Any, path: Path, value: Any) -> Any:
    new = copy.deepcopy(obj)
    get(new, path[:-1])[path[-1]] = value
    return new


def field_name(path: Path) -> Any:
    return next((k for k in reversed(path) if isinstance(k, str)), None)


def number_variants(value: Any) -> list[Any]:
    """Other valid exact numbers: +1, +1/1000 and the negation, in canonical spelling."""
    if isinstance(value, int):
        return [value + 1, value - 1]
    q = to_fmpq(value)
    out = [exact_number(q + 1), exact_number(q + fmpq(1, 1000))]
    if q != 0:
        out.append(exact_number(-q))
    return out


def single_number_edits(cert: dict[str, Any]) -> Iterator[tuple[Path, Any, dict[str, Any]]]:
    """Every certificate differing from ``cert`` in exactly one leaf (number or word)."""
    for path, value in leaves(cert):
        name = field_name(path)
        variants = WORDS[name] if name in WORDS else number_variants(value)
        for variant in variants:
            yield path, variant, replaced(cert, path, variant)


def structural_edits(cert: dict[str, Any]) -> Iterator[tuple[str, Path, dict[str, Any]]]:
    """Delete any field or element, add an unknown field, append a duplicate element."""
    for path, node in containers(cert):
        if isinstance(node, dict):
            for key in node:
                new = copy.deepcopy(cert)
                del get(new, path)[key]
                yield "delete field", (*path, key), new
            new = copy.deepcopy(cert)
            get(new, path)["comment"] = "unknown field"
            yield "add field", path, new
        else:
            for i in range(len(node)):
                new = copy.deepcopy(cert)
                del get(new, path)[i]
                yield "delete element", (*path, i), new
            new = copy.deepcopy(cert)
            get(new, path).append(copy.deepcopy(node[-1]))
            yield "append element", path, new
