"""Certificate kind ``"flow"``, version 1: exact images / enclosures of points under a flow map.

Specification: ``proofs/format.md`` section 4; meaning of VERIFIED: ``proofs/semantics.md``
("Kind flow"); soundness: ``proofs/checker_soundness.md`` section 2. Rules ``taylor-lohner``
(expression fields, ``_field_rule.py``) and ``relu-regions`` (``_relu_rule.py``) live in their
modules. Rule ``laminar-exact``: ReLU, every piece laminar with a shared normal (all rows of
``A`` equal ``a``, ``a . w_i = 0`` for every column ``w_i`` of ``W``); then ``a . x`` and the
field are constant along trajectories, the flow of a piece is exactly
``Phi_tau(x) = x + tau * sum_i w_i * (a . x + b_i)_+``, and the checker composes these maps in
exact rational arithmetic."""

from __future__ import annotations

from math import isqrt
from typing import Any

import flint

from ._field_rule import check_field_flow, reusing_replays
from ._parse import (
    MAX_BYTES,
    MAX_HEIGHT_BITS,
    MAX_REPLAY_COST,
    Rejected,
    array,
    box_rows,
    charge,
    exact,
    exact_sum,
    fields,
    matrix,
    positive,
    show,
    small_integer,
    string,
    vector,
)
from ._relu_rule import check_relu_regions

__all__ = ["Piece", "check_flow_v1", "relu_vectorised_limits", "replay_relu_vectorised",
           "reusing_replays"]  # fmt: skip
ACTIVATIONS = ("relu", "leaky_relu", "tanh", "sigmoid")
METHODS = ("laminar-exact", "relu-regions", "relu-vectorised")
_EXTRA = {"relu-regions": ("order", "precision", "grid", "points")}

Vector = list[flint.fmpq]

_ZERO = flint.fmpq(0)


class Piece:
    """One piece of a schedule: the field ``W sigma(A x + b)`` for ``duration`` time units."""

    __slots__ = ("A", "W", "b", "duration", "height", "where")

    def __init__(self, value: Any, where: str, dimension: int) -> None:
        fields(value, where, ("duration", "W", "A", "b"))
        self.where, self.duration = where, positive(value["duration"], f"{where}.duration")
        self.W = matrix(value["W"], f"{where}.W", dimension, None)  # d x p
        width = len(self.W[0])
        self.A = matrix(value["A"], f"{where}.A", width, dimension)  # p x d
        self.b = vector(value["b"], f"{where}.b", width)  # p
        numbers = [self.duration, *self.b, *(c for row in self.W + self.A for c in row)]
        self.height = max(c.height_bits() for c in numbers)

    def shared_normal(self) -> Vector:
        """The normal ``a`` of a laminar piece; Rejected if the piece is not laminar."""
        a = self.A[0]
        charge(len(self.b) * len(a), self.height, f"{self.where}: the normal")
        for i, row in enumerate(self.A):
            if row != a:
                raise Rejected(f"{self.where}.A: rows 0, {i}: the neurons do not share a normal")
        for i in range(len(self.b)):
            dot = sum((a[k] * self.W[k][i] for k in range(len(a))), _ZERO)
            if dot != 0:
                raise Rejected(f"{self.where}.W: column {i} not orthogonal to a: {show(str(dot))}")
        return a


def replay_relu_vectorised(pieces: list[Piece], sets: list, hints: Any, al: Any, boxes: bool,
                           trace: Any = None):  # fmt: skip
    """Rule relu-vectorised's replay, for producers: (lo, hi, failed) (see _relu_vec_rule)."""
    from ._relu_vec_rule import replay_relu_vectorised as replay

    return replay(pieces, sets, hints, al, boxes, trace)


def relu_vectorised_limits() -> tuple[int, tuple[int, int, int]]:
    """Rule relu-vectorised's cost limit and units (per round, per step, per lambda_max)."""
    from ._relu_vec_plan import MAX_RELU_VEC_COST, UNITS

    return MAX_RELU_VEC_COST, UNITS


def _laminar_step(x: Vector, piece: Piece, a: Vector) -> Vector:
    """Exact flow of one laminar piece: x + tau * sum_i w_i (a.x + b_i)_+  (proof: see module)."""
    d = len(x)
    s = sum((a[k] * x[k] for k in range(d)), _ZERO)
    velocity = [_ZERO] * d
    for i, b_i in enumerate(piece.b):
        z = s + b_i
        if z > 0:
            for k in range(d):
                velocity[k] += piece.W[k][i] * z
    return [x[k] + piece.duration * velocity[k] for k in range(d)]


def _laminar_box(box: list[tuple], piece: Piece, a: Vector) -> list[tuple]:
    """An exact box containing the image of a box under a laminar piece, x + F(a . x): F is
    affine between its breakpoints -b_i (proofs/bounds.md#relu-box-laminar-exact)."""
    d = len(box)
    ends = [sum((a[k] * box[k][(a[k] > 0) == e] for k in range(d)), _ZERO) for e in (0, 1)]
    cuts = {ends[0], ends[1], *(-b for b in piece.b if ends[0] < -b < ends[1])}
    a2 = sum((c * c for c in a), _ZERO)
    ys = [[s * c / a2 if a2 else _ZERO for c in a] for s in cuts]  # a . y = s, F(s) = Phi(y) - y
    F = [[u - v for u, v in zip(_laminar_step(y, piece, a), y, strict=True)] for y in ys]
    return [(box[k][0] + min(f[k] for f in F), box[k][1] + max(f[k] for f in F)) for k in range(d)]


def check_flow_v1(instance: Any, claim: Any, hints: Any) -> str:
    """Check a flow certificate of version 1; return a summary or raise Rejected."""
    if isinstance(instance, dict) and "field" in instance:
        return check_field_flow(instance, claim, hints)
    if not isinstance(hints, dict) or "method" not in hints:
        raise Rejected("hints: expected an object with a field 'method'")
    method = string(hints["method"], "hints.method", METHODS)
    if method != "relu-vectorised":  # that rule reads its hints (with "partition" for boxes)
        fields(hints, "hints", ("method", *_EXTRA.get(method, ())))
    start = "boxes" if isinstance(instance, dict) and "boxes" in instance else "points"
    fields(instance, "instance", ("schedule", start, "time"))
    schedule = instance["schedule"]
    slope, keys = isinstance(schedule, dict) and "slope" in schedule, ("dimension", "activation")
    fields(schedule, "instance.schedule", (*keys, "pieces", "slope")[: 3 + slope])
    d = small_integer(schedule["dimension"], "instance.schedule.dimension", 1, MAX_BYTES)
    activation = string(schedule["activation"], "instance.schedule.activation", ACTIVATIONS)
    al = exact(schedule.get("slope", "1/100"), "instance.schedule.slope")
    if (slope and activation != "leaky_relu") or not 0 < al < 1:
        raise Rejected("instance.schedule.slope: give it only for leaky_relu, in (0, 1)")
    raw_pieces = array(schedule["pieces"], "instance.schedule.pieces")
    pieces = [Piece(p, f"instance.schedule.pieces[{j}]", d) for j, p in enumerate(raw_pieces)]
    if start == "points":
        points = matrix(instance["points"], "instance.points", None, d)
    else:
        points = box_rows(instance["boxes"], "instance.boxes", None, d)
    n = len(points)
    time = exact(instance["time"], "instance.time")
    total = exact_sum([p.duration for p in pieces], "instance.schedule.pieces")
    if time != total:
        raise Rejected(f"instance.time: {show(str(time))} is not the duration {show(str(total))}")
    if not isinstance(claim, dict) or set(claim) not in ({"images"}, {"enclosures"}):
        raise Rejected("claim: expected an object with exactly one field, 'images' or 'enclosures'")
    images = boxes = None  # the claimed images (N x d) or enclosures (N x d x [lo, hi])
    if "images" in claim:
        images = matrix(claim["images"], "claim.images", n, d)
    else:
        boxes = box_rows(claim["enclosures"], "claim.enclosures", n, d)
    if start == "boxes" and images is not None:
        raise Rejected("instance.boxes: give enclosures, with rule laminar-exact or relu-regions")
    al = al if activation == "leaky_relu" else _ZERO
    if method == "relu-regions":
        return check_relu_regions(activation, pieces, points, boxes, hints, al, start == "boxes")
    if method == "relu-vectorised":
        if activation not in ("relu", "leaky_relu") or boxes is None:
            raise Rejected("rule relu-vectorised: enclosures of relu or leaky_relu flows only")
        from ._relu_vec_rule import check_relu_vectorised  # numpy: only for this rule

        return check_relu_vectorised(pieces, points, boxes, hints, al, start == "boxes")
    if activation != "relu":  # rule laminar-exact
        raise Rejected(f"instance.schedule.activation: laminar-exact needs relu, got {activation}")
    normals = [piece.shared_normal() for piece in pieces]
    budget = MAX_REPLAY_COST  # proofs/format.md section 4, replay limits
    too_costly = f"resource limit: the replay needs more than {budget} word operations"
    if n * sum((len(piece.b) + 1) * d for piece in pieces) > budget:
        raise Rejected(too_costly)
    for i, x in enumerate(points):
        height = max(c.height_bits() for c in (x if start == "points" else sum(x, ())))
        for j, (piece, a) in enumerate(zip(pieces, normals, strict=True)):
            words = 1 + max(height, piece.height) // 64  # exact arithmetic costs ~ words^1.5
            cuts = 1 if start == "points" else 2 * len(piece.b) + 4  # _laminar_box: <= p + 2 maps
            budget -= cuts * (len(piece.b) + 1) * d * words * isqrt(words)
            if budget < 0:
                raise Rejected(too_costly)
            x = _laminar_step(x, piece, a) if start == "points" else _laminar_box(x, piece, a)
            height = max(c.height_bits() for c in (x if start == "points" else sum(x, ())))
            if height > MAX_HEIGHT_BITS:
                raise Rejected(f"resource limit: point {i}, piece {j}: over {MAX_HEIGHT_BITS} bits")
        for k, (lo, hi) in enumerate((c, c) for c in x) if start == "points" else enumerate(x):
            if images is not None and images[i][k] != lo:
                raise Rejected(
                    f"claim.images[{i}][{k}]: differs from the exact image {show(str(lo))}"
                )
            if boxes is not None and not boxes[i][k][0] <= lo <= hi <= boxes[i][k][1]:
                raise Rejected(
                    f"claim.enclosures[{i}][{k}]: does not contain the exact image "
                    f"{show(str(lo) if lo == hi else f'[{lo}, {hi}]')}"
                )
    what = "exact images" if images is not None else "enclosures"
    return f"rule {method}: {n} points, {len(pieces)} pieces, {what}"
