"""Properties of the certified statements about an enclosed Gaussian: for random symmetric
boxes, the eigenvalue, condition-number and W2 enclosures contain the values of random
matrices inside the box (mpmath, 50 digits); the exact SPD decision agrees with the
eigenvalues; the closed-form blow-up time brackets the exact one (V = vI, d = 2)."""

from __future__ import annotations

import flint
import mpmath as mp
from hypothesis import example, given, settings
from hypothesis import strategies as st

from certified.errors import DomainError
from certified.transformers.gaussian_moments import (
    GaussianEnclosure,
    condition_number,
    covariance_eigenvalues,
    w2_to_target,
)
from certified.transformers.gaussian_pde import blowup_time, parse_params, require_spd

mp.mp.dps = 50
Q = flint.fmpq
TOL = mp.mpf(10) ** -40  # error of the 50-digit references (an enclosure may be exact)
small = st.fractions(min_value=-2, max_value=2, max_denominator=64)


def _mpf(q) -> mp.mpf:
    q = Q(q)
    return mp.mpf(int(q.p)) / int(q.q)


@st.composite
def spd_boxes(draw, d=3):
    L = [[draw(small) for _ in range(d)] for _ in range(d)]
    S = [[sum(Q(L[i][k].numerator, L[i][k].denominator) * Q(L[j][k].numerator,
              L[j][k].denominator) for k in range(d)) + (Q(1, 4) if i == j else 0)
          for j in range(d)] for i in range(d)]  # fmt: skip
    r = Q(1, 2 ** draw(st.integers(8, 40)))
    t = [draw(st.fractions(0, 1, max_denominator=16)) for _ in range(d * (d + 1) // 2)]
    m = [Q(draw(st.integers(-8, 8)), 4) for _ in range(d)]
    return S, r, t, m


def _box(S, r, m):
    d = len(m)
    cov = tuple(tuple((S[i][j] - r, S[i][j] + r) for j in range(d)) for i in range(d))
    return GaussianEnclosure(tuple((x - r, x + r) for x in m), cov)


def _inside_point(S, r, t):
    """A symmetric matrix of the box: S + r (2 t - 1) entrywise, t in [0, 1]."""
    d = len(S)
    out, k = [[None] * d for _ in range(d)], 0
    for i in range(d):
        for j in range(i, d):
            v = S[i][j] + r * (2 * Q(t[k].numerator, t[k].denominator) - 1)
            out[i][j] = out[j][i] = v
            k += 1
    return out


@settings(max_examples=25)
@given(spd_boxes())
@example(([[Q(1, 4), 0, 0], [0, Q(1, 4), 0], [0, 0, Q(1, 4)]], Q(1, 256), [0] * 6, [0, 0, 0]))
def test_eigenvalues_condition_and_w2_contain_matrices_of_the_box(case):
    S, r, t, m = case
    g = _box(S, r, m)
    P = _inside_point(S, r, t)
    ev = sorted(mp.eigsy(mp.matrix([[_mpf(x) for x in row] for row in P]))[0])
    eigs = covariance_eigenvalues(g)
    assert all(_mpf(lo) - TOL <= e <= _mpf(hi) + TOL for (lo, hi), e in zip(eigs, ev, strict=True))
    kappa = condition_number(eigs)
    if kappa is not None:
        assert _mpf(kappa[0]) - TOL <= ev[-1] / ev[0] <= _mpf(kappa[1]) + TOL
    target_m, target_S = [0, 0, 0], [[1, 0, 0], [0, 2, 0], [0, 0, Q(1, 2)]]
    w = w2_to_target(g, eigs, target_m, target_S)
    if w is not None:
        Pm = mp.matrix([[_mpf(x) for x in row] for row in P])
        T = mp.matrix([[_mpf(x) for x in row] for row in target_S])
        Ph = mp.sqrtm(Pm)
        root = mp.sqrtm(Ph * T * Ph)
        w2 = mp.sqrt(sum(_mpf(x) ** 2 for x in m) + sum(Pm[i, i] + T[i, i] - 2 * mp.re(root[i, i])
                                                         for i in range(3)))  # fmt: skip
        assert _mpf(w.lower) - TOL <= w2 <= _mpf(w.upper) + TOL


@settings(max_examples=50)
@given(st.lists(small, min_size=3, max_size=3))
@example([0, 0, 0])
def test_exact_spd_decision_agrees_with_the_eigenvalues(xs):
    import numpy as np

    a, b, c = (Q(x.numerator, x.denominator) if hasattr(x, "numerator") else Q(x) for x in xs)
    S = np.array([[a, b], [b, c]], dtype=object)
    spd = a > 0 and a * c - b * b > 0  # 2 x 2: both leading minors
    try:
        require_spd(S, "cov")
        assert spd
    except DomainError:
        assert not spd


@settings(max_examples=25)
@given(st.lists(small, min_size=4, max_size=4), st.fractions(Q(1, 8).__float__(), 2))
def test_blowup_interval_brackets_the_exact_time(A, v):
    """V = vI, Sigma0 = I: t* = 1 / (v lambda_max(A + A^T)) when that is positive."""
    A = [[str(A[0]), str(A[1])], [str(A[2]), str(A[3])]]
    v = str(v)
    params = {"mean": [1, 0], "cov": [[1, 0], [0, 1]], "A": A, "V": [[v, 0], [0, v]]}
    pde = parse_params(params, time=4)
    b = blowup_time(pde)
    M = [[mp.mpf(mp.fraction(*_pq(A[i][j]))) for j in range(2)] for i in range(2)]
    Sym = mp.matrix([[M[i][j] + M[j][i] for j in range(2)] for i in range(2)])
    lam = max(mp.eigsy(Sym)[0]) * mp.mpf(mp.fraction(*_pq(v)))
    if lam > 0 and 1 / lam <= 4:
        assert b.blows_up and _mpf(b.lower) <= 1 / lam <= _mpf(b.upper)
    elif lam <= 0 or 1 / lam > 4:
        assert not b.blows_up


def _pq(s: str) -> tuple[int, int]:
    p, _, q = s.partition("/")
    return int(p), int(q or 1)
