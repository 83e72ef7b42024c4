"""Certified C^1 enclosures and Lipschitz bounds of flow maps, for every smooth field.

``D Phi_T(x)`` for x in a box is enclosed by the ordered product of the steps' enclosures of
``D Phi_h`` over the Lohner sets (chain rule; each factor is the variational equation's Taylor
polynomial plus its remainder over the a priori box, proofs/bounds.md#lohner), and the
Lipschitz constant of ``Phi_T`` on the (convex) box by the largest 2-norm over that interval
matrix (mean value theorem).
"""

from __future__ import annotations

from typing import Any

import flint
import numpy as np

from certified.arith import Interval
from certified.arith.ball import precision
from certified.arith.exact import fmpq_to_float
from certified.errors import InputError, ShapeError
from certified.flow.options import SaveAt, StepPolicy, initial_set
from certified.flow.relu import FlowLipschitzBound
from certified.flow.result import FlowStatus
from certified.models import Schedule

__all__ = ["flow_jacobian", "norm2_upper"]


def norm2_upper(J: Interval) -> flint.fmpq:
    """An exact upper bound on ``max ||M||_2`` over the interval matrix J: the smaller of
    ``|| |J| ||_F`` and ``sqrt(|| |J| ||_1 || |J| ||_inf)`` (|J| the entrywise largest
    magnitude; both bound the 2-norm of every member, proofs/bounds.md#relu-gronwall).

    Guarantee: upper bound.
    """
    from certified.flow.taylor._lohner_arb import arb_to_fmpq

    M = np.maximum(np.abs(J.lo), np.abs(J.hi))
    with precision(64):
        m = [[flint.arb(float(v)) for v in row] for row in M]
        fro = sum((v * v for row in m for v in row), flint.arb(0)).sqrt()
        one = max(
            sum((m[i][j] for i in range(len(m))), flint.arb(0)).upper() for j in range(len(m[0]))
        )
        inf = max(sum(row, flint.arb(0)).upper() for row in m)
        mixed = (flint.arb(one) * flint.arb(inf)).sqrt()
        return arb_to_fmpq(flint.arb(min(fro.upper(), mixed.upper())))


def flow_jacobian(
    field: Any,
    box: Interval,
    *,
    save_at: SaveAt | None = None,
    step_policy: StepPolicy | None = None,
    order: int | None = None,
    max_step: Any = None,
) -> FlowLipschitzBound:
    """C^1 enclosure of ``D Phi_T`` over an axis-aligned box (or a point) for any smooth
    field (tanh / sigmoid schedule, expression field), and the Lipschitz bound it gives.

    .. math::

        J \\supseteq \\{ D\\Phi_T(x) : x \\in \\mathrm{box} \\},
        \\qquad \\mathrm{Lip}(\\Phi_T|_{\\mathrm{box}}) \\le \\max_{M \\in J} \\|M\\|_2

    Returns
    -------
    FlowLipschitzBound with ``method="c1-box"``, ``jacobian`` the (d, d) Interval and
    ``upper`` the bound (STEP_REJECTED with ``upper`` inf when the flow cannot be enclosed).

    Guarantee: if the status is SUCCESS, ``jacobian`` contains ``D Phi_T(x)`` for every x in
    the box and ``upper`` bounds the Lipschitz constant (Euclidean norm) of ``Phi_T`` on it.
    """
    from certified.flow.api import flow_problem
    from certified.flow.taylor.lohner import lohner_flow

    if not isinstance(box, Interval):
        raise InputError("box: expected an Interval of shape (d,) or (1, d)")
    if box.ndim == 1:
        box = box.reshape(1, -1)
    if box.ndim != 2 or box.shape[0] != 1:
        raise ShapeError(f"box: expected shape (d,) or (1, d), got {box.shape}")
    save_at = save_at or SaveAt()
    problem = flow_problem(field, save_at)
    if step_policy is None:
        K = 20 if order is None else order
        step_policy = StepPolicy(order=K, jacobian_order=min(K, 12), max_step=max_step)
    elif order is not None or max_step is not None:
        raise InputError("order, max_step: give them in step_policy, not both")
    sets = initial_set(box, problem.dimension)
    res = lohner_flow(problem, sets, SaveAt(), step_policy, 53, jacobian=True)
    if res.status is not FlowStatus.SUCCESS:
        return FlowLipschitzBound(
            float("inf"), None, "c1-box", status=res.status, message=res.message
        )
    J = res.hints["jacobian"][0]
    upper = norm2_upper(J)
    if isinstance(field, Schedule):  # Gronwall also bounds it (globally): keep the smaller
        from certified.flow.relu import gronwall_lipschitz

        pieces = field.pieces
        g = gronwall_lipschitz(
            [p.W for p in pieces], [p.A for p in pieces], [p.duration for p in pieces]
        )
        if g.upper_exact is not None and g.upper_exact < upper:
            upper = g.upper_exact
    return FlowLipschitzBound(
        fmpq_to_float(upper, "up"),
        upper,
        "c1-box",
        jacobian=J,
        hints={"steps": [len(s) for s in res.hints["steps"]], "enclosure": res.final[0]},
    )
