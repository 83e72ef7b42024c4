"""``certified bench sinkhorn``: certified entropic OT bounds against POT's ``sinkhorn2`` on the
same data in the same run.

Baseline (what it includes): ``ot.dist(x, y)`` (squared Euclidean) plus
``ot.sinkhorn2(a, b, M, gamma)`` with POT's defaults: ``method="sinkhorn"`` (scaling form with
the kernel ``exp(-M/γ)``, not log-domain), ``numItermax=1000``, ``stopThr=1e-9`` on the 2-norm
of the column-marginal error, checked every 10 iterations. It returns ⟨C, π⟩ of its last plan
(not OT_γ) and is not the same accuracy: on the default data it stops after 40 iterations at
γ = 1 (error ~3e-11) but runs into the 1000-iteration cap at γ = 0.1 and 0.01 (errors ~6e-7
and ~2e-4; at γ = 0.01 a third of its kernel underflows to 0). An untimed second call with
``log=True`` reports its iterations and final error (``pot_iterations``, ``pot_error``) next to
ours (``solver``: L1 marginal error ~1e-15, then the certified bounds). Our side is not
weakened to match: the ratio is that of a certified enclosure with relative gap <= 1e-10
against an uncertified, and at small γ unconverged, float estimate.

The certified run includes building the two :class:`Measure` objects, the cost bounds, the
built-in Sinkhorn + Newton solve (float64), the enclosed Gibbs sums and the bound assembly
(not the certificate check). Both sides run in one process with the same BLAS (the solver's
passes are single-threaded compiled loops; POT's products and our Cholesky factorisations
use numpy's BLAS with its default threads: set ``OPENBLAS_NUM_THREADS=1`` to time both on one
core, which is steadier on a loaded machine). Data: standard normal atoms in d = 3, the second
cloud shifted by 1/2; best of 7 (γ = 1) or 3 timed runs after one warm-up, per side.
"""

from __future__ import annotations

import os
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
    with warnings.catch_warnings():  # untimed: how far POT's default run got
        warnings.simplefilter("ignore")
        _, log = ot.sinkhorn2(a, a, ot.dist(x, y), float(gamma), log=True)
    e = result["e"]
    extra = {
        "relative_gap": e.relative_gap,
        "target_relative_gap": 1e-10,
        "lower": float(e.lower),
        "upper": float(e.upper),
        "pot_sinkhorn2_transport_cost": float(result["pot"]),
        "pot_iterations": int(log.get("niter", -1)),
        "pot_error": float(log["err"][-1]) if log.get("err") else None,
        "solver": e.info,
        "openblas_num_threads": os.environ.get("OPENBLAS_NUM_THREADS", "default"),
        "baseline_includes": f"ot.dist(x, y) + ot.sinkhorn2(a, a, M, {gamma}) (POT defaults: "
        "method='sinkhorn', numItermax=1000, stopThr=1e-9; returns <C, pi>, not OT_gamma)",
        "certified_includes": "Measure(x), Measure(y), entropic_ot: cost bounds, Sinkhorn + "
        "Newton (float64, to marginal error ~1e-15), enclosed Gibbs sums, bound assembly",
    }
    name = f"OT_gamma gamma={gamma} n={n} d=3 (certified)"
    return Benchmark(name, s, "ot.dist + ot.sinkhorn2", b, s / b, 2.0, extra)


def bench_sinkhorn(quick: bool = False) -> list[Benchmark]:
    """Entropic OT bounds for n atoms in d = 3, γ ∈ {1, 0.1, 0.01}, against
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
    # the γ = 1 runs take tens of milliseconds: more of them, so that one descheduling on a
    # busy machine does not decide the figure (both sides get the same count)
    return [_case(ot, x, y, gamma, 7 if gamma == "1" else 3) for gamma in ("1", "0.1", "0.01")]
