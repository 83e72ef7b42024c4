"""Property tests of the interpolation constructions on the public strategies
(``certified.strategies``): every construction interpolates exactly (checked by an independent
piece-by-piece replay), the switch count equals the formula, the checker accepts the
certificate, and a certificate with any single number changed is accepted only if its claim is
still true.

Datasets: N from 1 to hundreds, d from 2 to 20, p from 1 to N + 3, magnitudes 1e-300 .. 1e300,
repeated coordinates, last-bit differences, collinear and lattice data, near-degenerate data.
The ci profile runs the small ranges; ``-m slow`` with ``HYPOTHESIS_PROFILE=thorough`` the big
ones.
"""

from __future__ import annotations

import copy

import flint
import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from certified.arith.exact import to_fmpq
from certified.checker import check_certificate
from certified.interpolation import (
    construct_interpolation,
    interpolation_certificate,
    verify_interpolation,
)
from certified.models import Schedule
from certified.strategies import LAYOUTS, datasets, near_degenerate_datasets

_ZERO = flint.fmpq(0)


def _exact(a) -> np.ndarray:
    out = np.empty(np.shape(a), dtype=object)
    out.flat[:] = [to_fmpq(v) for v in np.asarray(a, dtype=object).flat]
    return out


def replay(schedule: Schedule, X: np.ndarray) -> np.ndarray | None:
    """Independent exact replay of a laminar ReLU schedule, piece by piece: in a laminar piece
    every a_i·x is constant, so the field is constant along each trajectory and
    Φ_τ(x) = x + τ W (A x + b)_+. None if a piece is not laminar."""
    Z = X.copy()
    for p in schedule.pieces:
        if not p.has_invariant_normals():
            return None
        pre = Z.dot(p.A.T) + p.b  # (N, p)
        act = np.vectorize(lambda q: q if q > 0 else _ZERO, otypes=[object])(pre)
        Z = Z + p.duration * act.dot(p.W.T)
    return Z


def formula(N: int, p: int, variant: str) -> int:
    K = -(-N // p)
    return 2 * K - 1 if variant == "general" else K - 1


def _check_construction(X, Y, p, variant="auto", time=1, certificate=True):
    interp = construct_interpolation(X, Y, p, variant=variant, time=time)
    N, d = np.shape(X)
    Xq, Yq = _exact(X), _exact(Y)
    assert interp.variant in ("general", "high-dim")
    if variant == "auto" and interp.variant == "general":
        assert d <= N or interp.formula_switches == formula(N, p, "general")
    images = replay(interp.schedule, Xq)
    assert images is not None, "a construction piece is not laminar"
    assert bool(np.all(images == Yq)), "Φ_T(x_n) != y_n"
    assert interp.switches == interp.schedule.switches == formula(N, p, interp.variant)
    assert interp.formula_switches == formula(N, p, interp.variant)
    assert interp.schedule.width <= p
    assert interp.schedule.total_time == to_fmpq(time)
    v = verify_interpolation(X, Y, interp.schedule)
    assert v.verdict == "VERIFIED" and v.exact and v.max_error == 0
    if certificate:
        cert = interpolation_certificate(interp)
        verdict = check_certificate(cert)
        assert verdict.verified, verdict.reason
    return interp


@given(datasets(n=(1, 40), d=(2, 6)), st.integers(1, 43), st.sampled_from(["auto", "general"]))
@example((np.array([[0.0, 0.0]]), np.array([[1.0, 1.0]])), 1, "auto")
@example((np.array([[0.0, 0.0], [1.0, 1.0]]), np.array([[1.0, 1.0], [0.0, 0.0]])), 3, "general")
def test_every_construction_interpolates_exactly(data, p, variant):
    X, Y = data
    _check_construction(X, Y, min(p, len(X) + 3), variant)


@settings(max_examples=30, suppress_health_check=[HealthCheck.too_slow])
@given(
    datasets(n=(1, 25), d=(2, 5), extreme=True),
    st.integers(1, 28),
    st.sampled_from(["1", "1/3", "1e-300", "1e300"]),
)
def test_extreme_magnitudes_and_times(data, p, T):
    X, Y = data
    _check_construction(X, Y, min(p, len(X) + 3), time=T)


@pytest.mark.parametrize("layout", LAYOUTS)
@settings(max_examples=10)
@given(data=st.data())
def test_every_layout(layout, data):
    X, Y = data.draw(datasets(n=(1, 30), d=(2, 5), layout=layout, extreme=True))
    p = data.draw(st.integers(1, len(X) + 3))
    _check_construction(X, Y, p)


@settings(max_examples=40)
@given(near_degenerate_datasets(n=(2, 20), d=(2, 5)), st.integers(1, 23))
def test_near_degenerate_data(data, p):
    X, Y = data
    _check_construction(X, Y, min(p, len(X) + 3))


@settings(max_examples=25)
@given(datasets(n=(1, 8), d=(9, 20)), st.integers(1, 11))
def test_high_dimensional_variant_when_d_exceeds_n(data, p):
    X, Y = data
    interp = _check_construction(X, Y, p, "auto")
    if interp.variant == "high-dim":
        assert interp.switches == -(-len(X) // p) - 1


def _numbers(obj, path=()):
    """Paths to every exact number (a string that is not a word) in a certificate."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _numbers(v, (*path, k))
    elif isinstance(obj, list):
        for k, v in enumerate(obj):
            yield from _numbers(v, (*path, k))
    elif isinstance(obj, (str, int)) and not isinstance(obj, bool):
        if isinstance(obj, int) or obj[:1].isdigit() or obj[:1] == "-":
            yield path


def _get(obj, path):
    for k in path:
        obj = obj[k]
    return obj


def _set(obj, path, value):
    for k in path[:-1]:
        obj = obj[k]
    obj[path[-1]] = value


@settings(max_examples=60)
@given(datasets(n=(1, 12), d=(2, 4)), st.integers(1, 6), st.data())
def test_a_certificate_with_one_number_changed_is_accepted_only_if_true(data, p, draw):
    X, Y = data
    interp = construct_interpolation(X, Y, min(p, len(X) + 3))
    cert = interpolation_certificate(interp)
    paths = list(_numbers(cert))
    path = draw.draw(st.sampled_from(paths))
    old = _get(cert, path)
    bad = copy.deepcopy(cert)
    if isinstance(old, int):
        new = old + draw.draw(st.sampled_from([-1, 1, 2]))
    else:
        delta = draw.draw(st.sampled_from(["1/3", "-1", "1*2^-60", "1"]))
        new = str(to_fmpq(old) + to_fmpq(delta)).replace(" ", "")
    _set(bad, path, new)
    verdict = check_certificate(bad)
    if not verdict.verified:
        return
    # accepted: the claim must still be true for the (changed) instance
    inst = bad["instance"]
    schedule = Schedule.from_json(inst["schedule"])
    images = replay(schedule, _exact(inst["X"]))
    assert images is not None
    assert bool(np.all(images == _exact(inst["Y"]))) == (bad["claim"]["result"] == "exact")
    assert bad["claim"]["switches"] == schedule.switches


@pytest.mark.slow
@settings(
    max_examples=max(3, settings.default.max_examples // 30),  # ci: 3, thorough: 66
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
@given(datasets(n=(100, 300), d=(2, 20), extreme=True), st.integers(1, 303))
def test_hundreds_of_points_up_to_dimension_twenty(data, p):
    X, Y = data
    _check_construction(X, Y, min(p, len(X) + 3))
