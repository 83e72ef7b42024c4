"""Certified gradients of neural-ODE losses (issue 21 item 1): containment of exact oracles
(scalar tanh closed form, the linear ODE's gradient through the Frechet derivative of expm),
metamorphic relations (split pieces, rescaling, central differences, Noether identity), widths,
mutated certificates rejected, bad input refused."""

from __future__ import annotations

import copy

import flint
import mpmath as mp
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from certified.arith.exact import to_fmpq, to_fmpq_array
from certified.checker import check_certificate
from certified.errors import InputError, ShapeError
from certified.fields import field
from certified.models import Schedule
from certified.training.certificate import gradient_certificate
from certified.training.examples import small_problem
from certified.training.gradient import NotDifferentiableError, certified_gradient

mp.mp.dps = 50


def _mpq(v) -> mp.mpf:
    q = to_fmpq(v)
    return mp.mpf(int(q.p)) / int(q.q)


def _contains(pair, value) -> bool:
    return _mpq(pair[0]) <= value <= _mpq(pair[1])


def _scalar(w, a, b, T, x0, y, eps):
    schedule = Schedule.from_json(
        {"dimension": 1, "activation": "tanh",
         "pieces": [{"duration": T, "W": [[w]], "A": [[a]], "b": [b]}]}
    )  # fmt: skip
    return schedule, to_fmpq_array([[x0]], "X"), to_fmpq_array([[y]], "Y"), eps


def _scalar_reference(w, a, b, T, x0, y, eps):
    """J(w, a, b) from sinh z(t) = sinh z(0) e^{a w t} (theorems.md §10), and its gradient by
    50-digit differentiation of the closed form."""
    q = [_mpq(v) for v in (w, a, b, T, x0, y, eps)]
    _, _, _, Tq, xq, yq, eq = q

    def J(w, a, b):  # noqa: N802 (the loss J)
        z = mp.asinh(mp.sinh(a * xq + b) * mp.exp(a * w * Tq))
        return (((z - b) / a - yq) ** 2) / 2 + eq / 2 * Tq * (w * w + a * a + b * b)

    args = q[:3]
    grad = [mp.diff(lambda t, k=k: J(*[t if i == k else args[i] for i in range(3)]), args[k])
            for k in range(3)]  # fmt: skip
    return J(*args), grad


@settings(max_examples=4, deadline=None)
@given(
    st.sampled_from(["1/2", "-3/4", "1", "2"]),
    st.sampled_from(["1", "-1/2", "3/2"]),
    st.sampled_from(["0", "1/4", "-1/3"]),
    st.sampled_from(["1/2", "1"]),
)
@example("2", "3/2", "-1/3", "1")
def test_scalar_tanh_contains_the_closed_form(w, a, b, T):
    args = (w, a, b, T, "3/10", "1/2", "1/10")
    result = certified_gradient(*_scalar(*args)[:3], eps=args[-1])
    J, grad = _scalar_reference(*args)
    assert _contains(result.loss, J)
    names = result.names
    for k, name in enumerate(("W[0][0]", "A[0][0]", "b[0]")):
        assert _contains(result.gradient[0][names.index(name)], grad[k]), name
    assert result.max_width < 1e-12


def test_scalar_tanh_at_128_bits_is_within_1e_20():
    args = ("1/2", "1", "1/4", "1/2", "3/10", "1/2", "1/10")
    result = certified_gradient(*_scalar(*args)[:3], eps=args[-1], prec=128)
    assert check_certificate(gradient_certificate(result)).verified  # compared at 128 bits
    J, grad = _scalar_reference(*args)
    assert _contains(result.loss, J)
    for k, name in enumerate(("W[0][0]", "A[0][0]", "b[0]")):
        assert _contains(result.gradient[0][result.names.index(name)], grad[k])
    assert result.max_width < 1e-20


def _linear_field(d: int):
    names = [f"W[{i}][{j}]" for i in range(d) for j in range(d)]
    return field(
        d,
        lambda x, p: [
            sum((p.__getattr__(f"W[{i}][{j}]") * x[j] for j in range(d)), 0) for i in range(d)
        ],
        parameters=names,
    )


def test_linear_ode_gradient_is_the_frechet_derivative_of_expm():
    # x' = W x on [0, 1]: grad_W J = eps W + L_exp(W^T, g x0^T), g = e^W x0 - y (theorems §10)
    W = [["1/2", "-1/3"], ["1/4", "1/5"]]
    x0, y, eps = ["1", "-1/2"], ["1/3", "1"], "1/10"
    f = _linear_field(2).on((1, [v for row in W for v in row]))
    result = certified_gradient(f, [x0], [y], eps=eps)
    Wm = mp.matrix([[_mpq(v) for v in row] for row in W])
    xm = mp.matrix([_mpq(v) for v in x0])
    ym = mp.matrix([_mpq(v) for v in y])
    g = mp.expm(Wm) * xm - ym
    big = mp.zeros(4, 4)
    E = g * xm.T
    for i in range(2):
        for j in range(2):
            big[i, j] = big[i + 2, j + 2] = Wm[j, i]
            big[i, j + 2] = E[i, j]
    L = mp.expm(big)
    e = mp.mpf(1) / 10
    assert _contains(result.loss, (g.T * g)[0] / 2 + e / 2 * sum(v * v for v in Wm))
    for i in range(2):
        for j in range(2):
            k = result.names.index(f"W[{i}][{j}]")
            assert _contains(result.gradient[0][k], e * Wm[i, j] + L[i, j + 2])


def _mid(pair) -> float:
    return float((pair[0] + pair[1]) / 2)


def _intersect(a, b) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


def test_splitting_a_piece_adds_the_gradients():
    schedule, X, Y = small_problem()
    one = Schedule.from_json({**schedule.to_json(), "pieces": schedule.to_json()["pieces"][:1]})
    piece = one.to_json()["pieces"][0]
    halves = [{**piece, "duration": "1/4"}, {**piece, "duration": "1/4"}]
    two = Schedule.from_json({**one.to_json(), "pieces": halves})
    g1 = certified_gradient(one, X[:1], Y[:1], eps="1/10")
    g2 = certified_gradient(two, X[:1], Y[:1], eps="1/10")
    assert _intersect(g1.loss, g2.loss)
    for k in range(len(g1.names)):
        total = (g2.gradient[0][k][0] + g2.gradient[1][k][0],
                 g2.gradient[0][k][1] + g2.gradient[1][k][1])  # fmt: skip
        assert _intersect(total, g1.gradient[0][k]), g1.names[k]


def test_rescaling_a_piece_rescales_the_loss_part_of_grad_w():
    # (W, h) -> (cW, h/c) leaves the flow unchanged, so with eps = 0 the W-gradient is divided
    # by c and the A-, b-gradients are unchanged
    schedule, X, Y = small_problem()
    obj = schedule.to_json()
    piece = obj["pieces"][0]
    W2 = 2 * to_fmpq_array(piece["W"], "W")
    scaled = {**piece, "duration": "1/4", "W": [[str(v) for v in row] for row in W2.tolist()]}
    g1 = certified_gradient(Schedule.from_json({**obj, "pieces": [piece]}), X[:1], Y[:1])
    g2 = certified_gradient(Schedule.from_json({**obj, "pieces": [scaled]}), X[:1], Y[:1])
    assert _intersect(g1.loss, g2.loss)
    for k, name in enumerate(g1.names):
        c = 2 if name.startswith("W") else 1
        lo, hi = g2.gradient[0][k]
        assert _intersect((c * lo, c * hi), g1.gradient[0][k]), name


def test_central_differences_of_the_loss_agree_with_the_gradient():
    schedule, X, Y = small_problem()
    obj = schedule.to_json()
    X, Y = X[1:], Y[1:]
    base = certified_gradient(schedule, X, Y, eps="1/10")
    delta = flint.fmpq(1, 10**4)
    k = base.names.index("A[0][1]")
    losses = []
    for sign in (1, -1):
        pieces = copy.deepcopy(obj["pieces"])
        a = to_fmpq_array(pieces[1]["A"], "A")
        a[0, 1] += sign * delta
        pieces[1]["A"] = [[str(v) for v in row] for row in a.tolist()]
        r = certified_gradient(Schedule.from_json({**obj, "pieces": pieces}), X, Y, eps="1/10")
        losses.append(r.loss)
    fd = (float(losses[0][0]) - float(losses[1][1])) / (2 * float(delta))
    # truncation ~ delta^2 |J'''| / 6: far below 1e-6 for this problem
    assert abs(fd - _mid(base.gradient[1][k])) < 1e-6


def test_noether_identity_for_the_identity_activation():
    # x' = W (A x + b): W^T G_W = G_A A^T + G_b b^T for the loss part G (theorems.md §10)
    d, p = 2, 2
    names = [f"W[{i}][{j}]" for i in range(d) for j in range(p)]
    names += [f"A[{j}][{i}]" for j in range(p) for i in range(d)] + [f"b[{j}]" for j in range(p)]

    def rhs(x, q):
        z = [sum((q.__getattr__(f"A[{j}][{i}]") * x[i] for i in range(d)), q.__getattr__(f"b[{j}]"))
             for j in range(p)]  # fmt: skip
        return [sum((q.__getattr__(f"W[{i}][{j}]") * z[j] for j in range(p)), 0) for i in range(d)]

    theta = ["1/2", "-1/4", "1/3", "1/5", "1", "-1/2", "1/4", "3/4", "1/10", "-1/5"]
    f = field(d, rhs, parameters=names).on((1, theta))
    r = certified_gradient(f, [["1", "1/2"]], [["0", "1"]])
    G = {n: flint.arb(r.gradient[0][k][0]).union(flint.arb(r.gradient[0][k][1]))
         for k, n in enumerate(names)}  # fmt: skip
    th = {n: to_fmpq(v) for n, v in zip(names, theta, strict=True)}
    for a in range(p):
        for c in range(p):
            lhs = sum((th[f"W[{i}][{a}]"] * G[f"W[{i}][{c}]"] for i in range(d)), flint.arb(0))
            rhs_ = sum((G[f"A[{a}][{i}]"] * th[f"A[{c}][{i}]"] for i in range(d)), flint.arb(0))
            rhs_ += G[f"b[{a}]"] * th[f"b[{c}]"]
            assert (lhs - rhs_).contains(0), (a, c)


def test_the_certificate_is_verified_and_every_mutation_rejected():
    schedule, X, Y = small_problem()
    obj = schedule.to_json()
    schedule = Schedule.from_json({**obj, "pieces": obj["pieces"][:1]})  # one piece: cheaper
    result = certified_gradient(schedule, X[:1], Y[:1], eps="1/10")
    cert = gradient_certificate(result)
    assert check_certificate(cert).verified
    for mutate in (
        lambda c: c["claim"]["loss"].__setitem__(0, c["claim"]["loss"][1]),
        lambda c: c["claim"]["gradient"][0][3].__setitem__(1, c["claim"]["gradient"][0][3][0]),
        lambda c: c["instance"]["targets"][0].__setitem__(0, "7/8"),
        lambda c: c["instance"].__setitem__("eps", "1/5"),
        lambda c: c["instance"]["pieces"][0]["parameters"].__setitem__(0, "1"),
        lambda c: c["hints"]["steps"][0].pop(),
        lambda c: c["hints"].__setitem__("precision", 52),
    ):
        bad = copy.deepcopy(cert)
        mutate(bad)
        verdict = check_certificate(bad)
        assert not verdict.verified, verdict


def test_bad_input_is_refused():
    schedule, X, Y = small_problem()
    with pytest.raises(ShapeError, match="targets"):
        certified_gradient(schedule, X, Y[:1])
    with pytest.raises(ShapeError, match="targets"):
        certified_gradient(schedule, X, [["1", "2", "3"], ["1", "2", "3"]])
    with pytest.raises(InputError, match="eps"):
        certified_gradient(schedule, X, Y, eps="-1")
    leaky, _, _ = small_problem("leaky_relu")
    with pytest.raises(NotDifferentiableError, match="leaky_relu"):
        certified_gradient(leaky, X, Y)
    with pytest.raises(InputError):
        certified_gradient(schedule, [["nan", "0"]], Y[:1])
    assert np.all(X == small_problem()[1])


def test_a_loss_given_as_an_expression_of_the_final_state():
    # Phi(x, y) = (x - y)^4 / 4 against the scalar tanh closed form
    args = ("1/2", "1", "1/4", "1/2", "3/10", "1/2", "1/10")
    loss = field(2, lambda v, p: [(v[0] - v[1]) ** 4 / 4, 0])
    result = certified_gradient(*_scalar(*args)[:3], eps=args[-1], loss=loss)
    w, a, b, T, x0, y, eps = (_mpq(v) for v in args)

    def J(w, a, b):  # noqa: N802 (the loss J)
        z = mp.asinh(mp.sinh(a * x0 + b) * mp.exp(a * w * T))
        return ((z - b) / a - y) ** 4 / 4 + eps / 2 * T * (w * w + a * a + b * b)

    params = [w, a, b]
    assert _contains(result.loss, J(*params))
    for k, name in enumerate(("W[0][0]", "A[0][0]", "b[0]")):
        ref = mp.diff(lambda u, k=k: J(*[u if i == k else params[i] for i in range(3)]), params[k])
        assert _contains(result.gradient[0][result.names.index(name)], ref), name
    cert = gradient_certificate(result)
    assert check_certificate(cert).verified
    bad = copy.deepcopy(cert)
    bad["instance"]["loss"] = field(2, lambda v, p: [(v[0] - v[1]) ** 2 / 2, 0]).to_json()
    assert not check_certificate(bad).verified
    with pytest.raises(InputError, match="loss"):
        certified_gradient(*_scalar(*args)[:3], loss=field(1, lambda v, p: [v[0]]))
