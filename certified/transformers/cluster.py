"""Clustering verdicts of the hemisphere theorem (theorems.md §8; proofs/transformers.md §3).

Setting: V = I, B = beta I, W = 0 on S^{d-1}, d >= 2. If all tokens lie in an open hemisphere
they converge to one point. An instance check asks: is the diameter of the token cloud at time
T at most eps? The answer is

* VERIFIED: the hypothesis is certified (an exact u with <u, x_i> > 0 for every token, the
  witness of the open hemisphere) *and* the certified upper bound on the diameter at T, from
  the flow's enclosures, is <= eps;
* REFUTED: a certified lower bound on the diameter at T is > eps (two tokens' boxes too far
  apart), whatever the hypothesis;
* UNDECIDED: otherwise, with the reason (the hypothesis is not certified — the tokens are not
  in an open hemisphere, or no witness was found — or the bounds straddle eps). Never
  VERIFIED without the hemisphere witness.

The diameter is the largest chord |x_i - x_j| (Euclidean, in R^d), bounded from the boxes in
exact rational arithmetic: upper sqrt(sum_c max(hi_i - lo_j, hi_j - lo_i)^2) and lower
sqrt(sum_c gap_c^2) (the square roots compared squared, exactly).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import flint
import numpy as np

from certified.arith.exact import to_fmpq
from certified.errors import InputError
from certified.transformers.flow import token_enclosures, transformer_flow
from certified.transformers.instance import TransformerInstance
from certified.verdict import Outcome

__all__ = ["ClusterVerdict", "diameter_bounds", "hemisphere_cluster", "hemisphere_witness"]


@dataclass(frozen=True)
class ClusterVerdict:
    """Verdict, reason, the hemisphere witness (exact u or None), squared-diameter bounds at T
    (exact), the first saved time whose certified upper bound is <= eps (or None), and the
    flow result.

    Guarantee: as the module docstring says for each outcome."""

    outcome: Outcome
    reason: str
    witness: tuple[flint.fmpq, ...] | None
    diameter_sq_upper: flint.fmpq | None
    diameter_sq_lower: flint.fmpq | None
    first_time: flint.fmpq | None
    result: Any = field(repr=False, default=None)


def check_theorem_setting(instance: TransformerInstance) -> list[flint.fmpq]:
    """The betas of the pieces; InputError unless every piece has V = I, B = beta I, W = 0,
    one head, on the sphere with softmax attention and no mask, d >= 2. Guarantee: exact."""
    d = instance.d
    if instance.geometry != "sphere" or instance.normalisation != "softmax" or instance.causal:
        raise InputError("cluster: the hemisphere theorem is for softmax attention on the sphere")
    if d < 2:
        raise InputError("tokens: the hemisphere theorem needs d >= 2")
    if len(instance.measures) != 1:
        raise InputError("cluster: give one token set ('tokens'), not 'measures'")
    betas = []
    for j, p in enumerate(instance.pieces):
        if len(p.heads) != 1 or p.W.shape[1]:
            raise InputError(f"pieces[{j}]: the hemisphere theorem has one head and W = 0")
        V, B = p.heads[0]
        beta = B[0, 0]
        for r in range(d):
            for c in range(d):
                if V[r, c] != int(r == c) or B[r, c] != (beta if r == c else 0):
                    raise InputError(
                        f"pieces[{j}]: the hemisphere theorem needs V = I and B = beta I"
                    )
        betas.append(beta)
    return betas


def hemisphere_witness(tokens: np.ndarray) -> tuple[flint.fmpq, ...] | None:
    """An exact u with <u, x_i> > 0 for every token (rows of exact numbers), or None.

    Proposals (untrusted): the normalised mean, then a linear program maximising the least
    margin; each is checked exactly.

    Guarantee: a returned u satisfies <u, x_i> > 0 exactly for every i.
    """
    Xf = np.array([[float(q.p) / float(q.q) for q in row] for row in tokens])
    proposals = [Xf.mean(axis=0)]
    try:
        from scipy.optimize import linprog

        n, d = Xf.shape
        # maximise t: <u, x_i> >= t, -1 <= u <= 1
        res = linprog(np.r_[np.zeros(d), -1.0], A_ub=np.c_[-Xf, np.ones(n)], b_ub=np.zeros(n),
                      bounds=[(-1, 1)] * d + [(None, 1)], method="highs")  # fmt: skip
        if res.status == 0:
            proposals.append(res.x[:d])
    except ImportError:  # pragma: no cover - scipy is a dependency
        pass
    for u in proposals:
        if not np.all(np.isfinite(u)):
            continue
        uq = tuple(to_fmpq(float(v)) for v in u)
        if all(sum((a * b for a, b in zip(uq, row, strict=True)), flint.fmpq(0)) > 0
               for row in tokens):  # fmt: skip
            return uq
    return None


def _q(v: Any) -> flint.fmpq:
    return v if isinstance(v, flint.fmpq) else to_fmpq(float(v))


def diameter_bounds(boxes) -> tuple[flint.fmpq, flint.fmpq]:
    """Exact bounds (lower, upper) on the squared largest chord max |x_i - x_j|^2 over all
    choices of x_i in box i (rows of an Interval (n, d)).

    Guarantee: lower <= max_{i<j} |x_i - x_j|^2 <= upper for points in the boxes."""
    lo = [[_q(v) for v in row] for row in boxes.lo]
    hi = [[_q(v) for v in row] for row in boxes.hi]
    n = len(lo)
    upper = lower = flint.fmpq(0)
    for i in range(n):
        for j in range(i + 1, n):
            u = sum((max(hi[i][c] - lo[j][c], hi[j][c] - lo[i][c]) ** 2
                     for c in range(len(lo[i]))), flint.fmpq(0))  # fmt: skip
            g = sum((max(flint.fmpq(0), lo[i][c] - hi[j][c], lo[j][c] - hi[i][c]) ** 2
                     for c in range(len(lo[i]))), flint.fmpq(0))  # fmt: skip
            upper, lower = max(upper, u), max(lower, g)
    return lower, upper


def hemisphere_cluster(
    instance: TransformerInstance, eps: Any, *, samples: int = 16, step_policy: Any = None
) -> ClusterVerdict:
    """The clustering verdict at the schedule's end for diameter threshold ``eps`` > 0, and
    the first of ``samples`` equally spaced times at which the certified diameter is <= eps.

    Guarantee: see the module docstring (VERIFIED only with an exact hemisphere witness and a
    certified diameter bound <= eps; REFUTED only with a certified lower bound > eps).
    """
    eps = to_fmpq(eps, "--eps")
    if not eps > 0:
        raise InputError(f"--eps: {eps} is not positive")
    check_theorem_setting(instance)
    u = hemisphere_witness(instance.measures[0])
    T = instance.total_time
    ts = [T * flint.fmpq(k, samples) for k in range(1, samples)]
    res = transformer_flow(instance, ts=ts, step_policy=step_policy)
    if res.status.name != "SUCCESS":
        return ClusterVerdict(Outcome.UNDECIDED, f"the flow was not certified: {res.message}",
                              u, None, None, None, res)  # fmt: skip
    first = None
    for k, t in enumerate(res.times):
        (boxes,) = token_enclosures(instance, res, k)
        if diameter_bounds(boxes)[1] <= eps * eps:
            first = to_fmpq(t)
            break
    (boxes,) = token_enclosures(instance, res, -1)
    lower, upper = diameter_bounds(boxes)
    if lower > eps * eps:
        outcome, reason = Outcome.REFUTED, "the certified diameter at T exceeds eps"
    elif u is None:
        outcome = Outcome.UNDECIDED
        reason = (
            "hypothesis not certified: no exact u with <u, x_i> > 0 for all tokens (the "
            "tokens are not in an open hemisphere, or no witness was found)"
        )
    elif upper <= eps * eps:
        outcome, reason = Outcome.VERIFIED, "tokens in an open hemisphere; diameter at T <= eps"
    else:
        outcome = Outcome.UNDECIDED
        reason = "the certified diameter bounds at T straddle eps: a longer time or larger eps"
    return ClusterVerdict(outcome, reason, u, upper, lower, first, res)
