"""A Python builder of expression graphs: write the field as a function, get the JSON graph.

The graph language is §7 of the "Certificate file format" (docs: theory/format; the file
format of a field alone: formats/field; source ``proofs/format.md`` section 7), parsed by
:func:`certified.checker.taylor.parse_field`, the one parser of the format. Nothing is ever
``eval``-ed: the builder records the operations applied to symbolic :class:`Expr` handles, and
equal sub-expressions are stored once.

Example::

    from certified.fields import field, sin

    pendulum = field(
        2, lambda x, p: [x[1], -sin(x[0]) - p.gamma * x[1] + p.torque],
        parameters=["gamma", "torque"],
    )
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import flint

from certified.arith.exact import fmpq_to_str, to_fmpq
from certified.errors import InputError

__all__ = [
    "Expr",
    "GraphBuilder",
    "cos",
    "exp",
    "log",
    "logsumexp",
    "sigmoid",
    "sin",
    "softmax",
    "sqrt",
    "tanh",
    "total",
]


class GraphBuilder:
    """Records nodes ``[op, *args]`` in topological order, each distinct node once."""

    def __init__(self, dimension: int, parameters: Sequence[str] = ()) -> None:
        if not isinstance(dimension, int) or dimension < 1:
            raise InputError(f"dimension: expected an integer >= 1, got {dimension!r}")
        names = list(parameters)
        if len(set(names)) != len(names) or not all(isinstance(n, str) and n for n in names):
            raise InputError(f"parameters: expected distinct non-empty names, got {names!r}")
        self.dimension, self.names = dimension, names
        self.nodes: list[list[Any]] = []
        self._index: dict[tuple, int] = {}
        self.x = tuple(self.node("x", i) for i in range(dimension))

    def node(self, op: str, *args: Any) -> Expr:
        key = (op, *args)
        if key not in self._index:
            self._index[key] = len(self.nodes)
            self.nodes.append([op, *args])
        return Expr(self, self._index[key])

    def const(self, value: Any) -> Expr:
        q = to_fmpq(value, "constant")
        return self.node("c", int(q.p) if q.q == 1 and abs(q.p) < 2**53 else fmpq_to_str(q))

    def param(self, name: str) -> Expr:
        if name not in self.names:
            raise InputError(f"parameter {name!r} is not declared; declared: {self.names}")
        return self.node("p", self.names.index(name))

    def lift(self, value: Any) -> Expr:
        if isinstance(value, Expr):
            if value.builder is not self:
                raise InputError("an expression of another field was used in this field")
            return value
        return self.const(value)

    def graph(self, outputs: Sequence[Any]) -> dict[str, Any]:
        outs = list(outputs)
        if len(outs) != self.dimension:
            raise InputError(
                f"outputs: the field returned {len(outs)} components for dimension {self.dimension}"
            )
        idx = [self.lift(o).index for o in outs]
        return {
            "dimension": self.dimension,
            "parameters": list(self.names),
            "nodes": [list(n) for n in self.nodes],
            "outputs": idx,
        }


class Expr:
    """A node of a field under construction; arithmetic with numbers and other nodes builds
    new nodes (``x ** k`` for integers k >= 0 by squaring)."""

    __slots__ = ("builder", "index")
    __array_priority__ = 1000  # numpy scalars on the left defer to Expr

    def __init__(self, builder: GraphBuilder, index: int) -> None:
        self.builder, self.index = builder, index

    def _bin(self, op: str, other: Any, swap: bool = False) -> Expr:
        o = self.builder.lift(other)
        a, b = (o, self) if swap else (self, o)
        return self.builder.node(op, a.index, b.index)

    def __add__(self, o: Any) -> Expr:
        return self._bin("add", o)

    def __radd__(self, o: Any) -> Expr:
        return self._bin("add", o, True)

    def __sub__(self, o: Any) -> Expr:
        return self._bin("sub", o)

    def __rsub__(self, o: Any) -> Expr:
        return self._bin("sub", o, True)

    def __mul__(self, o: Any) -> Expr:
        return self._bin("mul", o)

    def __rmul__(self, o: Any) -> Expr:
        return self._bin("mul", o, True)

    def __truediv__(self, o: Any) -> Expr:
        return self._bin("div", o)

    def __rtruediv__(self, o: Any) -> Expr:
        return self._bin("div", o, True)

    def __neg__(self) -> Expr:
        return self.builder.node("neg", self.index)

    def __pos__(self) -> Expr:
        return self

    def __pow__(self, k: Any) -> Expr:
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise InputError(f"power: only integer exponents >= 0 are supported, got {k!r}")
        if k == 0:
            return self.builder.const(1)
        if k == 1:
            return self
        half = self ** (k // 2)
        sq = self.builder.node("sqr", half.index)
        return sq * self if k % 2 else sq

    def __bool__(self) -> bool:
        raise TypeError(
            "an expression has no truth value: a field is smooth and cannot branch on the "
            "state (write the branches as separate pieces of a schedule)"
        )

    def __repr__(self) -> str:
        return f"Expr(node {self.index}: {self.builder.nodes[self.index]})"


def _unary(op: str) -> Callable[[Expr], Expr]:
    def f(e: Expr) -> Expr:
        if not isinstance(e, Expr):
            raise InputError(f"{op}: expected an expression of the field, got {e!r}")
        return e.builder.node(op, e.index)

    f.__name__ = op
    f.__doc__ = f"The node ``{op}(e)`` of the expression graph."
    return f


exp = _unary("exp")
log = _unary("log")
sqrt = _unary("sqrt")
tanh = _unary("tanh")
sigmoid = _unary("sigmoid")
sin = _unary("sin")
cos = _unary("cos")


def _builder_of(items: Sequence[Any], what: str) -> GraphBuilder:
    for e in items:
        if isinstance(e, Expr):
            return e.builder
    raise InputError(f"{what}: needs at least one expression of the field")


def total(items: Sequence[Any]) -> Expr:
    """The node ``sum(items)`` (one n-ary node instead of a chain of additions)."""
    b = _builder_of(items, "sum")
    if len(items) == 1:
        return b.lift(items[0])
    return b.node("sum", *(b.lift(e).index for e in items))


def logsumexp(items: Sequence[Any]) -> Expr:
    """``log(sum_j exp(items[j]))`` as one node (stable: no overflow of the exponentials)."""
    b = _builder_of(items, "logsumexp")
    return b.node("logsumexp", *(b.lift(e).index for e in items))


def softmax(items: Sequence[Any]) -> list[Expr]:
    """The softmax weights ``exp(items[j] - logsumexp(items))``."""
    lse = logsumexp(items)
    return [exp(lse.builder.lift(e) - lse) for e in items]


def is_zero(value: Any) -> bool:
    return not isinstance(value, Expr) and to_fmpq(value, "value") == flint.fmpq(0)
