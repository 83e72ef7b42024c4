"""Certified gradients of neural-ODE losses (theorems.md §10, issue 21 item 1).

For ``x' = f(x; theta_l)`` on pieces of length h_l (a tanh / sigmoid :class:`Schedule`, or any
:class:`~certified.fields.PiecewiseField`), data points x_i with targets y_i and

.. math::

    J(\\theta) = \\frac1N \\sum_i \\tfrac12 \\|x_i(T) - y_i\\|^2
        + \\frac{\\varepsilon}{2} \\sum_l h_l \\|\\theta_l\\|^2,

enclosures of J and of every ``grad_{theta_l} J`` come from the forward C^1 enclosure with the
parameters appended as constant state (``S_l``, ``M_l``) and the discrete adjoint
``p_{l-1} = M_l^T p_l``: :func:`certified.checker.sensitivity.replay_sensitivities` (public),
along steps and a priori boxes chosen by the Taylor-Lohner producer. No backward solve, no
float gradient: the producer computes exactly what the checker replays.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import flint
import numpy as np

from certified.arith.ball import check_precision, precision
from certified.arith.exact import to_fmpq, to_fmpq_array
from certified.errors import InputError, ShapeError

__all__ = ["GradientEnclosure", "NotDifferentiableError", "certified_gradient"]


class NotDifferentiableError(InputError):
    """The loss may not be differentiable at the given parameters (a ReLU kink may be met)."""


@dataclass(frozen=True)
class GradientEnclosure:
    """Exact enclosures ``loss = (lo, hi)`` of J and ``gradient[l][k] = (lo, hi)`` of
    ``dJ / d theta_l[k]`` (parameters in the order of ``names``), the problem and the steps
    the checker replays (``hints``).

    Guarantee: ``loss`` contains J(theta) and ``gradient[l][k]`` the partial derivative.
    """

    loss: tuple[flint.fmpq, flint.fmpq]
    gradient: list[list[tuple[flint.fmpq, flint.fmpq]]]
    names: tuple[str, ...]
    problem: Any
    points: np.ndarray
    targets: np.ndarray
    eps: flint.fmpq
    hints: dict = field(default_factory=dict, repr=False)
    loss_field: Any = None

    @property
    def max_width(self) -> float:
        ws = [float(hi - lo) for g in self.gradient for lo, hi in g]
        return max([float(self.loss[1] - self.loss[0]), *ws])

    def norm_upper(self) -> flint.fmpq:
        """An exact upper bound on ``|grad J|_2`` (sum of squared magnitudes, square root
        rounded up).  Guarantee: upper bound."""
        s = sum((max(abs(lo), abs(hi)) ** 2 for g in self.gradient for lo, hi in g), flint.fmpq(0))
        return _sqrt_upper(s)

    def norm_lower(self) -> flint.fmpq:
        """An exact lower bound on ``|grad J|_2``.  Guarantee: lower bound."""
        s = flint.fmpq(0)
        for g in self.gradient:
            for lo, hi in g:
                if lo > 0 or hi < 0:
                    s += min(abs(lo), abs(hi)) ** 2
        return _sqrt_lower(s)

    def piece_weights(self, schedule) -> list[dict[str, Any]]:
        """The gradient of each piece of a :class:`~certified.models.Schedule` as
        ``{"W": d x q, "A": q x d, "b": q}`` of (lo, hi) pairs (q the piece's width).

        Guarantee: exact (a rearrangement)."""
        idx = {n: k for k, n in enumerate(self.names)}
        d = schedule.dimension
        out = []
        for j, piece in enumerate(schedule.pieces):
            g, q = self.gradient[j], piece.width
            out.append(
                {
                    "W": [[g[idx[f"W[{i}][{k}]"]] for k in range(q)] for i in range(d)],
                    "A": [[g[idx[f"A[{k}][{i}]"]] for i in range(d)] for k in range(q)],
                    "b": [g[idx[f"b[{k}]"]] for k in range(q)],
                }
            )
        return out


def _sqrt_upper(s: flint.fmpq) -> flint.fmpq:
    from certified.flow.taylor._lohner_arb import arb_to_fmpq

    with precision(64):
        # slack 2^-60: the checker recomputes the squares from the balls at its precision
        return arb_to_fmpq(flint.arb((flint.arb(s).sqrt() * (1 + flint.arb(2) ** -60)).upper()))


def _sqrt_lower(s: flint.fmpq) -> flint.fmpq:
    from certified.flow.taylor._lohner_arb import arb_to_fmpq

    with precision(64):
        low = flint.arb(s).sqrt() * (1 - flint.arb(2) ** -60)
        return max(flint.fmpq(0), arb_to_fmpq(flint.arb(low.lower())))


def _problem(model: Any):
    from certified.fields import PiecewiseField
    from certified.flow.api import flow_problem
    from certified.models import Schedule

    if isinstance(model, Schedule) and model.activation.is_piecewise_linear:
        if model.activation.value != "relu":
            raise NotDifferentiableError(
                f"activation: {model.activation.value} gradients are not certified (relu, tanh "
                "and sigmoid are)"
            )
        return model
    if not isinstance(model, (Schedule, PiecewiseField)):
        raise InputError(
            f"model: expected a Schedule or a PiecewiseField, got {type(model).__name__}"
        )
    return flow_problem(model)


def _exact_rows(values: Any, name: str, d: int, n: int | None = None) -> np.ndarray:
    arr = to_fmpq_array(values, name)
    if arr.ndim != 2 or arr.shape[1] != d or arr.shape[0] < 1:
        raise ShapeError(f"{name}: expected shape (n, {d}) with n >= 1, got {arr.shape}")
    if n is not None and arr.shape[0] != n:
        raise ShapeError(
            f"{name}: expected {n} rows (one target per point), got {arr.shape[0]}; give as "
            "many targets as points"
        )
    return arr


def default_policy(prec: int, order: int | None = None, max_step: Any = None):
    """Taylor order K and variational order m of the sensitivities (m = K: the C^1 part sets
    the widths), and the step tolerance, by precision (tightness and cost only)."""
    from certified.flow.options import StepPolicy

    K = order if order is not None else (12 if prec == 53 else max(16, prec // 6))
    tol = 2.0**-52 if prec == 53 else 2.0 ** -min(prec - 40, 1000)  # C^1 widths dominate
    return StepPolicy(order=K, jacobian_order=K, max_step=max_step, tolerance=tol)


def certified_gradient(
    model: Any,
    points: Any,
    targets: Any,
    *,
    eps: Any = 0,
    prec: int = 53,
    order: int | None = None,
    max_step: Any = None,
    method: str = "replay",
    for_certificate: bool = False,
    loss: Any = None,
) -> GradientEnclosure:
    """Enclosures of the loss J and of its gradient with respect to every piece's parameters.

    Parameters
    ----------
    model : Schedule (tanh / sigmoid) or PiecewiseField
    points, targets : (N, d) numbers (read exactly)
    eps : number >= 0, the weight of the regulariser (exact)
    prec : working precision in bits of the replay (53 .. 4096)
    order, max_step : the Taylor order and the largest step (tightness and cost only)
    method : "replay" (default: the checker's replay per point in arb), "float64" (53 bits, the
        default loss, a field of ``sensitivity64.OPS64``: the checker's replay for all points at
        once in float64 intervals, :mod:`certified.checker.sensitivity64`) or "auto" (float64
        where it applies, else replay); either result can be written as a certificate
    for_certificate : refuse (InputError) before the replay when the checker's replay of the
        result would exceed its resource limit
    loss : VectorField of dimension 2d without parameters, optional
        Its first output is the per-point loss ``Phi(x, y)`` (x the final state, y the target);
        J's data part is the mean of Phi (default ``|x - y|^2 / 2``). Build it with
        :func:`certified.fields.field`, e.g. ``field(2 * d, lambda v, p: [Phi, *[0] * (2*d-1)])``.

    Raises
    ------
    InputError
        Shapes, eps < 0, a ReLU schedule whose activation pattern cannot be certified
        (:class:`NotDifferentiableError` naming piece, point and neuron), a flow that cannot
        be enclosed (the message says what to change).

    Guarantee: ``loss`` contains J(theta), ``gradient[l][k]`` contains dJ/d theta_l[k]
    (proofs/training.md#gradient).
    """
    from certified.checker.sensitivity import loss_and_gradient, replay_sensitivities
    from certified.checker.taylor import ReplayError
    from certified.fields import PiecewiseField
    from certified.flow.options import SaveAt, initial_set
    from certified.flow.result import FlowStatus
    from certified.flow.taylor.lohner import lohner_flow

    prec = check_precision(prec)
    eps = to_fmpq(eps, "eps")
    if eps < 0:
        raise InputError(f"eps: {eps} is negative; the regulariser's weight must be >= 0")
    problem = _problem(model)
    d = problem.dimension
    X = _exact_rows(points, "points", d)
    Y = _exact_rows(targets, "targets", d, X.shape[0])
    if loss is not None:
        from certified.fields import VectorField

        if not isinstance(loss, VectorField) or loss.dimension != 2 * d or loss.parameters:
            raise InputError(
                f"loss: expected a VectorField of dimension {2 * d} (x, then y) without "
                "parameters, whose first output is the per-point loss"
            )
        if method == "float64":
            raise InputError("loss: the float64 path has the squared error only; use 'replay'")
    if method not in ("replay", "float64", "auto"):
        raise InputError(f"method: expected 'replay', 'float64' or 'auto', got {method!r}")
    relu = problem is model and not isinstance(model, PiecewiseField)
    if method != "replay" and not relu:
        from certified.checker.sensitivity64 import supported64

        fits = prec == 53 and loss is None and supported64(problem.field.expression)
        if method == "float64" and not fits:
            raise InputError(
                "method: 'float64' takes the default loss at 53 bits and a field of the "
                "operations of certified.checker.sensitivity64.OPS64 (x, p, c, add, sub, neg, "
                "sum, mul, sqr, exp, tanh, sigmoid)"
            )
        if fits:
            return _float64_gradient(problem, X, Y, eps, order, max_step, for_certificate)
    elif method == "float64":
        raise InputError("method: 'float64' takes a tanh / sigmoid Schedule or a field, not ReLU")
    if problem is model and not isinstance(model, PiecewiseField):  # a ReLU schedule
        from certified.training.relu import relu_gradient

        value, grads, names, affine, patterns = relu_gradient(
            model, X, Y, eps, prec, order, max_step, loss
        )
        with precision(prec):
            out_loss, out_grad = _ends(value), [[_ends(g) for g in row] for row in grads]
        return GradientEnclosure(
            out_loss, out_grad, names, affine, X, Y, eps, {"relu_patterns": patterns}, loss
        )
    policy = default_policy(prec, order, max_step)
    res = lohner_flow(problem, initial_set(X, d), SaveAt(), policy, prec)
    if res.status is not FlowStatus.SUCCESS:
        raise InputError(f"the flow cannot be enclosed: {res.message}")
    steps, boxes = res.hints["steps"], _exact_boxes(res.hints["boxes"])
    K, m = res.hints["order"], policy.jacobian_order
    if for_certificate:  # refuse now what the checker would refuse after hours of replay
        from certified.checker.lohner import MAX_TAYLOR_OPS
        from certified.checker.sensitivity import sensitivity_cost

        total = sum(len(s) for s in steps)
        cost = sensitivity_cost(problem.field.expression, X.shape[0], total, K, m, prec)
        if cost > MAX_TAYLOR_OPS:
            most = max(1, int(X.shape[0] * MAX_TAYLOR_OPS / cost))
            raise InputError(
                f"--points: a certificate for {X.shape[0]} points would cost the checker about "
                f"{cost:.2g} operations (limit {MAX_TAYLOR_OPS:.2g}): certify at most about "
                f"{most} points per certificate (split the points file), or fewer pieces"
            )
    with precision(prec):
        pieces = [(p.duration, [flint.arb(v) for v in p.values]) for p in problem.pieces]
        try:
            finals, mats = replay_sensitivities(
                problem.field.expression, pieces, X.tolist(), steps, boxes, K, m
            )
        except ReplayError as exc:
            raise InputError(f"the sensitivity replay failed ({exc}); lower max_step") from None
        exact_pieces = [(p.duration, list(p.values)) for p in problem.pieces]
        phi = None if loss is None else loss.expression
        value, grads = loss_and_gradient(finals, mats, Y.tolist(), exact_pieces, eps, phi)
        out_loss = _ends(value)
        out_grad = [[_ends(g) for g in row] for row in grads]
    hints = {"order": K, "jacobian_order": m, "precision": prec, "steps": steps, "boxes": boxes}
    return GradientEnclosure(
        out_loss, out_grad, tuple(problem.field.parameters), problem, X, Y, eps, hints, loss
    )


def _float64_gradient(problem, X, Y, eps, order, max_step, for_certificate) -> GradientEnclosure:
    """The float64 replay (``sensitivity64``) along the producer's steps; the a priori factors
    are chosen by the replay and written as hints.

    Guarantee: encloses (proofs/training.md#sensitivity64)."""
    from certified.checker.ivec import to_arb
    from certified.checker.lohner import MAX_TAYLOR_OPS
    from certified.checker.sensitivity64 import cost64, loss_and_gradient64, replay_gradient64
    from certified.checker.taylor import ReplayError

    # order 16 (not the arb replay's 12): fewer, longer steps cost less here (25 instead of 38
    # steps on the bench's problem, ~12% less time, the same widths)
    steps, K, m = _steps(problem, X, 53, 16 if order is None else order, max_step)
    field = problem.field.expression
    if for_certificate:
        cost = cost64(field, X.shape[0], sum(len(s) for s in steps), K, m)
        if cost > MAX_TAYLOR_OPS:
            raise InputError(
                f"--points: a certificate for {X.shape[0]} points would cost the checker about "
                f"{cost:.2g} operations (limit {MAX_TAYLOR_OPS:.2g}): certify at most about "
                f"{max(1, int(X.shape[0] * MAX_TAYLOR_OPS / cost))} points per certificate"
            )
    pieces = [(p.duration, list(p.values)) for p in problem.pieces]
    apriori = [[None] * len(s) for s in steps]
    try:
        finals, mats = replay_gradient64(field, pieces, X.tolist(), steps, apriori, K, m)
        value, grads = loss_and_gradient64(finals, mats, Y.tolist(), pieces, eps)
    except ReplayError as exc:
        raise InputError(f"the float64 sensitivity replay failed ({exc}); lower max_step") from None
    with precision(53):  # the balls the checker compares with (ivec.to_arb at 53 bits)
        out_loss = _ends(to_arb(value)[0])
        out_grad = [[_ends(b) for b in to_arb(g)] for g in grads]
    hints = {"order": K, "jacobian_order": m, "precision": 53, "steps": steps,
             "arithmetic": "float64", "apriori": apriori}  # fmt: skip
    return GradientEnclosure(
        out_loss, out_grad, tuple(problem.field.parameters), problem, X, Y, eps, hints
    )


def _steps(problem, X, prec, order, max_step):
    """The Taylor-Lohner producer's steps (tightness and cost only), K and m. The steps come
    from the flow with a variational order of 1: the step control follows the order-K
    remainder, and the order-m C^1 enclosure (the replay's) would only cost time here."""
    from dataclasses import replace

    from certified.flow.options import SaveAt, initial_set
    from certified.flow.result import FlowStatus
    from certified.flow.taylor.lohner import lohner_flow

    policy = default_policy(prec, order, max_step)
    search = replace(policy, jacobian_order=1)
    res = lohner_flow(problem, initial_set(X, problem.dimension), SaveAt(), search, prec)
    if res.status is not FlowStatus.SUCCESS:
        raise InputError(f"the flow cannot be enclosed: {res.message}")
    return res.hints["steps"], res.hints["order"], policy.jacobian_order


def _ends(ball: flint.arb) -> tuple[flint.fmpq, flint.fmpq]:
    from certified.flow.taylor._lohner_arb import arb_to_fmpq

    if not ball.is_finite():
        raise InputError("the enclosure overflowed; shorten the pieces or use smaller weights")
    return arb_to_fmpq(flint.arb(ball.lower())), arb_to_fmpq(flint.arb(ball.upper()))


def _exact_boxes(boxes: list) -> list:
    """Per piece, step and point: the a priori box as d exact (lo, hi) pairs."""
    out = []
    for per_piece in boxes:
        steps = []
        for B in per_piece:
            lo, hi = np.asarray(B.lo), np.asarray(B.hi)
            steps.append(
                [
                    [(to_fmpq(a), to_fmpq(b)) for a, b in zip(r1, r2, strict=True)]
                    for r1, r2 in zip(lo.tolist(), hi.tolist(), strict=True)
                ]
            )
        out.append(steps)
    return out
