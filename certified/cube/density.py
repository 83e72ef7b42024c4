"""Piecewise-constant densities on a grid of boxes: the other input of theorem F.

File format (JSON): ``{"grid": [[b_0 < b_1 < ... < b_m] for each axis], "masses": nested
m_1 × ... × m_d array}``, the mass of each grid box (exact, >= 0, summing to exactly 1); the
density on a box is its mass over its volume.

The certified construction for densities is :func:`certified.cube.density_to_cube`
(proofs/cube.md §6).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import flint
import numpy as np

from certified.arith.exact import fmpq_to_str, to_fmpq
from certified.errors import InputError, ShapeError

__all__ = ["BoxDensity", "read_box_density"]


@dataclass(frozen=True, eq=False)
class BoxDensity:
    """A probability density, constant on each box of a grid.

    Attributes
    ----------
    grid : tuple of tuples of fmpq
        Per axis, strictly increasing breakpoints (at least two).
    masses : numpy.ndarray
        ``dtype=object`` of fmpq, shape ``(m_1, ..., m_d)``, >= 0, summing to exactly 1.

    Raises
    ------
    ShapeError
        Fewer than two breakpoints on an axis, masses of the wrong shape.
    InputError
        Breakpoints not increasing, a negative mass, masses not summing to 1.

    Guarantee: exact (validated in the constructor).
    """

    grid: tuple
    masses: np.ndarray

    def __post_init__(self) -> None:
        for k, axis in enumerate(self.grid):
            if len(axis) < 2:
                raise ShapeError(f"grid[{k}]: needs at least two breakpoints (one box)")
            for j in range(len(axis) - 1):
                if not axis[j] < axis[j + 1]:
                    raise InputError(
                        f"grid[{k}]: breakpoints {j} and {j + 1} are not strictly increasing"
                    )
        shape = tuple(len(axis) - 1 for axis in self.grid)
        if self.masses.shape != shape:
            raise ShapeError(
                f"masses: expected shape {shape} (boxes per axis), got {self.masses.shape}"
            )
        for index, m in np.ndenumerate(self.masses):
            if m < 0:
                raise InputError(
                    f"masses{list(index)}: {fmpq_to_str(m)} is negative; a density has masses >= 0"
                )
        total = sum(self.masses.ravel().tolist(), flint.fmpq(0))
        if total != 1:
            raise InputError(
                f"masses: sum to {fmpq_to_str(total)}, not exactly 1; rescale them, writing "
                'inexact values as strings such as "1/3"'
            )

    @property
    def d(self) -> int:
        """Dimension."""
        return len(self.grid)


def _nested(value: Any, shape: tuple[int, ...], where: str) -> list:
    if not shape:
        return [to_fmpq(value, where)]
    if not isinstance(value, list) or len(value) != shape[0]:
        got = len(value) if isinstance(value, list) else type(value).__name__
        raise ShapeError(f"{where}: expected an array of {shape[0]} entries, got {got}")
    return [x for j, v in enumerate(value) for x in _nested(v, shape[1:], f"{where}[{j}]")]


def read_box_density(obj: Any, source: str | os.PathLike[str] = "<density>") -> BoxDensity:
    """A :class:`BoxDensity` from the parsed JSON object ``{"grid", "masses"}``.

    Raises
    ------
    SchemaError, ShapeError, InputError, NonFiniteError, NumberFormatError
        Messages start with ``source``.

    Guarantee: exact.
    """
    from certified.io import check_keys, prefixed_errors

    with prefixed_errors(source):
        check_keys(obj, "", ["grid", "masses"])
        if not isinstance(obj["grid"], list) or not obj["grid"]:
            raise ShapeError("grid: expected one array of breakpoints per axis")
        grid = tuple(
            tuple(to_fmpq(b, f"grid[{k}][{j}]") for j, b in enumerate(_axis(axis, k)))
            for k, axis in enumerate(obj["grid"])
        )
        shape = tuple(max(len(axis) - 1, 0) for axis in grid)
        values = _nested(obj["masses"], shape, "masses")
        masses = np.empty(len(values), dtype=object)
        masses[:] = values
        return BoxDensity(grid, masses.reshape(shape))


def _axis(axis: Any, k: int) -> list:
    if not isinstance(axis, list) or len(axis) < 2:
        raise ShapeError(f"grid[{k}]: expected an array of at least two breakpoints (one box)")
    return axis
