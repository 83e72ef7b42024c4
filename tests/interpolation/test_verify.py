"""verify_interpolation (exact and certified-bound paths), sqrt_upper, export_float64."""

import math
from fractions import Fraction

import flint
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from interpolation_reference import reference_images

from certified.errors import InputError, ShapeError
from certified.interpolation import (
    construct_interpolation,
    export_float64,
    verify_interpolation,
)
from certified.interpolation.verify import laminar_images, sqrt_upper
from certified.models import Piece, Schedule

RNG = np.random.default_rng(11)
X, Y = RNG.random((10, 3)), RNG.random((10, 3))


def _sq_errors(images, Yq):
    return [
        sum(((a - b) * (a - b) for a, b in zip(u, v, strict=True)), flint.fmpq(0))
        for u, v in zip(images, Yq.tolist(), strict=True)
    ]


def test_construction_verifies_exactly():
    interp = construct_interpolation(X, Y, 3)
    v = verify_interpolation(X, Y, interp.schedule)
    assert (v.verdict, v.exact, v.max_error, v.max_error_squared) == ("VERIFIED", True, 0, 0)
    assert v.switches == v.formula_switches == 2 * math.ceil(10 / 3) - 1
    assert v.method == "laminar-exact"


def test_wrong_laminar_schedule_gives_the_exact_squared_error_and_an_upper_bound():
    interp = construct_interpolation(X, Y, 3)
    pieces = list(interp.schedule.pieces)
    p0 = pieces[0]
    b = p0.b.copy()
    b[0] += flint.fmpq(1, 7)  # a threshold moved: the images of some points change
    pieces[0] = Piece(p0.duration, p0.W, p0.A, b)
    wrong = Schedule(interp.schedule.dimension, "relu", tuple(pieces))
    v = verify_interpolation(X, Y, wrong)
    ref = max(_sq_errors(reference_images(wrong, interp.X), interp.Y))
    assert not v.exact and v.verdict == "VERIFIED"
    assert v.max_error_squared == ref > 0
    assert v.max_error * v.max_error >= ref
    assert v.max_error * v.max_error <= ref * (1 + flint.fmpq(1, 2**60))


def test_leaky_relu_laminar_schedule_matches_the_reference():
    interp = construct_interpolation(X, Y, 4)
    leaky = Schedule(3, "leaky_relu", interp.schedule.pieces, slope="1/3")
    images = laminar_images(leaky, interp.X)
    assert images.tolist() == reference_images(leaky, interp.X, flint.fmpq(1, 3))


def test_non_laminar_schedule_is_bounded_by_the_flow_engines():
    # A = 0: the field W relu(b) is constant (not laminar by definition), Phi(x) = x + T W relu(b)
    W = np.array([[1.0, 0.5], [0.0, -2.0]])
    piece = Piece("1/2", W, np.zeros((2, 2)), [1.0, 0.25])
    sched = Schedule(2, "relu", (piece,))
    assert not sched.is_laminar()
    Xs = np.array([[0.0, 0.0], [1.0, 2.0], [-3.0, 0.5]])
    Ys = np.array([[0.5, 0.0], [1.0, 1.0], [0.0, 0.0]])
    v = verify_interpolation(Xs, Ys, sched)
    shift = np.array([0.5 * (1.0 + 0.5 * 0.25), 0.5 * (-2.0 * 0.25)])
    true = max(math.dist(Xs[n] + shift, Ys[n]) for n in range(3))  # small exact doubles
    assert v.verdict == "VERIFIED" and v.method != "laminar-exact"
    assert float(v.max_error) >= true
    assert float(v.max_error) <= true + 1e-9


@given(st.fractions(min_value=0, max_value=10**6), st.integers(4, 200))
@settings(max_examples=50)
def test_sqrt_upper_is_an_upper_bound_and_tight(q, bits):
    q = flint.fmpq(q.numerator, q.denominator)
    r = sqrt_upper(q, bits)
    assert r >= 0 and r * r >= q
    if q:
        assert Fraction(int(r.p), int(r.q)) ** 2 <= Fraction(int(q.p), int(q.q)) * (
            1 + Fraction(1, 2 ** (bits - 2))
        )


def test_export_float64_stays_laminar_and_bounds_the_error():
    interp = construct_interpolation(X, Y, 3)
    sched, err = export_float64(interp)
    assert sched.is_float_exact and sched.is_laminar()
    assert sched.switches == interp.switches
    ref = max(_sq_errors(reference_images(sched, interp.X), interp.Y))
    assert err * err >= ref and float(err) < 1e-6


def test_export_rebuilds_the_second_phase_for_the_rounded_first():
    """Rounding every piece independently amplifies the first phase's rounding errors by the
    second phase's slopes; the export rebuilds the second phase and is far more accurate."""
    rng = np.random.default_rng(11)
    Xs, Ys = rng.random((400, 6)), rng.random((400, 6))
    interp = construct_interpolation(Xs, Ys, 6)
    sched, err = export_float64(interp)
    plain, plain_err = export_float64(interp, rebuild=False)
    assert sched.is_float_exact and sched.is_laminar() and sched.width == 6
    assert sched.switches == interp.switches and len(sched.pieces) == len(plain.pieces)
    ref = max(_sq_errors(reference_images(sched, interp.X), interp.Y))
    assert err * err >= ref
    assert float(err) < 1e-7 < float(plain_err) and err * 1000 < plain_err
    assert verify_interpolation(Xs, Ys, plain).max_error == plain_err
    with pytest.raises(InputError, match="rebuild"):
        export_float64(interp, rebuild="no")


def test_export_float64_of_the_high_dimensional_variant():
    rng = np.random.default_rng(4)
    Xh, Yh = rng.random((2, 4)), rng.random((2, 4))
    interp = construct_interpolation(Xh, Yh, 1)
    assert interp.variant == "high-dim"
    sched, err = export_float64(interp)
    assert sched.is_float_exact
    assert err is not None and float(err) < 1e-3


def test_bad_input():
    interp = construct_interpolation(X, Y, 3)
    with pytest.raises(ShapeError, match="dimension"):
        verify_interpolation(X[:, :2], Y[:, :2], interp.schedule)
    with pytest.raises(InputError, match="Schedule"):
        verify_interpolation(X, Y, {"dimension": 3})
    with pytest.raises(ShapeError):
        verify_interpolation(X, Y[:3], interp.schedule)


@given(st.integers(1, 40), st.integers(2, 5), st.integers(1, 6), st.integers(0, 2**32))
@settings(max_examples=15)
def test_float64_fast_bound_contains_the_exact_error(N, d, p, seed):
    rng = np.random.default_rng(seed)
    Xs, Ys = rng.random((N, d)) * 4 - 2, rng.random((N, d))
    interp = construct_interpolation(Xs, Ys, p, variant="general")
    sched, exact_err = export_float64(interp)
    sched_fast, bound = export_float64(interp, method="float64")
    assert sched_fast == sched
    v = verify_interpolation(Xs, Ys, sched)
    assert bound * bound >= v.max_error_squared
    assert bound >= exact_err or bound * bound >= v.max_error_squared


def test_float64_fast_path_images_match_the_exact_flow():
    from certified.interpolation.fast import float64_images, float_phases

    interp = construct_interpolation(X, Y, 3)
    sched, _ = export_float64(interp)
    spans = [tuple(h["pieces"]) for h in interp.hints["phases"]]
    phases = float_phases(sched, spans)
    exact = laminar_images(sched, interp.X)
    approx = float64_images(phases, X)
    assert np.allclose(approx, np.array(exact.tolist(), dtype=float), atol=1e-6)
    assert float_phases(interp.schedule, spans) is None  # not doubles: no float path
