"""Guillotine partitions of ``[0,1]^d`` whose cells' volumes equal the masses of their atoms.

The cells are built Knothe-style: the atoms are sorted along axis 0 and cut into ``K_0``
consecutive groups of about equal mass; slab ``j`` of ``[0,1]^d`` gets a width equal to its
group's mass; within each slab the same is done along axis 1 (widths relative to the slab's
mass), and so on. Every leaf cell then has a Lebesgue volume equal to the exact total weight of
its atoms, whatever the weights are (uniform ``1/n`` with a cell count not dividing n, or
arbitrary exact weights): the matching of theorem F's construction outline, made exact for
point masses (proofs/cube.md §4).

Which atoms go together is a heuristic (it only affects the bound); the volumes are exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import flint
import numpy as np

__all__ = ["Cell", "CellPartition", "guillotine_partition", "source_boxes"]

_ZERO, _ONE = flint.fmpq(0), flint.fmpq(1)


@dataclass(frozen=True)
class Cell:
    """A leaf: the box ``Π_k [lo_k, hi_k]`` (exact) and the indices of its units (atoms)."""

    lo: tuple[flint.fmpq, ...]
    hi: tuple[flint.fmpq, ...]
    units: tuple[int, ...]

    @property
    def volume(self) -> flint.fmpq:
        """Lebesgue volume, exact."""
        v = _ONE
        for a, b in zip(self.lo, self.hi, strict=True):
            v *= b - a
        return v


@dataclass(frozen=True)
class CellPartition:
    """Leaf cells in depth-first order and the tree as nested ``{"axis", "cuts", "parts"}``
    objects whose leaves are the cell numbers (``cells[i]`` for leaf ``i``)."""

    cells: tuple[Cell, ...]
    tree: Any


def _chunks(order: list[int], w: np.ndarray, m: int) -> list[list[int]]:
    """Split ``order`` into m non-empty consecutive runs of about equal float weight."""
    cum = np.cumsum(w[order])
    total, bounds, start = cum[-1], [], 0
    for j in range(1, m):
        target = total * j / m
        k = int(np.searchsorted(cum, target))  # first index with cum >= target
        if k > 0 and abs(cum[k - 1] - target) <= abs(cum[min(k, len(cum) - 1)] - target):
            k -= 1
        cut = min(max(k + 1, start + 1), len(order) - (m - j))  # runs stay non-empty
        bounds.append(cut)
        start = cut
    edges = [0, *bounds, len(order)]
    return [order[a:b] for a, b in pairwise(edges)]


def guillotine_partition(
    points: np.ndarray, weights: list[flint.fmpq], counts: tuple[int, ...]
) -> CellPartition:
    """Cells of ``[0,1]^d``, cut ``counts[k]`` times along axis ``k`` (fewer where a group has
    fewer atoms), with every cell's volume exactly the weight of its atoms.

    Parameters
    ----------
    points : (n, d) float64 array (heuristic: sorting only)
    weights : n exact positive weights summing to 1
    counts : number of parts per axis

    Guarantee: exact (the cells partition [0,1]^d; volume = sum of the exact weights).
    """
    n, d = points.shape
    wf = np.array([float(x) for x in weights])
    cells: list[Cell] = []

    def build(k: int, group: list[int], lo: list, hi: list, mass: flint.fmpq) -> Any:
        if k == d:
            cells.append(Cell(tuple(lo), tuple(hi), tuple(group)))
            return len(cells) - 1
        order = sorted(group, key=lambda i: (points[i, k], i))
        runs: list[list[int]] = []
        for run in _chunks(order, wf, min(counts[k], len(group))):
            if runs and (not any(weights[i] for i in run) or not any(weights[i] for i in runs[-1])):
                runs[-1] = runs[-1] + run  # atoms of weight 0 join a neighbour: volumes stay > 0
            else:
                runs.append(run)
        if len(runs) == 1:
            return build(k + 1, group, lo, hi, mass)
        side, edge, cuts, parts = hi[k] - lo[k], lo[k], [], []
        for j, run in enumerate(runs):
            m = sum((weights[i] for i in run), _ZERO)
            nxt = hi[k] if j == len(runs) - 1 else edge + side * m / mass
            sub_lo, sub_hi = list(lo), list(hi)
            sub_lo[k], sub_hi[k] = edge, nxt
            parts.append(build(k + 1, run, sub_lo, sub_hi, m))
            if j < len(runs) - 1:
                cuts.append(nxt)
            edge = nxt
        return {"axis": k, "cuts": cuts, "parts": parts}

    tree = build(0, list(range(n)), [_ZERO] * d, [_ONE] * d, _ONE)
    return CellPartition(tuple(cells), tree)


def source_boxes(
    partition: CellPartition, points: np.ndarray
) -> list[tuple[np.ndarray, np.ndarray]]:
    """The cells seen in the source space (theorem F's C_ij, one per leaf, for plots): the same
    tree, each split placed halfway between the last atom of a part and the first of the next
    along the axis, inside the atoms' bounding box (widened by 5%).

    Guarantee: none (plotting aid, float64); cell i holds exactly the atoms of ``cells[i]``
    unless atoms tie on a split coordinate (then they lie on the shared face).
    """
    lo, hi = points.min(axis=0), points.max(axis=0)
    pad = 0.05 * np.maximum(hi - lo, 1e-9)
    out: list[tuple[np.ndarray, np.ndarray] | None] = [None] * len(partition.cells)

    def units(node: Any) -> list[int]:
        if isinstance(node, int):
            return list(partition.cells[node].units)
        return [u for part in node["parts"] for u in units(part)]

    def walk(node: Any, a: np.ndarray, b: np.ndarray) -> None:
        if isinstance(node, int):
            out[node] = (a, b)
            return
        k, edge = node["axis"], a[node["axis"]]
        parts = node["parts"]
        for j, part in enumerate(parts):
            if j + 1 < len(parts):
                top = max(points[u, k] for u in units(part))
                nxt = (top + min(points[u, k] for u in units(parts[j + 1]))) / 2
            else:
                nxt = b[k]
            sub_a, sub_b = a.copy(), b.copy()
            sub_a[k], sub_b[k] = edge, nxt
            walk(part, sub_a, sub_b)
            edge = nxt

    walk(partition.tree, lo - pad, hi + pad)
    return out  # type: ignore[return-value]
