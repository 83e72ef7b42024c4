"""Import-time check of the floating-point environment the interval layer relies on.

The outward rounding of :mod:`certified.arith._kernels` is sound under IEEE 754 binary64
round-to-nearest-even with gradual underflow and without contraction of ``a*b + c`` into a
fused multiply-add (``proofs/bounds.md#pred-succ``). Each property is probed at run time on
values read from arrays, so no compiler can fold the probes into constants, both through
numpy and through the compiled kernels.
"""

from __future__ import annotations

import numpy as np

from certified.errors import FPUStateError

__all__ = ["check_fpu_state"]

_TINY = 2.0**-1022  # smallest normal
_SUB = 2.0**-1074  # smallest subnormal


def _expectations() -> list[tuple[str, float, float]]:
    x = np.array([1.0, -1.0, _TINY, _SUB, 1.0 + 2.0**-30])
    y = np.array([3 * 2.0**-54, -3 * 2.0**-54, 2.0**-54, 1.0 - 2.0**-30])
    return [
        # 1 + 3*2^-54 lies above the midpoint 1 + 2^-53: RN gives 1 + 2^-52, RD/RZ give 1
        ("round-to-nearest (upward case)", float(x[0] + y[0]), 1.0 + 2.0**-52),
        ("round-to-nearest (downward case)", float(x[1] + y[1]), -(1.0 + 2.0**-52)),
        # 1 + 2^-54 lies below the midpoint: RN gives 1, RU gives 1 + 2^-52
        ("round-to-nearest (tie-free)", float(x[0] + y[2]), 1.0),
        ("gradual underflow (no flush-to-zero)", float(x[2] / 2.0), 2.0**-1023),
        ("subnormal operands (no denormals-are-zero)", float(x[3] * 2.0), 2.0**-1073),
        # (1 + 2^-30)(1 - 2^-30) = 1 - 2^-60 rounds to 1; a fused a*b - 1 would give -2^-60
        ("no fused multiply-add contraction", float(x[4] * y[3] - 1.0), 0.0),
    ]


def check_fpu_state() -> None:
    """Raise :class:`FPUStateError` unless numpy and the compiled kernels round to nearest
    with gradual underflow and no FMA contraction.

    Guarantee: none (a precondition check); every interval kernel relies on it.
    """
    for name, got, want in _expectations():
        if got != want:
            raise FPUStateError(
                f"floating-point environment: {name} check failed (got {got!r}, expected "
                f"{want!r}); restore round-to-nearest without flush-to-zero before using certified"
            )
    from certified.arith import _kernels

    a = np.array([1.0, 1.0 + 2.0**-30, _TINY, _SUB])
    b = np.array([3 * 2.0**-54, 1.0 - 2.0**-30])
    c = np.array([-1.0])
    s, fused, half, double = _kernels.fpu_probe(a, b, c)
    checks = [
        ("compiled round-to-nearest", s, 1.0 + 2.0**-52),
        ("compiled no fused multiply-add contraction", fused, 0.0),
        ("compiled gradual underflow", half, 2.0**-1023),
        ("compiled subnormal operands", double, 2.0**-1073),
    ]
    for name, got, want in checks:
        if got != want:
            raise FPUStateError(
                f"floating-point environment: {name} check failed (got {got!r}, expected "
                f"{want!r}); the compiled interval kernels would not be sound"
            )
