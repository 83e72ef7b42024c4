"""The float64 replay of gradient certificates (``checker.sensitivity64``, issue 21): it
contains the 128-bit arb replay's enclosures and the 25-digit reference, writes certificates
that the checker verifies and rejects when mutated, and refuses what it does not cover."""

from __future__ import annotations

import copy

import mpmath as mp
import pytest

from certified.arith.exact import to_fmpq
from certified.checker import check_certificate
from certified.errors import InputError
from certified.models import Schedule
from certified.training.certificate import gradient_certificate
from certified.training.examples import small_problem
from certified.training.gradient import certified_gradient


def _one_piece(activation: str = "tanh"):
    schedule, X, Y = small_problem(activation)
    obj = schedule.to_json()
    return Schedule.from_json({**obj, "pieces": obj["pieces"][1:]}), X, Y


@pytest.mark.parametrize("activation", ["tanh", "sigmoid"])
def test_float64_replay_contains_the_128_bit_replay(activation):
    schedule, X, Y = _one_piece(activation)
    ref = certified_gradient(schedule, X[:1], Y[:1], eps="1/10", prec=128)
    one = certified_gradient(schedule, X[:1], Y[:1], eps="1/10", method="float64")
    assert one.loss[0] <= ref.loss[0] and ref.loss[1] <= one.loss[1]
    for j in range(len(ref.gradient)):
        for (lo, hi), (rlo, rhi) in zip(one.gradient[j], ref.gradient[j], strict=True):
            assert lo <= rlo and rhi <= hi
    assert one.max_width < 1e-12  # d = p = 2 at 53 bits (issue 21)


def test_float64_replay_contains_the_scalar_closed_form():
    # x' = w tanh(a x + b), one point: sinh z(t) = sinh z(0) e^{a w t}, z = a x + b, at 50 digits
    mp.mp.dps = 50
    w, a, b, x0, y, T = (mp.mpf(1) / 2, mp.mpf(3) / 4, mp.mpf(1) / 8, mp.mpf(1) / 2, 1, 1)
    schedule = Schedule.from_json({"dimension": 1, "activation": "tanh", "pieces": [
        {"duration": "1", "W": [["1/2"]], "A": [["3/4"]], "b": ["1/8"]}]})  # fmt: skip

    def final(w, a, b):
        z = mp.asinh(mp.sinh(a * x0 + b) * mp.exp(a * w * T))
        return (z - b) / a

    def loss(w, a, b):
        return (final(w, a, b) - y) ** 2 / 2

    res = certified_gradient(schedule, [["1/2"]], [["1"]], method="float64")
    q = [mp.mpf(int(v.p)) / int(v.q) for pair in res.loss for v in (to_fmpq(pair),)]
    assert q[0] <= loss(w, a, b) <= q[1]
    exact = [mp.diff(lambda t: loss(t, a, b), w), mp.diff(lambda t: loss(w, t, b), a),
             mp.diff(lambda t: loss(w, a, t), b)]  # fmt: skip
    for (lo, hi), value in zip(res.gradient[0], exact, strict=True):
        assert mp.mpf(int(lo.p)) / int(lo.q) <= value <= mp.mpf(int(hi.p)) / int(hi.q)


def test_float64_certificate_is_verified_and_every_mutation_rejected():
    schedule, X, Y = small_problem()
    result = certified_gradient(schedule, X, Y, eps="1/10", method="float64")
    cert = gradient_certificate(result)
    assert cert["hints"]["arithmetic"] == "float64" and "boxes" not in cert["hints"]
    assert check_certificate(cert).verified
    for mutate in (
        lambda c: c["claim"]["loss"].__setitem__(0, c["claim"]["loss"][1]),
        lambda c: c["claim"]["gradient"][1][3].__setitem__(1, c["claim"]["gradient"][1][3][0]),
        lambda c: c["instance"]["targets"][0].__setitem__(0, "7/8"),
        lambda c: c["instance"].__setitem__("eps", "1/5"),
        lambda c: c["instance"]["pieces"][0]["parameters"].__setitem__(0, "1"),
        lambda c: c["hints"]["steps"][0].pop(),
        lambda c: c["hints"]["apriori"][0].__setitem__(0, "65"),
        lambda c: c["hints"].__setitem__("precision", 64),
        lambda c: c["hints"].__setitem__("arithmetic", "arb"),
        lambda c: c["hints"].pop("arithmetic"),
    ):
        bad = copy.deepcopy(cert)
        mutate(bad)
        verdict = check_certificate(bad)
        assert not verdict.verified, verdict


def test_float64_replay_refuses_what_it_does_not_cover():
    schedule, X, Y = small_problem("relu")
    with pytest.raises(InputError, match="float64"):
        certified_gradient(schedule, X, Y, method="float64")
    tanh, _, _ = small_problem()
    with pytest.raises(InputError, match="float64"):
        certified_gradient(tanh, X, Y, method="float64", prec=128)
    with pytest.raises(InputError, match="method"):
        certified_gradient(tanh, X, Y, method="rk4")
