"""Certified flows of transformer instances (the engine of ``certified.flow``), the discrete
residual layers ``x_i <- x_i + h Gamma[mu](x_i)`` as certified maps beside their ODE limit,
and a float64 RK4 of the same system (the benchmark's baseline, heuristic).
"""

from __future__ import annotations

from typing import Any

import flint
import numpy as np

from certified.errors import InputError
from certified.flow import SaveAt, StepPolicy, enclose_flow
from certified.flow.result import FlowEnclosure
from certified.transformers.instance import TransformerInstance

__all__ = ["residual_layers", "rk4", "token_enclosures", "transformer_flow"]


def transformer_flow(
    instance: TransformerInstance,
    *,
    ts: Any = (),
    step_policy: StepPolicy | None = None,
    prec: int | None = None,
    steps: bool = False,
) -> FlowEnclosure:
    """Certified enclosures of the n x d state at the schedule's end (and at ``ts``), by the
    validated Taylor method with QR-Lohner sets (:func:`certified.flow.enclose_flow`) on the
    whole coupled state (one point of dimension ``sum(sizes) * d``).

    Guarantee: if the status is SUCCESS, ``enclosures[k, 0]`` contains the exact state at
    ``times[k]`` (tokens in the order of the instance, measure after measure).
    """
    save = SaveAt(instance.total_time, ts, steps=steps)
    return enclose_flow(instance.problem, instance.state(), save_at=save,
                        step_policy=step_policy, prec=prec)  # fmt: skip


def token_enclosures(instance: TransformerInstance, result: FlowEnclosure, k: int = -1):
    """The enclosures of time index k as a list per measure of (n_g, d) Intervals.
    Guarantee: as the result's."""
    from certified.arith import Interval

    lo, hi = result.enclosures.lo[k, 0], result.enclosures.hi[k, 0]
    out, start, d = [], 0, instance.d
    for n in instance.sizes:
        sl = slice(start * d, (start + n) * d)
        out.append(Interval(lo[sl].reshape(n, d), hi[sl].reshape(n, d)))
        start += n
    return out


def residual_layers(
    instance: TransformerInstance, layers: int, *, prec: int = 128
) -> list[flint.arb]:
    """The discrete transformer ``x <- x + h f_theta(x)`` (one forward-Euler step of the
    particle ODE per layer; theorems.md §1.4 and §9 "depth to ODE"): each piece of duration
    tau is ``layers`` layers of step ``h = tau / layers`` (``layers = T`` and tau = 1: the
    layers ``x_i <- x_i + (1/T) Gamma[mu](x_i)``), evaluated in arb ball arithmetic at
    ``prec`` bits from the exact tokens.

    Returns the balls of the final state (``sum(sizes) * d`` of them).

    Guarantee: encloses the exact output of the layers.
    """
    from certified.arith.ball import check_precision, precision
    from certified.checker.taylor import ReplayError, field_jets

    if not isinstance(layers, int) or layers < 1:
        raise InputError(f"layers: expected an integer >= 1, got {layers!r}")
    prec = check_precision(prec)
    field = instance.problem.field.expression
    with precision(prec):
        x = [flint.arb(q) for q in instance.state()[0]]
        for piece in instance.problem.pieces:
            params = [flint.arb(v) for v in piece.values]
            h = flint.arb(piece.duration / layers)
            for _ in range(layers):
                try:
                    f = field_jets(field, params, x, None, 1)[1]
                except ReplayError as exc:  # overflow of an exponential (huge scores)
                    raise InputError(f"layers: {exc}") from None
                x = [xi + h * fi[0] for xi, fi in zip(x, f, strict=True)]
    return x


def rk4(instance: TransformerInstance, steps: int) -> np.ndarray:
    """The classical Runge-Kutta method in float64 with ``steps`` equal steps per piece
    (the same field evaluated by :meth:`VectorField.evaluate`).

    Guarantee: none (heuristic: a baseline and a plot aid).
    """
    field = instance.problem.field
    x = instance.state().astype(float)
    for piece in instance.problem.pieces:
        vals = piece.values
        h = float(piece.duration.p) / float(piece.duration.q) / steps
        for _ in range(steps):
            k1 = field.evaluate(x, vals)
            k2 = field.evaluate(x + 0.5 * h * k1, vals)
            k3 = field.evaluate(x + 0.5 * h * k2, vals)
            k4 = field.evaluate(x + h * k3, vals)
            x = x + (h / 6) * (k1 + 2 * k2 + 2 * k3 + k4)
    return x[0]
