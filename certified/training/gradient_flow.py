"""Conservation laws along a certified gradient flow (issue 21 item 3, "along training").

The gradient flow ``theta' = -grad L(theta) - lam theta`` of a linear network
``x -> W_L ... W_1 x`` trained on a dataset, ``L = (1/2N) sum_i |W_L ... W_1 x_i - y_i|^2``, is an
expression field (the gradient written out as polynomials), so the flow engine encloses it.
For every law h of the architecture (``W_{k+1}^T W_{k+1} - W_k W_k^T``, quadratic and
orthogonal to every loss gradient), ``d/dt h(theta(t)) = -2 lam h``: so
``h(theta(t)) = e^{-2 lam t} h(theta_0)``. The certified statement is
``h(theta(t_k)) in e^{-2 lam t_k} h(theta_0) + [-delta, delta]``, delta computed from the
flow's enclosure alone (interval evaluation of h over it; proofs/training.md#conservation-flow).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import flint
import numpy as np

from certified.arith.ball import precision
from certified.arith.exact import to_fmpq, to_fmpq_array
from certified.errors import InputError, ShapeError

__all__ = ["LawsAlongFlow", "laws_along_gradient_flow", "linear_gradient_field"]


def linear_gradient_field(widths: Sequence[int], X: Any, Y: Any):
    """The field ``theta' = -grad L(theta) - lam theta`` (parameter ``lam``) of the linear
    network of ``widths`` (n, r_1, ..., m) on the dataset (X: N x n, Y: N x m, exact), with the
    variables in the order of :func:`certified.training.conservation.architecture`.

    Guarantee: exact (the gradient of L written out symbolically)."""
    from certified.fields import field, total
    from certified.training.conservation import architecture

    fact = architecture("linear", widths)
    w = list(widths)
    Xq, Yq = to_fmpq_array(X, "X"), to_fmpq_array(Y, "Y")
    if Xq.ndim != 2 or Xq.shape[1] != w[0] or Yq.shape != (Xq.shape[0], w[-1]):
        raise ShapeError(f"X, Y: expected N x {w[0]} and N x {w[-1]}, got {Xq.shape}, {Yq.shape}")
    N, D = Xq.shape[0], len(fact.names)
    shapes, offset = [], 0
    for k in range(len(w) - 1):
        shapes.append((offset, w[k + 1], w[k]))
        offset += w[k + 1] * w[k]

    def rhs(th, p):
        mats = [[[th[o + i * c + j] for j in range(c)] for i in range(r)] for o, r, c in shapes]
        grads = [[[0] * c for _ in range(r)] for _, r, c in shapes]
        for s in range(N):
            acts = [[Xq[s, j] for j in range(w[0])]]  # forward: a_{k+1} = W_{k+1} a_k
            for M in mats:
                acts.append([total([M[i][j] * acts[-1][j] for j in range(len(M[0]))])
                             for i in range(len(M))])  # fmt: skip
            back = [acts[-1][i] - Yq[s, i] for i in range(w[-1])]  # dL/da_L (times N)
            for k in reversed(range(len(mats))):
                M = mats[k]
                for i in range(len(M)):
                    for j in range(len(M[0])):
                        grads[k][i][j] = grads[k][i][j] + back[i] * acts[k][j]
                back = [total([M[i][j] * back[i] for i in range(len(M))]) for j in range(len(M[0]))]
        flat = [g for G in grads for row in G for g in row]
        return [-(g * flint.fmpq(1, N)) - p.lam * th[q] for q, g in enumerate(flat)]

    return field(D, rhs, parameters=["lam"], name="linear-gradient-flow"), fact


def _eval_ball(poly, balls) -> flint.arb:
    """Interval evaluation of an fmpq_mpoly at arb balls (term by term: encloses)."""
    out = flint.arb(0)
    for exps, c in poly.to_dict().items():
        t = flint.arb(c)
        for b, e in zip(balls, exps, strict=True):
            if e:
                t *= b**e
        out += t
    return out


@dataclass(frozen=True)
class LawsAlongFlow:
    """At each saved time t_k: ``delta[k]`` with h_j(theta(t_k)) in
    ``e^{-2 lam t_k} h_j(theta_0) + [-delta, delta]`` for every law j, and the loss enclosure
    ``losses[k] = (lo, hi)``.

    Guarantee: the inclusions hold (from the flow's certified enclosure)."""

    times: tuple[flint.fmpq, ...]
    delta: tuple[float, ...]
    losses: tuple[tuple[float, float], ...]
    laws: tuple[str, ...]
    values0: tuple[flint.fmpq, ...]


def laws_along_gradient_flow(
    widths: Sequence[int], X: Any, Y: Any, theta0: Any, *, lam: Any = 0, times: Sequence[Any]
) -> LawsAlongFlow:
    """Enclose the gradient flow from ``theta0`` (exact) up to ``times[-1]`` and bound how far
    each conservation law of the linear architecture strays from ``e^{-2 lam t} h(theta_0)``.

    Raises InputError when the flow cannot be enclosed (the message says what to change).

    Guarantee: see :class:`LawsAlongFlow`."""
    from certified.flow import FlowStatus, SaveAt, enclose_flow

    f, fact = linear_gradient_field(widths, X, Y)
    lam = to_fmpq(lam, "lam")
    if lam < 0:
        raise InputError(f"lam: {lam} is negative; weight decay must be >= 0")
    ts = [to_fmpq(t, "times") for t in times]
    th0 = to_fmpq_array([theta0], "theta0")
    if th0.shape != (1, len(fact.names)):
        raise ShapeError(f"theta0: expected {len(fact.names)} values, got {th0.shape[1]}")
    problem = f.on((ts[-1], [lam]))
    res = enclose_flow(problem, th0, save_at=SaveAt(ts=ts[:-1]))
    if res.status is not FlowStatus.SUCCESS:
        raise InputError(f"the gradient flow cannot be enclosed: {res.message}")
    Xq, Yq = to_fmpq_array(X, "X"), to_fmpq_array(Y, "Y")
    h0 = tuple(h(*th0[0]) for h in fact.laws)
    deltas, losses = [], []
    with precision(128):
        for k, t in enumerate(ts):
            box = res.enclosures[k, 0]
            balls = [flint.arb(float(a)).union(flint.arb(float(b))) for a, b in
                     zip(box.lo, box.hi, strict=True)]  # fmt: skip
            decay = (-2 * flint.arb(lam) * flint.arb(t)).exp()
            worst = flint.arb(0)
            for h, v0 in zip(fact.laws, h0, strict=True):
                dev = abs(_eval_ball(h, balls) - decay * flint.arb(v0))
                worst = max(worst, flint.arb(dev.upper()), key=lambda a: float(a.upper()))
            deltas.append(float(worst.upper()) * (1 + 2**-50))
            losses.append(_loss_bounds(widths, balls, Xq, Yq))
    return LawsAlongFlow(tuple(ts), tuple(deltas), tuple(losses),
                         tuple(str(h) for h in fact.laws), h0)  # fmt: skip


def _loss_bounds(widths, balls, Xq, Yq) -> tuple[float, float]:
    """Outward float bounds of L over the box of balls (interval evaluation)."""
    w, offset, mats = list(widths), 0, []
    for k in range(len(w) - 1):
        r, c = w[k + 1], w[k]
        mats.append([[balls[offset + i * c + j] for j in range(c)] for i in range(r)])
        offset += r * c
    total = flint.arb(0)
    for s in range(Xq.shape[0]):
        a = [flint.arb(v) for v in Xq[s]]
        for M in mats:
            a = [sum((M[i][j] * a[j] for j in range(len(a))), flint.arb(0)) for i in range(len(M))]
        total += sum(((a[i] - flint.arb(Yq[s, i])) ** 2 for i in range(len(a))), flint.arb(0))
    L = total / (2 * Xq.shape[0])
    lo, hi = float(L.lower()), float(L.upper())
    return np.nextafter(lo, -np.inf), np.nextafter(hi, np.inf)
