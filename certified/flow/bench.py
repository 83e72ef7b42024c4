"""``certified bench flow``: the tanh ensemble (validated Taylor, compiled float64 kernels) and
the ReLU ensembles (vectorised engine; region engine with certificates), each against float64
RK4 or the float64 version of the same algorithm, in the same run.
"""

from __future__ import annotations

import numpy as np

from certified.commands.records import Benchmark, compare

__all__ = ["bench_flow"]


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
    b = compare(
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

    bench = compare(
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

    b2 = compare(
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
