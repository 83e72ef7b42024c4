"""Exception hierarchy of ``certified``.

Every error the package raises on purpose is a :class:`CertifiedError`. Bad input raises a
subclass of :class:`InputError` (also a :class:`ValueError`) whose message names the field
and says what to change.
"""

from __future__ import annotations

__all__ = [
    "CertifiedError",
    "InputError",
    "NonFiniteError",
    "EmptyIntervalError",
    "ShapeError",
    "PrecisionError",
    "NumberFormatError",
    "DomainError",
    "RangeOverflowError",
    "FPUStateError",
    "MissingDependencyError",
    "NoCertificateError",
]


class CertifiedError(Exception):
    """Base class of every error raised on purpose by ``certified``."""


class InputError(CertifiedError, ValueError):
    """Bad input: the message names the offending field and the fix."""


class NonFiniteError(InputError):
    """A NaN or infinite number where a finite one is required."""


class EmptyIntervalError(InputError):
    """An interval whose lower endpoint exceeds its upper endpoint."""


class ShapeError(InputError):
    """Array shapes that do not match or do not broadcast."""


class PrecisionError(InputError):
    """A working precision (in bits) outside the supported range."""


class NumberFormatError(InputError):
    """A number string that is not an integer, a decimal, ``"p/q"`` or a dyadic."""


class DomainError(CertifiedError, ValueError):
    """An argument outside a function's domain (log of a non-positive number, division by an
    interval containing 0, ...)."""


class RangeOverflowError(CertifiedError, ArithmeticError):
    """A rigorous result does not fit in the float64 range; use the ball layer instead."""


class FPUStateError(CertifiedError, RuntimeError):
    """The floating-point unit is not in round-to-nearest with gradual underflow."""


class MissingDependencyError(CertifiedError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""


class NoCertificateError(CertifiedError):
    """No certificate the checker accepts could be produced; the message says why and what to
    change. ``result``: the computation's result when there is one (e.g. the flow's
    ``FlowEnclosure``: its enclosures hold when its status is SUCCESS, only the certificate is
    missing); ``retry``: whether smaller steps or chunks may help."""

    def __init__(self, message: str, result: object = None, retry: bool = False) -> None:
        super().__init__(message)
        self.result, self.retry = result, retry
