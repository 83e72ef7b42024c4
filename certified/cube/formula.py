"""The switch count of theorem F (theorems.md §3, row F) and the validation of its parameters.

.. math::

    L = \\lceil 2d/p \\rceil + \\left\\lceil \\frac{(3^{1+d/q}\\sqrt d/\\varepsilon)^{e}}{p-d+1}
        \\right\\rceil - 1, \\qquad e = \\frac{d}{1 + d/q - d}

It divides by ``p − d + 1``, so it needs ``p >= d`` (theorems.md §9: the slide's "any p >= 1"
is an erratum), and ``e > 0`` needs ``q < d/(d−1)`` (any ``q >= 1`` when ``d = 1``, where
``e = q``).
"""

from __future__ import annotations

import math
from typing import Any

import flint

from certified.arith.ball import precision
from certified.arith.exact import fmpq_to_str, to_fmpq
from certified.errors import DomainError, InputError

__all__ = ["MAX_FORMULA_DIGITS", "check_parameters", "formula_switches"]

MAX_FORMULA_DIGITS = 10_000  # a larger L is reported as None (its digits are not worth printing)


def check_parameters(
    d: int, width: Any, epsilon: Any, q: Any
) -> tuple[int, flint.fmpq, flint.fmpq]:
    """Validate ``(p, ε, q)`` for theorem F in dimension ``d``; return them exactly.

    Raises
    ------
    InputError
        ``p`` not an integer, ``ε <= 0``, ``q`` not a number.
    DomainError
        ``p < d`` (the formula divides by ``p − d + 1``: the erratum of theorems.md §9), or ``q``
        outside ``[1, d/(d−1))``.

    Guarantee: exact.
    """
    if isinstance(width, bool) or not isinstance(width, int):
        raise InputError(f"width: expected an integer p >= d, got {width!r}")
    if width < d:
        raise DomainError(
            f"width: p = {width} < d = {d}: theorem F's switch count divides by p - d + 1, so it "
            "needs p >= d (the statement's 'any p >= 1' is an erratum, theorems.md section 9); "
            f"give --width {d} or more"
        )
    eps = to_fmpq(epsilon, "epsilon")
    if eps <= 0:
        raise InputError(f"epsilon: {fmpq_to_str(eps)} is not positive; give epsilon > 0")
    qq = to_fmpq(q, "q")
    if qq < 1 or (d > 1 and qq * (d - 1) >= d):
        upper = "infinity" if d == 1 else f"{d}/{d - 1}"
        raise DomainError(
            f"q: {fmpq_to_str(qq)} is outside [1, {upper}) for d = {d}: theorem F bounds W_q "
            "only for 1 <= q < d/(d-1)"
        )
    return width, eps, qq


def _ceil_ratio(d: int, p: int, eps: flint.fmpq, q: flint.fmpq, bits: int) -> int | None:
    """⌈(3^{1+d/q}√d/ε)^e/(p−d+1)⌉ from an arb enclosure, or None if it does not decide."""
    with precision(bits):
        e = flint.arb(flint.fmpq(d)) / (1 + flint.fmpq(d) / q - d)
        base = flint.arb(3) ** (1 + flint.arb(flint.fmpq(d) / q)) * flint.arb(d).sqrt()
        x = (base / flint.arb(eps)) ** e / (p - d + 1)
        lo, hi = x.lower(), x.upper()
        if not (x.is_finite() and lo.floor() == hi.floor()) or lo.floor() == lo:
            return None
        return int(hi.floor().unique_fmpz()) + 1


def _rational_ratio(d: int, p: int, eps: flint.fmpq, q: flint.fmpq, e: flint.fmpq) -> Any:
    """The ratio exactly when it is rational by inspection (e and (1 + d/q) e integers, and
    e even or d a square: e.g. d = 2, q = 1 gives 729 * 2 / eps^2), else None."""
    t, r = (1 + flint.fmpq(d) / q) * e, math.isqrt(d)
    if e.q != 1 or t.q != 1 or (e.p % 2 and r * r != d) or e.p > 4 * MAX_FORMULA_DIGITS:
        return None
    root = flint.fmpq(d) ** (int(e.p) // 2) if e.p % 2 == 0 else flint.fmpq(r) ** int(e.p)
    return flint.fmpq(3) ** int(t.p) * root / eps ** int(e.p) / (p - d + 1)


def formula_switches(d: int, p: int, epsilon: Any, q: Any) -> int | None:
    """The switch count L of theorem F, or None when it has more than
    :data:`MAX_FORMULA_DIGITS` digits (q close to d/(d−1)).

    Raises
    ------
    InputError, DomainError
        As :func:`check_parameters`; or the ceiling cannot be decided (an exact integer value
        of the irrational-looking expression, never met in practice).

    Guarantee: exact (the ceiling is read off a certified enclosure that excludes integers;
    proof: proofs/bounds.md#cube-formula).
    """
    p, eps, q = check_parameters(d, p, epsilon, q)
    e_q = flint.fmpq(d) / (1 + flint.fmpq(d) / q - d)
    if (x := _rational_ratio(d, p, eps, q, e_q)) is not None:
        return -(-2 * d // p) + int(-((-x.p) // x.q)) - 1
    e = d / (1 + d / float(q) - d)
    log2 = e * (math.log2(3) * (1 + d / float(q)) + 0.5 * math.log2(d) - math.log2(float(eps)))
    if log2 > MAX_FORMULA_DIGITS * math.log2(10):
        return None
    bits = 64 + max(0, int(log2))
    while bits <= (1 << 16):
        if (k := _ceil_ratio(d, p, eps, q, bits)) is not None:
            return -(-2 * d // p) + k - 1
        bits *= 2
    raise DomainError(
        f"epsilon, q: the formula's ceiling is not decided at {bits // 2} bits (its value may "
        "be an exact integer); perturb epsilon"
    )
