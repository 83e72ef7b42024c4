"""The hardmax limit (β → ∞) of token-sample complexity, for Gaussian tokens
(theorems.md §9 "hardmax limit at a logarithmic rate"; arXiv 2512.10656).

With inverse temperature β, softmax attention tends to the hardmax ``H[μ_n](x) = G y_{i*(x)}``
with ``i*(x) ∈ argmax_i ⟨y_i, a⟩`` (``a = Aᵀx``; at ties every maximiser is allowed and the bounds
below hold for all of them). For Gaussian tokens ``N(m, Σ)`` (Σ positive definite) the
maximiser grows like ``s_n = √(2 log n)``; the normalised limit used here is

.. math::

    H_∞(x) = G \\frac{Σ a}{\\sqrt{aᵀ Σ a}} = \\lim_n H[μ_n](x) / s_n,

(``y = m + Σ^{1/2} z``: the maximiser of ``⟨z, Σ^{1/2} a⟩`` is ``≈ s_n Σ^{1/2}a/|Σ^{1/2}a|``; the
transverse part stays O(1), so the error is O(1/√log n), a logarithmic rate). The normalisation
is this package's reading of the hardmax regime, stated so that it can be tested.
Both maps are invariant under ``x ↦ t x`` (t > 0), so for every R > 0

.. math::

    S_∞ = \\sup_{0 < |x| ≤ R} |H[μ_n](x)/s_n − H_∞(x)|_2 = \\sup_{1/2 ≤ |x| ≤ 1} (\\ldots),

and :func:`hardmax_sup_bounds` bounds it by branch and bound over boxes covering the shell
(proofs/bounds.md#token-hardmax): on a box, the candidate maximisers are the ``i`` with
``max s_i(X) >= max_j min s_j(X)``; the bound is the largest ``|G y_i/s_n − H_∞(X)|`` over them.
"""

from __future__ import annotations

from typing import Any

import flint
import numpy as np

from certified.arith import interval as iv
from certified.arith.ball import check_precision, precision
from certified.arith.exact import to_fmpq
from certified.arith.interval import Interval
from certified.attention.box_search import branch_and_bound
from certified.attention.model import Attention
from certified.attention.populations import GaussianPopulation
from certified.attention.sample_complexity import (
    DEFAULT_PREC,
    SupErrorBounds,
    _as_fmpq,
    _check_budget,
    _named,
    _problem,
    _sqrt_nonneg,
    _tolerance,
)
from certified.errors import InputError

__all__ = ["hardmax_sup_bounds"]

MAX_BOXES = 1_000_000


def _check_inputs(layer: Any, population: Any, samples: Any) -> None:
    if isinstance(layer, Attention) and len(layer.heads) != 1:
        raise InputError("layer: the hardmax family takes one head (heads' maximisers differ)")
    if not isinstance(population, GaussianPopulation):
        raise InputError(
            "population: the hardmax family needs a GaussianPopulation (for a bounded support "
            "such as a box the hardmax jumps across a_j = 0 and the uniform error does not "
            "converge)"
        )
    S = population.cov
    for size in range(1, population.d + 1):
        minor = flint.fmpq_mat([[S[i, j] for j in range(size)] for i in range(size)]).det()
        if not minor > 0:
            raise InputError("cov: the hardmax limit needs a positive definite covariance")


def _evaluate(maps, W: Interval, Sig: Interval, lo: np.ndarray, hi: np.ndarray):
    """Upper bounds of the error on the boxes, certified lower bounds at their centres, the
    centres, and which boxes may meet the shell 1/4 <= |x|² <= 1 (proofs/bounds.md#token-hardmax).
    """
    Aiv, Giv, Z = maps
    X = Interval(lo, hi)
    c = np.minimum(np.maximum(lo + (hi - lo) / 2, lo), hi)
    out = []
    for Q in (X, Interval(c)):
        S = iv.matmul(Q, Z.T)  # scores s_i = ⟨A y_i, x⟩
        cand = S.hi >= S.lo.max(axis=1, keepdims=True)
        a = iv.matmul(Q, Aiv)
        Sa = iv.matmul(a, Sig)
        q = iv.isum(a * Sa, axis=1)
        ok = q.lo > 0
        safe = Interval(np.where(ok, q.lo, 1.0), np.where(ok, q.hi, 1.0))
        H = iv.matmul(Sa / iv.sqrt(safe).reshape(-1, 1), Giv.T)
        diff = W.reshape(1, *W.shape) - H.reshape(H.shape[0], 1, H.shape[1])
        mag = iv.absolute(diff)
        up = _sqrt_nonneg(iv.isum(iv.sqr(Interval(mag.hi)), axis=2)).hi
        low = _sqrt_nonneg(iv.isum(iv.sqr(Interval(mag.lo)), axis=2)).lo
        out.append(
            (
                np.where(ok, np.where(cand, up, -np.inf).max(axis=1), np.inf),
                np.where(ok, np.where(cand, low, np.inf).min(axis=1), -np.inf),
            )
        )
    norm2 = iv.isum(iv.sqr(X), axis=1)
    big = iv.isum(iv.sqr(Interval(iv.absolute(X).hi)), axis=1).hi
    meets = (norm2.lo <= 1.0) & (big >= 0.25)
    c2 = iv.isum(iv.sqr(Interval(c)), axis=1)
    at_c = np.where((c2.hi <= 1.0) & (c2.lo > 0), out[1][1], -np.inf)
    return out[0][0], at_c, c, meets


def _witness(c: list[flint.fmpq], A0: flint.fmpq_mat | None, R: flint.fmpq) -> np.ndarray:
    """A query in B_R \\ {0} with the value of the search point c (0-homogeneity)."""
    if A0 is not None:  # c is a point a of a-space: x = A₀⁻ᵀ a
        sol = A0.transpose().solve(flint.fmpq_mat([[v] for v in c]))
        c = [sol[i, 0] for i in range(sol.nrows())]
    # scale into B_R exactly: |x|_1 >= |x|_2, so R/|x|_1 · x has norm <= R
    t = R / sum((abs(v) for v in c), flint.fmpq(0))
    return np.array([t * v for v in c], dtype=object)


def hardmax_sup_bounds(
    layer: Attention,
    population: GaussianPopulation,
    samples: Any,
    R: Any,
    *,
    rel_tol: Any = 0.05,
    max_boxes: int = 4096,
    prec: int = DEFAULT_PREC,
    stop_below: float | None = None,
    stop_above: float | None = None,
) -> SupErrorBounds:
    """Certified bounds on ``S_∞ = sup_{0 < |x|_2 <= R} |H[μ_n](x)/√(2 log n) − H_∞(x)|_2``
    (module docstring; the value does not depend on R > 0).

    Parameters as :func:`certified.attention.sample_complexity.sup_error_bounds`; the layer
    has one head, the population is Gaussian with positive definite covariance, n >= 2.

    Raises
    ------
    InputError, ShapeError

    Guarantee: ``lower <= S_∞ <= upper`` for every choice of maximiser at ties
    (proofs/bounds.md#token-hardmax); the witness lies in ``B_R \\ {0}``.
    """
    prec = check_precision(prec)
    _check_inputs(layer, population, samples)
    tol = _tolerance(rel_tol)
    max_boxes = _check_budget(max_boxes, "max_boxes", 1, MAX_BOXES)
    p = _problem(layer, population, samples, R, prec)
    if p.n < 2:
        raise InputError("samples: the hardmax normalisation √(2 log n) needs n >= 2")
    with precision(prec):
        s_n = Interval.from_balls((2 * flint.arb(p.n).log()).sqrt())
    W = iv.matmul(p.Y, p.heads[0][3].T) / s_n  # rows G y_i / s_n
    # A invertible: search over a = Aᵀx directly (x ↦ a is onto; the conditioning of A then
    # costs nothing); A = A₀/√k, and x = A₀⁻ᵀ a is a positive multiple of the query of a
    A0 = flint.fmpq_mat(layer.heads[0].bilinear_unscaled().tolist())
    invertible = A0.det() != 0
    eye = Interval(np.eye(population.d))
    maps = (eye, p.heads[0][3], p.Y) if invertible else p.heads[0][2:]
    Sig = Interval.from_exact(population.cov)
    d = p.d
    batch = max(1, min(128, 600_000 // (p.n * d)))
    with _named("samples, Q, K, V (too large for the float64 branch and bound)"):
        top, best, best_c, count, resolved = branch_and_bound(
            lambda lo, hi: _evaluate(maps, W, Sig, lo, hi),
            (np.full(d, -1.0), np.full(d, 1.0)),
            batch=batch,
            rel_tol=tol,
            max_boxes=max_boxes,
            stop_below=stop_below,
            stop_above=stop_above,
        )
    upper = _as_fmpq(top) if np.isfinite(top) else None  # None: no finite bound yet
    R = to_fmpq(R, "R")
    if best_c is None:
        witness, lower = np.array([R] + [flint.fmpq(0)] * (d - 1), dtype=object), flint.fmpq(0)
    else:
        witness = _witness([_as_fmpq(v) for v in best_c], A0 if invertible else None, R)
        lower = _as_fmpq(best)
    return SupErrorBounds(lower, upper, witness, count, resolved, p.n, R)
