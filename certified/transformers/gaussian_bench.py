"""``certified bench transformer`` entry of the Gaussian Transformer PDE (issue 20's bar:
d = 8 to T = 1 in <= 1 s with width <= 1e-12): the certified flow of the moment ODE against a
float64 RK4 of the same ODE to the same accuracy, in the same run.
"""

from __future__ import annotations

import time

import numpy as np

from certified.commands.records import Benchmark

__all__ = ["bench_gaussian_pde", "rk4_moments"]


def _instance(d: int, seed: int = 20):
    """Random heads of ordinary scale (entries N(0, 1/d) scaled by 1/2), Sigma0 = I/2 + L Lᵀ/(2d)
    (exact doubles)."""
    from certified.transformers.gaussian_pde import parse_params

    rng = np.random.default_rng(seed)
    Q, K, V = (0.5 * rng.standard_normal((d, d)) / np.sqrt(d) for _ in range(3))
    L = rng.standard_normal((d, d)) / np.sqrt(d)
    S = 0.5 * np.eye(d) + 0.5 * (L @ L.T) / d
    S = 0.5 * (S + S.T)
    params = {"mean": rng.standard_normal(d).tolist(), "cov": S.tolist(), "Q": Q.tolist(),
              "K": K.tolist(), "V": V.tolist()}  # fmt: skip
    return parse_params(params, time=1), (Q.T @ K, V)


def rk4_moments(m, S, heads, T: float, steps: int):
    """The moment ODE by the classical RK4 in float64 (heads: list of (A, V)). Guarantee: none
    (a baseline)."""

    def f(m, S):
        M = sum(V @ S @ A for A, V in heads)
        dm = sum(V @ m for _, V in heads) + M @ m
        MS = M @ S
        return dm, MS + MS.T

    h = T / steps
    for _ in range(steps):
        k1 = f(m, S)
        k2 = f(m + 0.5 * h * k1[0], S + 0.5 * h * k1[1])
        k3 = f(m + 0.5 * h * k2[0], S + 0.5 * h * k2[1])
        k4 = f(m + h * k3[0], S + h * k3[1])
        m = m + (h / 6) * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
        S = S + (h / 6) * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
    return m, S


def bench_gaussian_pde(quick: bool = False) -> list[Benchmark]:
    """One entry: d = 8 (quick: d = 4), T = 1. Guarantee: none (timings)."""
    from certified.transformers.gaussian_pde import gaussian_pde_flow, moments_at

    d = 4 if quick else 8
    pde, (A, V) = _instance(d)
    _ = pde.problem  # the graph is built once, outside the timing
    gaussian_pde_flow(pde)  # compilation of the kernels outside the timing
    t0, c0 = time.perf_counter(), time.process_time()
    res = gaussian_pde_flow(pde)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    width = float(res.max_width())
    m0 = np.array([float(q) for q in pde.mean.tolist()], dtype=float)
    S0 = np.array([[float(q) for q in r] for r in pde.cov.tolist()], dtype=float)
    steps, prev = 16, rk4_moments(m0, S0, [(A, V)], 1.0, 8)
    while True:
        t1 = time.perf_counter()
        m, S = rk4_moments(m0, S0, [(A, V)], 1.0, steps)
        base = time.perf_counter() - t1
        diff = max(np.max(np.abs(m - prev[0])), np.max(np.abs(S - prev[1])))
        if diff <= max(width, 1e-14) or steps >= 1 << 14:
            break
        prev, steps = (m, S), 2 * steps
    g = moments_at(pde, res)
    inside = all(float(lo) <= x <= float(hi) for (lo, hi), x in zip(g.mean, m, strict=True))
    name = f"Gaussian Transformer PDE d={d} T=1 (certified moment ODE, rule taylor-lohner)"
    extra = {
        "max_width": width,
        "status": res.status.name,
        "cpu_seconds": cpu,
        "rk4_mean_inside_enclosure": inside,
        "bar_seconds": 1.0,
        "bar_width": 1e-12,
    }
    baseline = f"float64 RK4 of the moment ODE, {steps} steps"
    return [Benchmark(name, seconds, baseline, base, seconds / base, None, extra)]
