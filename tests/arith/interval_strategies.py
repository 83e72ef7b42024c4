"""Hypothesis strategies for float64 intervals, biased towards the corner cases of rounding.

Endpoints come from three sources mixed with ``one_of``: a catalogue of corner values
(signed zeros, subnormals, the smallest normal, ``1 +- ulp``, exponents near overflow,
thresholds of ``exp``), hypothesis' own ``floats`` (already biased to edges), and a
log-uniform draw over the whole binary exponent range, so that 1e-300 and 1e300 are as likely
as 1.  Intervals are pairs, points, one-ulp intervals, intervals straddling 0 and very wide
intervals.  Domain restrictions are built in (``min_value``/``max_value``) rather than
filtered, so that almost no draw is rejected.
"""

from __future__ import annotations

import math
import sys

import numpy as np
from hypothesis import strategies as st
from reference import exact, exact_midpoint

__all__ = [
    "CORNER_MAGNITUDES",
    "DBL_MAX",
    "LOG_DBL_MAX",
    "MIN_NORMAL",
    "TINY",
    "doubles",
    "interval_arrays",
    "intervals",
    "nonzero_intervals",
    "random_inside",
    "sample_points",
    "seeds",
]

DBL_MAX = sys.float_info.max
MIN_NORMAL = sys.float_info.min  # 2**-1022
TINY = 5e-324  # smallest subnormal, 2**-1074
LOG_DBL_MAX = 709.782712893384  # the double nearest log(DBL_MAX) (just below it)

CORNER_MAGNITUDES: tuple[float, ...] = (
    0.0,
    TINY,
    2 * TINY,
    MIN_NORMAL - TINY,  # largest subnormal
    2.2e-308,
    MIN_NORMAL,
    1e-300,
    2.0**-53,
    1e-16,
    1e-8,
    0.1,
    0.5,
    math.nextafter(1.0, 0.0),
    1.0,
    math.nextafter(1.0, 2.0),
    2.0,
    3.0,
    20.0,
    36.0,
    LOG_DBL_MAX,
    710.0,
    745.0,
    746.0,
    1e15,
    2.0**53,
    1e300,
    1.7e308,
    DBL_MAX,
)


def _clamp(x: float, min_value: float, max_value: float) -> float:
    return min(max(x, min_value), max_value)


def doubles(min_value: float = -DBL_MAX, max_value: float = DBL_MAX) -> st.SearchStrategy[float]:
    """Finite doubles in ``[min_value, max_value]``, biased to corner values and exponents."""
    corners = {
        min_value,
        max_value,
        math.nextafter(min_value, max_value),
        math.nextafter(max_value, min_value),
    }
    for magnitude in CORNER_MAGNITUDES:
        for value in (magnitude, -magnitude):
            if min_value <= value <= max_value:
                corners.add(value)
    log_uniform = st.builds(
        lambda sign, mantissa, exponent: _clamp(
            sign * math.ldexp(mantissa, exponent), min_value, max_value
        ),
        st.sampled_from((1.0, -1.0)),
        st.floats(1.0, 2.0, exclude_max=True),
        st.integers(-1074, 1023),
    )
    parts = [
        st.sampled_from(sorted(corners)),
        st.floats(min_value, max_value, allow_nan=False, allow_infinity=False),
        log_uniform,
    ]
    if min_value <= 0.0 <= max_value:
        parts.append(st.just(-0.0))
    return st.one_of(parts)


def intervals(
    min_value: float = -DBL_MAX, max_value: float = DBL_MAX
) -> st.SearchStrategy[tuple[float, float]]:
    """``(lo, hi)`` with ``min_value <= lo <= hi <= max_value``, biased to corner cases."""
    d = doubles(min_value, max_value)
    parts = [
        st.tuples(d, d).map(lambda p: (min(p), max(p))),
        d.map(lambda x: (x, x)),
        d.map(lambda x: (x, min(math.nextafter(x, math.inf), max_value))),
        st.sampled_from(
            [
                (min_value, max_value),
                (
                    _clamp(-1e300, min_value, max_value),
                    _clamp(1e300, min_value, max_value),
                ),
            ]
        ),
    ]
    if min_value < 0.0 < max_value:
        parts.append(st.tuples(doubles(min_value, 0.0), doubles(0.0, max_value)))
    return st.one_of(parts)


def nonzero_intervals(
    min_magnitude: float = TINY,
) -> st.SearchStrategy[tuple[float, float]]:
    """Intervals not containing 0 (divisors, negative powers), of either sign."""
    positive = intervals(min_magnitude, DBL_MAX)
    return st.one_of(positive, positive.map(lambda p: (-p[1], -p[0])))


@st.composite
def interval_arrays(
    draw: st.DrawFn,
    shape: tuple[int, ...],
    elements: st.SearchStrategy[tuple[float, float]] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Arrays ``(lo, hi)`` of the given shape whose entries are drawn from ``elements``."""
    elements = intervals() if elements is None else elements
    n = math.prod(shape)
    pairs = draw(st.lists(elements, min_size=n, max_size=n))
    lo = np.array([p[0] for p in pairs], dtype=np.float64).reshape(shape)
    hi = np.array([p[1] for p in pairs], dtype=np.float64).reshape(shape)
    return lo, hi


def seeds() -> st.SearchStrategy[int]:
    """Seeds for the numpy generator that picks random points inside intervals."""
    return st.integers(0, 2**32 - 1)


def _ordered(x: np.ndarray) -> np.ndarray:
    """Map doubles to int64 monotonically (both zeros to 0), so doubles can be counted."""
    bits = np.ascontiguousarray(x, dtype=np.float64).view(np.int64)
    return np.where(bits < 0, -(bits & np.int64(0x7FFFFFFFFFFFFFFF)), bits)


def _unordered(k: np.ndarray) -> np.ndarray:
    sign = np.int64(-0x8000000000000000)
    bits = np.where(k < 0, (-k) | sign, k).astype(np.int64)
    return bits.view(np.float64)


def random_inside(lo: np.ndarray, hi: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A double in ``[lo, hi]`` per entry: uniform over the doubles between (so every
    exponent of a wide interval is reached) or uniform in value, with equal chance."""
    lo = np.asarray(lo, dtype=np.float64)
    hi = np.asarray(hi, dtype=np.float64)
    by_count = _unordered(rng.integers(_ordered(lo), _ordered(hi), endpoint=True))
    u = rng.random(lo.shape)
    by_value = np.clip(lo * (1.0 - u) + hi * u, lo, hi)
    return np.where(rng.random(lo.shape) < 0.5, by_count, by_value).reshape(lo.shape)


def sample_points(
    lo: np.ndarray, hi: np.ndarray, rng: np.random.Generator, n_random: int = 2
) -> list[np.ndarray]:
    """Points inside ``[lo, hi]`` entrywise, as object arrays of exact ``fmpq``.

    Both endpoints, the rounded midpoint, a random mix of the two endpoints (the extremes of
    multilinear functions such as matrix products sit at such corners), the exact midpoint (a
    dyadic rational, in general not a double, strictly inside when ``lo < hi``) and
    ``n_random`` random doubles.
    """
    lo = np.asarray(lo, dtype=np.float64)
    hi = np.asarray(hi, dtype=np.float64)
    to_exact = np.frompyfunc(exact, 1, 1)
    floats = [
        lo,
        hi,
        np.clip(lo / 2 + hi / 2, lo, hi),
        np.where(rng.random(lo.shape) < 0.5, lo, hi),
    ]
    floats += [random_inside(lo, hi, rng) for _ in range(n_random)]
    points = [np.asarray(to_exact(f), dtype=object).reshape(lo.shape) for f in floats]
    points.append(
        np.asarray(np.frompyfunc(exact_midpoint, 2, 1)(lo, hi), dtype=object).reshape(lo.shape)
    )
    return points
