"""Symbolic proofs (sympy) of the moment-matching identities of theorems.md section 4.

What is proved and what is assumed is written in proofs/moment_matching.md. Each function
returns the simplified residuals of an identity (all zero) and raises AssertionError if one is
not; `check_all()` runs them all. Run by tests/moments/test_proofs.py; also runnable on its
own: `python proofs/moment_matching.py`. Depends on sympy only (not on the package).

Notation: for a measure mu on a compact K in R, M_k(b) = int y^k e^{b y} dmu, Z = M_0,
L_k = M_k / Z. The one assumption, differentiation under the integral sign, is the relation
M_k' = M_{k+1} (and, in d dimensions, d/dq_i Z = int y_i e^{<q, y>} dmu).
"""

from __future__ import annotations

import sympy as sp

ORDER = 8
"""Cumulant expansion checked for L_1^{(j)}(0) = kappa_{j+1}, j = 0..ORDER-1."""

b = sp.Symbol("b", real=True)


def moment_identity() -> list[sp.Expr]:
    """d/db L_k = L_{k+1} - L_k L_1 for every k >= 0, from M_k' = M_{k+1} alone.

    k enters only through A = M_k, B = M_{k+1} with A' = B; Z = M_0 with Z' = M_1. So one
    symbolic computation covers all k >= 1, and k = 0 is A = Z, B = M_1.
    """
    Z, A, B, M1 = (sp.Function(name)(b) for name in ("Z", "A", "B", "M1"))
    rules = {sp.Derivative(A, b): B, sp.Derivative(Z, b): M1}
    general = sp.diff(A / Z, b).subs(rules) - (B / Z - (A / Z) * (M1 / Z))
    k_zero = sp.diff(Z / Z, b).subs(rules) - (M1 / Z - (Z / Z) * (M1 / Z))
    residuals = [sp.simplify(general), sp.simplify(k_zero)]
    assert all(r == 0 for r in residuals), residuals
    return residuals


def moment_identity_discrete(n: int = 3, kmax: int = 3) -> list[sp.Expr]:
    """The same identity for a discrete measure sum_i w_i delta_{y_i} with symbolic atoms and
    weights, with no assumption (finite sums differentiate term by term)."""
    y = sp.symbols(f"y1:{n + 1}", real=True)
    w = sp.symbols(f"w1:{n + 1}", positive=True)
    Z = sum(wi * sp.exp(b * yi) for wi, yi in zip(w, y, strict=True))

    def tilted(k: int) -> sp.Expr:
        return sum(wi * yi**k * sp.exp(b * yi) for wi, yi in zip(w, y, strict=True)) / Z

    residuals = [
        sp.simplify(sp.diff(tilted(k), b) - (tilted(k + 1) - tilted(k) * tilted(1)))
        for k in range(kmax + 1)
    ]
    assert all(r == 0 for r in residuals), residuals
    return residuals


def log_derivative() -> sp.Expr:
    """L_1 = (log Z)' from Z' = M_1."""
    Z, M1 = sp.Function("Z")(b), sp.Function("M1")(b)
    residual = sp.simplify(sp.diff(sp.log(Z), b).subs(sp.Derivative(Z, b), M1) - M1 / Z)
    assert residual == 0, residual
    return residual


def _moments(order: int) -> list[sp.Symbol]:
    return [sp.Integer(1), *sp.symbols(f"m1:{order + 2}")]


def bell_cumulants(m: list[sp.Expr], order: int) -> list[sp.Expr]:
    """kappa_1..kappa_order from raw moments by sympy's incomplete Bell polynomials:
    kappa_n = sum_{k=1}^n (-1)^{k-1} (k-1)! B_{n,k}(m_1, ..., m_{n-k+1})."""
    return [
        sp.expand(
            sum(
                (-1) ** (k - 1) * sp.factorial(k - 1) * sp.bell(n, k, m[1 : n - k + 2])
                for k in range(1, n + 1)
            )
        )
        for n in range(1, order + 1)
    ]


def recursion_cumulants(m: list[sp.Expr], order: int) -> list[sp.Expr]:
    """kappa_n = m_n - sum_{k=1}^{n-1} C(n-1, k-1) kappa_k m_{n-k} (the recursion used by
    certified.moments.cumulants_from_moments), i.e. Z' = K' Z coefficient by coefficient."""
    kappa = [sp.Integer(0)]
    for n in range(1, order + 1):
        kappa.append(
            sp.expand(
                m[n] - sum(sp.binomial(n - 1, k - 1) * kappa[k] * m[n - k] for k in range(1, n))
            )
        )
    return kappa[1:]


def cumulant_expansion(order: int = ORDER) -> list[sp.Expr]:
    """L_1^{(j)}(0) = kappa_{j+1} for j = 0..order-1, with symbolic moments m_1..m_order:
    Z(b) = sum_n m_n b^n / n! (the moment generating function of a compactly supported
    measure is entire), L_1 = (log Z)', compared with sympy's Bell-polynomial cumulants and with
    the recursion."""
    m = _moments(order)
    Z = sum(m[n] * b**n / sp.factorial(n) for n in range(order + 1))
    L1 = sp.diff(sp.series(sp.log(Z), b, 0, order + 1).removeO(), b)
    derivs = [sp.expand(sp.diff(L1, b, j).subs(b, 0)) for j in range(order)]
    bell = bell_cumulants(m, order)
    rec = recursion_cumulants(m, order)
    residuals = [sp.expand(derivs[j] - bell[j]) for j in range(order)]
    residuals += [sp.expand(rec[j] - bell[j]) for j in range(order)]
    assert all(r == 0 for r in residuals), residuals
    return residuals


def cumulants_of_a_finite_variable(order: int = 6) -> list[sp.Expr]:
    """For the uniform measure on {0, 4, 5} (a sympy.stats FiniteRV): the coefficients of the
    series of log of sympy.stats' moment generating function equal the Bell-polynomial
    cumulants of sympy.stats' moments, and the series of L_1 = Z'/Z gives them too."""
    from sympy import stats

    X = stats.FiniteRV("X", {0: sp.Rational(1, 3), 4: sp.Rational(1, 3), 5: sp.Rational(1, 3)})
    t = sp.Symbol("t")
    mgf = stats.moment_generating_function(X)(t)
    m = [stats.moment(X, n) for n in range(order + 2)]
    kappa = bell_cumulants(m, order)
    logz = sp.series(sp.log(mgf), t, 0, order + 1).removeO()
    L1 = sp.series(sp.diff(mgf, t) / mgf, t, 0, order).removeO()
    residuals = [
        sp.nsimplify(sp.diff(logz, t, n).subs(t, 0)) - kappa[n - 1] for n in range(1, order + 1)
    ]
    residuals += [sp.simplify(sp.diff(L1, t, j).subs(t, 0) - kappa[j]) for j in range(order)]
    residuals = [sp.simplify(r) for r in residuals]
    assert all(r == 0 for r in residuals), residuals
    return residuals


def gradient_form(d: int = 3, n: int = 3) -> list[sp.Expr]:
    """G_mu(q) = grad log Z_mu(q) in d dimensions: for symbolic atoms and weights (a discrete
    measure, no assumption), and for a general measure from d/dq_i Z = M_i."""
    q = sp.symbols(f"q1:{d + 1}", real=True)
    w = sp.symbols(f"w1:{n + 1}", positive=True)
    y = [sp.symbols(f"y{i}_1:{d + 1}", real=True) for i in range(1, n + 1)]
    expo = [sp.exp(sum(qj * yij for qj, yij in zip(q, yi, strict=True))) for yi in y]
    Z = sum(wi * e for wi, e in zip(w, expo, strict=True))
    residuals = []
    for k in range(d):
        G_k = sum(wi * yi[k] * e for wi, yi, e in zip(w, y, expo, strict=True)) / Z
        residuals.append(sp.simplify(sp.diff(sp.log(Z), q[k]) - G_k))
    Zf = sp.Function("Z")(*q)
    for k in range(d):
        Mk = sp.Function(f"M{k + 1}")(*q)
        residuals.append(
            sp.simplify(sp.diff(sp.log(Zf), q[k]).subs(sp.Derivative(Zf, q[k]), Mk) - Mk / Zf)
        )
    assert all(r == 0 for r in residuals), residuals
    return residuals


def check_all() -> dict[str, int]:
    """Run every proof; return the number of identities checked per proof."""
    return {
        "moment_identity": len(moment_identity()),
        "moment_identity_discrete": len(moment_identity_discrete()),
        "log_derivative": len([log_derivative()]),
        "cumulant_expansion": len(cumulant_expansion()),
        "cumulants_of_a_finite_variable": len(cumulants_of_a_finite_variable()),
        "gradient_form": len(gradient_form()),
    }


if __name__ == "__main__":
    for name, count in check_all().items():
        print(f"{name}: {count} identities, all residuals simplify to 0")
