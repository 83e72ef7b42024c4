"""The float64 export of every variant of the interpolation construction (issue 15, item 2):
every export is an exactly laminar schedule of doubles with a certified error bound, and the
bound contains the true error of those doubles, computed exactly (fmpq) by an independent
piece-by-piece replay (tests/interpolation/interpolation_reference.py).

Variant C's own parameters (a normal u of hundreds of bits) rounded to the nearest doubles are
not laminar and the flow engines gave no bound; the export now rebuilds C's phase in doubles
(certified/interpolation/_rounded_phase.py).
"""

from __future__ import annotations

import flint
import numpy as np
import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from interpolation_reference import reference_images

from certified.errors import DomainError
from certified.interpolation import construct_interpolation, export_float64
from certified.interpolation._rounded_phase import KernelLattice, round_orthogonal
from certified.strategies import datasets

_ZERO = flint.fmpq(0)


def _true_error_squared(schedule, interp) -> flint.fmpq:
    """max_n |Φ(x_n) − y_n|² of the exported doubles, exactly (independent replay)."""
    images = reference_images(schedule, interp.X.tolist())
    return max(
        sum(((a - b) * (a - b) for a, b in zip(u, v, strict=True)), _ZERO)
        for u, v in zip(images, interp.Y.tolist(), strict=True)
    )


def _check_export(interp, method="exact"):
    sched, bound = export_float64(interp, method=method)
    assert bound is not None, f"{interp.variant}: the export has no certified bound"
    assert sched.is_float_exact and sched.is_laminar()
    # rounding may make two consecutive pieces equal (merged): never more switches
    assert sched.switches <= interp.switches and sched.width <= interp.schedule.width
    true_sq = _true_error_squared(sched, interp)
    assert bound >= 0 and bound * bound >= true_sq, "the bound does not contain the error"
    return sched, bound, true_sq


def _seed_data(seed):
    rng = np.random.default_rng(seed)
    return rng.random((4, 8)), rng.random((4, 8))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_issue_15_seeds_high_dim_export_has_a_bound(seed):
    """The three instances of the issue: C succeeds with 1 switch; its export had no bound."""
    X, Y = _seed_data(seed)
    interp = construct_interpolation(X, Y, width=2, variant="high-dim")
    assert interp.variant == "high-dim" and interp.switches == 1
    _, bound, true_sq = _check_export(interp)
    assert float(bound) < 1e-12  # measured 2.4e-14 .. 7.6e-14 (general: 9e-15 .. 1.5e-13)
    assert bound * bound <= true_sq * (1 + flint.fmpq(1, 2**40)) + flint.fmpq(1, 2**200)
    _check_export(interp, method="float64")


# found by the property below: lattice points (u's repeated entries tie symmetric ones) with
# targets a few ulps apart
_LATTICE_X = np.array(
    [
        [786432.0, 0.0, 0.0, 524288.0, 524288.0, 262144.0],
        [786432.0, 786432.0, 262144.0, 524288.0, 786432.0, 786432.0],
        [262144.0, 262144.0, 786432.0, 786432.0, 0.0, 524288.0],
        [786432.0, 524288.0, 524288.0, 524288.0, 262144.0, 262144.0],
    ]
)
_ROW = [-2.73986339029139, 8.0, 28.617601529857964, -5.429555116492404, -0.27442165081031733]
_NEAR_Y1 = np.array([[*_ROW, 0.10851402888599283]] + [[*_ROW, 0.10851402888599276]] * 3)
_NEAR_Y1[:, 1] = [8.000000000000002, 7.999999999999997, 8.00000000000001, 8.000000000000007]
_NEAR_Y2 = np.array([[*_ROW, 1.0]] * 4)
_NEAR_Y2[:, 0] = [-2.739863390291388, -2.73986339029139, -2.739863390291397, -2.73986339029139]
_NEAR_Y2[:, 1] = [8.000000000000002, 7.999999999999997, 8.000000000000002, 8.000000000000002]
_NEAR_Y2[3, 2] = 28.617601529857907

_CORNER_X = -np.array(
    [[0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0, 1], [0, 0, 0, 0, 0, 1, 0], [0, 1, 1, 1, 1, 1, 0]]
    + [[1, 1, 1, 1, 1, 1, 0]],
    dtype=float,
)
_CORNER_Y = -np.ones((5, 7))  # one entry of each target a few ulps below -1
_CORNER_Y[[0, 1, 2, 3, 4], [0, 1, 3, 2, 1]] = -1.0000000000000044
_CORNER_Y[1, 1] = -1.0000000000000042


@st.composite
def _instances(draw):
    variant = draw(st.sampled_from(["auto", "general", "high-dim"]))
    if variant == "high-dim":
        N = draw(st.integers(1, 6))
        X, Y = draw(datasets(n=N, d=(N + 1, N + 6)))
    else:
        X, Y = draw(datasets(n=(1, 12), d=(2, 7)))
    p = draw(st.integers(1, len(X) + 2))
    return X, Y, p, variant


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(_instances(), st.sampled_from(["exact", "float64"]))
@example((*_seed_data(0), 2, "high-dim"), "exact")
@example((*_seed_data(1), 2, "high-dim"), "exact")
@example((*_seed_data(2), 2, "high-dim"), "float64")
@example((_LATTICE_X, _NEAR_Y1, 2, "high-dim"), "exact")  # rounded u tied two s: no bound
@example((_LATTICE_X, _NEAR_Y2, 2, "high-dim"), "exact")  # ... and fell back to non-laminar
@example((_CORNER_X, _CORNER_Y, 1, "high-dim"), "exact")  # u's entries span 2^105: ties
def test_every_variant_exports_with_a_bound_containing_the_true_error(instance, method):
    X, Y, p, variant = instance
    try:
        interp = construct_interpolation(X, Y, p, variant=variant)
    except DomainError:  # high-dim not applicable to these data (no separating u ⊥ y − x)
        assert variant == "high-dim"
        event("high-dim not applicable")
        return
    event(f"exported: {interp.variant}")
    _check_export(interp, method)


@given(
    st.lists(st.integers(-(2**40), 2**40), min_size=2, max_size=14).filter(
        lambda a: sum(1 for x in a if x) >= 2
    ),
    st.lists(st.fractions(-(10**6), 10**6), min_size=14, max_size=14),
)
def test_lattice_rounding_is_exactly_orthogonal(a, w):
    """w' = round_orthogonal(w) satisfies a·w' = 0 exactly and has double entries (whatever w:
    not even orthogonal to a), or is None."""
    import math

    a = list(a)
    if math.gcd(*a) != 1:
        a[0] += 1 if a[0] >= 0 else -1
    if math.gcd(*a) != 1 or sum(1 for x in a if x) < 2:
        return
    S = [k for k in range(len(a)) if a[k]][:12]
    if math.gcd(*(a[k] for k in S)) != 1:
        return
    lat = KernelLattice(a, S)
    wq = [flint.fmpq(f.numerator, f.denominator) for f in w[: len(a)]]
    out = round_orthogonal(wq, a, lat)
    if out is None:
        return
    assert sum((flint.fmpq(x) * y for x, y in zip(a, out, strict=True)), _ZERO) == 0
    assert all(flint.fmpq(*float(q).as_integer_ratio()) == q for q in out)


_DOUBLES = st.floats(min_value=0, max_value=1e300, allow_nan=False, allow_infinity=False)


@given(st.lists(st.lists(_DOUBLES, min_size=3, max_size=3), min_size=1, max_size=4))
@example([[1e-226, 0.0, 0.0]])  # e_k² underflowed to 0: the float64 bound was 0 (issue 15 hunt)
@example([[5e-324, 5e-324, 0.0]])
@example([[1e-300, 3e-310, 1e-250]])
def test_float64_norm_bound_contains_the_exact_norm(rows):
    from certified.interpolation.fast import _norm_upper

    bound = _norm_upper(np.array(rows, dtype=np.float64))
    exact = max(sum((flint.fmpq(*v.as_integer_ratio()) ** 2 for v in row), _ZERO) for row in rows)
    assert bound == float("inf") or flint.fmpq(*bound.as_integer_ratio()) ** 2 >= exact
    assert _norm_upper(np.array([[1.7e308, 1.7e308]])) == float("inf")


def test_an_enclosure_beyond_the_double_range_is_undecided_not_a_crash():
    """Variant D (autonomous) certifies its doubles with the flow engines; on this instance the
    field's slope 1.2e3 makes the enclosure overflow: UNDECIDED (no bound), no exception (it
    raised RangeOverflowError out of verify_interpolation)."""
    from certified.interpolation.autonomous import construct_autonomous

    rng = np.random.default_rng(37)
    X, Y = rng.random((2, 3)), rng.random((2, 3))
    with np.errstate(all="ignore"):
        r = construct_autonomous(X, Y)
    assert r.verdict.verdict == "UNDECIDED" and r.verdict.max_error is None
    assert "double range" in r.verdict.message or "exceeds float64" in r.verdict.message


@st.composite
def _larger_instances(draw):
    extreme = draw(st.booleans())
    variant = draw(st.sampled_from(["auto", "general", "high-dim"]))
    if variant == "high-dim":
        N = draw(st.integers(1, 15))
        X, Y = draw(datasets(n=N, d=(N + 1, min(N + 8, 20)), extreme=extreme))
    else:
        X, Y = draw(datasets(n=(1, 40), d=(2, 12), extreme=extreme))
    return X, Y, draw(st.integers(1, len(X) + 2)), variant, extreme


@pytest.mark.slow
@settings(
    max_examples=max(4, settings.default.max_examples // 10),  # ci: 10, thorough: 200
    suppress_health_check=list(HealthCheck),
)
@given(_larger_instances(), st.sampled_from(["exact", "float64"]))
def test_larger_and_extreme_exports_never_claim_too_little(instance, method):
    """Up to N = 40, d = 20, magnitudes 1e-300 .. 1e300: a bound, when one is given, contains
    the exact error; without extreme magnitudes there always is one. With extreme ones the
    parameters may leave the double range: a clear RangeOverflowError, never a wrong bound."""
    from certified.errors import RangeOverflowError

    X, Y, p, variant, extreme = instance
    try:
        interp = construct_interpolation(X, Y, p, variant=variant)
    except DomainError:
        return
    try:
        with np.errstate(all="ignore"):
            sched, bound = export_float64(interp, method=method)
    except RangeOverflowError as exc:
        assert extreme and "beyond the float64 range" in str(exc)
        return
    if bound is None:
        assert extreme, "no bound without extreme magnitudes"
        return
    if sched.is_laminar():
        assert bound * bound >= _true_error_squared(sched, interp)
