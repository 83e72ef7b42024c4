"""Token-sample complexity of attention: certified two-sided bounds on the uniform error
(theorems.md §8, §9; Bohbot, Letrouit, Peyré, Vialard, arXiv 2512.10656).

For a non-causal attention layer (heads ``(A_h, G_h)``, convention of
:mod:`certified.attention.populations`: ``a = A_hᵀ x``), a population μ with a closed-form
tilted mean and exact samples ``y_1..y_n`` (``μ_n = (1/n) Σ δ_{y_i}``),

.. math::

    S = \\sup_{|x|_2 ≤ R} |Γ[μ_n](x) − Γ[μ](x)|_2

(Euclidean norms for the query ball and for the error vector; a residual connection cancels in
the difference and is ignored). :func:`sup_error_bounds` returns ``lower <= S <= upper``:

* lower: ``|D(c)|`` certified from below at points ``c`` of the ball (the centres of the
  boxes below), re-evaluated in ``arb`` at the best one (the *witness*);
* upper: branch and bound over boxes covering ``B_R`` (boxes that miss the ball are dropped
  when a certified lower bound of their distance to 0 exceeds ``R``). On a box ``X`` with a
  point ``c``, the mean-value form ``D(X) ⊆ D(c) + J_D(X)(X − c)`` with an interval enclosure
  of the Jacobian ``J_D = Σ_h G_h (Cov_h − ∂E_h) A_hᵀ`` (proofs/bounds.md#token-mean-value)
  bounds ``|D|`` on the box; the box with the largest bound is bisected along its widest side
  until the bound is within the tolerance of the lower bound, or the budget is spent.

All enclosures of the branch and bound are float64 intervals with outward rounding
(:mod:`certified.arith.interval`); the population terms come from ``arb``.

Cost: one box costs ``O(H n d²)`` interval operations (H heads, n samples). Reaching a relative
gap τ needs boxes of side ``~ sqrt(τ S / |D''|)`` where the first-order term is small, so the
number of boxes grows like ``(R / side)^d``: exponential in d; d <= 3 is the target.

Claims: ``S <= C/√n`` (:func:`check_rate_claim`) is VERIFIED if ``upper <= C/√n``, REFUTED if
``lower > C/√n`` (the witness is the counterexample query), UNDECIDED otherwise.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import flint
import numpy as np

from certified.arith import interval as iv
from certified.arith.ball import check_precision, endpoints, precision
from certified.arith.exact import fmpq_to_float, to_fmpq, to_fmpq_array
from certified.arith.interval import Interval
from certified.attention.box_search import branch_and_bound
from certified.attention.maps import attention_measure_map
from certified.attention.model import Attention
from certified.attention.populations import GaussianPopulation, UniformBox
from certified.errors import InputError, RangeOverflowError, ShapeError
from certified.verdict import Outcome

__all__ = [
    "RateClaimVerdict",
    "SupErrorBounds",
    "check_rate_claim",
    "rate_sweep",
    "rate_threshold",
    "error_at",
    "sup_error_bounds",
]

DEFAULT_PREC = 128
MAX_SAMPLES = 200_000
MAX_BOXES = 1_000_000
_BATCH_ENTRIES = 1_500_000  # boxes x samples x d per batch (memory of the interval arrays)


@dataclass(frozen=True, eq=False)
class SupErrorBounds:
    """Certified ``lower <= S <= upper`` for ``S = sup_{|x| <= R} |Γ[μ_n](x) − Γ[μ](x)|``
    (Euclidean norms).

    Attributes
    ----------
    lower, upper : fmpq
        ``upper`` is None when no finite bound was reached within the budget (possible only
        for the hardmax family, whose boxes around ``x = 0`` are unbounded).
    witness : (d,) object array of fmpq
        A query in ``B_R`` with ``|D(witness)| >= lower``.
    boxes : int
        Boxes evaluated by the branch and bound.
    resolved : bool
        The gap reached the tolerance (False: the budget ran out first; the bounds still hold).
    n, R : int, fmpq

    Guarantee: ``lower <= S <= upper``.
    """

    lower: flint.fmpq
    upper: flint.fmpq | None
    witness: np.ndarray
    boxes: int
    resolved: bool
    n: int
    R: flint.fmpq
    norm: str = "euclidean"


@dataclass(frozen=True, eq=False)
class RateClaimVerdict:
    """Verdict on ``S <= C / √n`` (or ``C / log n`` for ``rate="log"``).

    Guarantee: VERIFIED ⇒ the claim holds for these samples; REFUTED ⇒ it fails, with
    ``|D(counterexample)| > C/√n`` certified."""

    verdict: Outcome
    bounds: SupErrorBounds
    threshold_lower: flint.fmpq
    threshold_upper: flint.fmpq
    statement: str
    counterexample: np.ndarray | None = None
    message: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "verdict", Outcome(self.verdict))


@dataclass(frozen=True, eq=False)
class _Problem:
    layer: Attention
    population: GaussianPopulation | UniformBox
    samples: np.ndarray  # (n, d) fmpq
    Y: Interval  # (n, d)
    heads: list[tuple[flint.arb_mat, flint.arb_mat, Interval, Interval, Interval]]
    # per head: A, G (arb), A, G (float intervals) and Z = Y Aᵀ (row i is A y_i)
    R: flint.fmpq
    prec: int

    @property
    def n(self) -> int:
        return int(self.samples.shape[0])

    @property
    def d(self) -> int:
        return int(self.samples.shape[1])


def _problem(layer: Any, population: Any, samples: Any, R: Any, prec: int) -> _Problem:
    if not isinstance(layer, Attention):
        raise InputError("layer: give a certified.attention.Attention")
    if layer.causal:
        raise InputError("layer.causal: a measure has no token order; use causal=False")
    if not isinstance(population, GaussianPopulation | UniformBox):
        raise InputError("population: give a GaussianPopulation or a UniformBox")
    R = to_fmpq(R, "R")
    if not R > 0:
        raise InputError(f"R: {R} is not > 0; the query ball B_R needs a positive radius")
    Yq = to_fmpq_array(samples, "samples")
    if Yq.ndim != 2 or Yq.shape[0] == 0:
        raise ShapeError(f"samples: has shape {Yq.shape}; give an (n, d) array with n >= 1")
    if Yq.shape[1] != layer.d or population.d != layer.d:
        raise ShapeError(
            f"samples: {Yq.shape[1]} coordinates, population d = {population.d}, layer "
            f"d = {layer.d}; use one d"
        )
    if Yq.shape[0] > MAX_SAMPLES:
        raise InputError(f"samples: n = {Yq.shape[0]} > {MAX_SAMPLES}; subsample")
    # the branch and bound runs in float64 intervals: every input must fit the double range
    with _named("samples"):
        Y = Interval.from_exact(Yq)
    with _named("population"):
        for v in vars(population).values():
            Interval.from_exact(v)
    with _named("R"):
        Interval.from_exact([R * R])
    heads = []
    for A, G in layer.arb_parameters(prec):
        with _named("Q, K, V"):
            Aiv = Interval.from_balls(
                [[A[i, j] for j in range(A.ncols())] for i in range(A.nrows())]
            )
            Giv = Interval.from_balls(
                [[G[i, j] for j in range(G.ncols())] for i in range(G.nrows())]
            )
        heads.append((A, G, Aiv, Giv, iv.matmul(Y, Aiv.T)))
    return _Problem(layer, population, Yq, Y, heads, R, prec)


@contextmanager
def _named(field: str):
    try:
        yield
    except (InputError, RangeOverflowError) as exc:
        raise type(exc)(f"{field}: {exc}") from None


# --- certified point evaluation in arb ----------------------------------------------------------


def _population_map_arb(p: _Problem, x: list[flint.arb]) -> list[flint.arb]:
    out = [flint.arb(0)] * p.d
    for A, G, _, _, _ in p.heads:
        a = [sum((A[k, j] * x[k] for k in range(p.d)), flint.arb(0)) for j in range(p.d)]
        E = p.population.tilted_mean(a, p.prec)
        for i in range(p.d):
            out[i] += sum((G[i, j] * E[j] for j in range(p.d)), flint.arb(0))
    return out


def _difference_arb(p: _Problem, x: np.ndarray) -> list[flint.arb]:
    plain = Attention(p.layer.heads, residual=False, causal=False, scaled=p.layer.scaled)
    emp = attention_measure_map(plain, p.samples, None, [list(x)], prec=p.prec)
    with precision(p.prec):
        pop = _population_map_arb(p, [flint.arb(v) for v in x])
        return [emp[0, i] - pop[i] for i in range(p.d)]


def _norm_arb(D: list[flint.arb], prec: int) -> flint.arb:
    with precision(prec):
        return sum((v * v for v in D), flint.arb(0)).sqrt()


def error_at(
    layer: Attention,
    population: GaussianPopulation | UniformBox,
    samples: Any,
    x: Any,
    *,
    prec: int = DEFAULT_PREC,
) -> tuple[list[flint.arb], flint.arb]:
    """``D(x) = Γ[μ_n](x) − Γ[μ](x)`` and ``|D(x)|_2`` in ball arithmetic at an exact query.

    Raises
    ------
    InputError, ShapeError

    Guarantee: encloses ``D(x)`` and its Euclidean norm."""
    prec = check_precision(prec)
    xq = to_fmpq_array(x, "x")
    if xq.shape != (layer.d,):
        raise ShapeError(f"x: has shape {xq.shape}; give a vector of d = {layer.d} numbers")
    p = _problem(layer, population, samples, 1, prec)
    D = _difference_arb(p, xq)
    return D, _norm_arb(D, prec)


# --- float64 interval enclosures over batches of boxes -----------------------------------------


def _ball_of(lo: float, hi: float) -> flint.arb:
    return flint.arb(lo).union(flint.arb(hi))


def _population_terms(p: _Problem, A: Interval, ac: Interval, aX: Interval):
    """Tilted mean at the centres (B, d) and its a-Jacobian over the boxes (d x d of (B,)).

    Guarantee: encloses (proofs/bounds.md#token-closed-forms, #langevin)."""
    pop, d, B = p.population, p.d, ac.shape[0]
    if isinstance(pop, GaussianPopulation):
        S = Interval.from_exact(pop.cov)
        Ec = Interval.from_exact(pop.mean).reshape(1, d) + iv.matmul(ac, S)
        return Ec, [[S[j, k] for k in range(d)] for j in range(d)]
    with precision(p.prec):
        E, J = [], [[[] for _ in range(d)] for _ in range(d)]
        for b in range(B):
            a = [_ball_of(ac.lo[b, j], ac.hi[b, j]) for j in range(d)]
            E.append(pop.tilted_mean(a, p.prec))
            aw = [_ball_of(aX.lo[b, j], aX.hi[b, j]) for j in range(d)]
            Jb = pop.tilted_jacobian(aw, p.prec)
            for j in range(d):
                for k in range(d):
                    J[j][k].append(Jb[j][k])
    return Interval.from_balls(E), [
        [Interval.from_balls(J[j][k]) for k in range(d)] for j in range(d)
    ]


def _sqrt_nonneg(x: Interval) -> Interval:
    # x encloses a sum of squares (>= 0); outward rounding may push its lower end below 0
    return iv.sqrt(Interval(np.maximum(x.lo, 0.0), np.maximum(x.hi, 0.0)))


def _evaluate(p: _Problem, lo: np.ndarray, hi: np.ndarray, r2_lo: float, r2_hi: float):
    """For boxes ``[lo, hi]`` (B, d): rigorous upper bounds of ``|D|`` on each box, certified
    lower bounds of ``|D(c)|`` at their centres (``-inf`` when ``c`` is not certified in
    ``B_R``), the centres, and which boxes may meet ``B_R``.

    Guarantee: proofs/bounds.md#token-mean-value."""
    d, n = p.d, p.n
    X = Interval(lo, hi)
    c = np.minimum(np.maximum(lo + (hi - lo) / 2, lo), hi)
    C = Interval(c)
    dX = X - C
    Dc = Interval(np.zeros(lo.shape))
    JD = [[Interval(np.zeros(lo.shape[0])) for _ in range(d)] for _ in range(d)]
    for _, _, Aiv, Giv, Z in p.heads:
        mc = iv.matmul(iv.softmax(iv.matmul(C, Z.T), axis=1), p.Y)
        Ec, dE = _population_terms(p, Aiv, iv.matmul(C, Aiv), iv.matmul(X, Aiv))
        Dc = Dc + iv.matmul(mc - Ec, Giv.T)
        # Cov over the box, centred at a point e (proofs/bounds.md#token-mean-value)
        P = iv.softmax(iv.matmul(X, Z.T), axis=1)
        e = mc.mid()
        delta = iv.matmul(P, p.Y) - e
        U = p.Y.reshape(1, n, d) - e.reshape(-1, 1, d)
        M = [[None] * d for _ in range(d)]
        for j in range(d):
            for k in range(j, d):
                T = iv.isum(P * (U[:, :, j] * U[:, :, k]), axis=1)
                cov = T - delta[:, j] * delta[:, k]
                M[j][k] = cov - dE[j][k]
                M[k][j] = cov - dE[k][j] if k != j else M[j][k]
        for a in range(d):
            for q in range(d):
                acc = JD[a][q]
                for j in range(d):
                    for k in range(d):
                        acc = acc + Giv[a, j] * M[j][k] * Aiv[q, k]
                JD[a][q] = acc
    rows_lo, rows_hi = [], []
    for a in range(d):
        Da = Dc[:, a]
        for q in range(d):
            Da = Da + JD[a][q] * dX[:, q]
        rows_lo.append(Da.lo)
        rows_hi.append(Da.hi)
    Dbox = Interval(np.stack(rows_lo, axis=1), np.stack(rows_hi, axis=1))
    upper = _sqrt_nonneg(iv.isum(iv.sqr(Interval(iv.absolute(Dbox).hi)), axis=1)).hi
    at_c = _sqrt_nonneg(iv.isum(iv.sqr(Interval(iv.absolute(Dc).lo)), axis=1)).lo
    inside = iv.isum(iv.sqr(C), axis=1).hi <= r2_lo
    meets = iv.isum(iv.sqr(Interval(iv.absolute(X).lo)), axis=1).lo <= r2_hi
    return upper, np.where(inside, at_c, -np.inf), c, meets


# --- branch and bound ----------------------------------------------------------------------------


def _as_fmpq(v: float) -> flint.fmpq:
    return flint.fmpq(*float(v).as_integer_ratio())


def _check_budget(value: Any, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InputError(f"{name}: {value!r}; give an integer {low} <= {name} <= {high}")
    return value


def _tolerance(rel_tol: Any) -> float:
    t = to_fmpq(rel_tol, "rel_tol")
    if not 0 < t <= 10:
        raise InputError(f"rel_tol: {t} is not in (0, 10]")
    return float(t)


def sup_error_bounds(
    layer: Attention,
    population: GaussianPopulation | UniformBox,
    samples: Any,
    R: Any,
    *,
    rel_tol: Any = 0.05,
    max_boxes: int = 4096,
    prec: int = DEFAULT_PREC,
    stop_below: float | None = None,
    stop_above: float | None = None,
) -> SupErrorBounds:
    """Certified bounds on ``S = sup_{|x|_2 <= R} |Γ[μ_n](x) − Γ[μ](x)|_2`` (module docstring).

    Parameters
    ----------
    layer : Attention
        Non-causal; its residual connection cancels in the difference.
    population : GaussianPopulation or UniformBox
    samples : (n, d) exact numbers
        The tokens ``y_i`` of ``μ_n`` (floats mean their binary value).
    R : exact number > 0
    rel_tol : number in (0, 10]
        Stop when ``upper <= (1 + rel_tol) lower`` (``resolved``).
    max_boxes : int
        Budget of box evaluations (the bounds hold whenever it stops).
    stop_below, stop_above : float, optional
        Claim mode: refine until ``upper <= stop_below`` or ``lower > stop_above`` (or the
        budget is spent); ``rel_tol`` is then not used.

    Raises
    ------
    InputError, ShapeError
        R <= 0, a causal layer, mismatched d, empty samples, bad budgets.

    Guarantee: ``lower <= S <= upper`` (proofs/bounds.md#token-mean-value).
    """
    prec = check_precision(prec)
    tol = _tolerance(rel_tol)
    max_boxes = _check_budget(max_boxes, "max_boxes", 1, MAX_BOXES)
    p = _problem(layer, population, samples, R, prec)
    d, R = p.d, p.R
    r_up = fmpq_to_float(R, "up")
    r2_lo, r2_hi = fmpq_to_float(R * R, "down"), fmpq_to_float(R * R, "up")
    batch = max(1, min(256, _BATCH_ENTRIES // (2 * p.n * d)))
    root = (np.full(d, -r_up), np.full(d, r_up))
    with _named("samples, Q, K, V, R (too large for the float64 branch and bound)"):
        top, best, best_c, count, resolved = branch_and_bound(
            lambda lo, hi: _evaluate(p, lo, hi, r2_lo, r2_hi),
            root,
            batch=batch,
            rel_tol=tol,
            max_boxes=max_boxes,
            stop_below=stop_below,
            stop_above=stop_above,
        )
    best_c = np.zeros(d) if best_c is None else best_c
    upper = _as_fmpq(top) if np.isfinite(top) else None
    witness = np.array([_as_fmpq(v) for v in best_c], dtype=object)
    _, norm = _norm_at(p, witness)
    lower = max(_as_fmpq(best), endpoints(norm, "norm")[0], flint.fmpq(0))
    if upper is not None and lower > upper:  # both certified: a bug, never hidden
        raise AssertionError(f"sup_error_bounds: lower {lower} > upper {upper}")
    return SupErrorBounds(lower, upper, witness, count, resolved, p.n, R)


def _norm_at(p: _Problem, x: np.ndarray) -> tuple[list[flint.arb], flint.arb]:
    D = _difference_arb(p, x)
    return D, _norm_arb(D, p.prec)


# --- claims and sweeps ---------------------------------------------------------------------------

RATES = ("sqrt", "log", "sqrt_log")
FAMILIES = ("softmax", "hardmax")
_SHOWN = {"sqrt": "√n", "log": "log n", "sqrt_log": "√(log n)"}


def rate_threshold(C: Any, n: int, rate: str, prec: int) -> tuple[flint.fmpq, flint.fmpq]:
    """Exact ``lower <= C/r(n) <= upper`` with ``r(n) = √n`` (``rate="sqrt"``), ``log n``
    (``"log"``) or ``√(log n)`` (``"sqrt_log"``).

    Guarantee: encloses the threshold."""
    C = to_fmpq(C, "C")
    if not C > 0:
        raise InputError(f"C: {C} is not > 0")
    if rate not in RATES:
        raise InputError(f"rate: {rate!r}; use one of {', '.join(RATES)}")
    if rate != "sqrt" and n < 2:
        raise InputError(f"rate: C/{_SHOWN[rate]} needs n >= 2 samples (log 1 = 0)")
    with precision(prec):
        den = flint.arb(n).sqrt() if rate == "sqrt" else flint.arb(n).log()
        den = den.sqrt() if rate == "sqrt_log" else den
        return endpoints(flint.arb(C) / den, "threshold")


def check_rate_claim(
    layer: Attention,
    population: GaussianPopulation | UniformBox,
    samples: Any,
    R: Any,
    C: Any,
    *,
    rate: str = "sqrt",
    family: str = "softmax",
    rel_tol: Any = 0.05,
    max_boxes: int = 4096,
    prec: int = DEFAULT_PREC,
) -> RateClaimVerdict:
    """Three-valued check of ``sup_{|x| <= R} |Γ[μ_n](x) − Γ[μ](x)|_2 <= C/√n`` for these
    samples (``rate="log"``: ``C/log n``; ``"sqrt_log"``: ``C/√(log n)``). With
    ``family="hardmax"`` the left side is the normalised hardmax error ``S_∞`` of
    :func:`certified.attention.hardmax_complexity.hardmax_sup_bounds`.

    Returns
    -------
    RateClaimVerdict
        VERIFIED if the certified upper bound is ``<= C/√n``; REFUTED if the certified lower
        bound at the witness query is ``> C/√n`` (the witness is the counterexample);
        UNDECIDED otherwise (raise ``max_boxes`` or lower ``rel_tol``).

    Raises
    ------
    InputError, ShapeError

    Guarantee: VERIFIED ⇒ the claim holds for these samples, R and C; REFUTED ⇒ it fails.
    """
    prec = check_precision(prec)
    if family not in FAMILIES:
        raise InputError(f"family: {family!r}; use one of {', '.join(FAMILIES)}")
    n = to_fmpq_array(samples, "samples").shape[0]
    t_lo, t_hi = rate_threshold(C, n, rate, prec)
    if family == "hardmax":
        from certified.attention.hardmax_complexity import hardmax_sup_bounds as bound
    else:
        bound = sup_error_bounds
    b = bound(
        layer,
        population,
        samples,
        R,
        rel_tol=rel_tol,
        max_boxes=max_boxes,
        prec=prec,
        stop_below=fmpq_to_float(t_lo, "down"),
        stop_above=fmpq_to_float(t_hi, "up"),
    )
    shown = _SHOWN[rate]
    lhs = "|Γ[μ_n](x) − Γ[μ](x)|_2" if family == "softmax" else "|H[μ_n](x)/√(2 log n) − H_∞(x)|_2"
    what = f"sup over |x|_2 <= R of {lhs} <= C/{shown} (n = {n}, R = {b.R})"
    if b.upper is not None and b.upper <= t_lo:
        return RateClaimVerdict(
            Outcome.VERIFIED,
            b,
            t_lo,
            t_hi,
            f"holds: {what}",
            message=f"sup <= {float(b.upper):.6g} <= C/{shown} = {float(t_lo):.6g}",
        )
    if b.lower > t_hi:
        return RateClaimVerdict(
            Outcome.REFUTED,
            b,
            t_lo,
            t_hi,
            f"fails: |D(x)|_2 >= lower > C/{shown} at the counterexample query x",
            counterexample=b.witness,
            message=f"|D(x)| >= {float(b.lower):.6g} > C/{shown} = {float(t_hi):.6g}",
        )
    up = np.inf if b.upper is None else float(b.upper)
    return RateClaimVerdict(
        Outcome.UNDECIDED,
        b,
        t_lo,
        t_hi,
        "",
        message=f"{float(b.lower):.6g} <= sup <= {up:.6g} straddles C/{shown} = "
        f"{float(t_lo):.6g}; raise max_boxes or lower rel_tol",
    )


def rate_sweep(
    layer: Attention,
    population: GaussianPopulation | UniformBox,
    ns: Any,
    radii: Any,
    *,
    seed: int = 0,
    rel_tol: Any = 0.1,
    max_boxes: int = 4096,
    prec: int = DEFAULT_PREC,
) -> dict[str, Any]:
    """Certified bounds on S for nested samples (the first n of one draw) over ``ns`` x
    ``radii``, and a least-squares fit of ``log C(R)`` against ``R`` with
    ``C(R) = max_n √n · upper(n, R)``: the slope is the exponent κ of ``C(R) ~ e^{κR}``.

    Returns
    -------
    dict
        ``rows`` (n, R, lower, upper, sqrt_n_upper, resolved), ``C`` (R -> C(R)),
        ``slope``, ``intercept``.

    Guarantee: each row's bounds as :func:`sup_error_bounds`; the fit: none (heuristic).
    """
    ns = sorted({_check_budget(int(v), "ns", 1, MAX_SAMPLES) for v in ns})
    radii = sorted({to_fmpq(r, "radii") for r in radii})
    if not ns or not radii:
        raise InputError("ns, radii: give at least one sample size and one radius")
    Y = population.sample(ns[-1], np.random.default_rng(seed))
    rows = []
    for R in radii:
        for n in ns:
            b = sup_error_bounds(
                layer, population, Y[:n], R, rel_tol=rel_tol, max_boxes=max_boxes, prec=prec
            )
            root_n = float(n) ** 0.5
            rows.append(
                {
                    "n": n,
                    "R": float(R),
                    "lower": float(b.lower),
                    "upper": float(b.upper),
                    "sqrt_n_upper": root_n * float(b.upper),
                    "resolved": b.resolved,
                }
            )
    C = {float(R): max(r["sqrt_n_upper"] for r in rows if r["R"] == float(R)) for R in radii}
    xs = np.array(list(C))
    ys = np.log(np.array(list(C.values())))
    slope, intercept = np.polyfit(xs, ys, 1) if len(xs) > 1 else (float("nan"), ys[0])
    return {"rows": rows, "C": C, "slope": float(slope), "intercept": float(intercept)}
