"""``certified bench sinkhorn``: certified entropic OT bounds against POT's ``sinkhorn2`` on the
same data in the same run.

Baseline (what it includes): ``ot.dist(x, y)`` (squared Euclidean) plus
``ot.sinkhorn2(a, b, M, gamma)`` with POT's defaults (``method="sinkhorn"``,
``numItermax=1000``, ``stopThr=1e-9``). The baseline is a float64 estimate that need not be
converged (at γ = 0.01 its 1000 iterations are not: its value is reported next to the
certified bounds). The certified run includes building
the two :class:`Measure` objects, the cost bounds, the built-in Sinkhorn + Newton solve, the
enclosed Gibbs sums and the bound assembly (not the certificate check). Data: uniform atoms,
standard normal in d = 3, the second cloud shifted by 1/2.
"""

from __future__ import annotations

import warnings

import numpy as np

from certified.commands.records import Benchmark
from certified.commands.records import best_seconds as _best

__all__ = ["bench_sinkhorn"]


def _case(ot, x, y, gamma: str, reps: int) -> Benchmark:
    from certified.entropic import entropic_ot
    from certified.transport import Measure

    n = len(x)
    a = np.full(n, 1.0 / n)
    result = {}

    def certified_run():
        result["e"] = entropic_ot(Measure(x), Measure(y), gamma)

    def baseline():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result["pot"] = ot.sinkhorn2(a, a, ot.dist(x, y), float(gamma))

    s = _best(certified_run, reps)
    b = _best(baseline, reps)
    e = result["e"]
    extra = {
        "relative_gap": e.relative_gap,
        "target_relative_gap": 1e-10,
        "lower": float(e.lower),
        "upper": float(e.upper),
        "pot_sinkhorn2_transport_cost": float(result["pot"]),
        "solver": e.info,
        "baseline_includes": f"ot.dist(x, y) + ot.sinkhorn2(a, a, M, {gamma}) (POT defaults)",
        "certified_includes": "Measure(x), Measure(y), entropic_ot: cost bounds, Sinkhorn + "
        "Newton (float64), enclosed Gibbs sums, bound assembly",
    }
    name = f"OT_gamma gamma={gamma} n={n} d=3 (certified)"
    return Benchmark(name, s, "ot.dist + ot.sinkhorn2", b, s / b, 2.0, extra)


def bench_sinkhorn(quick: bool = False) -> list[Benchmark]:
    """Entropic OT bounds for n uniform atoms in d = 3, γ ∈ {1, 0.1, 0.01}, against
    ``ot.dist`` + ``ot.sinkhorn2``.

    Guarantee: none (timings); each certified run is a rigorous enclosure."""
    from certified.errors import MissingDependencyError

    try:
        import ot
    except ImportError:
        raise MissingDependencyError(
            "bench sinkhorn: the baseline is POT; pip install 'certified[ot]'"
        ) from None
    n = 200 if quick else 1000
    rng = np.random.default_rng(n)
    x = rng.standard_normal((n, 3))
    y = rng.standard_normal((n, 3)) + 0.5
    return [_case(ot, x, y, gamma, 3 if gamma == "1" else 1) for gamma in ("1", "0.1", "0.01")]
