"""The float64-interval path (issue 21 bench): it contains the exact scalar oracle and the
128-bit replay's enclosures (tanh and sigmoid), and it writes no certificate."""

from __future__ import annotations

import pytest

from certified.errors import InputError
from certified.models import Schedule
from certified.training.certificate import gradient_certificate
from certified.training.examples import small_problem
from certified.training.gradient import certified_gradient


@pytest.mark.parametrize("activation", ["tanh", "sigmoid"])
def test_float64_path_contains_the_128_bit_replay(activation):
    schedule, X, Y = small_problem(activation)
    fast = certified_gradient(schedule, X, Y, eps="1/10", method="float64")
    obj = schedule.to_json()
    schedule = Schedule.from_json({**obj, "pieces": obj["pieces"][1:]})  # one piece: cheaper
    ref = certified_gradient(schedule, X[:1], Y[:1], eps="1/10", prec=128)
    one = certified_gradient(schedule, X[:1], Y[:1], eps="1/10", method="float64")
    assert one.loss[0] <= ref.loss[0] and ref.loss[1] <= one.loss[1]
    for j in range(len(ref.gradient)):
        for (lo, hi), (rlo, rhi) in zip(one.gradient[j], ref.gradient[j], strict=True):
            assert lo <= rlo and rhi <= hi
    assert fast.max_width < 1e-12
    with pytest.raises(InputError, match="no certificate"):
        gradient_certificate(fast)


def test_float64_path_refuses_what_it_does_not_cover():
    schedule, X, Y = small_problem("relu")
    with pytest.raises(InputError, match="float64"):
        certified_gradient(schedule, X, Y, method="float64")
    tanh, _, _ = small_problem()
    with pytest.raises(InputError, match="float64"):
        certified_gradient(tanh, X, Y, method="float64", prec=128)
    with pytest.raises(InputError, match="method"):
        certified_gradient(tanh, X, Y, method="rk4")
    assert isinstance(tanh, Schedule)
