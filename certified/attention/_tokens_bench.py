"""``certified bench tokens``: certified bounds on the token-sample error against a float64 grid
search of the same sup in the same run, over n and R (the sweep of issue 14, item 3).

Baseline (what it includes): numpy float64 evaluation of ``|Γ[μ_n](x) − Γ[μ](x)|_2`` at as many
grid points of ``B_R`` as the certified run evaluated boxes (at least 400), and its max (a
heuristic value of the sup, no guarantee). Certified: :func:`sup_error_bounds` (branch and
bound, relative gap 5 %). Layer d = 2, one head, Gaussian tokens N(0, I). The extra fields carry
the sweep: ``sqrt_n_upper`` per row, and in the last record the fit ``log C(R) ≈ κ R + c``.
"""

from __future__ import annotations

import numpy as np

from certified.commands.records import Benchmark
from certified.commands.records import best_seconds as _best

__all__ = ["suite"]

_Q = [[0.5, 0.25], [0.0, 0.5]]
_V = [[1.0, 0.0], [0.5, 1.0]]


def _float_sup(Y: np.ndarray, R: float, m: int) -> float:
    A = np.eye(2).T @ np.array(_Q)  # KᵀQ with K = I (unscaled layer below)
    side = int(np.ceil(np.sqrt(m * 4 / np.pi)))
    g = np.linspace(-R, R, side)
    X = np.array([(a, b) for a in g for b in g if a * a + b * b <= R * R])
    S = (X @ A) @ Y.T  # x ᵀ A y
    S -= S.max(axis=1, keepdims=True)
    P = np.exp(S)
    P /= P.sum(axis=1, keepdims=True)
    emp = P @ Y
    pop = X @ A  # N(0, I): m + Σ a = a = Aᵀx
    D = (emp - pop) @ np.array(_V).T
    return float(np.linalg.norm(D, axis=1).max())


def suite(quick: bool = False) -> list[Benchmark]:
    """Certified sup bounds over n x R against a float64 grid search.

    Guarantee: none (timings); each certified row is a rigorous two-sided bound."""
    from certified.attention import Attention, GaussianPopulation, sup_error_bounds

    layer = Attention.single(_Q, np.eye(2), _V, scaled=False)
    pop = GaussianPopulation([0, 0], [[1, 0], [0, 1]])
    ns = (100, 1000) if quick else (10, 100, 1000, 10_000)
    radii = (1.0, 2.0) if quick else (0.5, 1.0, 2.0, 4.0)
    Y = pop.sample(max(ns), np.random.default_rng(0))
    out, C, res = [], {}, {}
    for R in radii:
        for n in ns:

            def certified_run(n=n, R=R):
                res["b"] = sup_error_bounds(layer, pop, Y[:n], R, rel_tol=0.05, max_boxes=20000)

            s = _best(certified_run, 1)
            b = res["b"]
            m = max(400, b.boxes)
            base = _best(lambda n=n, R=R, m=m: res.update(f=_float_sup(Y[:n], R, m)), 1)
            C[R] = max(C.get(R, 0.0), np.sqrt(n) * float(b.upper))
            extra = {
                "n": n,
                "R": R,
                "lower": float(b.lower),
                "upper": float(b.upper),
                "sqrt_n_upper": np.sqrt(n) * float(b.upper),
                "float_grid_sup": res["f"],
                "grid_inside_upper": res["f"] <= float(b.upper),
                "boxes": b.boxes,
                "resolved": b.resolved,
            }
            name = f"token sup d=2 n={n} R={R} (certified)"
            out.append(Benchmark(name, s, "float64 grid max", base, s / base, None, extra))
    if len(C) > 1:
        slope, icpt = np.polyfit(list(C), np.log(list(C.values())), 1)
        out[-1].extra.update({"fit_log_C_vs_R": {"slope": float(slope), "intercept": float(icpt)}})
    return out
