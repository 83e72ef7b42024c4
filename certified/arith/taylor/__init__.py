"""Taylor coefficients of expression fields in compiled float64 interval arithmetic.

The fast producer path of :func:`certified.checker.taylor.field_jets` (the arb reference):
the same recurrences (proofs/bounds.md#taylor-ad), over many initial points at once. A field
is compiled once into a :class:`Tape`; :func:`jets_float64` evaluates it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from certified.arith.fpu import check_fpu_state
from certified.arith.taylor import _kernels
from certified.arith.taylor.tape import Tape, compile_tape, parameter_intervals
from certified.errors import EmptyIntervalError, InputError, NonFiniteError, ShapeError

__all__ = [
    "STATUS",
    "Tape",
    "compile_tape",
    "jets_float64",
    "jets_float64_prevalidated",
    "parameter_intervals",
]

STATUS = {
    _kernels.OK: "ok",
    _kernels.OVERFLOW: "overflow",
    _kernels.DOMAIN: "domain",
    _kernels.BROKEN: "broken",
}
"""Meaning of the per-point status codes returned by :func:`jets_float64`."""

MAX_ORDER = 10_000

check_fpu_state()


def _check_fma() -> None:
    """The kernels' TwoProduct is ``fma(a, b, -fl(ab))``: it must round once. (1 + 2^-52)
    (1 - 2^-52) - 1 = -2^-104 exactly; an fma split into two roundings gives 0."""
    e = 2.0**-52
    if _kernels.fma(1.0 + e, 1.0 - e, -1.0) != -(2.0**-104):
        raise RuntimeError("the compiled fma is not fused: the Taylor kernels would be unsound")


_check_fma()


def _endpoints(lo: Any, hi: Any, shape: tuple[int, ...], name: str) -> tuple[np.ndarray, ...]:
    lo = np.ascontiguousarray(lo, dtype=np.float64)
    hi = np.ascontiguousarray(hi, dtype=np.float64)
    if lo.shape != shape or hi.shape != shape:
        raise ShapeError(f"{name}: shapes {lo.shape} and {hi.shape}, expected {shape}")
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
        raise NonFiniteError(f"{name}: NaN or infinite endpoint; pass finite intervals")
    if not np.all(lo <= hi):
        raise EmptyIntervalError(f"{name}: an interval has lo > hi; swap its endpoints")
    return lo, hi


def jets_float64(
    tape: Tape,
    params_lo: Any,
    params_hi: Any,
    x_lo: Any,
    x_hi: Any,
    seeds_lo: Any = None,
    seeds_hi: Any = None,
    *,
    order: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Taylor coefficients of the solutions of ``x' = f(x)`` through N boxes, with duals.

    .. math::

        x(t) = \\sum_k x_k t^k, \\qquad
        x_{k+1} = \\frac{f(x)_k}{k + 1}, \\qquad
        \\text{dual part of } x_k = D x_k(x_0)\\, S

    where ``S`` are the seeds (the rows of ``dx_0/dy``).

    Parameters
    ----------
    tape : Tape
        The compiled field (:func:`compile_tape`).
    params_lo, params_hi : (n_parameters,) float64
        Intervals enclosing the parameters (:func:`parameter_intervals` for exact values).
    x_lo, x_hi : (N, d) float64
        The initial boxes (equal endpoints for points).
    seeds_lo, seeds_hi : (N, d, g) float64, optional
        Intervals of the seeds; omitted: g = 0 (plain values).
    order : int
        The highest coefficient computed (``order >= 0``).

    Returns
    -------
    lo, hi : (order + 1, N, d, 1 + g) float64
        ``[lo, hi][k, i, j, 0]`` encloses coefficient k of coordinate j of the solution from
        box i, ``[..., 1 + l]`` its derivative along seed column l.
    status : (N,) int64
        0 (ok) or a failure code per point (:data:`STATUS`: ``domain`` when log/sqrt meets an
        interval not > 0 or a division an interval containing 0, ``overflow``); a failed
        point's coefficients are ``[-inf, inf]``. Treat the point as failed.

    Raises
    ------
    ShapeError, NonFiniteError, EmptyIntervalError, InputError
        Bad shapes, non-finite or empty intervals, a bad order.

    Guarantee: for every point with status 0, encloses the k-th Taylor coefficient at t = 0
    of every solution with x(0) in the box and parameters in their intervals (and its
    derivative times the seeds, for every seed matrix in the seed intervals).
    """
    if isinstance(order, bool) or not isinstance(order, int | np.integer):
        raise InputError(f"order: expected an integer, got {order!r}")
    if not 0 <= order <= MAX_ORDER:
        raise InputError(f"order: {order} is outside 0..{MAX_ORDER}")
    d = tape.dimension
    x_lo = np.asarray(x_lo, dtype=np.float64)
    if x_lo.ndim != 2 or x_lo.shape[1] != d:
        raise ShapeError(f"x_lo: shape {x_lo.shape}, expected (N, {d})")
    N = x_lo.shape[0]
    x_lo, x_hi = _endpoints(x_lo, x_hi, (N, d), "x")
    p_lo, p_hi = _endpoints(params_lo, params_hi, (tape.n_parameters,), "params")
    if (seeds_lo is None) != (seeds_hi is None):
        raise InputError("seeds_lo, seeds_hi: pass both or neither")
    if seeds_lo is None:
        s_lo = s_hi = np.zeros((N, d, 0))
    else:
        g = np.shape(seeds_lo)[-1] if np.ndim(seeds_lo) == 3 else -1
        s_lo, s_hi = _endpoints(seeds_lo, seeds_hi, (N, d, g), "seeds")
    return _run_tape(tape, p_lo, p_hi, x_lo, x_hi, s_lo, s_hi, order)


_NO_SEEDS: dict[tuple[int, int], np.ndarray] = {}


def jets_float64_prevalidated(tape: Tape, p_lo, p_hi, x_lo, x_hi, s_lo, s_hi, order: int):
    """:func:`jets_float64` for a stepping loop's hot path, with one fused validation: falls
    back to :func:`jets_float64` (and its specific errors) unless every endpoint is finite,
    lo <= hi, the shapes are (N, d) and (N, d, g) float64 and ``0 <= order <= MAX_ORDER``.

    Guarantee: as :func:`jets_float64`.
    """
    N, d = np.shape(x_lo) if np.ndim(x_lo) == 2 else (-1, -1)
    seeds = s_lo is not None and s_hi is not None
    ok = (
        d == tape.dimension
        and isinstance(order, int)
        and 0 <= order <= MAX_ORDER
        and np.shape(x_hi) == (N, d)
        and (not seeds or (np.ndim(s_lo) == 3 and np.shape(s_lo)[:2] == (N, d)))
        and (not seeds or np.shape(s_hi) == np.shape(s_lo))
    )
    if ok:
        x_lo = np.ascontiguousarray(x_lo, dtype=np.float64)
        x_hi = np.ascontiguousarray(x_hi, dtype=np.float64)
        ok = bool(np.isfinite(x_lo).all() and np.isfinite(x_hi).all() and (x_lo <= x_hi).all())
        if ok and seeds:
            s_lo = np.ascontiguousarray(s_lo, dtype=np.float64)
            s_hi = np.ascontiguousarray(s_hi, dtype=np.float64)
            ok = bool(np.isfinite(s_lo).all() and np.isfinite(s_hi).all() and (s_lo <= s_hi).all())
    if not ok:
        return jets_float64(tape, p_lo, p_hi, x_lo, x_hi, s_lo, s_hi, order=order)
    if not seeds:
        s_lo = s_hi = _NO_SEEDS.get((N, d))
        if s_lo is None:
            s_lo = s_hi = _NO_SEEDS.setdefault((N, d), np.zeros((N, d, 0)))
    return _run_tape(tape, p_lo, p_hi, x_lo, x_hi, s_lo, s_hi, order)


def _run_tape(tape: Tape, p_lo, p_hi, x_lo, x_hi, s_lo, s_hi, order: int):
    """The compiled kernel on validated inputs (C-contiguous float64, finite, lo <= hi)."""
    t = tape
    return _kernels.tape_jets(t.opcodes, t.arg_start, t.args, t.const, t.aux_start, t.outputs,
                              t.const_lo, t.const_hi, p_lo, p_hi, x_lo, x_hi, s_lo, s_hi,
                              int(order))  # fmt: skip
