"""``certified bench transformer``: self-attention dynamics (V = I, B = I) on the sphere, the
certified flow against a float64 RK4 of the same system to the same accuracy, in one run.

Two workloads. ``n = 8, d = 3, T = 5`` (quick: n = 4, T = 1): the whole certified flow of the
generic Taylor-Lohner engine (the certificate's method). ``n = 64, d = 8, T = 5`` (the issue's
size; quick: n = 16, d = 4): the generic engine's Jacobian duals of all n d = 512 coordinates are
out of reach, so this entry times the whole certified flow by Taylor steps vectorised over the
tokens (:mod:`certified.transformers.sphere_taylor`, ``proofs/particles.md`` §6: enclosures,
no certificate) against the float64 RK4 at the same accuracy, in the same run. Its products
are small (64 x 64): run with ``OPENBLAS_NUM_THREADS=1`` (on a loaded machine OpenBLAS's
threads multiplied the certified run's CPU time ~9x; the entry records the setting).
"""

from __future__ import annotations

import time

import numpy as np

from certified.commands.records import Benchmark, rk4

__all__ = ["bench_transformer"]


def _instance(n: int, d: int, T: str, seed: int = 5):
    from certified.transformers import parse_instance

    X = np.random.default_rng(seed).standard_normal((n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    eye = np.eye(d).tolist()
    return parse_instance({"tokens": X.tolist(), "pieces": [{"duration": T, "V": eye, "B": eye}]})


def _rk4(X: np.ndarray, V: np.ndarray, B: np.ndarray, T: float, steps: int) -> np.ndarray:
    """Self-attention on the sphere, x_i' = P_i V sum_j softmax_j(<B x_i, x_j>) x_j, by the
    classical RK4 in float64, vectorised over tokens (the baseline; no guarantee)."""

    def f(X):
        S = X @ B.T @ X.T
        P = np.exp(S - S.max(axis=1, keepdims=True))
        P /= P.sum(axis=1, keepdims=True)
        v = (P @ X) @ V.T
        return v - X * np.sum(X * v, axis=1, keepdims=True)

    return rk4(f, X, T / steps, steps)


def _rk4_matching(inst, width: float) -> tuple[float, int, np.ndarray]:
    """RK4 with doubled step counts until two successive results differ by at most the
    certified width (the same accuracy); returns (seconds of the final run, steps, state)."""
    X0 = inst.measures[0].astype(float)
    V, B = (M.astype(float) for M in inst.pieces[0].heads[0])
    T = float(inst.total_time.p) / float(inst.total_time.q)

    def rk4(_inst, steps):
        return _rk4(X0, V, B, T, steps).ravel()

    steps, prev = 16, rk4(inst, 8)
    while True:
        t0 = time.perf_counter()
        x = rk4(inst, steps)
        seconds = time.perf_counter() - t0
        if np.max(np.abs(x - prev)) <= max(width, 1e-14) or steps >= 1 << 16:
            return seconds, steps, x
        prev, steps = x, 2 * steps


def _small(quick: bool) -> Benchmark:
    from certified.transformers.flow import transformer_flow

    n, d, T = (4, 3, "1") if quick else (8, 3, "5")
    inst = _instance(n, d, T)
    _ = inst.problem  # the graph is built once, outside the timing
    t0 = time.perf_counter()
    res = transformer_flow(inst)
    seconds = time.perf_counter() - t0
    width = float(np.max(res.final.hi - res.final.lo))
    base, steps, x = _rk4_matching(inst, width)
    inside = bool(np.all((res.final.lo[0] <= x) & (x <= res.final.hi[0])))
    name = f"transformer self-attention n={n} d={d} T={T} (certified flow)"
    return Benchmark(name, seconds, f"float64 RK4, {steps} steps", base, seconds / base, 20.0,
                     {"max_width": width, "status": res.status.name,
                      "rk4_inside_enclosure": inside})  # fmt: skip


def _large(quick: bool) -> Benchmark:
    import os

    from certified.transformers.sphere_taylor import sphere_taylor_flow

    n, d, T = (16, 4, "5") if quick else (64, 8, "5")
    inst = _instance(n, d, T)
    t0, c0 = time.perf_counter(), time.process_time()
    (enc,) = sphere_taylor_flow(inst)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    box = enc.box()
    width = float(np.max(box.hi - box.lo))
    base, steps, x = _rk4_matching(inst, width)
    inside = bool(np.all((box.lo.ravel() <= x) & (x <= box.hi.ravel())))
    X0 = inst.measures[0].astype(float)
    c0 = time.process_time()  # the same RK4 run again, in CPU seconds (less sensitive to load)
    _rk4(X0, np.eye(d), np.eye(d), float(T), steps)
    rk4_cpu = time.process_time() - c0
    name = f"transformer self-attention n={n} d={d} T={T} (certified, Taylor steps over tokens)"
    blas = os.environ.get("OPENBLAS_NUM_THREADS", "default")
    return Benchmark(name, seconds, f"float64 RK4, {steps} steps", base, seconds / base, 20.0,
                     {"max_width": width, "steps": enc.steps, "cpu_seconds": cpu,
                      "rk4_cpu_seconds": rk4_cpu, "cpu_ratio": cpu / rk4_cpu,
                      "max_lognorm": enc.max_lipschitz, "rk4_inside_enclosure": inside,
                      "certificate": "none (enclosures only)",
                      "load": list(os.getloadavg()),
                      "openblas_num_threads": blas})  # fmt: skip


def bench_transformer(quick: bool = False) -> list[Benchmark]:
    """The two workloads of the module docstring, then the entries other modules register in
    ``EXTRA_ENTRIES`` ("module:function" of ``(quick) -> list[Benchmark]``).
    Guarantee: none (timings)."""
    from certified.commands.registry import load

    out = [_small(quick), _large(quick)]
    for ref in EXTRA_ENTRIES:
        out += load(ref)(quick)
    return out


# separate entries of ``certified bench transformer``, each in its own module
EXTRA_ENTRIES: tuple[str, ...] = (
    "certified.transformers.gaussian_bench:bench_gaussian_pde",
    "certified.transformers.stack_bench:bench_stack",
    "certified.transformers.particle_bench:bench_particles",
)
