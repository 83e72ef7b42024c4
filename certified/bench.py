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


def _tanh_rk4(Ws, As, bs, tau, X0, steps):
    """Float64 classical RK4 for x' = W tanh(A x + b), vectorised over points (baseline)."""
    x = X0.copy()
    for W, A, b in zip(Ws, As, bs, strict=True):
        h = tau / steps
        for _ in range(steps):
            k1 = np.tanh(x @ A.T + b) @ W.T
            k2 = np.tanh((x + 0.5 * h * k1) @ A.T + b) @ W.T
            k3 = np.tanh((x + 0.5 * h * k2) @ A.T + b) @ W.T
            k4 = np.tanh((x + h * k3) @ A.T + b) @ W.T
            x = x + (h / 6) * (k1 + 2 * k2 + 2 * k3 + k4)
    return x


def bench_flow(quick: bool = False) -> list[Benchmark]:
    """The tanh ensemble of the flow issue: d = 3, p = 8, four pieces of 1/4, N = 1000."""
    from certified.flow.smooth import smooth_flow

    rng = np.random.default_rng(7)
    Ws, As, bs = [], [], []
    for _ in range(4):
        Ws.append(rng.standard_normal((3, 8)) / np.sqrt(8))
        As.append(rng.standard_normal((8, 3)))
        bs.append(rng.standard_normal(8))
    X0 = rng.uniform(-1, 1, (1000, 3))
    if quick:
        X0 = X0[:100]
    reps = 1 if quick else 3
    result = {}

    def certified_run():
        result["r"] = smooth_flow(Ws, As, bs, ["1/4"] * 4, X0, order=20, max_step="1/32")

    # float64 RK4 with 256 steps per piece: error about 1e-13 here (reported below)
    b = _bench(
        f"tanh ensemble N={len(X0)}, d=3, p=8, 4 pieces (certified)",
        certified_run,
        "float64 RK4, 256 steps/piece",
        lambda: _tanh_rk4(Ws, As, bs, 0.25, X0, 256),
        reps,
    )
    res = result["r"]
    x = _tanh_rk4(Ws, As, bs, 0.25, X0, 256)
    extra = dict(b.extra)
    extra.update(
        certified_points=len(X0) if res.status.value == "success" else 0,
        max_width=res.max_width(),
        float_max_deviation=float(np.max(np.abs(x - res.final.mid()))),
    )
    out = [Benchmark(b.name, b.seconds, b.baseline, b.baseline_seconds, b.ratio, None, extra)]
    out.extend(_bench_relu(quick))
    return out


def _relu_rk4(Ws, As, bs, tau, X0, steps):
    """Float64 classical RK4 for x' = W relu(A x + b), vectorised over points (baseline)."""
    x = X0.copy()
    h = tau / steps
    for W, A, b in zip(Ws, As, bs, strict=True):
        At, Wt = A.T, W.T

        def f(y, At=At, Wt=Wt, b=b):
            return np.maximum(y @ At + b, 0.0) @ Wt

        for _ in range(steps):
            k1 = f(x)
            k2 = f(x + 0.5 * h * k1)
            k3 = f(x + 0.5 * h * k2)
            k4 = f(x + h * k3)
            x = x + (h / 6) * (k1 + 2 * k2 + 2 * k3 + k4)
    return x


def _bench_relu(quick: bool) -> list[Benchmark]:
    """ReLU ensemble of the flow issue: N = 10,000 points, d = p = 16, 64 random non-laminar
    pieces of 1/64 (rng 0: W ~ N(0, 1/p), A ~ N(0, 1), b ~ N(0, 1), X0 ~ U(-1, 1)), certified
    by the vectorised engine against float64 RK4 with 8 steps per piece (the same flow, not
    certified; its error is reported). Then the region engine (arb, 128 bits, certificates) on
    a smaller instance against the float64 version of the same algorithm."""
    from certified.flow._relu_vec import relu_flow_vectorised
    from certified.flow.relu import relu_flow, relu_flow_float64

    rng = np.random.default_rng(0)
    d = p = 16
    L = 4 if quick else 64
    N = 200 if quick else 10_000
    W = [rng.normal(size=(d, p)) / np.sqrt(p) for _ in range(L)]
    A = [rng.normal(size=(p, d)) for _ in range(L)]
    b = [rng.normal(size=p) for _ in range(L)]
    X0 = rng.uniform(-1, 1, size=(N, d))
    tau = f"1/{L}"
    result = {}

    def certified_run():
        result["r"] = relu_flow_vectorised(W, A, b, [tau] * L, X0)

    bench = _bench(
        f"relu ensemble N={N}, d=16, p=16, {L} pieces (certified, vectorised, 53 bits)",
        certified_run,
        "float64 RK4, 8 steps/piece",
        lambda: _relu_rk4(W, A, b, 1.0 / L, X0, 8),
        1,
    )
    res = result["r"]
    x8 = _relu_rk4(W, A, b, 1.0 / L, X0, 8)
    mid = res.final.mid()
    extra = {
        "certified_points": N,
        "max_width": res.max_width(),
        "median_width": float(np.median(res.final.width_upper().max(axis=1))),
        "rk4_max_deviation_from_certified_midpoint": float(np.max(np.abs(x8 - mid))),
        "region_steps": res.hints["region_steps"],
        "window_steps": res.hints["window_steps"],
    }
    out = [Benchmark(bench.name, bench.seconds, bench.baseline, bench.baseline_seconds,
                     bench.ratio, None, extra)]  # fmt: skip
    # the region engine (certificates), smaller
    L2, N2 = (2, 10) if quick else (8, 100)
    X2 = X0[:N2]

    def regions_run():
        result["s"] = relu_flow(W[:L2], A[:L2], b[:L2], ["1/8"] * L2, X2)

    b2 = _bench(
        f"relu N={N2}, d=16, p=16, {L2} pieces of 1/8 (certified, region engine, prec 128)",
        regions_run,
        "float64, same region algorithm",
        lambda: relu_flow_float64(W[:L2], A[:L2], b[:L2], [0.125] * L2, X2),
        1,
    )
    s = result["s"]
    extra2 = {
        "certified_points": N2 - len(s.hints.get("rejected", {})),
        "max_width": s.max_width(),
    }
    out.append(Benchmark(b2.name, b2.seconds, b2.baseline, b2.baseline_seconds, b2.ratio, None,
                         extra2))  # fmt: skip
    return out


def bench_wasserstein(quick: bool = False) -> list[Benchmark]:
    """Certified W_q enclosures against POT (``certified/transport/_bench.py``)."""
    from certified.transport._bench import bench_wasserstein as run

    return run(quick)


def bench_interpolation(quick: bool = False) -> list[Benchmark]:
    """Exact interpolation at N = 100,000 (``certified/interpolation/bench.py``)."""
    from certified.interpolation.bench import bench_interpolation as run

    return run(quick)


SUITES: dict[str, Callable[[bool], list[Benchmark]]] = {
    "arith": bench_arith,
    "flow": bench_flow,
    "wasserstein": bench_wasserstein,
    "interpolation": bench_interpolation,
}


def run_suite(name: str, quick: bool = False) -> list[Benchmark]:
    """Run one benchmark suite by name."""
    return SUITES[name](quick)
