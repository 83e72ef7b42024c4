"""``certified bench wasserstein``: certified W_q enclosures against POT's ``emd2`` on the same
data in the same run.

Baseline (what it includes): POT's cost matrix ``ot.dist(x, y)`` (squared Euclidean; for
q = 1 ``metric="euclidean"``) plus ``ot.emd2(a, b, M)`` with the same ``numItermax`` the
certified run passes to POT. The certified run includes building the two :class:`Measure`
objects from the float arrays, the cost bounds, the POT solve (``ot.emd`` with duals), the exact
permutation, the dual repair and the exact sums. Data: uniform atoms, standard normal in
d = 3, the second cloud shifted by 1/2.
"""

from __future__ import annotations

import numpy as np

from certified.commands.records import Benchmark
from certified.commands.records import best_seconds as _best

__all__ = ["bench_wasserstein"]


def _case(ot, x, y, q, metric, solver, n_iter, reps) -> Benchmark:
    from certified.transport import Measure, wasserstein

    n = len(x)
    a = np.full(n, 1.0 / n)
    result = {}

    def certified_run():
        result["e"] = wasserstein(Measure(x), Measure(y), q, solver=solver)

    def baseline():
        result["pot"] = ot.emd2(a, a, ot.dist(x, y, metric=metric), numItermax=n_iter)

    s = _best(certified_run, reps)
    b = _best(baseline, reps)
    e = result["e"]
    value = float(result["pot"])  # emd2 returns W_q^q (float, not certified)
    extra = {  # W_q and W_q^q labelled as such: POT's emd2 is W_q^q
        "relative_gap": e.relative_gap,
        "W_q_lower": float(e.lower),
        "W_q_upper": float(e.upper),
        "W_q^q_lower": float(e.lower_q),
        "W_q^q_upper": float(e.upper_q),
        "pot_emd2 (W_q^q)": value,
        "pot_inside_bounds_q": bool(float(e.lower_q) <= value <= float(e.upper_q)),
        "method": e.method,
        "baseline_includes": f"ot.dist(x, y, metric={metric!r}) + ot.emd2(a, a, M, "
        f"numItermax={n_iter})",
        "certified_includes": "Measure(x), Measure(y), wasserstein(mu, nu, q, solver="
        f"{solver!r}): cost bounds, solver, exact coupling, dual repair, exact sums",
    }
    target = 2.0 if (q == 2 and solver == "pot") else None
    name = f"W_{q} and W_{q}^{q} enclosures, n={n} d=3 (certified, {solver})"
    return Benchmark(name, s, "ot.dist + ot.emd2", b, s / b, target, extra)


def bench_wasserstein(quick: bool = False) -> list[Benchmark]:
    """W2 (and W1) enclosures for n uniform atoms in d = 3 against ``ot.dist`` + ``ot.emd2``.

    Guarantee: none (timings); each certified run is a rigorous enclosure."""
    from certified.errors import MissingDependencyError

    try:
        import ot
    except ImportError:
        raise MissingDependencyError(
            "bench wasserstein: the baseline is POT; pip install 'certified[ot]'"
        ) from None
    out: list[Benchmark] = []
    for n in (100, 300) if quick else (1000, 5000):
        rng = np.random.default_rng(n)
        x = rng.standard_normal((n, 3))
        y = rng.standard_normal((n, 3)) + 0.5
        n_iter = int(min(2**31 - 1, max(10**5, 20 * n * n)))
        reps = 1 if n >= 2000 else 3
        out.append(_case(ot, x, y, 2, "sqeuclidean", "pot", n_iter, reps))
        if n <= 1000:
            out.append(_case(ot, x, y, 1, "euclidean", "pot", n_iter, reps))
            out.append(_case(ot, x, y, 2, "sqeuclidean", "assignment", n_iter, reps))
    return out
