"""Certified gradients of ReLU neural-ODE losses where the activation pattern is certified.

On a piece where neuron j keeps a strict sign along the trajectory of point i, the ReLU field
``W relu(A x + b)`` coincides near that trajectory with the affine field ``W' (A x + b)``,
``W' = W diag(s)`` (s_j = 1 active, 0 inactive). The pattern is guessed from a float
simulation (heuristic), then certified: the masked field's flow is enclosed step by step and
every neuron's ``A_j B + b_j`` has its strict sign over every a priori box B (exact rational
interval arithmetic), so the masked trajectory solves the ReLU equation and, the signs being
strict on a compact set, so do nearby ones: the flow is differentiable there and its
derivatives are those of the masked field written with the original parameters
(``certified.checker.sensitivity.relu_field``: an inactive neuron's W-, A- and b-derivatives
vanish), replayed by the checker's own code, so that the certificate's claims (patterns, steps
and boxes per point in the hints) are what the checker recomputes. Where a sign
cannot be certified the loss may meet a kink: :class:`NotDifferentiableError` names the piece,
the point and the neuron (proofs/training.md#relu).
"""

from __future__ import annotations

import flint
import numpy as np

from certified.arith.ball import precision
from certified.errors import InputError

__all__ = ["relu_gradient"]


def _affine_field(d: int, p: int):
    """``W (A x + b)``: the checker's masked field with every neuron active, as a VectorField
    (the producer's flow, W masked through its values: ``W diag(s)``)."""
    from certified.checker.sensitivity import relu_field
    from certified.fields import VectorField

    e = relu_field(d, p, [1] * p)
    graph = {"dimension": d, "parameters": list(e.names), "outputs": list(e.outputs)}
    return VectorField(graph | {"nodes": [list(n) for n in e.nodes]}, name="affine")


def _guess_patterns(schedule, x0: np.ndarray, substeps: int = 64) -> list[np.ndarray]:
    """Float simulation (RK4) of one point: the activation pattern at the middle of each piece
    (heuristic: certified afterwards)."""
    x, out = x0.astype(float), []
    for piece in schedule.pieces:
        W, A, b = piece.W_float, piece.A_float, piece.b_float
        h = float(piece.duration) / substeps

        def f(y, W=W, A=A, b=b):
            return W @ np.maximum(A @ y + b, 0)

        pattern = None
        for s in range(substeps):
            k1 = f(x)
            k2 = f(x + h / 2 * k1)
            k3 = f(x + h / 2 * k2)
            x = x + h / 6 * (k1 + 2 * k2 + 2 * k3 + f(x + h * k3))
            if s == substeps // 2:
                pattern = (A @ x + b) > 0
        out.append(pattern)
    return out


def relu_gradient(schedule, X, Y, eps, prec: int, order, max_step, loss=None):
    """(loss ball, gradient balls per piece, the replay's data) for a ReLU schedule, by
    certified activation patterns; raises NotDifferentiableError where a sign is uncertain.

    Guarantee: encloses J and its gradient (proofs/training.md#relu)."""
    from certified.checker.sensitivity import (
        loss_and_gradient,
        relu_field,
        relu_sign_failure,
        replay_sensitivities,
    )
    from certified.checker.taylor import ReplayError
    from certified.flow.options import SaveAt, initial_set
    from certified.flow.result import FlowStatus
    from certified.flow.taylor.lohner import lohner_flow
    from certified.training.gradient import NotDifferentiableError, _exact_boxes, default_policy

    if schedule.activation.value != "relu":
        raise InputError(f"activation: {schedule.activation.value} gradients are not certified")
    d, p = schedule.dimension, schedule.width
    f = _affine_field(d, p)
    names = f.parameters
    policy = default_policy(prec, order, max_step)
    thetas = []
    for piece in schedule.pieces:
        W = np.zeros((d, p), dtype=object)
        A = np.zeros((p, d), dtype=object)
        bb = np.zeros(p, dtype=object)
        q = piece.width
        W[:, :q], A[:q], bb[:q] = piece.W, piece.A, piece.b
        W[W == 0], A[A == 0], bb[bb == 0] = flint.fmpq(0), flint.fmpq(0), flint.fmpq(0)
        thetas.append((W, A, bb))
    exact = [(piece.duration, [*W.ravel(), *A.ravel(), *bb])
             for piece, (W, A, bb) in zip(schedule.pieces, thetas, strict=True)]  # fmt: skip
    finals, mats = [], []
    hints = {"patterns": [], "steps": [], "boxes": [], "jacobian_order": policy.jacobian_order}
    hints["precision"], full = prec, relu_field(d, p, [1] * p)
    for i in range(X.shape[0]):
        patterns = [tuple(int(v) for v in s) for s in
                    _guess_patterns(schedule, np.array([float(v) for v in X[i]]))]  # fmt: skip
        pieces = []
        for piece, (W, A, bb), s in zip(schedule.pieces, thetas, patterns, strict=True):
            Wm = W * np.array([flint.fmpq(v) for v in s], dtype=object)[None, :]
            pieces.append((piece.duration, [*Wm.ravel(), *A.ravel(), *bb]))
        problem = f.on(*pieces)
        res = lohner_flow(problem, initial_set(X[i : i + 1], d), SaveAt(), policy, prec)
        if res.status is not FlowStatus.SUCCESS:
            raise InputError(f"point {i}: the flow cannot be enclosed: {res.message}")
        steps, boxes = res.hints["steps"], _exact_boxes(res.hints["boxes"])
        if hints.setdefault("order", res.hints["order"]) != res.hints["order"]:
            raise InputError(f"point {i}: the flow's Taylor order differs from point 0's")
        for j, (per_piece, (_, theta), s) in enumerate(zip(boxes, exact, patterns, strict=True)):
            for box in per_piece:
                k = relu_sign_failure(d, p, theta, s, box[0])
                if k is not None:
                    raise NotDifferentiableError(
                        f"piece {j}, point {i}, neuron {k}: the sign of A_k x + b_k is not "
                        "certified along the flow (a kink may be met): NOT_DIFFERENTIABLE"
                    )
        with precision(prec):  # the checker's replay (rule gradient, instance.relu)
            balls = [(t, [flint.arb(v) for v in vals]) for t, vals in exact]
            try:
                fin, ms = replay_sensitivities(
                    full, balls, X[i : i + 1].tolist(), steps, boxes, res.hints["order"],
                    policy.jacobian_order, lambda j, s=patterns: relu_field(d, p, s[j]),
                )  # fmt: skip
            except ReplayError as exc:
                raise InputError(f"point {i}: the sensitivity replay failed ({exc})") from None
        finals += fin
        mats += ms
        for key, value in (("patterns", patterns), ("steps", steps), ("boxes", boxes)):
            hints[key].append(value)
    with precision(prec):
        phi = None if loss is None else loss.expression
        value, grads = loss_and_gradient(finals, mats, Y.tolist(), exact, eps, phi)
    return value, grads, names, f.on(*exact), hints
