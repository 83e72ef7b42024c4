"""Kind ``gradient`` v1: enclosures of a neural-ODE loss and of its parameter gradient.

The instance is an expression field with its pieces (as in rule ``taylor-lohner``), the data
points, their targets and the regulariser's weight eps; the hints the step lengths and a
priori boxes of every point. The checker replays the flow and the C^1 enclosures with respect
to the parameters (``sensitivity.replay_sensitivities``), the discrete adjoint and the loss
(``sensitivity.loss_and_gradient``, proofs/training.md#gradient) and compares every claimed
interval with its own; with ``hints.arithmetic`` "float64" (a priori factors, not boxes) it does
so for all points at once in float64 intervals (``sensitivity64``, training.md#sensitivity64).
A ReLU instance (``instance.relu`` {dimension d, width p} in place of the field: ``W relu(A x +
b)``) carries per point its activation pattern, steps and boxes (``replay_relu``,
proofs/training.md#relu).
Kind ``training`` v1 (``check_training_v1``) is a list of such
instances along a descent trace, each loss replayed, each step's decrease certified."""

from __future__ import annotations

import itertools
from typing import Any

import flint

from . import _parse
from ._field_rule import a_priori_hints, field_pieces, lohner_hints
from ._parse import Rejected, array, exact, exact_row, fields, positive, small_integer
from .lohner import MAX_TAYLOR_OPS
from .sensitivity import (
    loss_and_gradient,
    relu_field,
    relu_sign_failure,
    replay_sensitivities,
    sensitivity_cost,
)
from .taylor import MAX_NODES, ReplayError, parse_field


def _within(claimed: tuple, ball: flint.arb, where: str) -> None:
    lo, hi = claimed
    if not (flint.arb(lo) <= ball.lower() and ball.upper() <= flint.arb(hi)):
        raise Rejected(f"{where}: misses the replayed enclosure")


def replay_gradient(instance: Any, hints: Any, budget: list[int]) -> tuple:
    """The replayed balls (loss, gradient per piece) of a gradient instance, and its size."""
    relu = isinstance(instance, dict) and "relu" in instance
    keys = ("relu" if relu else "field", "pieces", "points", "targets", "eps", "time")
    fields(
        instance, "instance", keys + ("loss",) * (isinstance(instance, dict) and "loss" in instance)
    )
    if relu:
        fields(instance["relu"], "instance.relu", ("dimension", "width"))
        d = small_integer(instance["relu"]["dimension"], "instance.relu.dimension", 1, 1000)
        p = small_integer(instance["relu"]["width"], "instance.relu.width", 1, 1000)
        if 4 * d * p + 2 * p + 2 * d > MAX_NODES:
            raise Rejected(f"resource limit: instance.relu has more than {MAX_NODES} nodes")
        field = relu_field(d, p, [1] * p)
    else:
        field = parse_field(instance["field"], "instance.field")
    d, loss = field.dimension, None
    if "loss" in instance:  # Phi(x, y): a graph on R^{2d} without parameters, first output
        loss = parse_field(instance["loss"], "instance.loss")
        if loss.dimension != 2 * d or loss.names:
            raise Rejected(f"instance.loss: expected dimension {2 * d} and no parameters")
    pieces = field_pieces(instance, len(field.names))
    points = _parse.matrix(instance["points"], "instance.points", None, d)
    n = len(points)
    targets = _parse.matrix(instance["targets"], "instance.targets", n, d)
    eps = exact(instance["eps"], "instance.eps")
    if eps < 0:
        raise Rejected("instance.eps: must be >= 0")
    if exact(instance["time"], "instance.time") != _parse.exact_sum(
        [p[0] for p in pieces], "instance.pieces"
    ):
        raise Rejected("instance.time: differs from the total duration of the pieces")
    if relu:
        return replay_relu(field, pieces, points, targets, eps, loss, hints, budget)
    prior, K, m, prec, steps, arithmetic = lohner_hints(
        hints, len(pieces), "taylor-lohner-c1", ("arithmetic",)
    )
    total = sum(len(s) for s in steps)
    if arithmetic == "float64":  # all points at once in float64 intervals (sensitivity64)
        from . import ivec  # numpy: imported only for this arithmetic
        from . import sensitivity64 as s64

        if prec != 53 or loss is not None or not s64.supported64(field) or prior != "apriori":
            ops = ", ".join(s64.OPS64)
            raise Rejected("hints.arithmetic: float64 needs precision 53, hints.apriori, the "
                           f"default loss and a field of the operations {ops}")  # fmt: skip
        budget[0] -= s64.cost64(field, n, total, K, m)
    elif prior == "apriori":
        raise Rejected("hints.apriori: only with hints.arithmetic float64 (else hints.boxes)")
    else:
        budget[0] -= sensitivity_cost(field, n, total, K, m, prec, loss)
    if budget[0] < 0:
        raise Rejected(f"resource limit: the replay needs more than {MAX_TAYLOR_OPS} operations")
    boxes, apriori = a_priori_hints(hints, prior, arithmetic, steps, n, d)
    if arithmetic == "float64":
        with flint.ctx.workprec(53):
            try:
                finals, mats = s64.replay_gradient64(field, pieces, points, steps, apriori, K, m)
                value, grads = s64.loss_and_gradient64(finals, mats, targets, pieces, eps)
            except ReplayError as exc:
                raise Rejected(f"hints: {exc}") from None
            balls = [ivec.to_arb(g) for g in grads]
            return ivec.to_arb(value)[0], balls, (n, len(pieces), total, prec)
    with flint.ctx.workprec(prec):
        balls = [(t, [flint.arb(v) for v in values]) for t, values in pieces]
        try:
            finals, mats = replay_sensitivities(field, balls, points, steps, boxes, K, m)
        except ReplayError as exc:
            raise Rejected(f"hints: {exc}") from None
        loss, grads = loss_and_gradient(finals, mats, targets, pieces, eps, loss)
    return loss, grads, (n, len(pieces), total, prec)


def replay_relu(field, pieces, points, targets, eps, loss, hints, budget: list[int]) -> tuple:
    """``replay_gradient`` of a ReLU instance: per point i and piece j the masked field of the
    pattern ``hints.relu_patterns[i][j]`` (``relu_field``) is replayed on the point's own steps
    and boxes (``hints.steps[i]``, ``hints.boxes[i]``), and over every a priori box every neuron's
    ``A_k B + b_k`` has the pattern's strict sign (exact rationals): proofs/training.md#relu."""
    n, L, d = len(points), len(pieces), field.dimension
    p = len(field.names) // (2 * d + 1)
    keys = ("method", "order", "jacobian_order", "precision", "relu_patterns", "steps", "boxes")
    fields(hints, "hints", keys)
    raw = array(hints["relu_patterns"], "hints.relu_patterns", n)
    patterns = []
    for i, row in enumerate(raw):
        patterns.append([])
        for j, s in enumerate(array(row, f"hints.relu_patterns[{i}]", L)):
            s = array(s, f"hints.relu_patterns[{i}][{j}]", p)
            if not all(type(v) is int and v in (0, 1) for v in s):
                raise Rejected(f"hints.relu_patterns[{i}][{j}]: expected p entries 0 or 1")
            patterns[-1].append(tuple(s))
    per_point = [array(hints[k], f"hints.{k}", n) for k in ("steps", "boxes")]
    parsed = []
    for i in range(n):
        sub = {k: hints[k] for k in keys[:4]} | {"steps": per_point[0][i], "boxes": per_point[1][i]}
        try:
            prior, K, m, prec, steps, _ = lohner_hints(sub, L, "taylor-lohner-c1", ())
            total = sum(len(s) for s in steps)
            budget[0] -= sensitivity_cost(field, 1, total, K, m, prec, loss) + total * L * d * p
            if budget[0] < 0:
                raise Rejected(
                    f"resource limit: the replay needs more than {MAX_TAYLOR_OPS} operations"
                )
            parsed.append((steps, a_priori_hints(sub, prior, "arb", steps, 1, d)[0]))
        except Rejected as exc:
            raise Rejected(f"point {i}: {exc}") from None
    masked = {s: relu_field(d, p, s) for row in patterns for s in row}
    finals, mats = [], []
    with flint.ctx.workprec(prec):
        balls = [(t, [flint.arb(v) for v in values]) for t, values in pieces]
        for i, (steps, boxes) in enumerate(parsed):
            for j, per_step in enumerate(boxes):
                for s, box in enumerate(per_step):
                    k = relu_sign_failure(d, p, pieces[j][1], patterns[i][j], box[0])
                    if k is not None:
                        raise Rejected(
                            f"hints.relu_patterns: piece {j}, point {i}, neuron {k}: the sign of "
                            f"A_k x + b_k is not certified over the a priori box of step {s}"
                        )
            try:
                fin, ms = replay_sensitivities(field, balls, [points[i]], steps, boxes, K, m,
                                               lambda j, i=i: masked[patterns[i][j]])  # fmt: skip
            except ReplayError as exc:
                raise Rejected(f"hints: point {i}: {exc}") from None
            finals += fin
            mats += ms
        value, grads = loss_and_gradient(finals, mats, targets, pieces, eps, loss)
    return value, grads, (n, L, sum(len(s) for st, _ in parsed for s in st), prec)


def _pair(value: Any, where: str) -> tuple:
    lo, hi = exact_row(array(value, where, 2), where)
    if lo > hi:
        raise Rejected(f"{where}: lower end above upper end")
    return lo, hi


def check_gradient_v1(instance: Any, claim: Any, hints: Any) -> str:
    """Check a gradient certificate; return a summary."""
    loss, grads, (n, L, total, prec) = replay_gradient(instance, hints, [MAX_TAYLOR_OPS])
    fields(claim, "claim", ("loss", "gradient"))
    with flint.ctx.workprec(prec):  # the balls' ends at the replay's precision
        _within(_pair(claim["loss"], "claim.loss"), loss, "claim.loss")
        rows = array(claim["gradient"], "claim.gradient", L)
        for j, row in enumerate(rows):
            items = array(row, f"claim.gradient[{j}]", len(grads[j]), 0)
            for k, item in enumerate(items):
                at = f"claim.gradient[{j}][{k}]"
                _within(_pair(item, at), grads[j][k], at)
    return f"rule taylor-lohner-c1: loss and gradient, {n} points, {L} pieces, {total} steps"


def _norm_within(grads: list, nlo: flint.fmpq, nhi: flint.fmpq) -> bool:
    """nlo <= |g| <= nhi for every g in the gradient enclosure (squares compared in arb at a
    precision that decides them: undecided is False)."""
    with flint.ctx.workprec(4 * flint.ctx.prec + 64):
        ups = [flint.arb(abs(g).upper()) for g in itertools.chain.from_iterable(grads)]
        los = [flint.arb(abs(g).lower()) for g in itertools.chain.from_iterable(grads)
               if g > 0 or g < 0]  # fmt: skip
        up = sum((u * u for u in ups), flint.arb(0))
        lo = sum((u * u for u in los), flint.arb(0))
        return bool(flint.arb(nhi) ** 2 >= up) and bool(flint.arb(nlo) ** 2 <= lo)


def check_training_v1(instance: Any, claim: Any, hints: Any) -> str:
    """Check a certified descent trace: each iterate's loss (and gradient norm) replayed, each
    step's loss upper bound below the previous lower bound (proofs/training.md#descent)."""
    fields(instance, "instance", ("iterates", "lr"))
    positive(instance["lr"], "instance.lr")
    iterates = array(instance["iterates"], "instance.iterates")
    fields(claim, "claim", ("losses", "gradient_norms"))
    losses = array(claim["losses"], "claim.losses", len(iterates))
    norms = array(claim["gradient_norms"], "claim.gradient_norms", len(iterates))
    steps = array(hints, "hints", len(iterates))
    budget, prev = [MAX_TAYLOR_OPS], None
    for k, (inst, h) in enumerate(zip(iterates, steps, strict=True)):
        loss, grads, (_, _, _, prec) = replay_gradient(inst, h, budget)
        same = ("field", "relu", "points", "targets", "eps", "time", "loss")
        durations = [
            [exact(p["duration"], "duration") for p in it["pieces"]] for it in (inst, iterates[0])
        ]
        if k and (
            durations[0] != durations[1]
            or any(inst.get(key) != iterates[0].get(key) for key in same)
        ):
            raise Rejected(
                f"instance.iterates[{k}]: not the problem of iterate 0 (only the "
                "pieces' parameters may change)"
            )
        lo_hi = _pair(losses[k], f"claim.losses[{k}]")
        with flint.ctx.workprec(prec):
            _within(lo_hi, loss, f"claim.losses[{k}]")
        nlo, nhi = _pair(norms[k], f"claim.gradient_norms[{k}]")
        with flint.ctx.workprec(prec):
            ok = _norm_within(grads, nlo, nhi)
        if not ok:
            raise Rejected(f"claim.gradient_norms[{k}]: misses the replayed bounds")
        if prev is not None and not lo_hi[1] < prev:
            raise Rejected(f"claim.losses[{k}]: its upper end is not below the previous lower end")
        prev = lo_hi[0]
    return f"rule taylor-lohner-c1: certified descent over {len(iterates) - 1} steps"
