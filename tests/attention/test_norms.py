"""Certified spectral-norm bounds enclose 110-digit mpmath singular values."""

from __future__ import annotations

import flint
import mpmath
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from mpmath import mp

from certified.arith.exact import to_fmpq_array
from certified.attention.norms import (
    exact_norm_upper,
    frobenius_upper,
    is_positive_definite_exact,
    spectral_norm_bounds,
    spectral_norm_lower,
    spectral_norm_upper,
)


def _sigma_max(M):
    with mp.workdps(110):
        A = mpmath.matrix([[mpmath.mpf(int(x.p)) / int(x.q) for x in row] for row in M])
        return max(mpmath.svd_r(A, compute_uv=False))


def _q(x):
    return mpmath.mpf(int(x.p)) / int(x.q)


matrices = st.integers(1, 5).flatmap(
    lambda r: st.integers(1, 5).flatmap(
        lambda c: st.lists(
            st.lists(
                st.floats(-4, 4, allow_nan=False).map(lambda x: round(x, 2)), min_size=c, max_size=c
            ),
            min_size=r,
            max_size=r,
        )
    )
)


@settings(max_examples=40)
@given(matrices)
@example([[0.0, 0.0], [0.0, 0.0]])
@example([[1.0, 1.0], [1.0, 1.0]])  # rank one: ‖M‖₂ = ‖M‖_F
@example([[1e-3]])
@example([[1.5, 1.5], [1.5, 1.5]])  # sigma = 3 exactly, the reference 3 + 7e-111: the tolerance
def test_bounds_enclose_the_largest_singular_value(M):
    Mq = to_fmpq_array(M, "M")
    lo, hi = spectral_norm_bounds(M, 128)
    s = exact_norm_upper(M)
    with mp.workdps(110):
        sig = _sigma_max(Mq.tolist())
        tol = sig * mpmath.mpf(10) ** -100  # the reference's own error (mpmath's SVD, 110 digits)
        assert _q(lo) - tol <= sig <= _q(hi) + tol
        assert sig <= _q(s) + tol and sig <= _q(frobenius_upper(M)) + tol
        if sig > 0:  # tight: the float SVD proposals are certified
            assert _q(hi) <= sig * (1 + mpmath.mpf(2) ** -5)
            assert _q(lo) >= sig * (1 - mpmath.mpf(2) ** -30)
    # the exact bound is what a checker can re-verify: s²I − MᵀM positive definite (or M = 0)
    if any(x != 0 for x in Mq.flat):
        G = (s * s) * np.eye(Mq.shape[1], dtype=int).astype(object) - (Mq.T @ Mq)
        assert is_positive_definite_exact(G)


def test_ball_matrices_bound_every_member():
    rng = np.random.default_rng(0)
    M = rng.standard_normal((4, 3))
    balls = [[flint.arb(x, 1e-3) for x in row] for row in M.tolist()]
    hi = spectral_norm_upper(balls, 128)
    lo = spectral_norm_lower(balls, 128)
    for _ in range(20):
        D = M + rng.uniform(-1e-3, 1e-3, M.shape)
        s = np.linalg.norm(D, 2)
        assert float(lo) <= s * (1 + 1e-12) and s <= float(hi) * (1 + 1e-12)


def test_positive_definiteness_exact():
    assert is_positive_definite_exact([[2, 1], [1, 2]])
    assert not is_positive_definite_exact([[1, 1], [1, 1]])  # semidefinite only
    assert not is_positive_definite_exact([[1, 2], [2, 1]])
    assert not is_positive_definite_exact([[0]])


def test_bad_input():
    from certified.errors import NonFiniteError, ShapeError

    with pytest.raises(ShapeError):
        spectral_norm_upper([1, 2], 64)
    with pytest.raises(NonFiniteError):
        spectral_norm_upper([[float("inf")]], 64)
