"""Benchmarks (``certified bench``): each hot path against the float64 computation of the same
thing, measured in the same run; the reported ratio is ``seconds / baseline_seconds``.

Timings are the minimum over repeats (the least perturbed run) after one warm-up call, which
also triggers the one-off compilation of the kernels. The suites come from the command registry
(``certified.commands.registry``): each family registers its own; the arithmetic suite is here.
"""

from __future__ import annotations

import argparse
import time

from certified.commands.records import Benchmark, compare
from certified.commands.registry import bench_suites, load
from certified.verdict import Outcome

__all__ = ["Benchmark", "add_arguments", "bench_arith", "run", "run_suite", "suite_names"]


def suite_names() -> list[str]:
    """The registered benchmark suites, sorted."""
    return sorted(bench_suites())


def run_suite(name: str, quick: bool = False) -> list[Benchmark]:
    """Run one benchmark suite by name (KeyError if no family registers it)."""
    return load(bench_suites()[name])(quick)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``certified bench``."""
    parser.add_argument("suite", choices=suite_names(), help="which hot paths to measure")
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    parser.add_argument("--quick", action="store_true", help="smaller sizes (for smoke tests)")


def run(args: argparse.Namespace) -> int:
    """Run ``certified bench SUITE``; print the figures (a table, or one JSON object)."""
    from certified._progress import Progress
    from certified.certificates import command_json, print_json

    t0 = time.perf_counter()
    with Progress("bench").stage(f"running suite {args.suite}"):
        results = run_suite(args.suite, quick=args.quick)
    seconds = time.perf_counter() - t0
    if args.json:
        print_json(
            command_json(
                "bench",
                Outcome.VERIFIED,
                None,
                seconds,
                suite=args.suite,
                benchmarks=[r.to_json() for r in results],
            )
        )
        return 0
    print(f"certified bench {args.suite}: ratio = seconds / baseline seconds, same run")
    print(f"  {'benchmark':46s} {'seconds':>10s} {'baseline':>16s} {'base s':>10s} {'ratio':>8s}")
    for r in results:
        target = "" if r.target is None else f"  (target <= {r.target:g})"
        print(
            f"  {r.name:46s} {r.seconds:10.5f} {r.baseline:>16s} {r.baseline_seconds:10.5f} "
            f"{r.ratio:8.2f}{target}"
        )
        for key, value in r.extra.items():
            print(f"      {key} = {value}")
    return 0


def bench_arith(quick: bool = False) -> list[Benchmark]:
    """Interval matrix product, elementwise multiply, exp and tanh against float64."""
    import numpy as np
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
        compare(
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
        compare(
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
        compare(
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
        compare(
            f"interval exp, {n} elements",
            lambda: iv.exp(Z),
            "np.exp",
            lambda: np.exp(z),
            reps,
            target=20.0,
        )
    )
    out.append(
        compare(
            f"interval tanh, {n} elements",
            lambda: iv.tanh(Z),
            "np.exp",
            lambda: np.exp(z),
            reps,
            target=20.0,
        )
    )
    out.append(
        compare(
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
        compare(f"arb multiply, {m} elements", arb_mul, "float64 x * y", lambda: xs * ys, reps)
    )
    out.append(compare(f"arb exp, {m} elements", arb_exp, "np.exp", lambda: np.exp(zs), reps))
    cols = 500 if quick else 2_000
    with precision(53):
        am = arb_mat(a.tolist())
        bm = arb_mat(b[:, :cols].tolist())

    def arb_matmul():
        with precision(53):
            return am * bm

    bc = np.ascontiguousarray(b[:, :cols])
    out.append(
        compare(
            f"arb_mat product 64x64 @ 64x{cols}",
            arb_matmul,
            "float64 a @ b",
            lambda: a @ bc,
            max(1, reps // 2),
        )
    )
    return out
