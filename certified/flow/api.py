"""One entry point for certified flows, and the certificates they give (in the spirit of
diffrax's ``diffeqsolve`` and CAPD's time maps: the field, the initial set, what is saved, the
method and the step policy are separate arguments; the result is a :class:`FlowEnclosure`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from certified.errors import InputError, NoCertificateError
from certified.flow.options import Balls, SaveAt, StepPolicy, initial_set
from certified.flow.result import FlowEnclosure, FlowStatus
from certified.models import Activation, Schedule

__all__ = [
    "NoCertificateError",
    "certify_flow",
    "enclose_flow",
    "flow_certificate_for",
    "flow_problem",
]

_TAYLOR_METHODS = ("auto", "taylor-lohner")
_RELU_METHODS = ("auto", "regions", "vectorised")


def flow_problem(field: Any, save_at: SaveAt | None = None):
    """The :class:`~certified.fields.PiecewiseField` of a smooth field: a tanh / sigmoid
    Schedule, a PiecewiseField, or a VectorField with ``save_at.t1`` (its default parameter
    values then hold on [0, t1]).

    Guarantee: exact.
    """
    from certified.fields import PiecewiseField, VectorField, neural_field

    if isinstance(field, Schedule):
        problem = neural_field(field)
    elif isinstance(field, PiecewiseField):
        problem = field
    elif isinstance(field, VectorField):
        if save_at is None or save_at.t1 is None:
            raise InputError("save_at: a VectorField needs the final time, SaveAt(t1=T)")
        return field.for_time(save_at.t1)
    else:
        raise InputError(
            f"field: expected a Schedule, a VectorField or a PiecewiseField, got "
            f"{type(field).__name__}"
        )
    if save_at is not None and save_at.t1 is not None and save_at.t1 != problem.total_time:
        raise InputError(
            f"save_at.t1: {save_at.t1} differs from the schedule's total time {problem.total_time}"
        )
    return problem


def _check_sphere(problem, sets) -> None:
    """Initial sets of a sphere field must lie on (boxes: meet) the unit sphere."""
    c = 0.5 * (sets.lo.astype(float) + sets.hi.astype(float))
    norms = np.sqrt(np.sum(c * c, axis=1))
    slack = np.sqrt(np.sum((sets.hi.astype(float) - sets.lo.astype(float)) ** 2, axis=1))
    bad = np.flatnonzero(np.abs(norms - 1) > 1e-12 + slack)
    if bad.size:
        i = int(bad[0])
        raise InputError(
            f"X0[{i}]: |x| = {norms[i]:.17g} is off the unit sphere; the field "
            f"{problem.field.name or ''} is tangent to S^{problem.dimension - 1}: normalise "
            "the initial points"
        )


def enclose_flow(
    field: Any,
    X0: Any,
    *,
    save_at: SaveAt | None = None,
    method: str = "auto",
    step_policy: StepPolicy | None = None,
    prec: int | None = None,
    order: int | None = None,
    max_step: Any = None,
    max_splits: int | None = None,
) -> FlowEnclosure:
    """Certified enclosures of ``Phi_t(x)`` for every x in each initial set.

    Parameters
    ----------
    field : Schedule, VectorField or PiecewiseField
        ReLU / leaky ReLU schedules use the piecewise-affine engines (``method`` "regions":
        laminar pieces exactly, other pieces region by region in arb at ``prec`` bits, default
        128; "vectorised": all points at once at 53 bits, rule relu-vectorised; "auto" takes the
        vectorised engine from 1000 non-laminar points with double parameters). Smooth fields
        (tanh / sigmoid schedules, expression fields) use the validated Taylor method with
        QR-Lohner sets (``method`` "taylor-lohner"), in float64 interval kernels at 53 bits
        (default) or in arb at ``prec`` bits.
    X0 : array_like, Interval or Balls
        The initial sets: points of shape (N, d) (floats are their exact doubles; an object
        array of exact rationals, as :func:`certified.io.read_points` returns, is exact),
        boxes as an :class:`~certified.arith.Interval` of shape (N, d), or
        :class:`~certified.flow.Balls`.
    save_at : SaveAt, optional
        Final time (``t1``, required for a VectorField), intermediate times ``ts``, and the
        tube over every step (``steps=True``). Smooth fields only, except ``t1``.
    method : str
        "auto" (default) or "taylor-lohner" for smooth fields; "auto", "regions" or
        "vectorised" for ReLU / leaky ReLU schedules (see ``field``).
    step_policy : StepPolicy, optional
        Taylor order, order of the variational equation, largest step, tolerance, step
        budget ``max_steps`` (smooth fields only): cost and tightness, never validity.
    prec : int, optional
        Working precision in bits (smooth fields: 53, the default, runs the float64 kernels;
        other values run the same method in arb).
    order : int, optional
        Shortcut for ``StepPolicy(order=...)``; not together with ``step_policy``.
    max_step : number, optional
        Shortcut for ``StepPolicy(max_step=...)`` (exact); not together with ``step_policy``.
    max_splits : int, optional
        ReLU / leaky ReLU boxes with the vectorised engine: at most this many bisections of the
        boxes that straddle a switching plane (default 64, ``certified flow --max-splits``);
        each box keeps the narrower of its own enclosure and the hull of its sub-boxes'.

    Returns
    -------
    FlowEnclosure
        Check ``status`` first: when it is not ``SUCCESS`` the enclosures are meaningless
        and ``message`` says what to change (smaller or split boxes, a shorter time, the
        step policy).

    Raises
    ------
    InputError
        Options that do not apply to the engine are refused, never ignored; initial sets of
        the wrong shape.

    Guarantee: if the status is SUCCESS, ``enclosures[k, i]`` contains ``Phi_{times[k]}(x)``
    for every x in initial set i.
    """
    if isinstance(field, Schedule) and field.activation.is_piecewise_linear:
        return _relu(field, X0, save_at, method, step_policy, prec, order, max_step, max_splits)
    from certified.arith.ball import check_precision
    from certified.flow.taylor.lohner import lohner_flow

    if method not in _TAYLOR_METHODS:
        raise InputError(f"method: {method!r} is not one of {_TAYLOR_METHODS} for smooth fields")
    prec = 53 if prec is None else check_precision(prec)
    save_at = save_at or SaveAt()
    problem = flow_problem(field, save_at)
    if step_policy is None:
        K = order if order is not None else (20 if prec == 53 else max(20, -(-3 * prec // 10)))
        step_policy = StepPolicy(
            order=K,
            jacobian_order=min(K, 8),
            max_step=max_step,
            tolerance=2.0**-52 if prec == 53 else 2.0 ** -min(prec, 1000),
        )
    elif order is not None or max_step is not None:
        raise InputError("order, max_step: give them in step_policy, not both")
    if isinstance(X0, Balls) and prec != 53:
        raise InputError("X0: balls are enclosed in boxes; give boxes at prec != 53")
    sets = initial_set(X0, problem.dimension)
    if problem.field.sphere:
        _check_sphere(problem, sets)
    return lohner_flow(problem, sets, save_at, step_policy, prec)


def _relu(
    schedule, X0, save_at, method, step_policy, prec, order, max_step, max_splits=None
) -> FlowEnclosure:
    from certified.flow.relu import DEFAULT_PREC, relu_flow

    if method not in _RELU_METHODS:
        raise InputError(f"method: {method!r} is not one of {_RELU_METHODS} for ReLU schedules")
    if step_policy is not None or order is not None or max_step is not None:
        raise InputError(
            "step_policy, order, max_step: the piecewise-affine ReLU engines have no step "
            "policy (their steps are the sign regions); remove them"
        )
    if save_at is not None and (save_at.ts or save_at.steps):
        raise InputError("save_at: the ReLU engines save the final time only (no ts, no steps)")
    if save_at is not None and save_at.t1 is not None and save_at.t1 != schedule.total_time:
        raise InputError(f"save_at.t1: the schedule's total time is {schedule.total_time}")
    if isinstance(X0, Balls):
        raise InputError("X0: the ReLU engines take points or boxes (Interval), not balls")
    n_sets = len(X0) if hasattr(X0, "__len__") else 0
    fast = method == "vectorised" or (
        method == "auto" and n_sets >= 1000 and prec in (None, 53) and not schedule.is_laminar()
    )
    W = [p.W for p in schedule.pieces]
    A = [p.A for p in schedule.pieces]
    b = [p.b for p in schedule.pieces]
    durations = [p.duration for p in schedule.pieces]
    if fast:
        if prec not in (None, 53):
            raise InputError(f"prec: the vectorised engine works at 53 bits, not {prec}")
        from certified.arith import Interval
        from certified.flow.relu._vec import relu_flow_vectorised

        if isinstance(X0, Interval):  # boxes: mean-value form (proofs/bounds.md#relu-mv)
            from certified.flow.relu._mv import mean_value_result
            from certified.flow.relu._split import DEFAULT_MAX_SPLITS

            splits = DEFAULT_MAX_SPLITS if max_splits is None else max_splits
            res = mean_value_result(schedule, X0, splits)
            if res is not None:
                return res
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
    field: Any,
    points: Any,
    result: FlowEnclosure,
    *,
    precision: int | None = None,
    replay: bool | None = True,
) -> dict[str, Any] | None:
    """A version-1 flow certificate of a successful result (``points``: the initial sets given
    to :func:`enclose_flow`), or None when no checker rule covers it.

    Rule relu-vectorised: with ``replay`` (default) the claims are the checker's own replay of
    the engine's steps (accepted unless the replay is over the checker's limit); without it,
    the engine's enclosures widened by half their width are claimed (no replay here: half the
    cost; almost always accepted, the replay's balls being at most ~1.2x the engine's, but
    check before relying on it: ``certified flow`` falls back to the replayed claims).

    Smooth fields (tanh / sigmoid schedules, expression fields): rule taylor-lohner, the
    field as an expression graph (without ``replay``, at 53 bits: the engine's enclosures
    made four times as wide are claimed and the checker picks its a priori factors);
    laminar ReLU schedules: exact images of points, enclosures
    of boxes (rule laminar-exact); other (leaky) ReLU points and boxes: rule relu-vectorised
    after ``method="vectorised"`` (the checker replays its steps), else rule relu-regions.
    :func:`certify_flow` gives the enclosures and a checked certificate in one call (for
    points of smooth fields at 53 bits in one replay, as ``certified flow`` does).

    Guarantee: none (the checker decides).
    """
    from certified.arith import Interval
    from certified.certificates import flow_certificate

    if result.status is not FlowStatus.SUCCESS:
        return None
    if result.hints.get("method") == "taylor-lohner":
        from certified.certificates.field_flow import field_flow_certificate

        problem = flow_problem(field, SaveAt(t1=result.times[-1]))
        sets = initial_set(points, problem.dimension)
        return field_flow_certificate(problem, sets, result, precision=precision, replay=replay)
    schedule = field
    if result.hints.get("method") == "relu-vectorised":  # rule relu-vectorised: replays its steps
        from certified.certificates.flow import relu_vectorised_certificate

        plan = result.hints["plan"]
        if "form" in plan:  # boxes in mean-value form: the enclosures are the checker's replay
            from certified.flow.relu._mv import certificate_of_result

            return certificate_of_result(schedule, points, result)
        claims = None
        if not replay:  # the engine's boxes widened by half (the replay's are up to ~1.2x wider)
            lo, hi = result.final.lo.astype(float), result.final.hi.astype(float)
            q = (hi - lo) * 0.25
            claims = np.stack([np.nextafter(lo - q, -np.inf), np.nextafter(hi + q, np.inf)], -1)
        if isinstance(points, Interval):
            boxes = np.stack([points.lo, points.hi], axis=-1)
            return relu_vectorised_certificate(schedule, None, plan, boxes=boxes, claims=claims)
        return relu_vectorised_certificate(schedule, points, plan, claims=claims)
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


def certify_flow(
    field: Any,
    X0: Any,
    *,
    save_at: SaveAt | None = None,
    prec: int | None = None,
    max_splits: int | None = None,
) -> tuple[FlowEnclosure, dict[str, Any]]:
    """Certified enclosures of ``Phi_t(x)`` and a flow certificate the checker accepted: what
    ``certified flow --out`` writes, as Python objects (nothing is written; save the
    certificate with :func:`certified.certificates.write_certificate`).

    Points of smooth fields (tanh / sigmoid schedules, expression fields, not sphere fields)
    at 53 bits take the one pass of ``certified flow`` (:mod:`certified.flow.one_pass`): steps
    from a float64 predictor, the claims the checker's own replay of them, the certificate's
    bytes checked with that replay reused. Boxes of those fields at 53 bits, saved at the final
    time only, take ``certified flow --boxes``'s route (quadratic sets split under ``max_splits``,
    :func:`certified.flow.taylor.boxes.certify_smooth_boxes`). Everything else (balls, sphere
    fields, ReLU and leaky ReLU schedules, ``prec`` other than 53, ``save_at.steps``, or a pass
    the checker refuses) takes the engine's route: :func:`enclose_flow`, then
    :func:`flow_certificate_for` (cheap claims first, the checker's replayed claims when those
    are missed), each checked.

    Parameters
    ----------
    field : Schedule, VectorField or PiecewiseField
        As for :func:`enclose_flow`.
    X0 : array_like, Interval or Balls
        Initial points (N, d) (floats are their exact doubles), boxes or balls, as for
        :func:`enclose_flow`.
    save_at : SaveAt, optional
        Final time (required for a VectorField) and earlier saved times (smooth fields).
    prec : int, optional
        Working precision in bits (default 53).
    max_splits : int, optional
        Boxes of smooth fields: the most bisections (default ``DEFAULT_MAX_SPLITS``, 64).

    Returns
    -------
    (FlowEnclosure, dict)
        The enclosures (status SUCCESS; from the one pass: the certificate's claims) and the
        certificate, whose exact bytes (``dumps_certificate``) the checker accepted.

    Raises
    ------
    NoCertificateError
        The flow failed, no checker rule covers the case, or the checker rejected every
        certificate tried (``.result``: the flow's enclosures, when computed).
    InputError
        Bad input, as for :func:`enclose_flow`.

    Guarantee: none (the checker decides); the returned certificate was accepted by the
    checker, and ``enclosures[k, i]`` contains ``Phi_{times[k]}(x)`` for every x in set i.
    """
    from certified.certificates.writer import certificate_bytes

    smooth = not (isinstance(field, Schedule) and field.activation.is_piecewise_linear)
    if smooth and (save_at is None or not save_at.steps):
        from certified.arith.ball import check_precision
        from certified.flow.one_pass import one_pass_applies, one_pass_certificate

        problem = flow_problem(field, save_at)
        if _smooth_boxes(problem, X0, prec, save_at):
            from certified.flow.taylor import boxes

            budget = boxes.DEFAULT_MAX_SPLITS if max_splits is None else max_splits
            if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
                raise InputError(f"max_splits: must be an integer >= 0, got {max_splits!r}")
            initial_set(X0, problem.dimension)  # validated: shape, finite, lo <= hi
            return boxes.certify_smooth_boxes(problem, X0.lo, X0.hi, budget)
        if one_pass_applies(problem, X0, prec if prec is None else check_precision(prec)):
            one = one_pass_certificate(problem, X0, save_at)
            if one is not None:
                return one
    result = enclose_flow(field, X0, save_at=save_at, prec=prec)
    if result.status is not FlowStatus.SUCCESS:
        failed = f"the flow failed ({result.status.value}): {result.message}"
        raise NoCertificateError(failed, result)
    from certified.certificates.field_flow import FieldCertificateError

    reason = "no checker rule covers this field and initial set"
    for replay in (None, True):  # cheap claims first, then the checker's replayed claims
        try:
            cert = flow_certificate_for(field, X0, result, precision=prec, replay=replay)
        except (InputError, FieldCertificateError) as exc:  # over a limit, a step refused
            raise NoCertificateError(f"no certificate: {exc}", result) from None
        if cert is None:
            break
        _, verdict = certificate_bytes(cert)
        if verdict.verified:
            return result, cert
        reason = f"the checker rejected the certificate: {verdict.reason}"
        if "resource limit" in verdict.reason or not _cheap_claims(cert, result):
            break  # the replayed claims were rejected: nothing else to try
    raise NoCertificateError(reason, result)


def _smooth_boxes(problem: Any, X0: Any, prec: int | None, save_at: SaveAt | None) -> bool:
    """Whether boxes take the quadratic-set route (as ``certified flow --boxes`` at 53 bits)."""
    from certified.arith import Interval
    from certified.checker.lohner import supported

    if not isinstance(X0, Interval) or prec not in (None, 53) or problem.field.sphere:
        return False
    final_only = save_at is None or list(save_at.times(problem.total_time)) == [problem.total_time]
    return final_only and X0.lo.ndim == 2 and supported(problem.field.expression)


def _cheap_claims(cert: dict[str, Any], result: FlowEnclosure) -> bool:
    """Whether ``flow_certificate_for(..., replay=None)`` claimed widened engine enclosures
    (rule taylor-lohner with the checker's a priori search, or relu-vectorised points), for
    which the checker's replayed claims are still to try."""
    plan = result.hints.get("plan")
    vec = result.hints.get("method") == "relu-vectorised" and "form" not in (plan or {})
    return cert["hints"].get("apriori") == "search" or vec
