"""An expression field flattened into contiguous arrays for the compiled Taylor kernel.

The field is the checker's :class:`~certified.checker.taylor.ExpressionField` (one parser of
the field format); the tape holds the same graph as integer arrays so that the numba kernel
(:func:`certified.arith.taylor._kernels.tape_jets`) interprets it without Python objects.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from certified.arith.exact import fmpq_to_float, to_fmpq
from certified.checker.taylor import OPERATIONS, ExpressionField
from certified.errors import InputError, ShapeError

__all__ = ["OPCODES", "Tape", "compile_tape", "parameter_intervals"]

OPCODES: dict[str, int] = {op: i for i, op in enumerate(OPERATIONS)}
"""Operation name -> opcode (the order of ``OPERATIONS``; the kernel uses the same numbers)."""


@dataclass(frozen=True)
class Tape:
    """The arrays of one expression field.

    Attributes
    ----------
    opcodes : (n,) int64
        ``OPCODES[op]`` of node i.
    arg_start : (n + 1,) int64
        Arguments of node i are ``args[arg_start[i]:arg_start[i + 1]]``: node indices, or the
        coordinate (``x``), parameter (``p``) or constant (``c``) index.
    args : (m,) int64
    const : (n,) uint8
        1 when node i does not depend on the state (only its order-0 coefficient is nonzero).
    aux_start : (n + 1,) int64
        Auxiliary series of node i (tanh/sigmoid: s'(a); sin/cos: the companion function;
        logsumexp: one softmax weight per argument) are rows ``aux_start[i]:aux_start[i + 1]``.
    outputs : (d,) int64
    dimension : int
    n_parameters : int
    const_lo, const_hi : (n_c,) float64
        Outward roundings of the exact constants of the ``c`` nodes.
    """

    opcodes: np.ndarray
    arg_start: np.ndarray
    args: np.ndarray
    const: np.ndarray
    aux_start: np.ndarray
    outputs: np.ndarray
    dimension: int
    n_parameters: int
    const_lo: np.ndarray
    const_hi: np.ndarray

    def __post_init__(self) -> None:
        n = self.opcodes.shape[0]
        shapes = {
            "arg_start": (self.arg_start, (n + 1,)),
            "const": (self.const, (n,)),
            "aux_start": (self.aux_start, (n + 1,)),
            "outputs": (self.outputs, (self.dimension,)),
            "const_hi": (self.const_hi, self.const_lo.shape),
        }
        for name, (a, shape) in shapes.items():
            if a.shape != shape:
                raise ShapeError(f"Tape.{name}: shape {a.shape}, expected {shape}")
        if self.args.shape != (int(self.arg_start[-1]),):
            raise ShapeError("Tape.args: its length differs from arg_start[-1]")
        if not np.all(self.const_lo <= self.const_hi):
            raise InputError("Tape.const_lo: a constant interval has lo > hi")
        for a in (self.opcodes, self.arg_start, self.args, self.const, self.aux_start):
            a.setflags(write=False)
        for a in (self.outputs, self.const_lo, self.const_hi):
            a.setflags(write=False)

    @property
    def n_nodes(self) -> int:
        return int(self.opcodes.shape[0])


def compile_tape(field: ExpressionField) -> Tape:
    """The tape of a parsed field.

    Guarantee: exact for the graph; each constant ``c`` node's interval encloses its exact
    rational value (outward rounding, :func:`certified.arith.exact.fmpq_to_float`).
    Raises RangeOverflowError when a constant exceeds the float64 range.
    """
    opcodes, starts, args, aux = [], [0], [], [0]
    const_lo: list[float] = []
    const_hi: list[float] = []
    for i, (op, *a) in enumerate(field.nodes):
        opcodes.append(OPCODES[op])
        if op == "c":
            q = to_fmpq(a[0], f"field.nodes[{i}][1]")
            a = [len(const_lo)]
            const_lo.append(fmpq_to_float(q, "down", f"field.nodes[{i}][1]"))
            const_hi.append(fmpq_to_float(q, "up", f"field.nodes[{i}][1]"))
        args.extend(int(v) for v in a)
        starts.append(len(args))
        width = {"tanh": 1, "sigmoid": 1, "sin": 1, "cos": 1, "logsumexp": len(a)}.get(op, 0)
        aux.append(aux[-1] + width)

    def ints(v: list[int]) -> np.ndarray:
        return np.ascontiguousarray(v, dtype=np.int64)

    return Tape(
        opcodes=ints(opcodes),
        arg_start=ints(starts),
        args=ints(args),
        const=np.ascontiguousarray(field.const, dtype=np.uint8),
        aux_start=ints(aux),
        outputs=ints(field.outputs),
        dimension=int(field.dimension),
        n_parameters=len(field.names),
        const_lo=np.ascontiguousarray(const_lo, dtype=np.float64),
        const_hi=np.ascontiguousarray(const_hi, dtype=np.float64),
    )


def parameter_intervals(values: Any) -> tuple[np.ndarray, np.ndarray]:
    """Float64 intervals ``(lo, hi)`` enclosing exact parameter values (anything
    :func:`certified.arith.exact.to_fmpq` reads: ints, floats, fmpq, decimal strings).

    Guarantee: ``lo[i] <= values[i] <= hi[i]`` exactly (outward rounding of each value).
    """
    qs = [to_fmpq(v, f"parameters[{i}]") for i, v in enumerate(values)]
    lo = np.array([fmpq_to_float(q, "down", f"parameters[{i}]") for i, q in enumerate(qs)])
    hi = np.array([fmpq_to_float(q, "up", f"parameters[{i}]") for i, q in enumerate(qs)])
    return lo.astype(np.float64).reshape(-1), hi.astype(np.float64).reshape(-1)
