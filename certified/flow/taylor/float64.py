"""A float64 Taylor integrator without enclosures: the same steps and the same coefficient
kernel as the certified method, but only the Taylor polynomial at the current points (no a
priori box, no remainder, no variational equation, no Lohner sets). The benchmarks' baseline
("the float64 evaluation of the same Taylor steps") and a sampler of trajectories.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from certified.arith.exact import fmpq_to_float
from certified.fields.field import PiecewiseField

__all__ = ["float_taylor_flow"]


def float_taylor_flow(
    problem: PiecewiseField, X0: Any, steps: list[list[Any]], order: int = 20, save: bool = False
) -> np.ndarray:
    """Phi_T(x) approximately for points X0 (N, d), stepping with ``steps`` (per piece, the
    step lengths of a certified run) at Taylor order ``order``; with ``save``, the states after
    every step, shape (steps + 1, N, d).

    Guarantee: none (heuristic).
    """
    from certified.arith.taylor import compile_tape, jets_float64

    tape = compile_tape(problem.field.expression)
    x = np.ascontiguousarray(np.asarray(X0, dtype=float))
    out = [x.copy()] if save else None
    for piece, hs in zip(problem.pieces, steps, strict=True):
        p = np.array([fmpq_to_float(v, "nearest") for v in piece.values], dtype=float)
        for h in hs:
            hf = fmpq_to_float(h, "nearest")
            lo, hi, _ = jets_float64(tape, p, p, x, x, order=order)
            coef = 0.5 * (lo[..., 0] + hi[..., 0])
            y = coef[order]
            for k in range(order - 1, -1, -1):
                y = y * hf + coef[k]
            x = np.ascontiguousarray(y)
            if save:
                out.append(x.copy())
    return np.stack(out) if save else x
