"""What a family hands back to ``certified demo`` and ``certified bench``.

A family's demo step returns :class:`DemoCheck` records and its benchmark suite returns
:class:`Benchmark` records; families import these from here, never from ``certified.demo`` or
``certified.bench`` (which import the families, through the command registry). Standard library
only: every family may import this module at no cost.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["Benchmark", "DemoCheck", "best_seconds", "compare", "rk4"]


@dataclass(frozen=True)
class DemoCheck:
    """One demo step: what was enclosed, whether the independent re-check passed, and the
    largest enclosure width. ``certificates`` (file name -> certificate) are the files the step
    certified and re-checked; ``certified demo --out DIR`` writes them into DIR."""

    name: str
    passed: bool
    max_width: float
    detail: str
    certificates: Mapping[str, dict] = field(default_factory=dict, repr=False, compare=False)


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


def best_seconds(f: Callable[[], Any], repeats: int) -> float:
    """Minimum wall-clock seconds of ``f()`` over ``repeats`` runs, after one warm-up call
    (compilation, caches): the least perturbed run.

    Guarantee: none (a timing)."""
    f()
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t)
    return best


def compare(name, f, baseline_name, g, repeats, target=None, **extra) -> Benchmark:
    """``f`` against its float64 baseline ``g``, both timed by :func:`best_seconds`.

    Guarantee: none (timings)."""
    s = best_seconds(f, repeats)
    b = best_seconds(g, repeats)
    return Benchmark(name, s, baseline_name, b, s / b, target, dict(extra))


def rk4(f: Callable[[Any], Any], x: Any, h: float, steps: int) -> Any:
    """``steps`` classical RK4 steps of length ``h`` for ``x' = f(x)`` (x any array type with
    ``+`` and scalar ``*``): the float64 baselines of the benchmarks. Guarantee: none."""
    for _ in range(steps):
        k1 = f(x)
        k2 = f(x + 0.5 * h * k1)
        k3 = f(x + 0.5 * h * k2)
        k4 = f(x + h * k3)
        x = x + (h / 6) * (k1 + 2 * k2 + 2 * k3 + k4)
    return x
