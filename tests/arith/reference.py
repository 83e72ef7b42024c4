"""Exact and high-precision references for the float64 interval containment tests.

Two kinds of reference, following the Arb test suite:

* rational-exact operations (+ - * / sqr pown abs min max, sums, dot, matmul) are evaluated in
  ``flint.fmpq`` at exact points: every double is a dyadic rational and enters through
  ``float.as_integer_ratio``;
* transcendental functions are evaluated as ``flint.arb`` balls at 256 bits at exact dyadic
  points, and an enclosure ``[L, H]`` passes only if ``ball.lower() >= L`` and
  ``ball.upper() <= H`` with exact arb comparisons.

A 256-bit ball cannot decide every case: ``exp(5e-324) = 1 + 2**-1074`` is 2**-1074 away
from the double 1, and ``tanh(1e308)`` differs from 1 by about ``exp(-2e308)``.  Two sound
devices handle these, neither of which can hide a miss:

* the precision is raised (256 -> 1024 -> 4096 -> 16384 bits) while the answer is undecided;
  the truth lies in every ball, so any one ball inside ``[L, H]`` proves containment;
* each function has an elementary range at the point (``tanh(x) in [0, 1]`` for ``x >= 0``,
  ``softplus(x) in [max(x, 0), max(x, 0) + 1]``, ...); the truth lies in the intersection of
  the ball with that range, so it suffices that the intersection lies inside ``[L, H]``.

A non-finite ball "contains" everything, so :class:`NonFiniteReferenceError` (an
``AssertionError``) is raised instead of ever passing on one.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator, Sequence

import flint
from flint import arb, fmpq, fmpz

__all__ = [
    "DBL_MAX",
    "OVERFLOW_SLACK",
    "REF_PREC",
    "UNARY",
    "NonFiniteReferenceError",
    "arb_exact",
    "arb_exp",
    "arb_precision",
    "ball_overflows_double",
    "exact",
    "exact_midpoint",
    "logsumexp_ball",
    "logsumexp_encloses",
    "overflows_double",
    "softmax_encloses",
    "unary_encloses",
]

DBL_MAX = sys.float_info.max
REF_PREC = 256
# Escalation ladder used only while a 256-bit ball leaves the answer undecided.
_PRECISIONS = (REF_PREC, 1024, 4096, 16384)
# Overflow is "justified" when some exact value exceeds this.  A sound enclosure must round
# its upper endpoint outward, so a value a few ulps below DBL_MAX may legitimately overflow;
# 2**-40 relative (about 4096 ulps) is far more slack than any one-ulp or Rump-style widening
# or any proved transcendental kernel needs.
OVERFLOW_SLACK = fmpq(1) - fmpq(1, 2**40)


class NonFiniteReferenceError(AssertionError):
    """A reference ball was NaN or infinite: it proves nothing, so the test must fail."""


@contextlib.contextmanager
def arb_precision(bits: int) -> Iterator[None]:
    """Set ``flint.ctx.prec`` to ``bits`` and restore the previous value however we leave."""
    saved = flint.ctx.prec
    flint.ctx.prec = bits
    try:
        yield
    finally:
        flint.ctx.prec = saved


def exact(x: float) -> fmpq:
    """The double ``x`` as an exact rational (``-0.0`` becomes 0)."""
    num, den = float(x).as_integer_ratio()
    return fmpq(num, den)


def exact_midpoint(lo: float, hi: float) -> fmpq:
    """The exact midpoint of ``[lo, hi]``: a dyadic rational, in general not a double."""
    return (exact(lo) + exact(hi)) / 2


def arb_exact(q: fmpq) -> arb:
    """The dyadic rational ``q`` as an exact arb (no rounding at any precision)."""
    den = int(q.q)
    if den & (den - 1):
        raise ValueError(f"{q} is not dyadic; references are only taken at dyadic points")
    return arb((q.p, -(den.bit_length() - 1)))


def _magnitude_bits(x: arb) -> int:
    """An upper bound on log2 |x| for an exact arb ``x`` (0 for |x| < 1)."""
    man, exp = x.mid().man_exp()
    return max(0, int(fmpz(abs(man)).bit_length()) + int(exp))


def arb_exp(x: arb) -> arb:
    """``exp(x)`` for an exact arb ``x`` of any double magnitude, at ``ctx.prec`` relative bits.

    arb's own ``exp`` returns ``[+/- inf]`` for ``x = 1e308`` and a ball around 0 for
    ``x = -1e308``.  Here ``x = n log 2 + r`` with ``|r| <= 1`` (reduction at enough extra bits
    to absorb ``|n|``), and ``exp(x) = 2**n exp(r)`` with ``2**n`` exact (fmpz exponent).
    """
    if abs(x) < 512:
        return x.exp()
    prec = flint.ctx.prec
    with arb_precision(prec + _magnitude_bits(x) + 64):
        ln2 = arb.const_log2()
        n = (x / ln2).mid().floor().unique_fmpz()
        r = x - arb(n) * ln2
        value = r.exp() * arb((1, n))
    return +value


def _sign(x: arb) -> int:
    return -1 if x < 0 else 1


def _expm1(x: arb) -> arb:
    return x.expm1() if abs(x) < 1 else arb_exp(x) - 1


def _tanh(x: arb) -> arb:
    if abs(x) < 1:
        return x.tanh()
    # 1 - tanh|x| = 2t/(1+t) with t = exp(-2|x|): no cancellation, any magnitude.
    t = arb_exp(-2 * abs(x))
    return _sign(x) * (1 - t) / (1 + t)


def _sigmoid(x: arb) -> arb:
    if x >= 0:
        return 1 / (1 + arb_exp(-x))
    t = arb_exp(x)
    return t / (1 + t)


def _softplus(x: arb) -> arb:
    if x > 0:
        return x + arb_exp(-x).log1p()
    return arb_exp(x).log1p()


_ZERO, _HALF, _ONE = arb(0), arb(0.5), arb(1)


def _no_range(x: arb) -> tuple[arb | None, arb | None]:
    return None, None


def _exp_range(x: arb) -> tuple[arb | None, arb | None]:
    return (_ZERO, _ONE) if x <= 0 else (_ONE, None)


def _expm1_range(x: arb) -> tuple[arb | None, arb | None]:
    return (-_ONE, _ZERO) if x <= 0 else (_ZERO, None)


def _tanh_range(x: arb) -> tuple[arb | None, arb | None]:
    return (-_ONE, _ZERO) if x <= 0 else (_ZERO, _ONE)


def _sigmoid_range(x: arb) -> tuple[arb | None, arb | None]:
    return (_ZERO, _HALF) if x <= 0 else (_HALF, _ONE)


def _softplus_range(x: arb) -> tuple[arb | None, arb | None]:
    base = x if x > 0 else _ZERO
    return base, base + 1


def _sqrt_range(x: arb) -> tuple[arb | None, arb | None]:
    return _ZERO, None


# name -> (reference on an exact arb, elementary range of the function at that point)
UNARY: dict[str, tuple[Callable[[arb], arb], Callable[[arb], tuple[arb | None, arb | None]]]] = {
    "sqrt": (lambda x: x.sqrt(), _sqrt_range),
    "exp": (arb_exp, _exp_range),
    "expm1": (_expm1, _expm1_range),
    "log": (lambda x: x.log(), _no_range),
    "log1p": (lambda x: x.log1p(), _no_range),
    "tanh": (_tanh, _tanh_range),
    "sigmoid": (_sigmoid, _sigmoid_range),
    "softplus": (_softplus, _softplus_range),
}


def _ball_encloses(
    compute: Callable[[], tuple[arb, tuple[arb | None, arb | None]]],
    lo: float,
    hi: float,
) -> bool:
    """Whether the truth, known to lie in ``compute()``'s ball and range, lies in ``[lo, hi]``.

    Returns False only when the truth certainly lies outside ``[lo, hi]`` or the question is
    still undecided at the top of the precision ladder (both count as a miss).
    """
    L, H = arb(lo), arb(hi)
    for prec in _PRECISIONS:
        with arb_precision(prec):
            ball, (floor, ceiling) = compute()
            if not ball.is_finite():
                raise NonFiniteReferenceError(f"reference ball {ball} at {prec} bits is not finite")
            lower, upper = ball.lower(), ball.upper()
            if floor is not None and lower < floor:
                lower = floor
            if ceiling is not None and upper > ceiling:
                upper = ceiling
            if lower >= L and upper <= H:
                return True
            if upper < L or lower > H:
                return False
    return False


def unary_encloses(name: str, x: fmpq, lo: float, hi: float) -> bool:
    """Whether ``[lo, hi]`` contains ``name(x)`` for the exact dyadic point ``x``."""
    function, elementary_range = UNARY[name]
    point = arb_exact(x)
    return _ball_encloses(lambda: (function(point), elementary_range(point)), lo, hi)


def _shifted_exps(xs: Sequence[fmpq]) -> tuple[fmpq, list[arb]]:
    """``m = max xs`` and the balls ``exp(x_i - m)`` (each ``x_i - m`` is exact)."""
    m = max(xs)
    return m, [arb_exp(arb_exact(x - m)) for x in xs]


def logsumexp_ball(xs: Sequence[fmpq]) -> arb:
    """``log(sum(exp(xs)))`` at exact dyadic points, as ``max + log(sum(exp(x_i - max)))``."""
    m, exps = _shifted_exps(xs)
    return arb_exact(m) + sum(exps[1:], exps[0]).log()


def logsumexp_encloses(xs: Sequence[fmpq], lo: float, hi: float) -> bool:
    """Whether ``[lo, hi]`` contains ``log(sum(exp(xs)))`` (range ``[max, max + n]``)."""

    def compute() -> tuple[arb, tuple[arb | None, arb | None]]:
        top = arb_exact(max(xs))
        return logsumexp_ball(xs), (top, top + len(xs))

    return _ball_encloses(compute, lo, hi)


def softmax_encloses(xs: Sequence[fmpq], i: int, lo: float, hi: float) -> bool:
    """Whether ``[lo, hi]`` contains the ``i``-th entry of ``softmax(xs)`` (range ``[0, 1]``)."""

    def compute() -> tuple[arb, tuple[arb | None, arb | None]]:
        _, exps = _shifted_exps(xs)
        return exps[i] / sum(exps[1:], exps[0]), (_ZERO, _ONE)

    return _ball_encloses(compute, lo, hi)


def overflows_double(value: fmpq) -> bool:
    """Whether ``|value|`` is within ``OVERFLOW_SLACK`` of, or beyond, the largest double."""
    return abs(value) > OVERFLOW_SLACK * exact(DBL_MAX)


def ball_overflows_double(compute: Callable[[], arb]) -> bool:
    """Whether the ball's magnitude may exceed ``OVERFLOW_SLACK * DBL_MAX`` (lenient: an
    undecided ball counts as overflowing, since this only excuses a RangeOverflowError)."""
    with arb_precision(REF_PREC):
        ball = compute()
        if not ball.is_finite():
            raise NonFiniteReferenceError(f"reference ball {ball} is not finite")
        limit = arb_exact(OVERFLOW_SLACK * exact(DBL_MAX))
        return not (abs(ball) < limit)
