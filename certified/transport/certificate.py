"""Certificates of kind ``wasserstein`` (producer side; format: ``proofs/wasserstein.md``)."""

from __future__ import annotations

from typing import Any

from certified.certificates import exact_number
from certified.transport.wasserstein import WassersteinEnclosure

__all__ = ["wasserstein_certificate"]


def wasserstein_certificate(enclosure: WassersteinEnclosure) -> dict[str, Any]:
    """The ``wasserstein`` v1 certificate of an enclosure: the two measures and q (instance),
    the four bounds (claim), the coupling and the potentials (hints).

    Guarantee: none by itself (the checker decides); every number is written exactly.
    """
    e = enclosure
    return {
        "kind": "wasserstein",
        "version": 1,
        "instance": {"mu": e.mu.to_json(), "nu": e.nu.to_json(), "q": exact_number(e.q)},
        "claim": {
            "lower_q": exact_number(e.lower_q),
            "upper_q": exact_number(e.upper_q),
            "lower": exact_number(e.lower),
            "upper": exact_number(e.upper),
        },
        "hints": {
            "coupling": [[i, j, exact_number(w)] for i, j, w in e.coupling],
            "phi": [exact_number(v) for v in e.phi_float.tolist()],
            "psi": [exact_number(v) for v in e.psi_float.tolist()],
        },
    }
