"""certified: rigorous numerics for neural ODEs and transformers as flow maps."""

__version__ = "0.1.0"

from certified.arith import Interval, Tri, TriArray, interval
from certified.errors import (
    CertifiedError,
    DomainError,
    EmptyIntervalError,
    InputError,
    NonFiniteError,
    NumberFormatError,
    PrecisionError,
    RangeOverflowError,
    ShapeError,
)

__all__ = [
    "__version__",
    "Interval",
    "Tri",
    "TriArray",
    "interval",
    "CertifiedError",
    "DomainError",
    "EmptyIntervalError",
    "InputError",
    "NonFiniteError",
    "NumberFormatError",
    "PrecisionError",
    "RangeOverflowError",
    "ShapeError",
]
