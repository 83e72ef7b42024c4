"""Certified optimal transport: Wasserstein distances between discrete measures (two-sided
enclosures from a primal coupling and feasible dual potentials) and between Gaussians.

Theory: ``../shared/theorems.md`` section 6; lemmas: ``proofs/bounds.md`` (section
"Wasserstein distances"); certificates: ``proofs/wasserstein.md``.
"""

from __future__ import annotations

from certified.transport.measure import Measure
from certified.transport.wasserstein import WassersteinEnclosure, wasserstein

__all__ = ["Measure", "WassersteinEnclosure", "wasserstein"]
