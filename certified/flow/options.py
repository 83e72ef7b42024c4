"""What to save and where to step: the options of :func:`certified.flow.enclose_flow` that
are separate from the field and the method (diffrax's ``SaveAt`` and step-size controller).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import flint
import numpy as np

from certified.arith import Interval
from certified.arith.exact import to_fmpq, to_fmpq_array
from certified.errors import InputError, ShapeError

__all__ = ["Balls", "SaveAt", "StepPolicy", "initial_set"]


@dataclass(frozen=True)
class SaveAt:
    """Times at which enclosures are returned.

    ``t1``: the final time (exact; required for an autonomous :class:`VectorField`, else the
    schedule's total time, which it must equal if given); ``ts``: earlier times (exact,
    increasing, in (0, t1)) also saved; ``steps=True``: the tube too, an enclosure of the
    trajectory over every step (``hints["tube"]``, ``hints["tube_times"]``).
    """

    t1: flint.fmpq | None = None
    ts: tuple[flint.fmpq, ...] = ()
    steps: bool = False

    def __init__(self, t1: Any = None, ts: Sequence[Any] = (), *, steps: bool = False) -> None:
        end = None if t1 is None else to_fmpq(t1, "save_at.t1")
        if end is not None and not end > 0:
            raise InputError(f"save_at.t1: {end} is not positive; the final time must be > 0")
        times = tuple(to_fmpq(t, f"save_at.ts[{i}]") for i, t in enumerate(ts))
        if any(not t > 0 for t in times) or any(b <= a for a, b in itertools.pairwise(times)):
            raise InputError("save_at.ts: times must be positive and strictly increasing")
        object.__setattr__(self, "t1", end)
        object.__setattr__(self, "ts", times)
        object.__setattr__(self, "steps", bool(steps))

    def times(self, total: flint.fmpq) -> tuple[flint.fmpq, ...]:
        """The saved times for a flow of total time ``total`` (which always ends them)."""
        if self.ts and self.ts[-1] > total:
            raise InputError(f"save_at.ts: {self.ts[-1]} is after the final time {total}")
        return tuple(t for t in self.ts if t < total) + (total,)


@dataclass(frozen=True)
class StepPolicy:
    """Where the steps go (tightness and cost only, never validity).

    order : Taylor order K of the solution (2..60); jacobian_order : order m of the
    variational equation (1..K; the 53-bit loop uses it for C^1 results and as the largest
    order otherwise, lowering it per step where the set is small enough; certificates replay
    every step at m); max_step : largest step (exact, or None); tolerance : the
    step h is chosen with ``|x_K| h^K ~ tolerance * max(1, |x|)`` at the centres;
    max_steps : a budget (the flow fails with a message beyond it); halvings : how often a
    step whose a priori enclosure fails is halved before giving up.
    """

    order: int = 20
    jacobian_order: int = 8
    max_step: Any = None
    tolerance: float = 2.0**-52
    max_steps: int = 100_000
    halvings: int = 8
    extra: dict = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.order, int) or not 2 <= self.order <= 60:
            raise InputError(f"order: expected an integer in [2, 60], got {self.order!r}")
        if not isinstance(self.jacobian_order, int) or not 1 <= self.jacobian_order <= self.order:
            raise InputError(
                f"jacobian_order: expected an integer in [1, order], got {self.jacobian_order!r}"
            )
        if self.max_step is not None:
            h = to_fmpq(self.max_step, "max_step")
            if not h > 0:
                raise InputError("max_step: must be positive")
            object.__setattr__(self, "max_step", h)
        if not (isinstance(self.tolerance, float) and 0 < self.tolerance < 1):
            raise InputError(f"tolerance: expected a float in (0, 1), got {self.tolerance!r}")


@dataclass(frozen=True)
class Balls:
    """Euclidean balls ``B(centres[i], radii[i])`` as initial sets (exact numbers)."""

    centres: Any
    radii: Any


class InitialSets:
    """Initial sets as exact boxes ``[lo, hi]`` (points have lo == hi; (N, d) object arrays
    of fmpq, converted on first use when the points are doubles, which are exact already)
    and their float64 Lohner form ``c + I r``."""

    def __init__(self, lo, hi, points: bool, c, rl, rh) -> None:
        self._lo, self._hi = lo, hi
        self.points, self.c, self.rl, self.rh = points, c, rl, rh

    @property
    def lo(self) -> np.ndarray:
        if self._lo is None:  # doubles: c is the point exactly
            self._lo = self._hi = to_fmpq_array(self.c, "X0")
        return self._lo

    @property
    def hi(self) -> np.ndarray:
        return self.lo if self._hi is None else self._hi


def initial_set(X0: Any, d: int) -> InitialSets:
    """Points ((N, d) numbers), boxes (an :class:`~certified.arith.Interval`) or
    :class:`Balls` (enclosed in boxes), validated against dimension d.

    Guarantee: the boxes contain the given sets exactly; ``c + r`` contains each box.
    """
    from certified.arith.exact import fmpq_array_to_float

    points = not isinstance(X0, (Interval, Balls))
    if points and isinstance(X0, np.ndarray) and X0.dtype == np.float64:
        if X0.ndim == 2 and X0.shape[1] == d and X0.shape[0] and np.all(np.isfinite(X0)):
            c = np.array(X0, dtype=np.float64, order="C")  # doubles are exact: no conversion
            z = np.zeros_like(c)
            return InitialSets(None, None, True, c, z, z.copy())
    if isinstance(X0, Interval):
        lo, hi = to_fmpq_array(X0.lo, "X0"), to_fmpq_array(X0.hi, "X0")
    elif isinstance(X0, Balls):
        c = to_fmpq_array(X0.centres, "centres")
        rad = to_fmpq_array(X0.radii, "radii")
        if c.ndim != 2 or rad.shape != (c.shape[0],) or any(not r >= 0 for r in rad):
            raise ShapeError("balls: expected centres (N, d) and N radii >= 0")
        lo, hi = c - rad[:, None], c + rad[:, None]
    else:
        lo = hi = to_fmpq_array(X0, "X0")
    if lo.ndim != 2 or lo.shape[1] != d or lo.shape[0] == 0:
        raise ShapeError(
            f"X0: expected shape (N, {d}) with N >= 1 for a field of dimension {d}, got {lo.shape}"
        )
    lf, hf = fmpq_array_to_float(lo, "down", "X0"), fmpq_array_to_float(hi, "up", "X0")
    c = 0.5 * lf + 0.5 * hf
    box = Interval(lf, hf) - Interval(c)
    return InitialSets(lo, hi, points, np.ascontiguousarray(c), box.lo.copy(), box.hi.copy())
