"""The Gaussian Transformer PDE: enclosures contain the closed forms of theorems.md §9 (1-D,
V = vI with any A, commuting symmetric V, A, Sigma0, finite-time blow-up) at 53 and 128 bits;
eigenvalues, condition numbers and W2 distances contain their exact values; Gauss-Hermite
tokens moved as particles agree with the moments to the quadrature's accuracy; swapping Q and
K changes the answer."""

from __future__ import annotations

import flint
import mpmath as mp
import pytest

from certified.errors import DomainError, InputError, ShapeError
from certified.transformers.gaussian_moments import (
    condition_number,
    covariance_eigenvalues,
    w2_to_target,
)
from certified.transformers.gaussian_pde import (
    BlowUpError,
    blowup_time,
    gaussian_pde_flow,
    moments_at,
    parse_params,
)

mp.mp.dps = 50
Q = flint.fmpq


def _mpf(q) -> mp.mpf:
    q = Q(q)
    return mp.mpf(int(q.p)) / int(q.q)


def _inside(lo, hi, x) -> bool:
    return _mpf(lo) <= x <= _mpf(hi)


def _run(params, T, prec):
    pde = parse_params(params, time=T)
    res = gaussian_pde_flow(pde, prec=prec)
    assert res.status.name == "SUCCESS", res.message
    return pde, moments_at(pde, res)


@pytest.mark.parametrize("prec", [53, 128])
def test_one_dimensional_closed_form(prec):
    v, q, k, s0, m0, T = Q(1, 2), Q(3, 4), Q(1, 2), Q(2, 3), Q(-1, 3), Q(1, 2)
    params = {"mean": [str(m0)], "cov": [[str(s0)]], "Q": [[str(q)]], "K": [[str(k)]],
              "V": [[str(v)]]}  # fmt: skip
    _, g = _run(params, str(T), prec)
    c = _mpf(v * q * k)
    den = 1 - 2 * c * _mpf(s0) * _mpf(T)
    s = _mpf(s0) / den
    m = _mpf(m0) * mp.exp(_mpf(v) * _mpf(T)) / mp.sqrt(den)
    assert _inside(*g.cov[0][0], s) and _inside(*g.mean[0], m)
    assert g.max_width() < (Q(1, 10**12) if prec == 53 else Q(1, 10**30))


def _matrix(rows):
    return [[str(Q(x)) for x in r] for r in rows]


THIRD, HALF = Q(1, 3), Q(1, 2)
V_SCALAR = {
    "mean": ["1/2", "-1/3", "1/4"],
    "cov": _matrix([[1, Q(1, 4), 0], [Q(1, 4), Q(1, 2), Q(1, 8)], [0, Q(1, 8), Q(3, 4)]]),
    "heads": [
        {"V": _matrix([[Q(1, 2), 0, 0], [0, Q(1, 2), 0], [0, 0, Q(1, 2)]]),
         "A": _matrix([[HALF, THIRD, 0], [-Q(1, 5), Q(1, 4), HALF], [0, Q(1, 7), -THIRD]])},
        {"V": _matrix([[-Q(1, 4), 0, 0], [0, -Q(1, 4), 0], [0, 0, -Q(1, 4)]]),
         "Q": _matrix([[1, 0, 1]]), "K": _matrix([[0, Q(1, 2), Q(1, 3)]])},
    ],
}  # fmt: skip


def _sigma_scalar_v(params, T) -> flint.fmpq_mat:
    """V_h = v_h I: Sigma(T)^{-1} = Sigma0^{-1} - T (G + G^T), G = sum_h v_h A_h (exact)."""
    d = len(params["mean"])
    S0 = flint.fmpq_mat(d, d, [Q(x) for r in params["cov"] for x in r])
    G = flint.fmpq_mat(d, d)
    pde = parse_params(params, time=T)
    for h in pde.pieces[0].heads:
        G += Q(h.V[0, 0]) * flint.fmpq_mat(d, d, [Q(x) for x in h.A.ravel()])
    return (S0.inv() - Q(T) * (G + G.transpose())).inv()


V_SCALAR_2D = {
    "mean": ["1/2", "-1/3"],
    "cov": _matrix([[1, Q(1, 4)], [Q(1, 4), HALF]]),
    "heads": [
        {"V": _matrix([[HALF, 0], [0, HALF]]), "A": _matrix([[HALF, THIRD], [-Q(1, 5), Q(1, 4)]])},
        {"V": _matrix([[-Q(1, 4), 0], [0, -Q(1, 4)]]), "Q": [[1, 0]], "K": _matrix([[0, HALF]])},
    ],
}  # fmt: skip


@pytest.mark.parametrize(("params", "prec"), [(V_SCALAR, 53), (V_SCALAR_2D, 128)])
def test_scalar_v_any_a_two_heads(params, prec):
    T = "3/4" if prec == 53 else "1/4"
    _, g = _run(params, T, prec)
    S = _sigma_scalar_v(params, T)
    d = len(params["mean"])
    assert all(lo <= S[i, j] <= hi for i, row in enumerate(g.cov) for j, (lo, hi) in enumerate(row))
    # eigenvalues and condition number of the exact Sigma(T)
    M = mp.matrix([[_mpf(S[i, j]) for j in range(d)] for i in range(d)])
    ev = sorted(mp.eigsy(M)[0])
    eigs = covariance_eigenvalues(g)
    assert all(_inside(lo, hi, e) for (lo, hi), e in zip(eigs, ev, strict=True))
    kappa = condition_number(eigs)
    assert kappa is not None and _inside(*kappa, ev[-1] / ev[0])


def test_scalar_v_symmetric_a_mean_and_w2():
    """V = vI, A symmetric: m(t) = e^{vt} S0^{1/2} U (I - 2vt L)^{-1/2} U^T S0^{-1/2} m0 with
    S0^{1/2} A S0^{1/2} = U L U^T; and W2 to a target contains the exact distance."""
    v, T = Q(2, 3), Q(1, 2)
    A = [[Q(1, 2), Q(1, 5)], [Q(1, 5), -Q(1, 3)]]
    S0 = [[Q(1), Q(1, 3)], [Q(1, 3), Q(1, 2)]]
    m0 = [Q(1, 2), Q(-1, 4)]
    target = {"mean": ["1", "0"], "cov": _matrix([[2, 0], [0, Q(1, 2)]])}
    params = {"mean": [str(x) for x in m0], "cov": _matrix(S0), "A": _matrix(A),
              "V": _matrix([[v, 0], [0, v]]), "target": target}  # fmt: skip
    pde, g = _run(params, str(T), 53)
    R = mp.sqrtm(mp.matrix([[_mpf(x) for x in r] for r in S0]))
    B = R * mp.matrix([[_mpf(x) for x in r] for r in A]) * R
    lam, U = mp.eigsy(B)
    D = mp.diag([1 / mp.sqrt(1 - 2 * _mpf(v) * _mpf(T) * lam[i]) for i in range(2)])
    m = (
        mp.exp(_mpf(v) * _mpf(T))
        * R
        * U
        * D
        * U.T
        * mp.inverse(R)
        * mp.matrix([_mpf(x) for x in m0])
    )
    assert all(_inside(*g.mean[i], m[i]) for i in range(2))
    # W2(N(m, S), target)^2 = |m - mt|^2 + tr S + tr St - 2 tr (S^{1/2} St S^{1/2})^{1/2}
    S = mp.matrix(
        [
            [_mpf(x) for x in r]
            for r in [[_sigma_scalar_v(params, str(T))[i, j] for j in range(2)] for i in range(2)]
        ]
    )
    St = mp.matrix([[_mpf(x) for x in r] for r in [[2, 0], [0, Q(1, 2)]]])
    Sh = mp.sqrtm(S)
    w2 = mp.sqrt((m[0] - 1) ** 2 + m[1] ** 2 + sum(S[i, i] + St[i, i] for i in range(2))
                 - 2 * sum(mp.sqrtm(Sh * St * Sh)[i, i] for i in range(2)))  # fmt: skip
    eigs = covariance_eigenvalues(g)
    w = w2_to_target(g, eigs, *pde.target)
    assert w is not None and _mpf(w.lower) <= w2 <= _mpf(w.upper)
    assert w.upper - w.lower < Q(1, 10**10)


@pytest.mark.parametrize("prec", [53, 128])
def test_commuting_symmetric_case(prec):
    """V, A, Sigma0 = U diag(.) U^T with U a rational rotation: per eigen-direction the 1-D
    closed form (Sigma exact, m by mpmath)."""
    U = [[Q(3, 5), -Q(4, 5)], [Q(4, 5), Q(3, 5)]]

    def conj(diag):
        return [[sum(U[i][k] * diag[k] * U[j][k] for k in range(2)) for j in range(2)]
                for i in range(2)]  # fmt: skip

    v, a, s = [Q(1, 2), -Q(1, 3)], [Q(1, 4), Q(1, 2)], [Q(1), Q(1, 3)]
    m0 = [Q(1, 3), Q(1, 2)]
    T = Q(1, 2)
    params = {"mean": [str(x) for x in m0], "cov": _matrix(conj(s)), "A": _matrix(conj(a)),
              "V": _matrix(conj(v))}  # fmt: skip
    _, g = _run(params, str(T), prec)
    st = [s[i] / (1 - 2 * v[i] * a[i] * s[i] * T) for i in range(2)]
    S = conj(st)
    assert all(lo <= S[i][j] <= hi for i, row in enumerate(g.cov) for j, (lo, hi) in enumerate(row))
    z0 = [sum(U[k][i] * m0[k] for k in range(2)) for i in range(2)]  # U^T m0
    z = [_mpf(z0[i]) * mp.exp(_mpf(v[i] * T)) / mp.sqrt(_mpf(1 - 2 * v[i] * a[i] * s[i] * T))
         for i in range(2)]  # fmt: skip
    m = [sum(_mpf(U[i][k]) * z[k] for k in range(2)) for i in range(2)]
    assert all(_inside(*g.mean[i], m[i]) for i in range(2))


def test_blow_up_one_dimensional_refused_with_interval():
    params = {"mean": ["1"], "cov": [["1/2"]], "Q": [[1]], "K": [[1]], "V": [[1]]}
    b = blowup_time(parse_params(params, time=2))  # c s0 = 1/2: t* = 1
    assert b.blows_up and b.lower <= 1 <= b.upper and b.family == "V = vI"
    with pytest.raises(BlowUpError, match=r"t\* in \[1, 1\]"):
        gaussian_pde_flow(parse_params(params, time=2))
    with pytest.raises(BlowUpError):  # exactly at t*: refused too
        gaussian_pde_flow(parse_params(params, time=1))
    res = gaussian_pde_flow(parse_params(params, time="9/10"))  # before t*: certified
    assert res.status.name == "SUCCESS"


def test_blow_up_scalar_v_irrational_time_and_pieces():
    """V = I, A with an irrational t* = 1 / (2 lambda_max(S0^{1/2} sym(A) S0^{1/2})), reached
    in the second piece (the first piece contracts)."""
    A = [[1, "1/2"], [0, "1/3"]]
    I2 = [[1, 0], [0, 1]]
    params = {"mean": [1, 0], "cov": [[1, 0], [0, 1]],
              "pieces": [{"duration": "1/4", "A": A, "V": [[-1, 0], [0, -1]]},
                         {"duration": 4, "A": A, "V": I2}]}  # fmt: skip
    pde = parse_params(params)
    b = blowup_time(pde)
    # after piece 1: P = I + (1/4)(A + A^T); blow-up when P - tau (A + A^T) is singular
    S = mp.matrix([[2, mp.mpf(1) / 2], [mp.mpf(1) / 2, mp.mpf(2) / 3]])
    P = mp.eye(2) + S / 4
    lam = max(mp.eig(mp.inverse(P) * S)[0], key=lambda z: mp.re(z))
    t_star = mp.mpf(1) / 4 + 1 / mp.re(lam)
    assert b.blows_up and _inside(b.lower, b.upper, t_star)
    assert b.upper - b.lower < Q(1, 10**20)
    with pytest.raises(BlowUpError):
        gaussian_pde_flow(pde)
    assert not blowup_time(pde.truncated(Q(1, 4) + Q(1, 2))).blows_up


def test_diagonal_blow_up():
    params = {"mean": [0, 1], "cov": [[1, 0], [0, "1/2"]], "A": [["1/2", 0], [0, 1]],
              "V": [[1, 0], [0, "1/2"]]}  # fmt: skip
    b = blowup_time(parse_params(params, time=3))  # t* = min(1/(2 * 1/2 * 1), 1/(2 * 1/2 * 1/2))
    assert b.family == "diagonal" and b.blows_up and b.lower <= 1 <= b.upper


def test_general_v_has_no_closed_form_but_is_certified():
    params = {"mean": [1, 0], "cov": [[1, 0], [0, 1]], "A": [[1, 0], [0, 1]],
              "V": [[1, "1/2"], [0, 1]]}  # fmt: skip
    pde = parse_params(params, time="1/4")
    assert blowup_time(pde) is None
    assert gaussian_pde_flow(pde).status.name == "SUCCESS"


def test_swapping_q_and_k_changes_the_mean():
    base = {"mean": [1, "1/2"], "cov": [[1, 0], [0, 1]], "V": [["1/2", 0], [0, "1/2"]]}
    Qm, Km = [[1, 0], [0, 1]], [["1/2", 1], [0, "1/2"]]  # Q^T K is not symmetric
    _, g1 = _run({**base, "Q": Qm, "K": Km}, "1/2", 53)
    _, g2 = _run({**base, "Q": Km, "K": Qm}, "1/2", 53)
    assert any(h1 < l2 or h2 < l1 for (l1, h1), (l2, h2) in zip(g1.mean, g2.mean, strict=True))


def test_gauss_hermite_tokens_agree_with_the_moments():
    """8 Gauss-Hermite tokens (d = 1) moved by the empirical attention: their certified
    moments at T agree with the Gaussian enclosure to the quadrature's accuracy."""
    from certified.transformers.gaussian_particles import gauss_hermite_tokens, particle_moments

    params = {"mean": ["1/2"], "cov": [["1/2"]], "Q": [[1]], "K": [["1/2"]], "V": [["1/2"]]}
    pde, g = _run(params, "1/2", 53)
    X, w = gauss_hermite_tokens(pde, 8)
    p = particle_moments(pde, X, w)
    tol = Q(1, 10**9)
    assert abs(p.mean[0][0] - g.mean[0][0]) < tol and abs(p.mean[0][1] - g.mean[0][1]) < tol
    assert abs(p.cov[0][0][0] - g.cov[0][0][0]) < tol and abs(p.cov[0][0][1] - g.cov[0][0][1]) < tol


@pytest.mark.parametrize(
    ("params", "error", "message"),
    [
        ({"mean": [0, 0], "cov": [[1, 2], [2, 1]], "A": [[1, 0], [0, 1]], "V": [[1, 0], [0, 1]]},
         DomainError, "not positive definite"),
        ({"mean": [0, 0], "cov": [[1, 0], ["1/2", 1]], "A": [[1, 0], [0, 1]],
          "V": [[1, 0], [0, 1]]}, DomainError, "not symmetric"),
        ({"mean": [0, 0], "cov": [[1, 0], [0, 1]], "A": [[1, 0], [0, 1]], "V": [[1, 0, 0]] * 2},
         ShapeError, "V"),
        ({"mean": [0, 0], "cov": [[1, 0], [0, 1]], "Q": [[1, 0]], "K": [[1, 0], [0, 1]],
          "V": [[1, 0], [0, 1]]}, ShapeError, "K"),
        ({"mean": [0], "cov": [[1, 0], [0, 1]], "A": [[1]], "V": [[1]]}, ShapeError, "cov"),
        ({"mean": [0], "cov": [[1]], "A": [[1]], "V": [[1]], "Q": [[1]]}, InputError, "not both"),
    ],
)  # fmt: skip
def test_bad_input(params, error, message):
    with pytest.raises(error, match=message):
        parse_params(params, time=1)
