"""Symbolic proofs (sympy) of the Gaussian reduction of the Transformer PDE (theorems.md §9;
proofs/transformers_gaussian.md §1-§3).

1. ``tilt``: for y ~ N(m, Sigma), the density tilted by ``e^{<a, y>}`` is N(m + Sigma a, Sigma)
   (completing the square), so attention with the score ``<Q y, K x> = <y, a>``, a = QᵀK x,
   gives ``Gamma[N(m, Sigma)](x) = V (m + Sigma A x)`` with A = QᵀK; several heads add up.
2. ``continuity``: for the affine field v(x) = c + M x, the Gaussian N(m(t), Sigma(t)) solves
   ``d/dt rho + div(rho v) = 0`` iff ``m' = c + M m`` and ``Sigma' = M Sigma + Sigma Mᵀ``: the
   residual ``(d/dt rho + div(rho v)) / rho`` is a quadratic polynomial in x whose coefficients
   vanish for these rates and for no others (the linear system in the rates has one solution).
   With c = sum_h V_h m and M = sum_h V_h Sigma A_h this is the moment ODE of the package.
3. ``residual_layer``: one layer x <- x + h v(x) maps N(m, Sigma) to N(m + h v(m),
   (I + hM) Sigma (I + hM)ᵀ) = Sigma + h(M Sigma + Sigma Mᵀ) + h² M Sigma Mᵀ (not an Euler step
   of the moment ODE: they differ by h² M Sigma Mᵀ).
4. Closed forms: ``one_dimensional`` (s = s0 / (1 - 2 c s0 t), m = m0 e^{vt} (1 - 2 c s0 t)^{-1/2},
   c = v a); ``scalar_v`` (V = vI: Sigma(t)^{-1} = Sigma0^{-1} - 2 v t sym(A), any A, and the
   invariant mᵀ Sigma^{-1} m = e^{2vt} m0ᵀ Sigma0^{-1} m0); ``diagonal`` (V, A, Sigma diagonal:
   Sigma^{-1} decreases at the rate 2 V A).

Each function returns its simplified residuals (all zero) and raises AssertionError otherwise;
``check_all()`` runs them. Run by tests/transformers/test_gaussian_pde_proofs.py; also runnable
alone: ``python proofs/gaussian_pde.py``. Depends on sympy only.
"""

from __future__ import annotations

import sympy as sp

t, h, v = sp.symbols("t h v", real=True)


def _zero(residuals) -> list:
    out = [sp.simplify(sp.expand(r)) for r in residuals]
    assert all(r == 0 for r in out), out
    return out


def _sym(name: str, d: int) -> sp.Matrix:
    return sp.Matrix(d, d, lambda i, j: sp.Symbol(f"{name}{min(i, j)}{max(i, j)}", real=True))


def _gen(name: str, d: int) -> sp.Matrix:
    return sp.Matrix(d, d, lambda i, j: sp.Symbol(f"{name}{i}{j}", real=True))


def _vec(name: str, d: int) -> sp.Matrix:
    return sp.Matrix(d, 1, lambda i, _: sp.Symbol(f"{name}{i}", real=True))


def tilt(d: int = 2) -> list:
    """-(y-m)ᵀP(y-m)/2 + <y, a> = -(y-m-Σa)ᵀP(y-m-Σa)/2 + <a, m> + aᵀΣa/2 with P = Σ^{-1}
    (the y-free remainder cancels in the normalised attention), and <Qy, Kx> = <y, QᵀKx>."""
    S, m, y, a, x = _sym("s", d), _vec("m", d), _vec("y", d), _vec("a", d), _vec("x", d)
    P = S.inv()
    lhs = -((y - m).T * P * (y - m))[0] / 2 + (y.T * a)[0]
    c = m + S * a
    rhs = -((y - c).T * P * (y - c))[0] / 2 + (a.T * m)[0] + (a.T * S * a)[0] / 2
    Q, K = _gen("q", d), _gen("k", d)
    score = ((Q * y).T * (K * x))[0] - (y.T * (Q.T * K * x))[0]
    return _zero([sp.together(lhs - rhs), score])


def continuity(d: int = 2) -> list:
    """The Gaussian solves the continuity equation of v(x) = c + Mx iff m' = c + Mm and
    Sigma' = M Sigma + Sigma Mᵀ (unique rates)."""
    S, m, x, c, M = _sym("s", d), _vec("m", d), _vec("x", d), _vec("c", d), _gen("M", d)
    mdot, Sdot = _vec("mdot", d), _sym("sdot", d)
    P = S.inv()
    z = x - m
    # (d/dt rho)/rho with d/dt Sigma^{-1} = -P Sdot P and d/dt log det Sigma = tr(P Sdot)
    dlog_dt = -(P * Sdot).trace() / 2 + (mdot.T * P * z)[0] + (z.T * P * Sdot * P * z)[0] / 2
    grad_log = -P * z
    vx = c + M * x
    residual = sp.together(dlog_dt + (vx.T * grad_log)[0] + M.trace())
    num = sp.numer(residual)
    poly = sp.Poly(sp.expand(num), *x)
    unknowns = [*mdot, *{s for s in Sdot if s.is_Symbol}]
    sol = sp.solve(poly.coeffs(), unknowns, dict=True)
    assert len(sol) == 1, sol  # the rates are unique
    s = sol[0]
    want_m = c + M * m
    want_S = M * S + S * M.T
    res = [s[mdot[i]] - want_m[i] for i in range(d)]
    res += [s[Sdot[i, j]] - want_S[i, j] for i in range(d) for j in range(i, d)]
    return _zero(res)


def residual_layer(d: int = 2) -> list:
    """x' = x + h(c + Mx): mean m + h(c + Mm), covariance (I + hM) Σ (I + hM)ᵀ, which is
    Σ + h(MΣ + ΣMᵀ) + h² MΣMᵀ."""
    S, M = _sym("s", d), _gen("M", d)
    G = sp.eye(d) + h * M
    layer = G * S * G.T
    return _zero(list(layer - (S + h * (M * S + S * M.T) + h**2 * M * S * M.T)))


def one_dimensional() -> list:
    """d = 1, c = v a: s' = 2 c s^2 and m' = v (m + s a m) by the closed forms."""
    a, s0, m0 = sp.symbols("a s0 m0", real=True)
    c = v * a
    s = s0 / (1 - 2 * c * s0 * t)
    m = m0 * sp.exp(v * t) / sp.sqrt(1 - 2 * c * s0 * t)
    return _zero([
        sp.diff(s, t) - 2 * (v * s * a) * s,  # Sigma' = 2 M Sigma with M = v s a
        sp.diff(m, t) - v * (m + s * a * m),
        s.subs(t, 0) - s0,
        m.subs(t, 0) - m0,
    ])  # fmt: skip


def scalar_v(d: int = 2) -> list:
    """V = vI, any A: Sigma(t) = (Sigma0^{-1} - 2vt sym(A))^{-1} solves Sigma' = M Sigma +
    Sigma Mᵀ (M = v Sigma A); and d/dt (mᵀ Sigma^{-1} m) = 2v mᵀ Sigma^{-1} m along the
    moment ODE."""
    A, P0 = _gen("a", d), _sym("p", d)
    P = P0 - v * t * (A + A.T)
    S = P.inv()
    M = v * S * A
    ode = [sp.together(e) for e in sp.diff(S, t) - (M * S + S * M.T)]
    m = _vec("m", d)
    Pm = _sym("w", d)  # any symmetric Sigma^{-1}; its derivative -v(A + Aᵀ) for V = vI
    Sg = Pm.inv()
    mdot = v * (m + Sg * A * m)
    d_inv = 2 * (mdot.T * Pm * m)[0] + (m.T * (-v * (A + A.T)) * m)[0]
    invariant = sp.together(d_inv - 2 * v * (m.T * Pm * m)[0])
    return _zero([*ode, invariant])


def diagonal(d: int = 2) -> list:
    """V, A, Sigma0 diagonal: Sigma(t) = diag(1 / (1/s_i - 2 v_i a_i t)) solves the ODE."""
    vs = sp.symbols(f"v0:{d}", real=True)
    As = sp.symbols(f"a0:{d}", real=True)
    ss = sp.symbols(f"s0:{d}", positive=True)
    V, A = sp.diag(*vs), sp.diag(*As)
    S = sp.diag(*[1 / (1 / ss[i] - 2 * vs[i] * As[i] * t) for i in range(d)])
    M = V * S * A
    return _zero(list(sp.diff(S, t) - (M * S + S * M.T)))


def check_all() -> dict[str, list]:
    """Every proof of this file; AssertionError if one fails."""
    return {
        "tilt": tilt(2),
        "continuity": continuity(2),
        "residual_layer": residual_layer(2),
        "one_dimensional": one_dimensional(),
        "scalar_v": scalar_v(2),
        "diagonal": diagonal(3),
    }


if __name__ == "__main__":
    for name, residuals in check_all().items():
        print(f"{name}: {len(residuals)} identities, all zero")
