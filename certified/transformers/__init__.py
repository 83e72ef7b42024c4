"""Transformers as flow maps on the sphere (theorems.md §1.3-1.4, §2, §8): attention particle
systems as expression fields of the flow engine, their closed forms, and clustering verdicts.

``parse_instance`` / ``read_instance`` read an instance (tokens or measures, and a piecewise
constant schedule theta(t)); ``transformer_flow`` certifies the flow of the coupled n x d
state; ``residual_layers`` the discrete layers beside it; ``hemisphere_cluster`` the clustering
verdict of the hemisphere theorem. Deep transformers (issue 20): ``parse_params`` /
``gaussian_pde_flow`` the Gaussian Transformer PDE, ``depth_gap_table`` the depth-to-ODE gap.
"""

from certified.transformers.depth import depth_gap_table
from certified.transformers.flow import residual_layers, rk4, token_enclosures, transformer_flow
from certified.transformers.gaussian_pde import (
    BlowUpError,
    GaussianPDE,
    blowup_time,
    gaussian_pde_flow,
    moments_at,
    parse_params,
)
from certified.transformers.instance import (
    TransformerInstance,
    TransformerPiece,
    parse_instance,
    read_instance,
)

__all__ = [
    "BlowUpError",
    "GaussianPDE",
    "TransformerInstance",
    "TransformerPiece",
    "blowup_time",
    "depth_gap_table",
    "gaussian_pde_flow",
    "moments_at",
    "parse_instance",
    "parse_params",
    "read_instance",
    "residual_layers",
    "rk4",
    "token_enclosures",
    "transformer_flow",
]
