"""Entropic optimal transport and Sinkhorn: certified two-sided bounds (issue 14, item 2).

``entropic_ot`` encloses ``OT_γ(μ, ν)``, ``sinkhorn_divergence`` encloses ``S_γ(μ, ν)``,
``certify_potentials`` turns any dual potentials into bounds, ``sinkhorn_rate`` tests a stated
``C/k`` rate of the Sinkhorn iterates; certificates of kind ``entropic`` (proofs/entropic.md).
"""

from certified.entropic.entropic import (
    EntropicBounds,
    SinkhornDivergenceBounds,
    certify_potentials,
    entropic_ot,
    sinkhorn_divergence,
)

__all__ = [
    "EntropicBounds",
    "SinkhornDivergenceBounds",
    "certify_potentials",
    "entropic_ot",
    "sinkhorn_divergence",
]
