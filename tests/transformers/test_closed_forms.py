"""Every enclosure of the attention fields contains the closed forms of theorems.md §2 (proved
in proofs/transformer_closed_forms.py), evaluated at 50 digits with mpmath."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
import transformer_reference as ref

from certified.fields import field
from certified.flow import enclose_flow
from certified.transformers import parse_instance, token_enclosures, transformer_flow

mpmath.mp.dps = 50
E3 = [[1, 0, 0], [0, 1, 0], [0, 0, 1]]


def _gram_contains(boxes, rho) -> bool:
    """rho lies in the interval Gram entries <x_i, x_k> computed from the boxes (mpmath
    interval-free: exact endpoint products bound each term)."""
    n, d = boxes.lo.shape
    for i in range(n):
        for k in range(i + 1, n):
            lo = hi = mpmath.mpf(0)
            for c in range(d):
                ends = [mpmath.mpf(float(a)) * mpmath.mpf(float(b))
                        for a in (boxes.lo[i, c], boxes.hi[i, c])
                        for b in (boxes.lo[k, c], boxes.hi[k, c])]  # fmt: skip
                lo, hi = lo + min(ends), hi + max(ends)
            if not lo <= rho <= hi:
                return False
    return True


def _rho(rho0, beta, n, T, normalised):
    def rhs(t, r):
        e = mpmath.exp(beta * r)
        z = mpmath.exp(beta) + (n - 1) * e if normalised else n
        return 2 * e * (1 - r) * (1 + (n - 1) * r) / z

    return mpmath.odefun(rhs, 0, mpmath.mpf(rho0))(T)


# the unnormalised variant at beta = 10 carries e^10 in every Taylor coefficient (the self term
# m_i e^beta x_i, projected out only after the fact): thousands of steps, left out here
@pytest.mark.parametrize(
    ("beta", "normalisation"),
    [(0, "softmax"), (10, "softmax"), (0, "mean")],
)
def test_equiangular_orthonormal_tokens(normalisation, beta):
    """Three orthonormal tokens (rho0 = 0, exact) under V = I, B = beta I stay equiangular."""
    B = [[beta * int(i == j) for j in range(3)] for i in range(3)]
    inst = parse_instance(
        {"tokens": E3, "normalisation": normalisation,
         "pieces": [{"duration": "1/2", "V": E3, "B": B}]}
    )  # fmt: skip
    res = transformer_flow(inst)
    assert res.status.name == "SUCCESS", res.message
    rho = _rho(0, beta, 3, mpmath.mpf(1) / 2, normalisation == "softmax")
    (boxes,) = token_enclosures(inst, res)
    assert float(np.max(boxes.hi - boxes.lo)) < 1e-9
    assert _gram_contains(boxes, rho)
    assert not _gram_contains(boxes, rho + mpmath.mpf(10) ** -8)  # the test can fail


@pytest.mark.parametrize(("beta", "normalisation"), [(10, "softmax"), (1, "mean")])
def test_two_nearly_antipodal_tokens(beta, normalisation):
    """n = 2 is always equiangular; tokens 2^-20 (in angle) from antipodal."""
    a = 2.0**-20
    x1 = [1.0, 0.0, 0.0]
    x2 = [-np.cos(a), np.sin(a), 0.0]
    inst = parse_instance({"tokens": [x1, x2], "normalisation": normalisation, "pieces": [
        {"duration": 1, "V": E3, "B": [[beta * int(i == j) for j in range(3)] for i in range(3)]}
    ]})  # fmt: skip
    res = transformer_flow(inst)
    assert res.status.name == "SUCCESS", res.message
    rho0 = -mpmath.mpf(np.cos(a))  # the exact product of the doubles: x1 . x2 = x2[0]
    rho = _rho(rho0, beta, 2, 1, normalisation == "softmax")
    (boxes,) = token_enclosures(inst, res)
    assert _gram_contains(boxes, rho)


def test_constant_pull_on_the_sphere():
    """V = 0, W tanh(U x + b) with U = 0: x' = k P_x^perp z with k z = W tanh(b)."""
    x0 = [0.6, 0.8, 0.0]
    W = [[0], [0], [2]]  # k z = 2 tanh(1/2) e3
    inst = parse_instance({"tokens": [x0], "pieces": [
        {"duration": "3/2", "W": W, "U": [[0, 0, 0]], "b": ["1/2"]}
    ]})  # fmt: skip
    res = transformer_flow(inst)
    assert res.status.name == "SUCCESS", res.message
    k = 2 * mpmath.tanh(mpmath.mpf(1) / 2)
    s = mpmath.tanh(mpmath.atanh(0) + k * mpmath.mpf(3) / 2)
    r = mpmath.sqrt(1 - s * s)
    exact = [r * mpmath.mpf(0.6), r * mpmath.mpf(0.8), s]
    (boxes,) = token_enclosures(inst, res)
    assert ref.contains(boxes.lo, boxes.hi, exact) == []
    assert ref.contains(boxes.lo, boxes.hi, [exact[0], exact[1], s + 1e-12]) == [2]


def test_gated_pull_hitting_time():
    """x' = (<z, x> - c) P_x^perp z (the gate stays open from s0 > c): the time at which s
    reaches s1 is t(s1) of the closed form; the flow up to that time ends at s1."""
    c, s0, s1 = mpmath.mpf(-1) / 4, mpmath.mpf(0), mpmath.mpf(1) / 2
    A, B, C = 1 / (1 - c**2), 1 / (2 * (1 - c)), -1 / (2 * (1 + c))
    T = (A * mpmath.log((s1 - c) / (s0 - c)) - B * mpmath.log((1 - s1) / (1 - s0))
         + C * mpmath.log((1 + s1) / (1 + s0)))  # fmt: skip
    gate = field(3, lambda x, p: [-(x[2] + p.c) * x[0] * x[2], -(x[2] + p.c) * x[1] * x[2],
                                  (x[2] + p.c) * (1 - x[2] * x[2])],
                 parameters=["c"], values=["1/4"])  # fmt: skip
    Tq = mpmath.nstr(T, 40)  # a decimal within 1e-40 of t(s1)
    res = enclose_flow(gate.for_time(Tq), np.array([[1.0, 0.0, 0.0]]))
    assert res.status.name == "SUCCESS", res.message
    z = res.final
    assert float(z.lo[0, 2]) - 1e-30 <= s1 <= float(z.hi[0, 2]) + 1e-30
    assert float(z.hi[0, 2] - z.lo[0, 2]) < 1e-12


def test_barycentre_flow():
    """B = 0, V = alpha alpha^T: <x, alpha> = tanh(artanh <x0, alpha> + C(t)) with
    C' = E[tanh(artanh <alpha, x0> + C)]; the part orthogonal to alpha keeps its direction."""
    X = [[0.6, 0.0, 0.8], [0.0, 0.6, 0.8], [0.0, 1.0, 0.0]]
    alpha = [0, 0, 1]
    V = [[a * b for b in alpha] for a in alpha]
    inst = parse_instance({"tokens": X, "pieces": [{"duration": 2, "V": V}]})
    res = transformer_flow(inst)
    assert res.status.name == "SUCCESS", res.message
    s0 = [mpmath.mpf(x[2]) for x in X]
    with mpmath.workdps(25):  # the enclosures are ~1e-13 wide: 25 digits decide containment
        Cf = mpmath.odefun(lambda t, C: sum(mpmath.tanh(mpmath.atanh(s) + C) for s in s0) / 3,
                           0, mpmath.mpf(0))(2)  # fmt: skip
    exact = []
    for x, s in zip(X, s0, strict=True):
        st = mpmath.tanh(mpmath.atanh(s) + Cf)
        perp = [mpmath.mpf(x[0]), mpmath.mpf(x[1])]
        norm = mpmath.sqrt(perp[0] ** 2 + perp[1] ** 2)
        scale = mpmath.sqrt(1 - st * st) / norm
        exact += [perp[0] * scale, perp[1] * scale, st]
    (boxes,) = token_enclosures(inst, res)
    assert ref.contains(boxes.lo, boxes.hi, exact) == []
