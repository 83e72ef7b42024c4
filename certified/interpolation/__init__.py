"""Interpolation of point pairs by ReLU neural ODEs (theorems.md section 3).

* :func:`construct_interpolation` -- exact laminar constructions: A (any d >= 2,
  ``2⌈N/p⌉ − 1`` switches) and C (d > N, ``⌈N/p⌉ − 1`` switches); returns an
  :class:`Interpolation`.
* :func:`verify_interpolation` -- the verdict for any schedule: exact rational equality for
  laminar schedules, else a certified upper bound of the error; an
  :class:`InterpolationVerdict`.
* :func:`export_float64` -- the construction with double parameters and the certified error of
  their flow.
* :func:`interpolation_certificate` -- certificate of kind ``"interpolation"`` (checked by
  ``certified check``).
"""

from certified.interpolation.construct import (
    DuplicatePointError,
    Interpolation,
    OrderIncompatibleError,
    construct_interpolation,
    formula_switches,
)
from certified.interpolation.verify import (
    InterpolationVerdict,
    export_float64,
    verify_interpolation,
)

__all__ = [
    "DuplicatePointError",
    "Interpolation",
    "InterpolationVerdict",
    "OrderIncompatibleError",
    "construct_interpolation",
    "export_float64",
    "formula_switches",
    "interpolation_certificate",
    "verify_interpolation",
]


def __getattr__(name: str):
    if name == "interpolation_certificate":
        from certified.interpolation.certificate import interpolation_certificate

        return interpolation_certificate
    raise AttributeError(name)
