"""Shipped fields: Lorenz, Van der Pol, Rössler, and the neural fields of theorems.md §1.1-1.2
(``x' = W s(A x + b)`` in R^d, ``x' = P_x^perp W s(U x + b)`` on the sphere) as graphs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from certified.arith.exact import to_fmpq_array
from certified.errors import InputError, ShapeError
from certified.fields.expr import GraphBuilder, sigmoid, tanh, total
from certified.fields.field import PiecewiseField, VectorField, field

__all__ = ["EXAMPLES", "lorenz", "neural_field", "rossler", "sphere_neural_field", "vanderpol"]


def lorenz(sigma: Any = 10, rho: Any = 28, beta: Any = "8/3") -> VectorField:
    """``x' = sigma (y - x), y' = x (rho - z) - y, z' = x y - beta z``."""
    return field(
        3,
        lambda x, p: [
            p.sigma * (x[1] - x[0]),
            x[0] * (p.rho - x[2]) - x[1],
            x[0] * x[1] - p.beta * x[2],
        ],
        parameters=["sigma", "rho", "beta"],
        values=[sigma, rho, beta],
        name="lorenz",
    )


def vanderpol(mu: Any = 1) -> VectorField:
    """``x' = y, y' = mu (1 - x^2) y - x``."""
    return field(
        2,
        lambda x, p: [x[1], p.mu * (1 - x[0] ** 2) * x[1] - x[0]],
        parameters=["mu"],
        values=[mu],
        name="vanderpol",
    )


def rossler(a: Any = "0.2", b: Any = "0.2", c: Any = "5.7") -> VectorField:
    """``x' = -y - z, y' = x + a y, z' = b + z (x - c)``."""
    return field(
        3,
        lambda x, p: [-x[1] - x[2], x[0] + p.a * x[1], p.b + x[2] * (x[0] - p.c)],
        parameters=["a", "b", "c"],
        values=[a, b, c],
        name="rossler",
    )


EXAMPLES: dict[str, Callable[[], VectorField]] = {
    "lorenz": lorenz,
    "vanderpol": vanderpol,
    "rossler": rossler,
}
"""Shipped example fields by name (``certified flow --field NAME``), with their defaults:
Lorenz sigma = 10, rho = 28, beta = 8/3; Van der Pol mu = 1; Rössler a = b = 0.2, c = 5.7."""

_ACT = {"tanh": tanh, "sigmoid": sigmoid}


def _names(prefix: str, rows: int, cols: int | None) -> list[str]:
    if cols is None:
        return [f"{prefix}[{i}]" for i in range(rows)]
    return [f"{prefix}[{i}][{j}]" for i in range(rows) for j in range(cols)]


def _layer(b: GraphBuilder, M: str, rows: int, cols: int, v: Sequence[Any], bias: str | None):
    out = []
    for i in range(rows):
        terms = [b.param(f"{M}[{i}][{j}]") * v[j] for j in range(cols)]
        if bias is not None:
            terms.append(b.param(f"{bias}[{i}]"))
        out.append(total(terms))
    return out


def neural_field(schedule: Any) -> PiecewiseField:
    """The tanh / sigmoid schedule ``x' = W s(A x + b)`` as a piecewise field (parameters
    ``W[i][j]``, ``A[i][j]``, ``b[i]``; narrower pieces are padded with zero neurons).

    Guarantee: exact (same field, same pieces).
    """
    from certified.models import Schedule

    if not isinstance(schedule, Schedule):
        schedule = Schedule.from_json(schedule)
    act = schedule.activation.value
    if act not in _ACT:
        raise InputError(
            f"activation: {act} is not smooth; the Taylor method needs tanh or "
            "sigmoid (ReLU schedules use the piecewise-affine engines)"
        )
    d, p = schedule.dimension, schedule.width
    names = _names("W", d, p) + _names("A", p, d) + _names("b", p, None)
    b = GraphBuilder(d, names)
    y = [_ACT[act](u) for u in _layer(b, "A", p, d, b.x, "b")]
    f = VectorField(b.graph(_layer(b, "W", d, p, y, None)), name=f"neural-{act}")
    pieces = []
    for piece in schedule.pieces:
        W = np.zeros((d, p), dtype=object)
        A = np.zeros((p, d), dtype=object)
        bb = np.zeros(p, dtype=object)
        q = piece.width
        W[:, :q], A[:q], bb[:q] = piece.W, piece.A, piece.b
        pieces.append((piece.duration, [*W.ravel(), *A.ravel(), *bb]))
    return f.on(*pieces)


def sphere_neural_field(
    pieces: Sequence[tuple[Any, Any, Any, Any]], *, activation: str = "tanh"
) -> PiecewiseField:
    """``x' = P_x^perp W s(U x + b)`` (theorems.md §1.2) on S^{d-1} with pieces
    ``(duration, W, U, b)``, W, U of shape (d, d), b of length d. The graph is
    ``v - x (x . v)`` with ``v = W s(U x + b)``: the sphere is invariant.

    Guarantee: exact.
    """
    if activation not in _ACT:
        raise InputError(f"activation: expected tanh or sigmoid, got {activation!r}")
    if not pieces:
        raise ShapeError("pieces: at least one piece (duration, W, U, b)")
    d = to_fmpq_array(pieces[0][1], "pieces[0].W").shape[0]
    names = _names("W", d, d) + _names("U", d, d) + _names("b", d, None)
    b = GraphBuilder(d, names)
    v = _layer(b, "W", d, d, [_ACT[activation](u) for u in _layer(b, "U", d, d, b.x, "b")], None)
    s = total([b.x[i] * v[i] for i in range(d)])
    f = VectorField(
        b.graph([v[i] - b.x[i] * s for i in range(d)]), name="sphere-neural", sphere=True
    )
    values = []
    for j, (t, W, U, bias) in enumerate(pieces):
        Wq, Uq = to_fmpq_array(W, f"pieces[{j}].W"), to_fmpq_array(U, f"pieces[{j}].U")
        bq = to_fmpq_array(bias, f"pieces[{j}].b")
        if Wq.shape != (d, d) or Uq.shape != (d, d) or bq.shape != (d,):
            raise ShapeError(
                f"pieces[{j}]: W, U must be {d}x{d} and b of length {d}, got "
                f"{Wq.shape}, {Uq.shape}, {bq.shape}"
            )
        values.append((t, [*Wq.ravel(), *Uq.ravel(), *bq]))
    return f.on(*values)
