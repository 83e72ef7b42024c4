"""High-precision references for vector schedules (issue 21, "How it is judged"): a tanh
schedule against a 25-digit solution of the forward sensitivity system (mpmath odefun) and the
discrete adjoint; a ReLU schedule with a certified pattern against its closed form (affine
pieces through the exponential of a block matrix) differentiated at 40 digits."""

from __future__ import annotations

import mpmath as mp

from certified.arith.exact import to_fmpq
from certified.models import Schedule
from certified.training.examples import small_problem
from certified.training.gradient import certified_gradient


def _q(v):
    v = to_fmpq(v)
    return mp.mpf(int(v.p)) / int(v.q)


def _inside(pair, value) -> bool:
    return _q(pair[0]) <= value <= _q(pair[1])


def test_vector_tanh_against_a_25_digit_sensitivity_solve():
    mp.mp.dps = 25
    schedule, X, Y = small_problem()
    obj = schedule.to_json()
    obj["pieces"][1]["duration"] = "1/4"  # shorter: the reference solve dominates the cost
    schedule = Schedule.from_json(obj)
    d = p = 2
    P = 2 * d * p + p
    x, mats = [_q(v) for v in X[0]], []
    for piece in schedule.pieces:
        W = mp.matrix([[_q(v) for v in r] for r in piece.W])
        A = mp.matrix([[_q(v) for v in r] for r in piece.A])
        b = mp.matrix([_q(v) for v in piece.b])

        def rhs(t, Z, W=W, A=A, b=b):
            xx = mp.matrix(Z[:d])
            M = mp.matrix([[Z[d + i * d + j] for j in range(d)] for i in range(d)])
            S = mp.matrix([[Z[d + d * d + i * P + j] for j in range(P)] for i in range(d)])
            y = (A * xx + b).apply(mp.tanh)
            u = [1 - y[j] ** 2 for j in range(p)]
            Df = mp.matrix([[sum(W[i, j] * u[j] * A[j, k] for j in range(p)) for k in range(d)]
                            for i in range(d)])  # fmt: skip
            F = mp.matrix(d, P)
            for i in range(d):
                for j in range(p):
                    F[i, i * p + j] = y[j]
                    for k in range(d):
                        F[i, d * p + j * d + k] = W[i, j] * u[j] * xx[k]
                    F[i, 2 * d * p + j] = W[i, j] * u[j]
            dM, dS = Df * M, Df * S + F
            return [*(W * y), *(dM[i, j] for i in range(d) for j in range(d)),
                    *(dS[i, j] for i in range(d) for j in range(P))]  # fmt: skip

        Z0 = [
            *x,
            *(mp.mpf(int(i == j)) for i in range(d) for j in range(d)),
            *[mp.mpf(0)] * (d * P),
        ]
        Z = mp.odefun(rhs, 0, Z0)(_q(piece.duration))
        x = Z[:d]
        M = mp.matrix([[Z[d + i * d + j] for j in range(d)] for i in range(d)])
        mats.append(
            (M, mp.matrix([[Z[d + d * d + i * P + j] for j in range(P)] for i in range(d)]))
        )
    pv = mp.matrix([x[i] - _q(Y[0][i]) for i in range(d)])
    ref = [None, None]
    for j in (1, 0):
        ref[j] = mats[j][1].T * pv
        pv = mats[j][0].T * pv
    r = certified_gradient(schedule, X[:1], Y[:1])
    assert _inside(r.loss, sum((x[i] - _q(Y[0][i])) ** 2 for i in range(d)) / 2)
    for j in range(2):
        for k in range(P):
            assert _inside(r.gradient[j][k], ref[j][k]), (j, r.names[k])


def test_vector_relu_against_its_closed_form():
    mp.mp.dps = 40
    obj = small_problem("relu")[0].to_json()
    for piece, b in zip(obj["pieces"], (["2", "-3"], ["3", "3"]), strict=True):
        piece["b"] = b  # neuron 1 inactive in piece 0, every neuron active in piece 1
    schedule = Schedule.from_json(obj)
    X, Y = [["1/2", "-1/4"]], [["1", "0"]]
    r = certified_gradient(schedule, X, Y, eps="1/10")
    d = p = 2
    theta = [[_q(v) for v in (*pc.W.ravel(), *pc.A.ravel(), *pc.b)] for pc in schedule.pieces]
    masks = [(1, 0), (1, 1)]

    def J(th):  # noqa: N802 (the loss J)
        x = mp.matrix([_q(v) for v in X[0]])
        reg = 0
        for piece, t, s in zip(schedule.pieces, th, masks, strict=True):
            W = mp.matrix([[t[i * p + j] * s[j] for j in range(p)] for i in range(d)])
            A = mp.matrix([[t[d * p + j * d + i] for i in range(d)] for j in range(p)])
            b = mp.matrix([t[2 * d * p + j] for j in range(p)])
            G, c = W * A, W * b
            big = mp.zeros(d + 1, d + 1)
            for i in range(d):
                for k in range(d):
                    big[i, k] = G[i, k]
                big[i, d] = c[i]
            E = mp.expm(big * _q(piece.duration))
            x = mp.matrix([sum(E[i, k] * x[k] for k in range(d)) + E[i, d] for i in range(d)])
            reg += _q(piece.duration) * sum(v * v for v in t)
        return sum((x[i] - _q(Y[0][i])) ** 2 for i in range(d)) / 2 + reg / 20

    assert _inside(r.loss, J(theta))
    for j in range(2):
        for k in range(len(theta[j])):

            def f(u, j=j, k=k):
                th = [list(t) for t in theta]
                th[j][k] = u
                return J(th)

            assert _inside(r.gradient[j][k], mp.diff(f, theta[j][k])), (j, r.names[k])
