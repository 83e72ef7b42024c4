"""Certified optimal transport: Wasserstein distances between discrete measures (two-sided
enclosures from a primal coupling and feasible dual potentials) and between Gaussians.

Theory: ``../shared/theorems.md`` section 6; lemmas: ``proofs/bounds.md`` (section
"Wasserstein distances"); certificates: ``proofs/wasserstein.md``.
"""

from __future__ import annotations

from certified.transport.certificate import wasserstein_certificate
from certified.transport.gaussian import GaussianW2Enclosure, gaussian_w2
from certified.transport.measure import Measure
from certified.transport.wasserstein import WassersteinEnclosure, wasserstein

__all__ = [
    "GaussianW2Enclosure",
    "Measure",
    "WassersteinEnclosure",
    "gaussian_w2",
    "wasserstein",
    "wasserstein_certificate",
]
