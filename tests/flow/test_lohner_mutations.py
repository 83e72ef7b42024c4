"""The containment tests catch a deliberately broken Taylor-Lohner step (Arb's rule: a test
must fail when the function is broken).

Each mutation is run through a few cases at a low order with long steps (so that the Lagrange
remainder and the a priori box matter far above rounding); the unmutated flow contains the
30-digit reference in every case, the mutated one misses it in at least one.
"""

from __future__ import annotations

from fractions import Fraction

import field_reference as fref
import numpy as np
import pytest

import certified.flow.taylor.lohner as LO  # noqa: N812
from certified.arith import Interval
from certified.fields import lorenz, neural_field, vanderpol
from certified.flow import SaveAt, StepPolicy, enclose_flow
from certified.flow.result import FlowStatus
from certified.models import Schedule

_POLICY = StepPolicy(order=6, jacobian_order=4, tolerance=1e-8, max_step="1/8")


def _cases():
    rng = np.random.default_rng(3)
    spec = {
        "dimension": 2,
        "activation": "tanh",
        "pieces": [
            {
                "duration": "1/2",
                "W": rng.standard_normal((2, 3)).tolist(),
                "A": rng.standard_normal((3, 2)).tolist(),
                "b": rng.standard_normal(3).tolist(),
            }
        ],
    }
    return [
        (vanderpol().for_time(2), np.array([[1.4, 2.4], [-1.0, 0.5]])),
        (lorenz().for_time("1/4"), np.array([[15.0, 15.0, 36.0]])),
        (neural_field(Schedule.from_json(spec)), np.array([[0.5, -0.5]])),
    ]


def _misses(tube: bool = False) -> int:
    """Saved enclosures (over all cases, points and times) missing the reference; with
    ``tube``, also the tube's boxes (the a priori boxes) at the ends and middle of each step."""
    count = 0
    for P, X0 in _cases():
        T = Fraction(str(P.total_time))
        save_at = SaveAt(ts=[T / 2], steps=tube)
        res = enclose_flow(P, X0, save_at=save_at, step_policy=_POLICY)
        assert res.status is FlowStatus.SUCCESS, res.message
        g = P.field.to_json()
        for i, x0 in enumerate(X0):
            refs = fref.taylor_flow(g, P, list(x0), [T / 2, T], dps=30)
            for k, ref in enumerate(refs):
                lo, hi = res.enclosures.lo[k, i], res.enclosures.hi[k, i]
                count += len(fref.outside(lo, hi, ref, rel=1e-25))
            if not tube:
                continue
            spans = [(Fraction(a), Fraction(b)) for a, b in res.hints["tube_times"]]
            times = sorted({t for a, b in spans for t in (a + (b - a) / 2, b)})
            at = dict(zip(times, fref.taylor_flow(g, P, list(x0), times, dps=30), strict=True))
            box = res.hints["tube"]
            for s, (a, b) in enumerate(spans):
                for t in (a + (b - a) / 2, b):
                    count += len(fref.outside(box.lo[s, i], box.hi[s, i], at[t], rel=1e-25))
    return count


def test_unmutated_low_order_contains():
    assert _misses(tube=True) == 0


def test_mutation_remainder_dropped_is_caught(monkeypatch):
    """_poly without its last coefficient: the Lagrange remainder x_K(B) h^K (and the
    variational one) left out."""
    original = LO._poly
    monkeypatch.setattr(LO, "_poly", lambda lo, hi, h: original(lo[:-1], hi[:-1], h))
    assert _misses() > 0


def test_mutation_a_priori_box_is_the_start_set_is_caught(monkeypatch):
    """The a priori box replaced by the start set (no Picard inflation): the remainder is then
    evaluated where the trajectory starts, not where it goes."""
    monkeypatch.setattr(
        LO, "_apriori", lambda jets, j, X, h, hw, at: (X, np.ones(X.shape[0], bool), None, None)
    )
    assert _misses() > 0


@pytest.mark.parametrize("shrink", [0.3, 0.5])
def test_mutation_a_priori_box_shrunk_is_caught(monkeypatch, shrink):
    """The validated a priori box shrunk by a fraction of its width about its centre (15%
    and 25% off each side; 5% is an equivalent mutant: the producer keeps a margin of at least
    5% of the box beyond the trajectories, so the shrunk box is still valid). The saved
    enclosures alone do not show it (the Lagrange remainder's mean-value point lies inside the
    step, where the shrunk box still reaches); the tube, whose boxes are the a priori boxes,
    must contain the trajectory at the ends of the steps."""
    original = LO._apriori

    def shrunk(jets, j, X, h, hw, at):
        B, good, Df, st = original(jets, j, X, h, hw, at)
        m, w = 0.5 * (B.lo + B.hi), (0.5 - shrink / 2) * (B.hi - B.lo)
        return Interval(m - w, m + w), good, Df, st

    monkeypatch.setattr(LO, "_apriori", shrunk)
    assert _misses(tube=True) > 0
