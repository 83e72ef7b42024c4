"""The float64 error tables of the interpolation export (proofs/bounds.md#interp-float) against
exact rational prefix sums: every intermediate claim of the lemma, on phases built to cancel."""

from __future__ import annotations

import numpy as np
from flint import fmpq
from hypothesis import example, given, settings
from hypothesis import strategies as st

from certified.interpolation.fast import (
    certified_error_float64,
    float64_images,
    phase_tables,
)


def _q(x: float) -> fmpq:
    return fmpq(*x.as_integer_ratio())


def _phase(seed: int, P: int, d: int, spread: int):
    """Sorted breakpoints with tiny and large gaps; weights alternating in sign over many
    binades (large slopes that cancel, as the interpolation construction produces)."""
    rng = np.random.default_rng(seed)
    brk = np.sort(rng.random(P) * 2 - 1)
    if P > 3:
        brk[1] = np.nextafter(brk[0], 2.0)  # a one-ulp gap
    brk = np.sort(brk)
    signs = np.where(np.arange(P) % 2 == 0, 1.0, -1.0)[:, None]
    W = signs * rng.random((P, d)) * 2.0 ** rng.integers(-spread, spread + 1, (P, d))
    tau = np.full(P, 1 / 3)  # not a power of two: tau w_i is rounded
    return tau, W, brk


def _check_tables(seed: int, P: int, d: int, spread: int) -> tuple[fmpq, fmpq]:
    """Assert the table bounds; return the largest actual errors of S and V."""
    worst_S = worst_V = fmpq(0)
    tau, W, brk = _phase(seed, P, d, spread)
    S, V, _beta, Sa, errS, errV = phase_tables(tau, W, brk)
    c = [[_q(tau[i]) * _q(W[i, j]) for j in range(d)] for i in range(P)]
    b = [_q(x) for x in brk]
    exact_S = [fmpq(0)] * d
    for k in range(1, P + 1):
        exact_S = [u + v for u, v in zip(exact_S, c[k - 1], strict=True)]
        exact_V = [sum((c[i][j] * (b[k - 1] - b[i]) for i in range(k)), fmpq(0)) for j in range(d)]
        for j in range(d):
            dS, dV = abs(exact_S[j] - _q(S[k, j])), abs(exact_V[j] - _q(V[k, j]))
            assert dS <= _q(errS[k, j]) and dV <= _q(errV[k, j])
            assert abs(exact_S[j]) <= _q(Sa[k, j])  # |S_k| <= sum |c_i| (rounded up)
            worst_S, worst_V = max(worst_S, dS), max(worst_V, dV)
    return worst_S, worst_V


@settings(max_examples=60)
@given(st.integers(0, 2**32), st.integers(1, 60), st.integers(1, 4), st.integers(0, 40))
@example(seed=1, P=60, d=3, spread=40)
def test_prefix_tables_bound_the_exact_sums(seed, P, d, spread):
    _check_tables(seed, P, d, spread)


def test_the_tables_are_not_vacuous():
    """The rounded sums really are off (so a bound missing a term would be caught)."""
    worst_S, worst_V = _check_tables(1, 60, 3, 40)
    assert worst_S > 0 and worst_V > 0


@settings(max_examples=40)
@given(st.integers(0, 2**32), st.integers(1, 40), st.integers(0, 30))
def test_one_phase_bound_contains_the_exact_image(seed, P, spread):
    """x + G(a·x) exactly, against the bound of one phase (Y = the float images)."""
    d = 3
    tau, W, brk = _phase(seed, P, d, spread)
    W[:, 0] = 0.0  # laminar for the normal e_0
    a = np.array([1.0, 0.0, 0.0])
    rng = np.random.default_rng(seed + 1)
    X = rng.random((25, d)) * 2 - 1
    X[:5, 0] = brk[rng.integers(0, P, 5)]  # points exactly on breakpoints
    phases = [(a, tau, W, brk)]
    Yf = float64_images(phases, X)
    bound = _q(certified_error_float64(phases, X, Yf))
    for x, yf in zip(X, Yf, strict=True):
        s = _q(x[0])
        g = [
            sum(
                (_q(tau[i]) * _q(W[i, j]) * (s - _q(brk[i])) for i in range(P) if brk[i] < x[0]),
                fmpq(0),
            )
            for j in range(d)
        ]
        err2 = sum(((_q(x[j]) + g[j] - _q(yf[j])) ** 2 for j in range(d)), fmpq(0))
        assert err2 <= bound * bound
