"""One entry point for certified flows of a :class:`~certified.models.Schedule`, and the
certificates they give (in the spirit of diffrax's ``diffeqsolve``: the field is the schedule,
the method is chosen from it, the result is a :class:`FlowEnclosure`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from certified.errors import InputError
from certified.flow.result import FlowEnclosure, FlowStatus
from certified.models import Activation, Schedule

__all__ = ["enclose_flow", "flow_certificate_for"]


def enclose_flow(
    schedule: Schedule,
    X0: Any,
    *,
    prec: int | None = None,
    order: int = 20,
    max_step: Any = "1/32",
    method: str = "auto",
) -> FlowEnclosure:
    """Certified enclosures of ``Phi_T(x)`` for every initial point (or box) x, T the total
    time of the schedule.

    ReLU / leaky ReLU schedules use the piecewise-affine engine (laminar pieces exactly, other
    pieces region by region, ball arithmetic at ``prec`` bits, default 128; ``method="regions"``)
    or the vectorised 53-bit engine (``method="vectorised"``: all points at once, BLAS
    midpoint-radius Taylor steps, windows at crossings; no certificate rule replays it).
    ``method="auto"`` takes the vectorised engine for non-laminar schedules with double
    parameters, at least 1000 points and ``prec`` None or 53, else the region engine; tanh / sigmoid
    schedules use the validated Taylor method with log-norm propagation in float64 interval
    arithmetic (``order``, ``max_step``) at 53 bits, or in arb at ``prec`` bits if given.

    Guarantee: if the status is SUCCESS, ``enclosures[0, i]`` contains ``Phi_T(x)`` for every
    x in initial set i.
    """
    W = [p.W for p in schedule.pieces]
    A = [p.A for p in schedule.pieces]
    b = [p.b for p in schedule.pieces]
    durations = [p.duration for p in schedule.pieces]
    if schedule.activation in (Activation.TANH, Activation.SIGMOID):
        from certified.flow.smooth import smooth_flow

        return smooth_flow(
            W,
            A,
            b,
            durations,
            X0,
            activation=schedule.activation.value,
            order=order,
            max_step=max_step,
            prec=53 if prec is None else prec,
        )
    from certified.flow.relu import DEFAULT_PREC, relu_flow

    if method not in ("auto", "regions", "vectorised"):
        raise InputError(f"method: {method!r} is not one of 'auto', 'regions', 'vectorised'")
    n_sets = len(X0) if hasattr(X0, "__len__") else 0
    fast = method == "vectorised" or (
        method == "auto" and n_sets >= 1000 and prec in (None, 53) and not schedule.is_laminar()
    )
    if fast:
        if prec not in (None, 53):
            raise InputError(f"prec: the vectorised engine works at 53 bits, not {prec}")
        from certified.flow._relu_vec import relu_flow_vectorised

        res = relu_flow_vectorised(
            W, A, b, durations, X0, activation=schedule.activation.value, slope=schedule.slope
        )
        if res is not None:
            return res
        if method == "vectorised":
            raise InputError(
                "method: the vectorised engine needs parameters that are doubles; use "
                "method='regions' for exact rational parameters"
            )
    return relu_flow(
        W,
        A,
        b,
        durations,
        X0,
        activation=schedule.activation.value,
        slope=schedule.slope,
        prec=DEFAULT_PREC if prec is None else prec,
    )


def flow_certificate_for(
    schedule: Schedule,
    points: Any,
    result: FlowEnclosure,
    *,
    order: int = 20,
    precision: int = 128,
) -> dict[str, Any] | None:
    """A version-1 flow certificate of a successful result (``points``: the points, or the
    :class:`~certified.arith.Interval` of boxes given to :func:`enclose_flow`), or None when no
    checker rule covers it (boxes of tanh / sigmoid flows).

    Laminar ReLU schedules give exact images of points and enclosures of boxes (rule
    laminar-exact); other (leaky) ReLU points and boxes use rule relu-regions.

    Guarantee: none (the checker decides).
    """
    from certified.arith import Interval
    from certified.certificates import flow_certificate

    if result.status is not FlowStatus.SUCCESS:
        return None
    enc = np.stack([result.final.lo, result.final.hi], axis=-1)
    boxes = None
    if isinstance(points, Interval):
        boxes, points = np.stack([points.lo, points.hi], axis=-1), None
    if boxes is not None:
        if schedule.activation is Activation.RELU and schedule.is_laminar():
            return flow_certificate(schedule.to_json(), None, enclosures=enc, boxes=boxes)
        if "boxes" not in result.hints:
            return None
        return flow_certificate(
            schedule.to_json(),
            None,
            enclosures=enc,
            boxes=boxes,
            method="relu-regions",
            extra_hints=result.hints,
        )
    if schedule.activation in (Activation.TANH, Activation.SIGMOID):
        precision = max(precision, result.hints.get("precision", 53))
        hints = {"order": order, "precision": precision, "chains": result.hints["chains"]}
        return flow_certificate(
            schedule.to_json(),
            points,
            enclosures=enc,
            method="taylor-lognorm",
            extra_hints=hints,
        )
    if schedule.activation is Activation.RELU and schedule.is_laminar():
        if result.exact is not None:
            return flow_certificate(schedule.to_json(), points, images=result.exact[-1])
        return flow_certificate(schedule.to_json(), points)
    if schedule.activation is Activation.LEAKY_RELU and result.exact is not None:
        enc = np.stack([result.exact[-1], result.exact[-1]], axis=-1)  # exact, as [x, x]
    if "points" in result.hints:
        return flow_certificate(
            schedule.to_json(),
            points,
            enclosures=enc,
            method="relu-regions",
            extra_hints=result.hints,
        )
    return None
