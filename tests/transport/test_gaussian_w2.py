"""Gaussian W2 (Bures formula): containment of closed forms and of 50-digit mpmath values
(sqrtm), singular covariances, and bad input."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from flint import fmpq
from hypothesis import given
from hypothesis import strategies as st
from transport_reference import inside

from certified.errors import DomainError, NonFiniteError, ShapeError
from certified.transport import gaussian_w2


def _reference(m1, S1, m2, S2):
    with mpmath.workdps(50):
        A = mpmath.matrix(S1.tolist())
        B = mpmath.matrix(S2.tolist())
        r = mpmath.sqrtm(A)
        T = mpmath.sqrtm(r * B * r)
        tr = sum(T[i, i] for i in range(len(m1)))
        mean = sum((mpmath.mpf(a) - mpmath.mpf(b)) ** 2 for a, b in zip(m1, m2, strict=True))
        return mean + sum(A[i, i] + B[i, i] for i in range(len(m1))) - 2 * mpmath.re(tr)


@given(st.integers(1, 4), st.integers(0, 2**32))
def test_contains_50_digit_reference(d, seed):
    rng = np.random.default_rng(seed)
    A, B = rng.standard_normal((d, d)), rng.standard_normal((d, d))
    S1, S2 = A @ A.T + 0.1 * np.eye(d), B @ B.T + 0.1 * np.eye(d)
    S1, S2 = (S1 + S1.T) / 2, (S2 + S2.T) / 2
    m1, m2 = rng.standard_normal(d), rng.standard_normal(d)
    e = gaussian_w2(m1, S1, m2, S2)
    ref = _reference(m1, S1, m2, S2)
    assert inside(e.lower_sq, ref, e.upper_sq)
    with mpmath.workdps(50):
        root = mpmath.sqrt(ref)
    assert inside(e.lower, root, e.upper)
    assert float(e.gap) < 1e-20


@pytest.mark.parametrize(
    "m1, S1, m2, S2, w2sq",
    [
        ([0, 0], [[1, 0], [0, 1]], [1, 0], [[4, 0], [0, 1]], 2),  # 1 + (2 - 1)^2
        ([0], [[4]], [0], [[9]], 1),
        ([1, 2], [[2, 1], [1, 2]], [1, 2], [[2, 1], [1, 2]], 0),  # identical
        ([0, 0], [[1, 0], [0, 0]], [0, 0], [[0, 0], [0, 1]], 2),  # singular, orthogonal
        ([0, 0, 0], [[0] * 3] * 3, [3, 4, 0], [[0] * 3] * 3, 25),  # Diracs
        (["1/3"], [["1/4"]], [0], [[1]], fmpq(1, 9) + fmpq(1, 4)),
    ],
)
def test_closed_forms(m1, S1, m2, S2, w2sq):
    e = gaussian_w2(m1, S1, m2, S2)
    assert e.lower_sq <= w2sq <= e.upper_sq
    assert e.lower**2 <= w2sq <= e.upper**2
    assert e.upper_sq - e.lower_sq < fmpq(1, 10**25)


@pytest.mark.parametrize(
    "args, error, match",
    [
        (([0, 0], [[1, 2], [0, 1]], [0, 0], [[1, 0], [0, 1]]), DomainError, "symmetric"),
        (([0, 0], [[1, 0], [0, -1]], [0, 0], [[1, 0], [0, 1]]), DomainError, "semi-definite"),
        (([0, 0], [[1, 2], [2, 1]], [0, 0], [[1, 0], [0, 1]]), DomainError, "semi-definite"),
        (([0, 0], [[1, 0], [0, 1]], [0], [[1]]), ShapeError, "m2"),
        (([0, 0], [[1, 0]], [0, 0], [[1, 0], [0, 1]]), ShapeError, "S1"),
        (([0, 0], [[1, 0], [0, 1]], [0, 0], [[1, 0, 0], [0, 1, 0]]), ShapeError, "S2"),
        (([0, "nan"], [[1, 0], [0, 1]], [0, 0], [[1, 0], [0, 1]]), NonFiniteError, "m1"),
        (([], [], [], []), ShapeError, "m1"),
    ],
)
def test_bad_input(args, error, match):
    with pytest.raises(error, match=match):
        gaussian_w2(*args)
