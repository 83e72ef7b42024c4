"""Moment matching and certified separation of discrete measures (``theorems.md`` section 4).

* :mod:`~certified.moments.measure`: exact discrete measures, canonical forms, moments,
  cumulants;
* :mod:`~certified.moments.tilted`: L_k, G = grad log Z and their Taylor series in ball
  arithmetic, instance checks of the moment-matching identities;
* :mod:`~certified.moments.separation`: certified separation witnesses and their certificates
  (kind ``"separation"``, checked by ``certified.checker``).
"""

from certified.moments.measure import (
    cumulants_from_moments,
    discrete_measure,
    merged_atoms,
    same_measure,
)
from certified.moments.separation import (
    SeparationResult,
    SeparationStatus,
    SeparationWitness,
    separation_witness,
)
from certified.moments.tilted import (
    IdentityCheck,
    check_cumulants,
    check_gradient_identity,
    check_moment_identity,
    log_partition_gradient,
    tilted_moment_series,
    tilted_moments,
)

__all__ = [
    "SeparationResult",
    "SeparationStatus",
    "SeparationWitness",
    "separation_witness",
    "IdentityCheck",
    "check_cumulants",
    "check_gradient_identity",
    "check_moment_identity",
    "cumulants_from_moments",
    "discrete_measure",
    "log_partition_gradient",
    "merged_atoms",
    "same_measure",
    "tilted_moment_series",
    "tilted_moments",
]
