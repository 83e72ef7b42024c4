"""Symbolic proofs (sympy) of the closed forms of theorems.md section 2 for attention dynamics
on the sphere: constant pull, gated pull (self-centred gate), barycentre flow, equiangular
self-attention (normalised and unnormalised).

What is proved and what is assumed is written in proofs/transformers.md. Each function returns
the simplified residuals of its identities (all zero) and raises AssertionError otherwise;
`check_all()` runs them all. Run by tests/transformers/test_closed_form_proofs.py; also
runnable on its own: `python proofs/transformer_closed_forms.py`. Depends on sympy only.
"""

from __future__ import annotations

import sympy as sp

t, k, c = sp.symbols("t k c", real=True)
s, s0 = sp.symbols("s s0", real=True)


def _zero(residuals: list[sp.Expr]) -> list[sp.Expr]:
    out = [sp.simplify(r) for r in residuals]
    out = [r if r == 0 else sp.simplify(r.rewrite(sp.exp)) for r in out]
    assert all(r == 0 for r in out), out
    return out


def constant_pull() -> list[sp.Expr]:
    """x' = k P_x^perp z, |z| = |x| = 1: s = <x, z> has s' = <x', z> = k (1 - s^2), solved
    by s(t) = tanh(artanh(s0) + k t); and x stays in span(x0, z): with u the unit vector of
    x0 - s0 z, x = s z + sqrt(1 - s^2) u solves the ODE (both sides' components along z, u)."""
    a = sp.Symbol("a", real=True)  # a = artanh(s0)
    st = sp.tanh(a + k * t)
    ode = sp.diff(st, t) - k * (1 - st**2)
    initial = st.subs(t, 0) - sp.tanh(a)
    # x = s z + r u, r = sqrt(1 - s^2) = sech(a + k t) > 0; P_x^perp z = z - s x
    r = 1 / sp.cosh(a + k * t)
    along_z = sp.diff(st, t) - k * (1 - st * st)  # component of x' - k (z - s x) along z
    along_u = sp.diff(r, t) - k * (0 - st * r)  # along u (z has no u part)
    unit = st**2 + r**2 - 1
    return _zero([ode, initial, along_z, along_u, unit.rewrite(sp.exp)])


def gated_pull() -> list[sp.Expr]:
    """x' = (<z, x> - c)_+ P_x^perp z, |c| < 1, s0 > c: while s > c (forever: s' > 0 there),
    s' = (s - c)(1 - s^2), and the time to go from s0 to s is
    t(s) = A ln((s-c)/(s0-c)) - B ln((1-s)/(1-s0)) + C ln((1+s)/(1+s0)),
    A = 1/(1-c^2), B = 1/(2(1-c)), C = -1/(2(1+c)): dt/ds = 1/((s-c)(1-s^2)), t(s0) = 0."""
    A, B, C = 1 / (1 - c**2), 1 / (2 * (1 - c)), -1 / (2 * (1 + c))
    T = (
        A * sp.log((s - c) / (s0 - c))
        - B * sp.log((1 - s) / (1 - s0))
        + C * sp.log((1 + s) / (1 + s0))
    )
    derivative = sp.together(sp.diff(T, s) - 1 / ((s - c) * (1 - s**2)))
    return _zero([derivative, T.subs(s, s0)])


def barycentre_flow() -> list[sp.Expr]:
    """B = 0 makes the softmax uniform (weights m_j), so A_0[mu](x) = E_mu[x] = m for every x.
    With V = alpha alpha^T, |alpha| = 1, W = 0: x' = <alpha, m> P_x^perp alpha, a pull towards
    alpha of speed kappa(t) = <alpha, m(t)> shared by all particles. Then s = <x, alpha> has
    s' = kappa (1 - s^2): s = tanh(artanh s0 + C(t)) with C' = kappa = E_mu0[tanh(artanh <alpha,
    x0> + C)] (each particle's s is that formula); the part y = x - s alpha has
    y' = -kappa s y, so it keeps its direction. Proved: the s-equation for an arbitrary C(t),
    the y-equation from x' = kappa (alpha - s x), and B = 0 uniformity of the softmax."""
    a = sp.Symbol("a", real=True)
    Cf = sp.Function("C")(t)
    st = sp.tanh(a + Cf)
    kappa = sp.diff(Cf, t)
    s_eq = sp.diff(st, t) - kappa * (1 - st**2)
    # y = x - s alpha; x' = kappa (alpha - s x) and s' = kappa (1 - s^2) give
    # y' = kappa (alpha - s x) - kappa (1 - s^2) alpha = -kappa s (x - s alpha)
    xs, ss, kk = sp.symbols("x s kappa", real=True)  # one coordinate of x and alpha: xs, 1
    alpha = sp.Symbol("alpha_c", real=True)
    y_eq = kk * (alpha - ss * xs) - kk * (1 - ss**2) * alpha - (-kk * ss * (xs - ss * alpha))
    n = 3
    xs_ = sp.symbols(f"y0:{n}", real=True)
    ws = sp.symbols(f"m0:{n}", positive=True)
    soft = [ws[j] * sp.exp(0) / sum(ws[i] * sp.exp(0) for i in range(n)) for j in range(n)]
    uniform = sum(soft[j] * xs_[j] for j in range(n)) - sum(ws[j] * xs_[j] for j in range(n)) / sum(
        ws
    )
    return _zero([s_eq, y_eq, uniform])


def equiangular(normalised: bool = True) -> list[sp.Expr]:
    """V = I, B = beta I, n tokens with all <x_i, x_j> = rho (i != j): for a pair (i, k),
    d/dt <x_i, x_k> = <x_i', x_k> + <x_i, x_k'>, <x_i', x_k> = sum_j P_ij (<x_j, x_k> -
    <x_i, x_j><x_i, x_k>) with P_ij = e^{beta <x_i, x_j>} / Z: the terms j = i (0), j = k
    (e^{beta rho}(1 - rho^2)) and the n - 2 others (e^{beta rho}(rho - rho^2)). The result is
    the same for every pair, so the configuration stays equiangular and
    rho' = 2 e^{beta rho}(1-rho)(1+(n-1)rho) / (e^beta + (n-1) e^{beta rho}) (normalised,
    Z = e^beta + (n-1) e^{beta rho}) or (2/n) e^{beta rho}(1-rho)(1+(n-1)rho) (Z = n)."""
    beta, rho = sp.symbols("beta rho", real=True)
    n = sp.Symbol("n", positive=True, integer=True)
    e_self, e_other = sp.exp(beta), sp.exp(beta * rho)
    Z = e_self + (n - 1) * e_other if normalised else n
    one_side = (e_self * (rho - 1 * rho) + e_other * (1 - rho * rho)
                + (n - 2) * e_other * (rho - rho * rho)) / Z  # fmt: skip
    claimed = 2 * e_other * (1 - rho) * (1 + (n - 1) * rho) / Z
    return _zero([2 * one_side - claimed])


def equiangular_explicit(n: int = 4, normalised: bool = True) -> list[sp.Expr]:
    """The same for an explicit n with the sum over j written out (no grouping of terms)."""
    beta, rho = sp.symbols("beta rho", real=True)
    G = [[sp.Integer(1) if i == j else rho for j in range(n)] for i in range(n)]
    P = [[sp.exp(beta * G[i][j]) for j in range(n)] for i in range(n)]
    Z = [sum(P[i]) if normalised else sp.Integer(n) for i in range(n)]
    i, q = 0, 1

    def side(a: int, b: int) -> sp.Expr:
        return sum(P[a][j] * (G[j][b] - G[a][j] * G[a][b]) for j in range(n)) / Z[a]

    claimed = 2 * sp.exp(beta * rho) * (1 - rho) * (1 + (n - 1) * rho)
    claimed = claimed / (sp.exp(beta) + (n - 1) * sp.exp(beta * rho)) if normalised else claimed / n
    return _zero([side(i, q) + side(q, i) - claimed])


def check_all() -> dict[str, list[sp.Expr]]:
    """Run every proof; AssertionError on the first failure."""
    return {
        "constant_pull": constant_pull(),
        "gated_pull": gated_pull(),
        "barycentre_flow": barycentre_flow(),
        "equiangular_normalised": equiangular(True),
        "equiangular_unnormalised": equiangular(False),
        "equiangular_explicit_n4": equiangular_explicit(4, True),
        "equiangular_explicit_n3_unnormalised": equiangular_explicit(3, False),
    }


if __name__ == "__main__":
    for name, residuals in check_all().items():
        print(f"{name}: {len(residuals)} identities, residuals {residuals}")
