"""Particles against the Gaussian PDE as n grows (issue 20, item 3): the table n = 10, 100,
1,000 of certified empirical moments (Taylor steps vectorised over the particles,
``proofs/particles.md``) against the certified Gaussian enclosure, and a ``certified bench``
entry that times one row against a float64 RK4 of the same particle system in the same run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import flint
import numpy as np

from certified.commands.records import Benchmark, rk4

__all__ = [
    "NOTEBOOK_PARAMS",
    "ParticleRow",
    "bench_particles",
    "particle_rk4",
    "particles_against_gaussian",
]

# the instance of notebooks/07_deep_transformers.ipynb (d = 2, one head)
NOTEBOOK_PARAMS: dict[str, Any] = {
    "mean": [1, "1/2"],
    "cov": [[1, "1/4"], ["1/4", "1/2"]],
    "Q": [[1, 0], [0, 1]],
    "K": [["1/2", 0], ["1/3", "1/5"]],
    "V": [["1/2", "1/10"], [0, "1/2"]],
}


@dataclass(frozen=True)
class ParticleRow:
    """One row: n tokens, wall and CPU seconds of the certified flow, the token radius, the
    enclosures (GaussianEnclosure) of the empirical and Gaussian moments, and the certified
    range of the largest gap between them (``gap_lower`` > 0 proves the empirical moments
    differ from the Gaussian ones). Guarantee: the enclosures are certified; timings none."""

    n: int
    seconds: float
    cpu_seconds: float
    steps: int
    token_radius: float
    empirical: Any
    gaussian: Any
    max_width: float
    gap_lower: float
    gap_upper: float


def _flat(g) -> list[tuple[Any, Any]]:
    return list(g.mean) + [g.cov[a][b] for a in range(g.d) for b in range(a, g.d)]


def particles_against_gaussian(
    params: dict[str, Any] | None = None,
    time_: Any = "1/2",
    sizes: tuple[int, ...] = (10, 100, 1000),
    seed: int = 0,
    **options: Any,
) -> list[ParticleRow]:
    """For each n: n tokens sampled from N(m0, Sigma0) (seed), their certified empirical mean and
    covariance at ``time_`` and the certified Gaussian moments at the same time.
    Guarantee: enclosures certified (timings: none)."""
    from certified.transformers.gaussian_particles import empirical_moments, sampled_tokens
    from certified.transformers.gaussian_pde import gaussian_pde_flow, moments_at, parse_params
    from certified.transformers.particle_taylor import particle_taylor_flow

    pde = parse_params(params or NOTEBOOK_PARAMS, time=time_)
    gauss = moments_at(pde, gaussian_pde_flow(pde))
    rows = []
    for n in sizes:
        X = sampled_tokens(pde, n, seed=seed)
        t0, c0 = time.perf_counter(), time.process_time()
        enc = particle_taylor_flow(pde, X, **options)
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        box = enc.box()
        emp = empirical_moments(box.lo, box.hi, [flint.fmpq(1, n)] * n)
        widths = [float(hi - lo) for lo, hi in _flat(emp)]
        gaps = [
            (max(l1 - h2, l2 - h1, 0), max(h1 - l2, h2 - l1))
            for (l1, h1), (l2, h2) in zip(_flat(emp), _flat(gauss), strict=True)
        ]
        rows.append(
            ParticleRow(
                n,
                seconds,
                cpu,
                enc.steps,
                float(np.max(box.hi - box.lo)) / 2,
                emp,
                gauss,
                max(widths),
                float(max(g[0] for g in gaps)),
                float(max(g[1] for g in gaps)),
            )
        )
    return rows


def particle_rk4(pde, X: np.ndarray, steps: int) -> np.ndarray:
    """The particle system by the classical RK4 in float64 (a baseline; no guarantee)."""
    out = np.array(X, dtype=float)
    for piece in pde.pieces:
        heads = [
            (np.array(h.A, dtype=float), np.array(h.V, dtype=float)) for h in piece.heads
        ]  # fmt: skip

        def f(Y, heads=heads):
            F = np.zeros_like(Y)
            for A, V in heads:
                S = (Y @ A.T) @ Y.T
                W = np.exp(S - S.max(axis=1, keepdims=True))
                W /= W.sum(axis=1, keepdims=True)
                F += (W @ Y) @ V.T
            return F

        k = max(1, round(steps * float(piece.duration) / float(pde.total_time)))
        h = float(piece.duration) / k
        out = rk4(f, out, h, k)
    return out


def bench_particles(quick: bool = False) -> list[Benchmark]:
    """One entry: the notebook instance, d = 2, T = 1/2, n = 1,000 (quick: n = 100), against a
    float64 RK4 of the same particles with as many steps as the certified run. Guarantee: none
    (timings)."""
    from certified.transformers.gaussian_particles import sampled_tokens
    from certified.transformers.gaussian_pde import parse_params

    n = 100 if quick else 1000
    row = particles_against_gaussian(sizes=(n,))[0]
    pde = parse_params(NOTEBOOK_PARAMS, time="1/2")
    X = np.array(sampled_tokens(pde, n, seed=0))
    t0 = time.perf_counter()
    Y = particle_rk4(pde, X, row.steps)
    base = time.perf_counter() - t0
    mean = Y.mean(axis=0)
    inside = all(float(lo) <= m <= float(hi) for (lo, hi), m in zip(row.empirical.mean, mean,
                                                                      strict=True))  # fmt: skip
    name = f"particles against the Gaussian PDE n={n} d=2 T=1/2 (Taylor steps over particles)"
    extra = {
        "cpu_seconds": row.cpu_seconds,
        "steps": row.steps,
        "token_radius": row.token_radius,
        "moments_max_width": row.max_width,
        "gap_to_gaussian": [row.gap_lower, row.gap_upper],
        "rk4_mean_inside_enclosure": inside,
    }
    return [Benchmark(name, row.seconds, f"float64 RK4 of the particles, {row.steps} steps", base,
                      row.seconds / base, None, extra)]  # fmt: skip
