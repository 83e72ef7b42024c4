"""Vector fields as data: an expression graph, named parameters, piecewise-constant values.

A :class:`VectorField` is the graph (§7 of the "Certificate file format", docs:
theory/format; source ``proofs/format.md`` section 7) and optional default parameter values;
a :class:`PiecewiseField` adds the schedule of pieces ``(duration, values)`` over which the
parameters are constant (one piece for an autonomous field). Both are validated when built (the
structure by :func:`certified.checker.taylor.parse_field`, the one parser of the format;
numbers exactly by :func:`certified.arith.exact.to_fmpq`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import flint
import numpy as np

from certified.arith import Interval
from certified.arith.exact import fmpq_to_str, to_fmpq
from certified.checker.taylor import ExpressionField, Rejected, parse_field
from certified.errors import InputError, ShapeError
from certified.fields.expr import GraphBuilder

__all__ = ["FieldError", "FieldPiece", "PiecewiseField", "VectorField", "field"]


class FieldError(InputError):
    """An expression graph is not valid: unknown operation, wrong arity, bad index, a
    constant that is not a finite number, dimensions that do not match."""


def _canonical(value: Any, where: str) -> Any:
    q = to_fmpq(value, where)  # NaN / inf / non-numbers raise a NonFiniteError naming `where`
    return int(q.p) if q.q == 1 and abs(q.p) < 2**53 else fmpq_to_str(q)


def _normalised(graph: Any) -> dict[str, Any]:
    """The graph with every constant in canonical exact form (floats are their doubles,
    decimal strings the rationals they spell)."""
    if not isinstance(graph, Mapping):
        raise FieldError(f"field: expected an object (an expression graph), got {graph!r:.60}")
    out = dict(graph)
    nodes = graph.get("nodes")
    if isinstance(nodes, list):
        out["nodes"] = [
            ["c", _canonical(n[1], f"field.nodes[{i}][1]")]
            if isinstance(n, list) and len(n) == 2 and n[0] == "c"
            else n
            for i, n in enumerate(nodes)
        ]
    return out


class VectorField:
    """An autonomous vector field ``x' = f(x; theta)`` on R^d given by an expression graph.

    Parameters
    ----------
    graph : dict
        ``{"dimension": d, "parameters": [names], "nodes": [...], "outputs": [...]}``.
    values : dict or sequence of numbers, optional
        Default parameter values, read exactly (int, float as its double, string such as
        ``"1/10"``, fmpq): a dict naming every parameter and nothing else, or a sequence in
        the order of ``parameters``. Needed by :meth:`for_time` (a field without pieces).
    name : str, optional
    sphere : bool
        The field is tangent to the unit sphere (``x . f(x) = 0`` on it): initial points must
        lie on the sphere (to 1e-12), and samples are drawn there.

    Guarantee: exact (a description; nothing is computed).
    """

    def __init__(
        self, graph: Any, *, values: Any = None, name: str | None = None, sphere: bool = False
    ) -> None:
        self.graph = _normalised(graph)
        try:
            self.expression: ExpressionField = parse_field(self.graph)
        except Rejected as exc:
            raise FieldError(str(exc)) from None
        self.name = name
        self.sphere = bool(sphere)
        self.values = None if values is None else self.parameter_values(values, "values")

    @property
    def dimension(self) -> int:
        return self.expression.dimension

    @property
    def parameters(self) -> tuple[str, ...]:
        return tuple(self.expression.names)

    def __repr__(self) -> str:
        name = f" {self.name}" if self.name else ""
        return (
            f"VectorField{name}(dimension={self.dimension}, "
            f"parameters={list(self.parameters)}, nodes={len(self.expression.nodes)})"
        )

    def parameter_values(self, values: Any, where: str = "parameters") -> tuple[flint.fmpq, ...]:
        """Exact values in the order of :attr:`parameters` (a mapping by name or a sequence)."""
        names = self.parameters
        if isinstance(values, Mapping):
            unknown = set(values) - set(names)
            missing = [n for n in names if n not in values]
            if unknown or missing:
                raise FieldError(f"{where}: unknown {sorted(unknown)}, missing {missing}")
            values = [values[n] for n in names]
        values = list(values)
        if len(values) != len(names):
            raise ShapeError(f"{where}: expected {len(names)} values ({names}), got {len(values)}")
        return tuple(to_fmpq(v, f"{where}[{names[i]}]") for i, v in enumerate(values))

    def on(self, *pieces: tuple[Any, Any]) -> PiecewiseField:
        """The field with piecewise-constant parameters: ``on((t1, values1), (t2, values2))``,
        each duration exact and > 0, each ``values`` a dict by name or a sequence in the order
        of :attr:`parameters` (as ``values=`` of :func:`field`)."""
        return PiecewiseField(
            self,
            tuple(
                FieldPiece(
                    to_fmpq(t, f"pieces[{j}].duration"),
                    self.parameter_values(v, f"pieces[{j}].parameters"),
                )
                for j, (t, v) in enumerate(pieces)
            ),
        )

    def for_time(self, time: Any) -> PiecewiseField:
        """One piece of duration ``time`` with the default values (the field is autonomous)."""
        if self.values is None and self.parameters:
            raise FieldError(
                f"the field has parameters {list(self.parameters)} and no default values; "
                "give them with .on((time, values)) or a field file with 'pieces'"
            )
        return self.on((time, self.values or ()))

    def to_json(self) -> dict[str, Any]:
        """The expression graph ``{"dimension", "parameters", "nodes", "outputs"}`` (constants
        in canonical exact form): the ``"field"`` object of a field file, without values or
        pieces. A whole file is ``self.for_time(T).to_json()`` or ``self.on(...).to_json()``
        (:meth:`PiecewiseField.to_json`), or ``{"field": self.to_json(), "values": ...}`` for
        an autonomous field read with ``--time``.

        Guarantee: exact (the graph as built).
        """
        return dict(self.graph)

    def taylor_coefficients(self, X: Any, order: int, values: Any = None):
        """Taylor coefficients ``x_0..x_order`` of the solutions through the points or boxes
        X (an Interval or an (N, d) array), in compiled float64 interval arithmetic: an
        Interval of shape (order + 1, N, d) (the "Catalogue of rounding and remainder
        lemmas", docs: theory/bounds; source proofs/bounds.md#taylor-ad).

        Guarantee: encloses the k-th Taylor coefficient at t = 0 of every solution starting
        in each box.
        """
        lo, hi = self._jets(X, order, values, jacobian=False)
        return Interval(lo[..., 0], hi[..., 0])

    def jacobian(self, X: Any, values: Any = None):
        """An enclosure of ``Df`` over each box of X: an Interval of shape (N, d, d).

        Guarantee: contains Df(x) for every x in each box.
        """
        lo, hi = self._jets(X, 1, values, jacobian=True)
        return Interval(lo[1, :, :, 1:], hi[1, :, :, 1:])

    def _jets(self, X: Any, order: int, values: Any, jacobian: bool):
        from certified.arith.taylor import compile_tape, jets_float64, parameter_intervals

        box = X if isinstance(X, Interval) else Interval(np.atleast_2d(np.asarray(X, float)))
        if box.ndim != 2 or box.shape[1] != self.dimension:
            raise ShapeError(f"X: expected shape (N, {self.dimension}), got {box.shape}")
        vals = self.values if values is None else self.parameter_values(values)
        if vals is None and self.parameters:
            raise FieldError("values: the field has parameters and no default values")
        pl, ph = parameter_intervals(vals or ())
        n, d = box.shape
        seeds = np.broadcast_to(np.eye(d), (n, d, d)) if jacobian else None
        lo, hi, status = jets_float64(compile_tape(self.expression), pl, ph, box.lo, box.hi,
                                      seeds, seeds, order=order)  # fmt: skip
        if np.any(status != 0):
            bad = int(np.flatnonzero(status)[0])
            raise FieldError(
                f"X[{bad}]: the field leaves its domain or overflows on this box "
                "(log/sqrt of a non-positive value, division by an interval "
                "containing 0)"
            )
        return lo, hi

    def evaluate(self, x: Any, values: Any = None) -> np.ndarray:
        """``f(x)`` in float64 for points x of shape (N, d) (no guarantee: for sampling
        trajectories and baselines).

        Guarantee: none (heuristic).
        """
        vals = self.values if values is None else self.parameter_values(values)
        return _evaluate(self.expression, np.asarray(x, dtype=float), vals or ())


_FLOAT_OPS: dict[str, Callable] = {
    "neg": np.negative,
    "sqr": np.square,
    "sqrt": np.sqrt,
    "exp": np.exp,
    "log": np.log,
    "tanh": np.tanh,
    "sin": np.sin,
    "cos": np.cos,
    "sigmoid": lambda u: 0.5 * (1 + np.tanh(u / 2)),
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
}


def _evaluate(ex: ExpressionField, x: np.ndarray, values: Sequence[Any]) -> np.ndarray:
    if x.ndim != 2 or x.shape[1] != ex.dimension:
        raise ShapeError(f"x: expected shape (N, {ex.dimension}), got {x.shape}")
    v: list[Any] = []
    for op, *a in ex.nodes:
        if op == "x":
            v.append(x[:, a[0]])
        elif op in ("p", "c"):
            v.append(float(values[a[0]] if op == "p" else a[0]))
        elif op == "sum":
            v.append(sum(v[i] for i in a))
        elif op == "logsumexp":
            m = np.max([np.broadcast_to(v[i], x.shape[:1]) for i in a], axis=0)
            v.append(m + np.log(sum(np.exp(v[i] - m) for i in a)))
        else:
            v.append(_FLOAT_OPS[op](*(v[i] for i in a)))
    return np.stack([np.broadcast_to(v[o], x.shape[:1]) for o in ex.outputs], axis=1)


@dataclass(frozen=True)
class FieldPiece:
    """Constant parameter values for a time ``duration`` > 0 (exact)."""

    duration: flint.fmpq
    values: tuple[flint.fmpq, ...]

    def __post_init__(self) -> None:
        if not self.duration > 0:
            raise InputError(f"duration: {self.duration} is not positive; durations must be > 0")


@dataclass(frozen=True)
class PiecewiseField:
    """A field with piecewise-constant parameters: ``pieces[j]`` holds for its duration.

    Guarantee: exact (a description).
    """

    field: VectorField
    pieces: tuple[FieldPiece, ...]

    def __post_init__(self) -> None:
        if not self.pieces:
            raise ShapeError("pieces: a schedule needs at least one piece")
        n = len(self.field.parameters)
        for j, p in enumerate(self.pieces):
            if len(p.values) != n:
                raise ShapeError(
                    f"pieces[{j}].parameters: expected {n} values, got {len(p.values)}"
                )

    @property
    def dimension(self) -> int:
        return self.field.dimension

    @cached_property
    def total_time(self) -> flint.fmpq:
        return sum((p.duration for p in self.pieces), flint.fmpq(0))

    def to_json(self) -> dict[str, Any]:
        """``{"field": graph, "pieces": [{"duration", "parameters"}]}`` with exact strings
        (and ``"sphere": true`` for a field tangent to the unit sphere)."""
        sphere = {"sphere": True} if self.field.sphere else {}
        return {
            **sphere,
            "field": self.field.to_json(),
            "pieces": [
                {
                    "duration": fmpq_to_str(p.duration),
                    "parameters": [fmpq_to_str(v) for v in p.values],
                }
                for p in self.pieces
            ],
        }

    @classmethod
    def from_json(cls, obj: Any, *, time: Any = None, where: str = "field file") -> PiecewiseField:
        """Read ``{"field": graph, "pieces": [...]}``, ``{"field": graph, "values": [...]}``
        (autonomous: needs ``time``) or a bare graph without parameters (needs ``time``)."""
        if not isinstance(obj, Mapping):
            raise FieldError(f"{where}: expected a JSON object")
        if time is not None:
            time = to_fmpq(time, "--time")
            if not time > 0:
                raise InputError(f"--time: {time} is not positive; the final time must be > 0")
        if "nodes" in obj:
            obj = {"field": obj}
        extra = set(obj) - {"field", "pieces", "values", "sphere"}
        if extra or "field" not in obj or ("pieces" in obj and "values" in obj):
            raise FieldError(
                f"{where}: expected 'field' and either 'pieces' or 'values' (and optionally "
                f"'sphere'); got keys {sorted(obj)}"
            )
        f = VectorField(obj["field"], values=obj.get("values"), sphere=obj.get("sphere") is True)
        if "pieces" in obj:
            items = obj["pieces"]
            if not isinstance(items, list) or not items:
                raise FieldError("pieces: expected a non-empty list of {duration, parameters}")
            pieces = []
            for j, it in enumerate(items):
                if not isinstance(it, Mapping) or set(it) != {"duration", "parameters"}:
                    raise FieldError(f"pieces[{j}]: expected exactly 'duration' and 'parameters'")
                pieces.append((it["duration"], it["parameters"]))
            pf = f.on(*pieces)
            if time is not None and to_fmpq(time, "time") != pf.total_time:
                raise InputError(
                    f"--time: {time} differs from the total duration {pf.total_time} of the "
                    "pieces; leave --time out for piecewise fields"
                )
            return pf
        if time is None:
            raise InputError("--time: an autonomous field needs the final time T > 0")
        return f.for_time(time)


def read_field(source: Any, *, time: Any = None) -> PiecewiseField:
    """A field by shipped name (:data:`certified.fields.EXAMPLES`) or from a JSON file (its
    structure checked against the shipped JSON Schema ``field`` first: :class:`FieldError`
    naming the JSON path).

    Guarantee: exact.
    """
    from certified.fields.examples import EXAMPLES
    from certified.io import prefixed_errors, read_json, validate_json

    if isinstance(source, str) and source in EXAMPLES:
        if time is None:
            raise InputError(f"--time: the example field {source!r} needs the final time T > 0")
        time = to_fmpq(time, "--time")
        if not time > 0:
            raise InputError(f"--time: {time} is not positive; the final time must be > 0")
        return EXAMPLES[source]().for_time(time)
    if not isinstance(source, (str, os.PathLike)):
        raise InputError(f"field: expected a file name or one of {sorted(EXAMPLES)}")
    if isinstance(source, str) and not os.path.exists(source) and "." not in source:
        raise InputError(
            f"--field: {source!r} is neither a file nor a shipped example "
            f"({', '.join(sorted(EXAMPLES))})"
        )
    obj = read_json(source)
    with prefixed_errors(source):
        validate_json(obj, "field", error=FieldError, shape_error=FieldError)
        return PiecewiseField.from_json(obj, time=time)


class _Parameters:
    """``p.name`` for the declared parameters; an undeclared name is an InputError."""

    def __init__(self, builder: GraphBuilder) -> None:
        self._builder = builder

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return self._builder.param(name)


def field(
    dimension: int,
    f: Callable[..., Sequence[Any]],
    *,
    parameters: Sequence[str] = (),
    values: Any = None,
    name: str | None = None,
    sphere: bool = False,
) -> VectorField:
    """Build a field from a Python function ``f(x, p)`` of symbolic coordinates ``x[i]`` and
    parameters ``p.name`` (arithmetic, ``**`` with integer exponents, and the functions of
    :mod:`certified.fields.expr`), returning the d components of ``x'``.

    ``parameters`` names the parameters; ``values`` gives their default values, exactly: a
    dict naming every parameter (``{"gamma": "1/10", "torque": 0}``) or a sequence in the
    order of ``parameters`` (needed by :meth:`VectorField.for_time`; pieces given with
    :meth:`VectorField.on` carry their own values). ``sphere=True`` declares a field tangent
    to the unit sphere.

    Guarantee: exact (the graph records exactly the operations written).
    """
    b = GraphBuilder(dimension, parameters)
    p = _Parameters(b)
    return VectorField(b.graph(f(b.x, p)), values=values, name=name, sphere=sphere)
