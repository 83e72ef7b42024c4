"""Symbolic proofs (sympy) of the closed forms used by certified/attention/populations.py
(proofs/bounds.md#token-closed-forms, #langevin); wrong variants must not pass."""

from __future__ import annotations

import sympy as sp

y, t, m, u = sp.symbols("y t m u", real=True)
a = sp.Symbol("a", real=True, nonzero=True)
s, h = sp.symbols("s h", positive=True)
c = sp.symbols("c", real=True)


def _tilted_mean_on(lo, hi):
    # antiderivatives checked by differentiation (fast and exact): F' = y e^{ay}, E' = e^{ay}
    F = sp.exp(a * y) * (y / a - 1 / a**2)
    E = sp.exp(a * y) / a
    assert sp.simplify(sp.diff(F, y) - y * sp.exp(a * y)) == 0
    assert sp.simplify(sp.diff(E, y) - sp.exp(a * y)) == 0
    return (F.subs(y, hi) - F.subs(y, lo)) / (E.subs(y, hi) - E.subs(y, lo))


def test_gaussian_complete_the_square_any_d():
    # -1/2 (y-m)ᵀ Σ⁻¹ (y-m) + aᵀy = -1/2 (y-m-Σa)ᵀ Σ⁻¹ (y-m-Σa) + aᵀm + 1/2 aᵀΣa, so the
    # tilted Gaussian is N(m + Σa, Σ) and its mean is m + Σa. Symbolic symmetric Σ (d = 3),
    # Σ⁻¹ = adj(Σ)/det Σ: the identity times det Σ is a polynomial identity (fast to expand)
    d = 3
    S = sp.Matrix(d, d, lambda i, j: sp.Symbol(f"s{min(i, j)}{max(i, j)}", real=True))
    Y = sp.Matrix(sp.symbols("y0:3", real=True))
    M = sp.Matrix(sp.symbols("m0:3", real=True))
    A = sp.Matrix(sp.symbols("a0:3", real=True))
    adj, det = S.adjugate(), S.det()

    def quad(v):  # det Σ · vᵀ Σ⁻¹ v
        return (v.T * adj * v)[0]

    lhs = -quad(Y - M) / 2 + det * (A.T * Y)[0]
    rhs = -quad(Y - M - S * A) / 2 + det * ((A.T * M)[0] + (A.T * S * A)[0] / 2)
    assert sp.expand(lhs - rhs) == 0
    wrong = -quad(Y - M - A) / 2 + det * ((A.T * M)[0] + (A.T * S * A)[0] / 2)  # Σa → a
    assert sp.expand(lhs - wrong) != 0


def test_uniform_on_minus_one_one_is_langevin():
    ratio = _tilted_mean_on(-1, 1)
    L = sp.coth(a) - 1 / a
    assert sp.simplify((ratio - L).rewrite(sp.exp)) == 0
    assert sp.simplify((ratio - sp.tanh(a)).rewrite(sp.exp)) != 0
    # L(0) = 0 and the series a/3 − a³/45 + 2a⁵/945
    z = sp.Symbol("z")
    Lz = sp.coth(z) - 1 / z
    # (sympy 1.x returns -oo for limit(coth z - 1/z, z, 0): the series is the proof of L(0) = 0)
    assert sp.series(Lz, z, 0, 7).removeO() == z / 3 - z**3 / 45 + 2 * z**5 / 945


def test_uniform_on_any_interval_is_c_plus_h_langevin_of_h_a():
    # y = c + h t, t ∈ [−1, 1]: E_a[y] = c + h L(h a)
    ratio = _tilted_mean_on(c - h, c + h)
    target = c + h * (sp.coth(h * a) - 1 / (h * a))
    assert sp.simplify((ratio - target).rewrite(sp.exp)) == 0
    wrong = c + h * (sp.coth(a) - 1 / a)  # forgetting the scale inside L
    assert sp.simplify((ratio - wrong).subs({h: 2, a: 1, c: 0})) != 0


def test_langevin_derivative_positive_and_decreasing():
    L = sp.coth(t) - 1 / t
    Lp = sp.diff(L, t)
    assert sp.simplify(Lp - (1 / t**2 - 1 / sp.sinh(t) ** 2)) == 0
    # L'' < 0 on t > 0  ⇔  t³ cosh t < sinh³ t. With f(t) = sinh t cosh^{-1/3} t − t, f(0) = 0
    # and f' = ((2/3) cosh² t + 1/3 − cosh^{4/3} t) / cosh^{4/3} t; with w = cosh^{2/3} t >= 1
    # the numerator is (2w³ − 3w² + 1)/3 = (w − 1)²(2w + 1)/3 >= 0.
    Lpp = sp.diff(L, t, 2)
    assert sp.simplify(Lpp - (-2 / t**3 + 2 * sp.cosh(t) / sp.sinh(t) ** 3)) == 0
    f = sp.sinh(t) * sp.cosh(t) ** sp.Rational(-1, 3) - t
    fp_claim = (
        sp.Rational(2, 3) * sp.cosh(t) ** 2 + sp.Rational(1, 3) - sp.cosh(t) ** sp.Rational(4, 3)
    ) / sp.cosh(t) ** sp.Rational(4, 3)
    assert sp.simplify((sp.diff(f, t) - fp_claim).rewrite(sp.exp)) == 0
    assert sp.expand(2 * u**3 - 3 * u**2 + 1 - (u - 1) ** 2 * (2 * u + 1)) == 0
    assert sp.expand(2 * u**3 - 3 * u**2 + 1 - (u - 1) * (2 * u + 1)) != 0
    assert f.subs(t, 0) == 0
    # L' even and L'(0) = 1/3
    assert sp.simplify(Lp.subs(t, -t) - Lp) == 0
    z = sp.Symbol("z")
    assert (
        sp.series(1 / z**2 - 1 / sp.sinh(z) ** 2, z, 0, 3).removeO()
        == sp.Rational(1, 3) - z**2 / 15
    )
