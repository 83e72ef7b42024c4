"""Certificates of kind ``transport-to-cube`` (v1, proofs/cube.md), producer side.

Instance: the measure, the width p, ε, q. Claim: the schedule, the bound, the switch count.
Hints: the laminar phases (replayed by the checker as for interpolation certificates) and the
guillotine tree of cells, whose leaves list the atoms (indices into the measure) of each cell.
"""

from __future__ import annotations

from typing import Any

from certified.certificates import exact_number
from certified.cube.construct import CubeTransport
from certified.cube.density_flow import DensityTransport

__all__ = ["cube_certificate", "density_certificate"]


def _tree(node: Any, atoms_of_cell: list[list[int]]) -> Any:
    if isinstance(node, int):
        return atoms_of_cell[node]
    return {
        "axis": node["axis"],
        "cuts": [exact_number(c) for c in node["cuts"]],
        "parts": [_tree(part, atoms_of_cell) for part in node["parts"]],
    }


def cube_certificate(result: CubeTransport) -> dict[str, Any]:
    """The ``transport-to-cube`` v1 certificate of a construction.

    Guarantee: none by itself (the checker decides); every number is written exactly.
    """
    cells = result.partition.cells
    cell_of_unit = {u: c for c, cell in enumerate(cells) for u in cell.units}
    atoms_of_cell: list[list[int]] = [[] for _ in cells]
    for k, u in enumerate(result.unit_of_atom.tolist()):
        atoms_of_cell[cell_of_unit[u]].append(k)
    schedule = result.schedule
    phases = [
        {
            "pieces": list(ph["pieces"]),
            "normal": [exact_number(v) for v in schedule.pieces[ph["pieces"][0]].A[0]],
        }
        for ph in result.interpolation.hints["phases"]
    ]
    return {
        "kind": "transport-to-cube",
        "version": 1,
        "instance": {
            "measure": result.measure.to_json(),
            "width": result.width,
            "epsilon": exact_number(result.epsilon),
            "q": exact_number(result.q),
        },
        "claim": {
            "schedule": schedule.to_json(),
            "bound": exact_number(result.bound),
            "switches": result.switches,
        },
        "hints": {"phases": phases, "cells": _tree(result.partition.tree, atoms_of_cell)},
    }


def _density_tree(node: Any) -> Any:
    if isinstance(node, int):
        return "cell"
    return {
        "axis": node["axis"],
        "cuts": [exact_number(c) for c in node["cuts"]],
        "targets": [exact_number(c) for c in node["targets"]],
        "parts": [_density_tree(part) for part in node["parts"]],
    }


def _nested(masses: Any) -> Any:
    if getattr(masses, "ndim", 0) == 0:
        return exact_number(masses if not hasattr(masses, "item") else masses.item())
    return [_nested(m) for m in masses]


def density_certificate(result: DensityTransport) -> dict[str, Any]:
    """The ``transport-to-cube`` v1 certificate of a density construction (proofs/cube.md §6):
    instance ``{"density": {"grid", "masses"}, ...}``, hints ``{"cells": tree}`` whose inner
    nodes carry source ``cuts`` and target ``targets``, leaves ``"cell"``.

    Guarantee: none by itself (the checker decides); every number is written exactly.
    """
    density = result.density
    return {
        "kind": "transport-to-cube",
        "version": 1,
        "instance": {
            "density": {
                "grid": [[exact_number(v) for v in axis] for axis in density.grid],
                "masses": [_nested(m) for m in density.masses],
            },
            "width": result.width,
            "epsilon": exact_number(result.epsilon),
            "q": exact_number(result.q),
        },
        "claim": {
            "schedule": result.schedule.to_json(),
            "bound": exact_number(result.bound),
            "switches": result.switches,
        },
        "hints": {"cells": _density_tree(result.tree)},
    }
