"""Benchmarks (``certified bench``): each hot path against the float64 computation of the same
thing, measured in the same run; the reported ratio is ``seconds / baseline_seconds``.

Timings are the minimum over repeats (the least perturbed run) after one warm-up call, which
also triggers the one-off compilation of the kernels.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

__all__ = ["Benchmark", "SUITES", "run_suite"]


@dataclass(frozen=True)
class Benchmark:
    """One measured figure. ``ratio = seconds / baseline_seconds``; ``target`` is the ratio
    the project aims for (None where there is no target)."""

    name: str
    seconds: float
    baseline: str
    baseline_seconds: float
    ratio: float
    target: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(d.pop("extra"))
        return d


def _best(f: Callable[[], Any], repeats: int) -> float:
    f()  # warm-up (compilation, caches)
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t)
    return best


def _bench(name, f, baseline_name, g, repeats, target=None, **extra) -> Benchmark:
    s = _best(f, repeats)
    b = _best(g, repeats)
    return Benchmark(name, s, baseline_name, b, s / b, target, dict(extra))


def bench_arith(quick: bool = False) -> list[Benchmark]:
    """Interval matrix product, elementwise multiply, exp and tanh against float64."""
    from flint import arb, arb_mat

    from certified.arith import Interval
    from certified.arith import interval as iv
    from certified.arith.ball import precision

    rng = np.random.default_rng(1788)
    reps = 3 if quick else 7
    out: list[Benchmark] = []

    # 64x64 @ 64x10000, both operands genuine intervals (radius 1e-6 relative)
    a = rng.standard_normal((64, 64))
    b = rng.standard_normal((64, 10_000))
    A = Interval(a - 1e-6 * abs(a), a + 1e-6 * abs(a))
    B = Interval(b - 1e-6 * abs(b), b + 1e-6 * abs(b))
    out.append(
        _bench(
            "interval matmul 64x64 @ 64x10000",
            lambda: A @ B,
            "float64 a @ b",
            lambda: a @ b,
            reps,
            target=5.0,
        )
    )

    P = Interval(a)
    out.append(
        _bench(
            "matmul point 64x64 @ interval 64x10000",
            lambda: P @ B,
            "float64 a @ b",
            lambda: a @ b,
            reps,
        )
    )

    n = 10**5 if quick else 10**6
    x = rng.standard_normal(n)
    y = rng.standard_normal(n)
    X = Interval(x - 1e-9 * abs(x), x + 1e-9 * abs(x))
    Y = Interval(y - 1e-9 * abs(y), y + 1e-9 * abs(y))
    out.append(
        _bench(
            f"interval multiply, {n} elements",
            lambda: X * Y,
            "float64 x * y",
            lambda: x * y,
            reps,
            target=10.0,
        )
    )
    z = rng.uniform(-20.0, 20.0, n)
    Z = Interval(z - 1e-9 * abs(z), z + 1e-9 * abs(z))
    out.append(
        _bench(
            f"interval exp, {n} elements",
            lambda: iv.exp(Z),
            "np.exp",
            lambda: np.exp(z),
            reps,
            target=20.0,
        )
    )
    out.append(
        _bench(
            f"interval tanh, {n} elements",
            lambda: iv.tanh(Z),
            "np.exp",
            lambda: np.exp(z),
            reps,
            target=20.0,
        )
    )
    out.append(
        _bench(
            f"interval tanh, {n} elements (vs np.tanh)",
            lambda: iv.tanh(Z),
            "np.tanh",
            lambda: np.tanh(z),
            reps,
        )
    )

    # the same computations in arb (53-bit balls), for comparison
    m = 10**4 if quick else 10**5
    with precision(53):
        xa = [arb(v) for v in x[:m]]
        ya = [arb(v) for v in y[:m]]
        za = [arb(v) for v in z[:m]]
    xs, ys, zs = x[:m], y[:m], z[:m]

    def arb_mul():
        with precision(53):
            return [p * q for p, q in zip(xa, ya, strict=True)]

    def arb_exp():
        with precision(53):
            return [p.exp() for p in za]

    out.append(
        _bench(f"arb multiply, {m} elements", arb_mul, "float64 x * y", lambda: xs * ys, reps)
    )
    out.append(_bench(f"arb exp, {m} elements", arb_exp, "np.exp", lambda: np.exp(zs), reps))
    cols = 500 if quick else 2_000
    with precision(53):
        am = arb_mat(a.tolist())
        bm = arb_mat(b[:, :cols].tolist())

    def arb_matmul():
        with precision(53):
            return am * bm

    bc = np.ascontiguousarray(b[:, :cols])
    out.append(
        _bench(
            f"arb_mat product 64x64 @ 64x{cols}",
            arb_matmul,
            "float64 a @ b",
            lambda: a @ bc,
            max(1, reps // 2),
        )
    )
    return out


SUITES: dict[str, Callable[[bool], list[Benchmark]]] = {"arith": bench_arith}


def run_suite(name: str, quick: bool = False) -> list[Benchmark]:
    """Run one benchmark suite by name."""
    return SUITES[name](quick)
