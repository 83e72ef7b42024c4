"""The compiled enclosures of certified.entropic._gibbs against exact rational arithmetic."""

from __future__ import annotations

import numpy as np
from flint import fmpq
from hypothesis import example, given
from hypothesis import strategies as st

from certified.entropic._gibbs import _exponent, gibbs_sums, gibbs_sums_sq


def _q(v: float) -> fmpq:
    return fmpq(*float(v).as_integer_ratio())


_double = st.one_of(
    st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False),
    st.floats(-1e-140, 1e-140, allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, 1.0, -1.0, 0.1, 1 / 3, 2.0**-460, 3 * 2.0**-470]),
)


@given(st.lists(_double, min_size=8, max_size=8))
@example([0.1, 0.2, 1 / 3, 0.0, 2.0**-460, -1.0, 1.0, 0.3])  # a tiny difference (no Dekker)
@example([1e6, -1e6, 1e6, 1e6, 1e6, 1e6 - 1, 1e6 + 1, 1e6])  # cancellation f + g - cost
def test_exponent_encloses_the_exact_numerator(v):
    f, g = v[0], v[1]
    X = np.array([v[2:5]])
    YT = np.array([v[5:8]]).T
    zlo, zhi = _exponent(f, g, X, YT, 0, 0)
    z = (
        _q(f)
        + _q(g)
        - sum(((_q(a) - _q(b)) ** 2 for a, b in zip(v[2:5], v[5:8], strict=True)), fmpq(0))
    )
    assert _q(zlo) <= z <= _q(zhi)
    scale = abs(z) + abs(_q(f)) * fmpq(1, 2**50) + fmpq(1, 2**800)
    assert _q(zhi) - _q(zlo) <= scale * fmpq(1, 2**48)  # about an ulp of the numerator


@given(st.integers(0, 2**32 - 1), st.sampled_from([0.05, 0.5, 3.0]))
def test_both_kernels_enclose_the_same_sums(seed, gamma):
    rng = np.random.default_rng(seed)
    X, Y = rng.standard_normal((3, 2)), rng.standard_normal((4, 2))
    f, g = rng.standard_normal(3), rng.standard_normal(4)
    a, b = np.full(3, 1 / 4), np.full(4, 1 / 4)  # exact doubles, any non-negative weights
    S = ((X[:, None, :] - Y[None, :, :]) ** 2).sum(-1)
    clo, chi = S * (1 - 2.0**-48), S * (1 + 2.0**-48)  # generous valid cost bounds
    inv = (1 / gamma * (1 - 2.0**-50), 1 / gamma * (1 + 2.0**-50))
    plain = gibbs_sums(f, g, clo, chi, inv, (a, a), (b, b))
    sq = gibbs_sums_sq(f, g, X, Y, inv, (a, a), (b, b))
    assert plain[-1] and sq[-1]
    import mpmath

    with mpmath.workdps(40):

        def e(i, j):
            c = sum((mpmath.mpf(X[i, k]) - mpmath.mpf(Y[j, k])) ** 2 for k in range(2))
            return mpmath.exp((mpmath.mpf(f[i]) + mpmath.mpf(g[j]) - c) / mpmath.mpf(gamma))

        E = [[e(i, j) for j in range(4)] for i in range(3)]
        rows = [mpmath.fsum(E[i]) / 4 for i in range(3)]
        cols = [mpmath.fsum(E[i][j] for i in range(3)) / 4 for j in range(4)]
        for lo_r, hi_r, lo_c, hi_c, _ in (plain, sq):
            assert all(lo_r[i] <= rows[i] <= hi_r[i] for i in range(3))
            assert all(lo_c[j] <= cols[j] <= hi_c[j] for j in range(4))
