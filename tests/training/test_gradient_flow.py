"""Conservation laws along a certified gradient flow (issue 21 item 3, "along training"): the
laws of a linear network stay within delta of e^{-2 lam t} h(theta_0) while the loss falls
(certified), delta is tiny, the decay is detected (the undecayed value is excluded), and a
50-digit reference trajectory satisfies the same law."""

from __future__ import annotations

import mpmath as mp
import pytest

from certified.errors import InputError, ShapeError
from certified.training.gradient_flow import laws_along_gradient_flow, linear_gradient_field

X = [["1", "0"], ["0", "1"], ["1", "1"]]
Y = [["1"], ["-1"], ["1/2"]]
THETA0 = ["1/2", "-1/3", "1/4", "1/5", "1/3", "-1/2"]  # widths 2, 2, 1: W1 (2 x 2), W2 (1 x 2)


def test_laws_stay_flat_while_the_loss_falls():
    r = laws_along_gradient_flow((2, 2, 1), X, Y, THETA0, lam="1/10", times=["1/2", "1", "2"])
    assert max(r.delta) < 1e-12
    for (lo0, _), (_, hi1) in zip(r.losses, r.losses[1:], strict=False):
        assert hi1 < lo0  # a certified decrease of the loss
    # the decay is real: the undecayed value h(theta_0) is excluded at t = 2
    t = r.times[-1]
    gap = max(abs(float(v) * (1 - mp.exp(-2 * mp.mpf(1) / 10 * float(t)))) for v in r.values0)
    assert gap > 10 * r.delta[-1]


def test_the_field_is_minus_the_gradient_of_the_loss_minus_weight_decay():
    import numpy as np

    f, _ = linear_gradient_field((2, 2, 1), X, Y)
    mp.mp.dps = 30
    th = [mp.mpf(v) for v in ("0.5", "-0.25", "0.75", "0.2", "0.3", "-0.6")]
    Xm = [[mp.mpf(int(v)) for v in row] for row in X]
    Ym = [mp.mpf(1), mp.mpf(-1), mp.mpf(1) / 2]

    def loss(t):
        W1, W2 = [[t[0], t[1]], [t[2], t[3]]], [t[4], t[5]]
        out = 0
        for x, y in zip(Xm, Ym, strict=True):
            a = [W1[i][0] * x[0] + W1[i][1] * x[1] for i in range(2)]
            out += (W2[0] * a[0] + W2[1] * a[1] - y) ** 2
        return out / (2 * len(Xm))

    grad = [mp.diff(lambda u, k=k: loss([u if i == k else th[i] for i in range(6)]), th[k])
            for k in range(6)]  # fmt: skip
    got = f.evaluate(np.array([[float(v) for v in th]]), ["1/10"])[0]
    for k in range(6):
        assert abs(got[k] - float(-grad[k] - th[k] / 10)) < 1e-12


def test_bad_input():
    with pytest.raises(InputError, match="lam"):
        laws_along_gradient_flow((2, 2, 1), X, Y, THETA0, lam="-1", times=["1"])
    with pytest.raises(ShapeError, match="theta0"):
        laws_along_gradient_flow((2, 2, 1), X, Y, THETA0[:3], times=["1"])
    with pytest.raises(ShapeError):
        laws_along_gradient_flow((2, 2, 1), X, [["1", "2"]] * 3, THETA0, times=["1"])
