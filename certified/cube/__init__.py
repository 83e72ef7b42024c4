"""Theorem F: transport onto the uniform cube by a ReLU neural ODE, certified for empirical
measures and for piecewise-constant densities on grids of boxes (theorems.md §3, row F;
proofs/cube.md).

:func:`transport_to_cube` builds an exact laminar schedule and guillotine cells of
``[0,1]^d`` whose volumes equal their atoms' weights; :func:`cube_certificate` writes the
``transport-to-cube`` certificate the checker re-verifies (W_q(Φ_T#μ, U) <= bound <= ε);
:func:`density_to_cube` and :func:`density_certificate` do the same for a density
(:class:`BoxDensity`) with axis shears and coordinate scalings (W_2 <= bound <= ε);
:func:`formula_switches` is the theorem's switch count L.
"""

from __future__ import annotations

from certified.cube.cells import Cell, CellPartition, guillotine_partition, source_boxes
from certified.cube.certificate import cube_certificate, density_certificate
from certified.cube.construct import CubeTransport, sup_distance_squared, transport_to_cube
from certified.cube.density import BoxDensity, read_box_density
from certified.cube.density_flow import DensityCell, DensityTransport, density_to_cube, push_points
from certified.cube.formula import check_parameters, formula_switches

__all__ = [
    "BoxDensity",
    "Cell",
    "CellPartition",
    "CubeTransport",
    "DensityCell",
    "DensityTransport",
    "check_parameters",
    "cube_certificate",
    "density_certificate",
    "density_to_cube",
    "formula_switches",
    "guillotine_partition",
    "push_points",
    "read_box_density",
    "source_boxes",
    "sup_distance_squared",
    "transport_to_cube",
]
