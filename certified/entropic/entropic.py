r"""Certified two-sided bounds on entropic optimal transport and the Sinkhorn divergence.

.. math::

    OT_γ(μ, ν) = \min_{π ∈ Π(a, b)} ⟨C, π⟩ + γ KL(π \,|\, a ⊗ b)
               = \max_{f, g} ⟨f, a⟩ + ⟨g, b⟩ − γ ⟨e^{(f ⊕ g − C)/γ} − 1, a ⊗ b⟩ ,

with ``C_ij = |x_i − y_j|^q``. An untrusted float solver proposes potentials ``(f, g)``.
Everything else is derived from them with outward rounding, from the same n × m enclosed
exponentials ``E_ij = e^{(f_i + g_j − C_ij)/γ}``:

* lower bound: the dual value at ``(f, g)`` (weak duality, proofs/bounds.md#eot-dual);
* upper bound: the Gibbs plan ``P = (a_i b_j E_ij)`` divided by a scale ``t`` that makes its
  row and column sums at most ``a`` and ``b``, completed to exact marginals by the rank-one
  repair of Altschuler, Weed and Rigollet (2017); its objective is bounded from the marginals
  of ``P`` alone (proofs/bounds.md#eot-primal), so the plan is never formed.

The certificate therefore carries only ``(f, g, t)`` per problem (kind ``entropic``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import flint
import numpy as np

from certified.arith.ball import endpoints, precision
from certified.arith.exact import fmpq_array_to_float, fmpq_to_float, to_fmpq
from certified.entropic._gibbs import gibbs_sums, gibbs_sums_s, gibbs_sums_sq
from certified.entropic._sinkhorn import solve_potentials
from certified.errors import DomainError, InputError, RangeOverflowError, ShapeError
from certified.transport._costs import TINY, CostBounds
from certified.transport.measure import Measure, as_measure
from certified.transport.wasserstein import _check_q

__all__ = [
    "EntropicBounds",
    "SinkhornDivergenceBounds",
    "certify_potentials",
    "entropic_ot",
    "sinkhorn_divergence",
]

PREC = 128  # bits of the final assembly (n + m balls)
REPAIR_ABOVE = flint.fmpq(1, 10**11)  # relative gap above which the potentials are repaired
MAX_POTENTIAL = 2.0**48  # |f| / γ and |g| / γ above it are refused by the checker


@dataclass(frozen=True, eq=False)
class EntropicBounds:
    """``lower <= OT_γ(μ, ν) <= upper`` (exact ``fmpq``) with the evidence: potentials ``f``,
    ``g`` (float64, exact dyadics) and the scale ``t`` of the repaired Gibbs plan. ``info``
    reports the untrusted solver (sweeps, Newton steps, float marginal error).

    Guarantee: encloses ``OT_γ(μ, ν)`` (rigorous).
    """

    mu: Measure
    nu: Measure
    gamma: flint.fmpq
    q: flint.fmpq
    lower: flint.fmpq
    upper: flint.fmpq
    f: np.ndarray
    g: np.ndarray
    scale: flint.fmpq
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def gap(self) -> flint.fmpq:
        """``upper - lower``. Guarantee: exact."""
        return self.upper - self.lower

    @property
    def relative_gap(self) -> float:
        """``(upper - lower) / |upper|`` as a float. Guarantee: none (a figure of merit)."""
        return 0.0 if self.upper == 0 else float(self.gap / abs(self.upper))

    def __repr__(self) -> str:
        return (
            f"EntropicBounds(gamma={self.gamma}, q={self.q}, OT in [{float(self.lower):.17g}, "
            f"{float(self.upper):.17g}], relative gap {self.relative_gap:.2e})"
        )


@dataclass(frozen=True, eq=False)
class SinkhornDivergenceBounds:
    """``lower <= S_γ(μ, ν) <= upper`` from the three problems ``parts = (OT(μ, ν), OT(μ, μ),
    OT(ν, ν))``: ``lower = L_μν − (U_μμ + U_νν)/2``, ``upper = U_μν − (L_μμ + L_νν)/2``.

    Guarantee: encloses ``S_γ(μ, ν)`` (rigorous)."""

    lower: flint.fmpq
    upper: flint.fmpq
    parts: tuple[EntropicBounds, EntropicBounds, EntropicBounds]

    @property
    def relative_gap(self) -> float:
        """``(upper - lower) / |upper|``. Guarantee: none (a figure of merit)."""
        return 0.0 if self.upper == 0 else float((self.upper - self.lower) / abs(self.upper))


def check_gamma(gamma: Any) -> flint.fmpq:
    """``gamma`` as an exact rational in ``[2^-60, 2^60]`` (else DomainError). Guarantee: exact."""
    g = to_fmpq(gamma, "gamma")
    if g <= 0:
        raise DomainError(f"gamma: {gamma!r} is not > 0; the entropic regularisation needs γ > 0")
    if not flint.fmpq(1, 2**60) <= g <= 2**60:
        raise DomainError(f"gamma: {gamma!r} is outside [2^-60, 2^60]; rescale the costs")
    return g


def _cost_matrices(costs: CostBounds) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(float costs, lower bounds, upper bounds), n × m each."""
    n, m = costs.mu.n, costs.nu.n
    M = costs.float_costs()
    if costs._S is not None and costs.q == 2:  # proof: proofs/bounds.md#w-sqdist
        S = costs._S
        big = S >= TINY
        return M, np.where(big, S * costs.kappa, 0.0), np.where(big, S * costs.K, 2 * TINY)
    lo = costs.lower_block(0, n)
    r, c = np.divmod(np.arange(n * m), m)
    return M, lo, costs.upper_pairs(r, c).reshape(n, m)


def _weight_bounds(m: Measure) -> tuple[np.ndarray, np.ndarray]:
    if m.uniform:
        w = m.weights[0]
        return np.full(m.n, fmpq_to_float(w, "down")), np.full(m.n, fmpq_to_float(w, "up"))
    return fmpq_array_to_float(m.weights, "down"), fmpq_array_to_float(m.weights, "up")


def _live(m: Measure) -> np.ndarray:
    """The atoms of positive weight (exact test)."""
    return np.ones(m.n, dtype=bool) if m.uniform else np.asarray([w > 0 for w in m.weights])


def enclosed_sums(costs: CostBounds, gamma: flint.fmpq, f: np.ndarray, g: np.ndarray):
    """Enclosures of the inner Gibbs sums (proofs/bounds.md#eot-sums) and ``(cmax, wmin)``:
    a double ``>= C_ij`` for every pair of atoms of positive weight, and ``w`` of
    #eot-primal exactly (uniform weights) or a double ``<= w``; the error-free exponent
    (#eot-exponent) for q = 2, double points and ``max cost / γ > 100`` (where the cost's
    rounding would dominate the gap); for q = 2 and double points otherwise, the cost bounds
    of #w-sqdist formed entry by entry.

    Guarantee: encloses (raises RangeOverflowError when an exponential overflows)."""
    mu, nu = costs.mu, costs.nu
    inv = (fmpq_to_float(1 / gamma, "down"), fmpq_to_float(1 / gamma, "up"))
    a_iv, b_iv = _weight_bounds(mu), _weight_bounds(nu)
    live_a, live_b = _live(mu), _live(nu)
    if costs._S is not None and costs.q == 2:
        S = costs._S
        smax = float(S.max() if live_a.all() and live_b.all() else S[np.ix_(live_a, live_b)].max())
        # fl(K_d ŝ) is non-decreasing in ŝ: the largest upper bound of #w-sqdist
        cmax = smax * costs.K if smax >= TINY else 2 * TINY
        if cmax * inv[1] > 100:
            *sums, ok = gibbs_sums_sq(f, g, mu.points_lo, nu.points_lo, inv, a_iv, b_iv)
        else:
            *sums, ok = gibbs_sums_s(f, g, S, (costs.kappa, costs.K), inv, a_iv, b_iv)
    else:
        _, clo, chi = _cost_matrices(costs)
        cmax = float(chi[np.ix_(live_a, live_b)].max())
        *sums, ok = gibbs_sums(f, g, clo, chi, inv, a_iv, b_iv)
    if not ok:
        raise RangeOverflowError("potentials: exp((f_i + g_j - c_ij)/gamma) overflows float64")
    if mu.uniform and nu.uniform:
        wmin = max(mu.weights[0], nu.weights[0])
    else:  # a lower bound on w: H (#eot-primal) only grows, the upper bound stays valid
        wmin = max(float(a_iv[0][live_a].min()), float(b_iv[0][live_b].min()))
    return sums, (cmax, wmin)


def _round(x: flint.fmpq, up: bool, bits: int = 80) -> flint.fmpq:
    """A dyadic with about ``bits`` significant bits, ``>= x`` (up) or ``<= x``. Exact."""
    if x == 0:
        return x
    e = bits - (int(x.p).bit_length() - int(x.q).bit_length())
    num, den = (int(x.p) << max(e, 0), int(x.q) << max(-e, 0))
    k = -((-num) // den) if up else num // den
    return flint.fmpq(k, 1 << e) if e >= 0 else flint.fmpq(k * (1 << -e))


def _ball(lo, hi) -> flint.arb:
    """The arb ball of the exact interval [lo, hi] (doubles or fmpq; current precision)."""
    return flint.arb(lo).union(flint.arb(hi))


def _dyadics(x: np.ndarray) -> tuple[list[int], np.ndarray]:
    """Integers k and exponents e with x = k 2^e exactly (float64 array)."""
    m, e = np.frexp(x)
    return np.ldexp(m, 53).astype(np.int64).tolist(), e.astype(np.int64) - 53


def _exact_dot(x: np.ndarray, y: np.ndarray) -> flint.fmpq:
    """``Σ_k x_k y_k`` exactly (float64 arrays: each product is an exact dyadic). Exact."""
    keep = (x != 0) & (y != 0)
    if not keep.any():
        return flint.fmpq(0)
    kx, ex = _dyadics(x[keep])
    ky, ey = _dyadics(y[keep])
    e = ex + ey
    emin = int(e.min())
    shifts = (e - emin).tolist()
    total = sum((a * b) << s for a, b, s in zip(kx, ky, shifts, strict=True))
    scale = flint.fmpz(2) ** abs(emin)
    return flint.fmpq(total) * scale if emin >= 0 else flint.fmpq(total, scale)


class _Sums:
    """Weighted sums ``Σ_k w_k x_k y_k`` over the atoms of one measure (x, y float64): exact
    for uniform weights; for other weights a 128-bit arb sum (the products x_k y_k are exact
    in 128 bits, the weights are balls) whose end on the requested side is returned (exact
    rationals with many different denominators grow without bound)."""

    def __init__(self, m: Measure) -> None:
        self.m = m
        self.balls = None if m.uniform else [flint.arb(w) for w in m.weights]

    def dot(self, x: np.ndarray, y: np.ndarray, side: str) -> flint.fmpq:
        """A rational <= (side "lo") or >= (side "hi") the sum. Guarantee: as stated."""
        if self.balls is None:
            return self.m.weights[0] * _exact_dot(x, y)
        keep = np.flatnonzero((x != 0) & (y != 0)).tolist()
        xs, ys, ws = x.tolist(), y.tolist(), self.balls
        ball = sum((ws[k] * (flint.arb(xs[k]) * flint.arb(ys[k])) for k in keep), flint.arb(0))
        lo, hi = endpoints(ball)
        return lo if side == "lo" else hi


def _assemble(mu, nu, gamma, f, g, bounds, sums):
    """(lower, upper, t) from the enclosed inner sums and ``bounds = (cmax, wmin)`` of
    :func:`enclosed_sums`; the checker's formulas, with the sums over the n + m atoms exact
    (uniform weights) or in 128-bit arb, and arb balls for the few remaining scalars."""
    row_lo, row_hi, col_lo, col_hi = sums
    cmax, wmin = bounds
    A, B = _Sums(mu), _Sums(nu)
    ones_a, ones_b = np.ones(mu.n), np.ones(nu.n)
    # M = Σ_i a_i ρ_i = Σ_j b_j κ_j (ρ_i = r_i / a_i ∈ [row_lo_i, row_hi_i], κ_j likewise):
    # both enclosures hold, so their intersection does
    M_lo = max(A.dot(ones_a, row_lo, "lo"), B.dot(ones_b, col_lo, "lo"))
    M_hi = min(A.dot(ones_a, row_hi, "hi"), B.dot(ones_b, col_hi, "hi"))
    # proof: proofs/bounds.md#eot-dual (exact for uniform weights, except for M)
    lower = A.dot(ones_a, f, "lo") + B.dot(ones_b, g, "lo") - gamma * (M_hi - 1)
    # proof: proofs/bounds.md#eot-primal; r_i / a_i <= row_hi_i, c_j / b_j <= col_hi_j
    live_a, live_b = _live(mu), _live(nu)
    t_hi = max(float(row_hi[live_a].max()), float(col_hi[live_b].max()))
    t = _round(flint.fmpq(*t_hi.as_integer_ratio()) * (1 + flint.fmpq(1, 2**60)), up=True, bits=64)
    # Σ f_i r_i + Σ g_j c_j: per term the end of [row_lo_i, row_hi_i] that bounds f_i ρ_i
    mass_lo = A.dot(f, np.where(f >= 0, row_lo, row_hi), "lo")
    mass_lo += B.dot(g, np.where(g >= 0, col_lo, col_hi), "lo")
    mass_hi = A.dot(f, np.where(f >= 0, row_hi, row_lo), "hi")
    mass_hi += B.dot(g, np.where(g >= 0, col_hi, col_lo), "hi")
    ga, ta, M = flint.arb(gamma), flint.arb(t), _ball(M_lo, M_hi)
    H = flint.arb(cmax) + ga * (1 - flint.arb(wmin).log())
    upper = (_ball(mass_lo, mass_hi) - ga * ta.log() * M) / ta + (1 - M / ta) * H
    up = endpoints(upper)[1]
    margin = flint.fmpq(1, 2**64)  # covers the checker's own rounding (128-bit balls)
    lo = _round(lower - margin * (1 + abs(lower)), False)
    return lo, _round(up + margin * (1 + abs(up)), True), t


def _repair(sums, gamma, f, g, a, b):
    """Potentials lowered so that the Gibbs plan's rows and columns are about <= the
    marginals: x_i = f_i + γ log min(1, a_i / r_i), y_j = g_j + γ log min(1, b_j / c_j) from
    one enclosed pass (the columns of the row-lowered plan are at most those of the first).
    Guarantee: none (heuristic; the scale t of the certificate absorbs what remains)."""
    gf = float(gamma)
    _, row_hi, _, col_hi = sums
    with np.errstate(divide="ignore", invalid="ignore"):  # r_i / a_i is the inner row sum
        alpha = np.where(a > 0, np.minimum(1.0, 1.0 / row_hi), 1.0)
        beta = np.where(b > 0, np.minimum(1.0, 1.0 / col_hi), 1.0)
        x = f + gf * np.log(alpha) - gf * 2.0**-50 * (alpha < 1)
        y = g + gf * np.log(beta) - gf * 2.0**-50 * (beta < 1)
    ok = np.all(np.isfinite(x)) and np.all(np.isfinite(y))
    return (x, y) if ok else (f, g)


def certify_potentials(
    mu: Any,
    nu: Any,
    gamma: Any,
    f: Any,
    g: Any,
    q: Any = 2,
    *,
    info: dict | None = None,
    costs: CostBounds | None = None,
    repair: bool = True,
) -> EntropicBounds:
    """Certified bounds on ``OT_γ(μ, ν)`` from ANY potentials ``f`` (n doubles), ``g`` (m).

    With ``repair`` (default), when the relative gap exceeds 1e-11, the potentials are
    lowered where the Gibbs plan's rows and columns exceed the marginals
    (``f_i + γ log min(1, a_i / r_i)``, the same for g) and the bounds recomputed (kept if
    tighter): the scale t is then about 1 and the repaired plan's deficit is the L1 marginal
    error instead of the largest relative one (the rounding of Altschuler, Weed and Rigollet
    2017, carried by the potentials; heuristic, the bounds hold either way).

    Guarantee: ``lower <= OT_γ(μ, ν) <= upper`` (rigorous, for the exact points, weights, γ
    and q), whatever ``f`` and ``g`` are; their quality only decides the gap.
    """
    mu, nu = as_measure(mu, "mu"), as_measure(nu, "nu")
    if mu.d != nu.d:
        raise ShapeError(f"nu: points in dimension {nu.d}, mu's are in dimension {mu.d}")
    gam, qq = check_gamma(gamma), _check_q(q)
    f = np.ascontiguousarray(f, dtype=np.float64)
    g = np.ascontiguousarray(g, dtype=np.float64)
    if f.shape != (mu.n,) or g.shape != (nu.n,):
        raise ShapeError(f"potentials: expected shapes ({mu.n},) and ({nu.n},)")
    if not (np.all(np.isfinite(f)) and np.all(np.isfinite(g))):
        raise InputError("potentials: not finite; the solver failed")
    gf = float(gam)
    if max(np.abs(f).max(), np.abs(g).max()) > MAX_POTENTIAL * gf * (1 - 2.0**-40):
        raise RangeOverflowError(
            "potentials: |f| / gamma or |g| / gamma above 2^48; rescale the costs or raise gamma"
        )
    costs = costs or CostBounds(mu, nu, qq)
    sums, bounds = enclosed_sums(costs, gam, f, g)
    with precision(PREC):
        lower, upper, t = _assemble(mu, nu, gam, f, g, bounds, sums)
    if repair and upper - lower > REPAIR_ABOVE * abs(upper):
        x, y = _repair(sums, gam, f, g, mu.weights_float, nu.weights_float)
        sums, bounds = enclosed_sums(costs, gam, x, y)
        with precision(PREC):
            lo2, up2, t2 = _assemble(mu, nu, gam, x, y, bounds, sums)
        if up2 - lo2 < upper - lower:
            f, g, lower, upper, t = x, y, lo2, up2, t2
    return EntropicBounds(mu, nu, gam, qq, lower, upper, f, g, t, dict(info or {}))


def entropic_ot(mu: Any, nu: Any, gamma: Any, q: Any = 2) -> EntropicBounds:
    """Certified two-sided enclosure of ``OT_γ(μ, ν) = min ⟨C, π⟩ + γ KL(π | a ⊗ b)``.

    Parameters
    ----------
    mu, nu : Measure or array_like (n, d)
        Discrete probability measures (an array is the uniform measure on its rows).
    gamma : int, str, fmpq, float (exact)
        Regularisation ``γ > 0`` (``"1/100"`` or ``"0.01"`` are read exactly).
    q : exact number >= 1
        Cost ``|x - y|^q`` (Euclidean norm); default 2.

    Raises
    ------
    DomainError
        ``γ <= 0`` (or outside ``[2^-60, 2^60]``), ``q < 1``.
    ShapeError, InputError
        Invalid measures (see :class:`Measure`), different dimensions.

    Guarantee: ``lower <= OT_γ(μ, ν) <= upper`` (rigorous). The producer is the built-in
    ε-scaled, stabilised Sinkhorn + Newton solver (untrusted; it decides only the gap).
    """
    mu, nu = as_measure(mu, "mu"), as_measure(nu, "nu")
    if mu.d != nu.d:
        raise ShapeError(f"nu: points in dimension {nu.d}, mu's are in dimension {mu.d}")
    gam, qq = check_gamma(gamma), _check_q(q)
    costs = CostBounds(mu, nu, qq)
    M = costs.float_costs()
    f, g, info = solve_potentials(M, mu.weights_float, nu.weights_float, float(gam))
    return certify_potentials(mu, nu, gam, f, g, qq, info=info, costs=costs)


def sinkhorn_divergence(mu: Any, nu: Any, gamma: Any, q: Any = 2) -> SinkhornDivergenceBounds:
    """Certified enclosure of ``S_γ(μ, ν) = OT_γ(μ, ν) − OT_γ(μ, μ)/2 − OT_γ(ν, ν)/2``.

    Guarantee: ``lower <= S_γ(μ, ν) <= upper`` (rigorous; the three problems enclosed by
    :func:`entropic_ot`)."""
    mu, nu = as_measure(mu, "mu"), as_measure(nu, "nu")
    xy = entropic_ot(mu, nu, gamma, q)
    xx = entropic_ot(mu, mu, gamma, q)
    yy = entropic_ot(nu, nu, gamma, q)
    half = flint.fmpq(1, 2)
    lower = xy.lower - half * (xx.upper + yy.upper)
    upper = xy.upper - half * (xx.lower + yy.lower)
    return SinkhornDivergenceBounds(lower, upper, (xy, xx, yy))
