"""The "robust" O(1/k) rate of Sinkhorn as a testable hypothesis (Python API only).

Hypothesis (seed 002; Dvurechensky, Gasnikov and Kroshnin 2018 prove a bound of this shape):
the dual sub-optimality of the k-th Sinkhorn iterate satisfies

    OT_γ(μ, ν) − D(f_k, g_k) ≤ K / k,    default K = 2 ‖C‖∞² / γ   (linear in 1/γ),

with ``D`` the unconstrained dual and one iterate = an f-update then a g-update of the
log-domain Sinkhorn started from ``g = 0``. For each requested k the sub-optimality is enclosed
rigorously: ``OT_γ`` by :func:`entropic_ot` (converged potentials), ``D(f_k, g_k)`` by the same
enclosed Gibbs sums (proofs/bounds.md#eot-dual, both directions). VERIFIED when the upper
bound is ``<= K/k``, REFUTED when the lower bound is ``> K/k`` (the iterate ``(f_k, g_k)``,
exact dyadics, is the certified counterexample), UNDECIDED otherwise. Not a certificate kind:
the checker has no rate mode (the evidence is two ``entropic``-style evaluations).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import flint
import numpy as np

from certified.arith.ball import endpoints, precision
from certified.arith.exact import to_fmpq
from certified.entropic._sinkhorn import sinkhorn_iterates
from certified.entropic.entropic import (
    EntropicBounds,
    _ball,
    _cost_matrices,
    check_gamma,
    enclosed_sums,
    entropic_ot,
)
from certified.errors import InputError
from certified.transport._costs import CostBounds
from certified.transport.measure import as_measure
from certified.transport.wasserstein import _check_q, weighted_exact_sum
from certified.verdict import Outcome

__all__ = ["RateCheck", "SinkhornRate", "dual_value", "sinkhorn_rate"]


@dataclass(frozen=True, eq=False)
class RateCheck:
    """One iterate: ``suboptimality_lower <= OT_γ − D(f_k, g_k) <= suboptimality_upper``
    against ``bound = K/k``; ``f``, ``g`` are the iterate (float64, exact dyadics).

    Guarantee: the enclosure is rigorous; ``verdict`` is VERIFIED / REFUTED only when certain.
    """

    k: int
    bound: flint.fmpq
    suboptimality_lower: flint.fmpq
    suboptimality_upper: flint.fmpq
    verdict: Outcome
    f: np.ndarray
    g: np.ndarray


@dataclass(frozen=True, eq=False)
class SinkhornRate:
    """The checks of :func:`sinkhorn_rate`; ``verdict`` is REFUTED if any iterate refutes the
    bound, VERIFIED if all verify it, else UNDECIDED.

    Guarantee: as :class:`RateCheck`, for every entry of ``checks``."""

    optimum: EntropicBounds
    constant: flint.fmpq
    checks: tuple[RateCheck, ...]

    @property
    def verdict(self) -> Outcome:
        """The overall verdict. Guarantee: as the checks."""
        verdicts = {c.verdict for c in self.checks}
        if Outcome.REFUTED in verdicts:
            return Outcome.REFUTED
        return Outcome.VERIFIED if verdicts == {Outcome.VERIFIED} else Outcome.UNDECIDED


def dual_value(mu, nu, gamma, f, g, q=2, costs: CostBounds | None = None):
    """Exact ``(lo, hi)`` with ``lo <= D(f, g) <= hi``, ``D`` the unconstrained entropic dual.

    Guarantee: encloses ``D(f, g)`` (rigorous; proofs/bounds.md#eot-dual, #eot-sums)."""
    mu, nu = as_measure(mu, "mu"), as_measure(nu, "nu")
    gam, qq = check_gamma(gamma), _check_q(q)
    f = np.ascontiguousarray(f, dtype=np.float64)
    g = np.ascontiguousarray(g, dtype=np.float64)
    costs = costs or CostBounds(mu, nu, qq)
    (row_lo, row_hi, _, _), _ = enclosed_sums(costs, gam, f, g)
    with precision(128):
        rows = zip(row_lo, row_hi, mu.weights, strict=True)
        M = sum((_ball(lo, hi) * flint.arb(w) for lo, hi, w in rows), flint.arb(0))
        lin = weighted_exact_sum(mu.weights, f, mu.uniform)
        lin += weighted_exact_sum(nu.weights, g, nu.uniform)
        lo, hi = endpoints(flint.arb(lin) - flint.arb(gam) * (M - 1))
    return lo, hi


def sinkhorn_rate(
    mu: Any,
    nu: Any,
    gamma: Any,
    steps: Iterable[int] = (1, 2, 5, 10, 20, 50),
    constant: Any = None,
    q: Any = 2,
) -> SinkhornRate:
    """Test ``OT_γ − D(f_k, g_k) <= constant / k`` on the Sinkhorn iterates ``k in steps``.

    ``constant`` defaults to ``2 ‖C‖∞² / γ`` (``‖C‖∞`` an exact upper bound on the largest
    cost). Raises InputError for an empty ``steps`` or a step < 1.

    Guarantee: each check's enclosure is rigorous; VERIFIED / REFUTED only when certain.
    """
    mu, nu = as_measure(mu, "mu"), as_measure(nu, "nu")
    gam, qq = check_gamma(gamma), _check_q(q)
    ks = sorted({int(k) for k in steps})
    if not ks or ks[0] < 1:
        raise InputError("steps: give step counts k >= 1")
    opt = entropic_ot(mu, nu, gam, qq)
    costs = CostBounds(mu, nu, qq)
    M, _, chi = _cost_matrices(costs)
    if constant is None:
        cmax = flint.fmpq(*float(chi.max()).as_integer_ratio())
        K = 2 * cmax**2 / gam
    else:
        K = to_fmpq(constant, "constant")
    iterates = sinkhorn_iterates(M, mu.weights_float, nu.weights_float, float(gam), ks)
    checks = []
    for k in ks:
        f, g = iterates[k]
        d_lo, d_hi = dual_value(mu, nu, gam, f, g, qq, costs)
        lo, hi = opt.lower - d_hi, opt.upper - d_lo
        bound = K / k
        verdict = (
            Outcome.VERIFIED
            if hi <= bound
            else Outcome.REFUTED
            if lo > bound
            else Outcome.UNDECIDED
        )
        checks.append(RateCheck(k, bound, lo, hi, verdict, f, g))
    return SinkhornRate(opt, K, tuple(checks))
