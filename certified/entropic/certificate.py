"""Certificates of kind ``entropic`` (producer side; format: ``proofs/entropic.md``)."""

from __future__ import annotations

from typing import Any

from certified.certificates import exact_number
from certified.entropic.entropic import EntropicBounds, SinkhornDivergenceBounds

__all__ = ["entropic_certificate"]


def _potentials(e: EntropicBounds) -> dict[str, Any]:
    return {
        "f": [exact_number(v) for v in e.f.tolist()],
        "g": [exact_number(v) for v in e.g.tolist()],
        "scale": exact_number(e.scale),
    }


def entropic_certificate(bounds: EntropicBounds | SinkhornDivergenceBounds) -> dict[str, Any]:
    """The ``entropic`` v1 certificate of bounds on ``OT_γ`` or on ``S_γ``: the measures, γ, q
    and the quantity, ``"ot"`` or ``"divergence"`` (instance), the two bounds (claim), the
    potentials and the scale of each problem (hints; three for the divergence: μν, μμ, νν).

    Guarantee: none by itself (the checker decides); every number is written exactly.
    """
    divergence = isinstance(bounds, SinkhornDivergenceBounds)
    parts = bounds.parts if divergence else (bounds,)
    e = parts[0]
    return {
        "kind": "entropic",
        "version": 1,
        "instance": {
            "mu": e.mu.to_json(),
            "nu": e.nu.to_json(),
            "gamma": exact_number(e.gamma),
            "q": exact_number(e.q),
            "quantity": "divergence" if divergence else "ot",
        },
        "claim": {"lower": exact_number(bounds.lower), "upper": exact_number(bounds.upper)},
        "hints": {"potentials": [_potentials(p) for p in parts]},
    }
