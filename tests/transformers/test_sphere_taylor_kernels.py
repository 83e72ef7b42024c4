"""The compiled Cauchy sums of the particle / sphere-attention series
(certified/transformers/sphere_taylor_kernels.py): containment of the exact rational sums of
products of the endpoints' intervals, agreement bit for bit with Interval's product and sum,
broadcasting of a last axis of length 1, overflow reported, and a deliberately broken rounding
caught."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import certified.transformers.sphere_taylor_kernels as sk
from certified.arith.interval import Interval, isum
from certified.errors import RangeOverflowError

finite = st.floats(-1e6, 1e6, allow_nan=False, allow_subnormal=True)


def _buffers(vals, K, R, C):
    a = np.array(vals[: K * R * C * 2], dtype=float).reshape(2, K, R, C)
    return np.minimum(a[0], a[1]), np.maximum(a[0], a[1])


def _exact_range(alo, ahi, blo, bhi, m0, k, r, c, ca, cb):
    """The exact interval of Σ a_m b_{k-m} (each product's exact range, summed exactly)."""
    lo = hi = Fraction(0)
    for m in range(m0, k + 1):
        x = [Fraction(alo[m, r, c if ca else 0]), Fraction(ahi[m, r, c if ca else 0])]
        y = [Fraction(blo[k - m, r, c if cb else 0]), Fraction(bhi[k - m, r, c if cb else 0])]
        p = [u * v for u in x for v in y]
        lo, hi = lo + min(p), hi + max(p)
    return lo, hi


@settings(max_examples=25, deadline=None)
@given(st.lists(finite, min_size=48, max_size=48), st.integers(0, 1), st.booleans())
@example([1e-300] * 24 + [-3.0, 7.0] * 12, 0, True)  # tiny products (underflow) and signs
def test_encloses_the_exact_sum(vals, m0, broadcast):
    K, R, C = 3, 2, 2
    alo, ahi = _buffers(vals, K, R, C)
    blo, bhi = _buffers(vals[::-1], K, R, C)
    if broadcast:
        blo, bhi = np.ascontiguousarray(blo[:, :, :1]), np.ascontiguousarray(bhi[:, :, :1])
    for k in range(K):
        lo, hi = sk.cauchy(alo, ahi, blo, bhi, m0, k)
        for r in range(R):
            for c in range(C):
                elo, ehi = _exact_range(alo, ahi, blo, bhi, m0, k, r, c, True, not broadcast)
                assert Fraction(lo[r, c]) <= elo and ehi <= Fraction(hi[r, c])


def test_agrees_with_interval_products_and_sums():
    rng = np.random.default_rng(0)
    K, R, C = 6, 5, 4
    a = Interval(rng.standard_normal((K, R, C))) + Interval(-1e-3, 1e-3)
    b = Interval(rng.standard_normal((K, R, 1)))
    for k in range(K):
        lo, hi = sk.cauchy(a.lo, a.hi, b.lo, b.hi, 1, k)
        if k == 0:
            assert np.all(lo == 0.0) and np.all(hi == 0.0)  # the empty sum
            continue
        ref = isum(a[1 : k + 1] * b[k - 1 :: -1], axis=0)
        assert np.array_equal(lo, ref.lo) and np.array_equal(hi, ref.hi)


def test_overflow_is_reported():
    big = np.full((2, 1, 1), 1e200)
    with pytest.raises(RangeOverflowError):
        sk.cauchy(big, big, big, big, 0, 1)


def test_a_broken_rounding_is_caught(monkeypatch):
    """Products and sums rounded to nearest (dn, up replaced by the identity) miss the exact
    0.1 * 0.3 + 0.7 * 0.2 of these doubles; the real kernel contains it."""
    vals = np.array([[[0.1]], [[0.7]]]), np.array([[[0.2]], [[0.3]]])
    exact = Fraction(0.1) * Fraction(0.3) + Fraction(0.7) * Fraction(0.2)
    lo, hi = sk.cauchy(vals[0], vals[0], vals[1], vals[1], 0, 1)
    assert Fraction(lo[0, 0]) <= exact <= Fraction(hi[0, 0])
    py = sk._cauchy_into.py_func
    monkeypatch.setattr(sk, "_cauchy_into", py)
    monkeypatch.setitem(py.__globals__, "dn", lambda c: c)
    monkeypatch.setitem(py.__globals__, "up", lambda c: c)
    lo, hi = sk.cauchy(vals[0], vals[0], vals[1], vals[1], 0, 1)
    assert not (Fraction(lo[0, 0]) <= exact <= Fraction(hi[0, 0]))
