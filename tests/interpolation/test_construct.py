"""Construction A and C: exact interpolation, switch counts, laminarity, bad input."""

import math

import flint
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from interpolation_reference import reference_images

from certified.errors import DomainError, InputError, NonFiniteError, ShapeError
from certified.interpolation import (
    DuplicatePointError,
    OrderIncompatibleError,
    construct_interpolation,
)
from certified.interpolation.construct import phase_kinks


def _q(a):
    out = np.empty(np.shape(a), dtype=object)
    out.flat[:] = [
        flint.fmpq(*float(v).as_integer_ratio()) if isinstance(v, float) else flint.fmpq(v)
        for v in np.asarray(a, dtype=object).flat
    ]
    return out


def _assert_exact(X, Y, interp):
    assert interp.schedule.is_laminar()
    images = reference_images(interp.schedule, interp.X)
    assert images == interp.Y.tolist()  # rational equality, coordinate by coordinate
    assert interp.switches == interp.formula_switches == interp.schedule.switches
    assert len(interp.schedule.pieces) == interp.switches + 1
    assert interp.schedule.width <= max(1, interp.schedule.width)


DATASETS = {
    "random": (np.random.default_rng(1).random((9, 3)), np.random.default_rng(2).random((9, 3))),
    "lattice": (
        np.array([[i, j] for i in range(3) for j in range(3)], dtype=float),
        np.array([[j, -i] for i in range(3) for j in range(3)], dtype=float),
    ),
    "collinear": (
        np.array([[k, 2 * k, 3 * k] for k in range(6)], dtype=float),
        np.array([[k, k, k] for k in range(5, -1, -1)], dtype=float),
    ),
    "last-bit": (
        np.array([[1.0, 1.0], [np.nextafter(1.0, 2.0), 1.0], [1.0, np.nextafter(1.0, 2)]]),
        np.array([[0.0, 0.0], [0.0, 5e-324], [5e-324, 0.0]]),
    ),
    "huge-tiny": (
        np.array([[1e300, -1e-300], [-1e300, 1e-300], [1e-300, 1e300]]),
        np.array([[1e-300, 1e300], [1e300, 1e300], [-1e300, 0.0]]),
    ),
    "repeated-coordinates": (
        np.array([[0.5, 1.0, 0.5], [0.5, 2.0, 0.5], [0.5, 3.0, 0.5]]),
        np.array([[0.5, 0.5, 1.0], [0.5, 0.5, 2.0], [0.5, 0.5, 3.0]]),
    ),
}


@pytest.mark.parametrize("name", sorted(DATASETS))
@pytest.mark.parametrize("p", [1, 2, 4, 20])
def test_general_construction_is_exact_with_the_formula_switch_count(name, p):
    X, Y = DATASETS[name]
    interp = construct_interpolation(X, Y, p, variant="general")
    assert interp.variant == "general"
    assert interp.formula_switches == 2 * math.ceil(len(X) / p) - 1
    _assert_exact(X, Y, interp)


@pytest.mark.parametrize("T", [1, "1/3", 7.5, "1e-20"])
def test_any_positive_time(T):
    X, Y = DATASETS["random"]
    interp = construct_interpolation(X, Y, 3, time=T)
    assert interp.schedule.total_time == flint.fmpq(
        *((1, 1) if T == 1 else (1, 3) if T == "1/3" else (15, 2) if T == 7.5 else (1, 10**20))
    )
    _assert_exact(X, Y, interp)


def test_high_dimensional_variant_has_ceil_n_over_p_minus_one_switches():
    rng = np.random.default_rng(3)
    X, Y = rng.random((4, 7)), rng.random((4, 7))
    for p in (1, 2, 3, 4, 9):
        interp = construct_interpolation(X, Y, p)  # auto picks C (fewest switches)
        assert interp.variant == "high-dim"
        assert interp.formula_switches == math.ceil(4 / p) - 1
        u = np.array([flint.fmpq(k) for k in interp.directions[0]], dtype=object)
        assert all(q == 0 for q in (interp.X - interp.Y).dot(u))
        _assert_exact(X, Y, interp)
    general = construct_interpolation(X, Y, 2, variant="general")
    assert general.switches == 3 > construct_interpolation(X, Y, 2).switches == 1


def test_high_dim_falls_back_to_general_when_no_direction_exists():
    # y_0 = x_1: every u with u.(x_n - y_n) = 0 has u.x_0 = u.x_1, so C is impossible
    X = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    Y = np.array([[1.0, 0.0, 0.0], [5.0, 5.0, 5.0]])
    interp = construct_interpolation(X, Y, 1)
    assert interp.variant == "general"
    _assert_exact(X, Y, interp)
    with pytest.raises(DomainError, match="none exists"):
        construct_interpolation(X, Y, 1, variant="high-dim")
    with pytest.raises(DomainError, match="d > N"):
        construct_interpolation(*DATASETS["random"], 1, variant="high-dim")


def test_directions_are_deterministic_and_separate_the_data():
    X, Y = DATASETS["lattice"]  # e_1 does not separate the lattice: t = 1 is needed
    interp = construct_interpolation(X, Y, 2)
    u, v = interp.directions
    assert u == (1, 1) or u[0] == 1
    assert sum(a * b for a, b in zip(u, v, strict=True)) == 0
    s = [sum(flint.fmpq(a) * x for a, x in zip(u, row, strict=True)) for row in interp.X]
    assert len(set(map(str, s))) == len(s)
    assert construct_interpolation(X, Y, 2).directions == interp.directions


def test_parameters_stay_small_for_random_doubles():
    # thresholds with c - s a power of two would add ~43 bits per point (sizes growing with N);
    # power-of-two ratios keep every parameter near the data's size
    rng = np.random.default_rng(5)
    X, Y = rng.random((400, 2)), rng.random((400, 2))
    interp = construct_interpolation(X, Y, 4)
    height = max(
        max(int(q.p).bit_length(), int(q.q).bit_length())
        for piece in interp.schedule.pieces
        for a in (piece.W, piece.b)
        for q in a.flat
    )
    assert height < 400


@given(
    st.integers(1, 12),
    st.integers(2, 4),
    st.integers(1, 15),
    st.integers(0, 2**32),
    st.sampled_from(["small-ints", "dyadic", "rational"]),
)
@example(1, 2, 1, 0, "small-ints")
@example(12, 2, 15, 7, "small-ints")
@settings(max_examples=25)
def test_property_exact_interpolation(N, d, p, seed, kind):
    rng = np.random.default_rng(seed)
    if kind == "small-ints":
        pool = rng.permutation(np.array(np.meshgrid(*[range(4)] * d)).reshape(d, -1).T)
        X, Y = pool[:N], rng.permutation(pool)[:N]
        if len(pool) < N:
            return
        X, Y = _q(X.astype(int).tolist()), _q(Y.astype(int).tolist())
    elif kind == "dyadic":
        X, Y = rng.random((N, d)), rng.integers(-8, 8, (N, d)) / 4 + rng.random((N, d)) * 1e-3
    else:
        X = np.array(
            [
                [flint.fmpq(int(a), int(b)) for a, b in zip(r1, r2, strict=True)]
                for r1, r2 in zip(
                    rng.integers(-50, 50, (N, d)), rng.integers(1, 9, (N, d)), strict=True
                )
            ],
            dtype=object,
        )
        Y = np.array(
            [[flint.fmpq(int(a), 3) for a in r] for r in rng.integers(-99, 99, (N, d))],
            dtype=object,
        )
        if len({tuple(r) for r in X.tolist()}) < N or len({tuple(r) for r in Y.tolist()}) < N:
            return
    interp = construct_interpolation(X, Y, p)
    _assert_exact(X, Y, interp)


def test_phase_kinks_interpolates_prescribed_displacements():
    s = _q([5, 3, 2.5, 0, -7])
    delta = _q([[1], [-2], [0.25], [3], [0]])
    c, J, _ = phase_kinks(s, delta)
    assert all(s[i] < c[i] for i in range(5)) and all(c[i] < s[i - 1] for i in range(1, 5))
    for n in range(5):
        G = sum((J[i, 0] * max(c[i] - s[n], flint.fmpq(0)) for i in range(5)), flint.fmpq(0))
        assert G == delta[n, 0]


# --- bad input -----------------------------------------------------------------------------


X0, Y0 = DATASETS["random"]


@pytest.mark.parametrize(
    ("X", "Y", "kwargs", "error", "match"),
    [
        (
            np.array([[0.0, 1.0], [2.0, 3.0], [0.0, 1.0]]),
            np.eye(3, 2),
            {},
            DuplicatePointError,
            r"X\[0\] and X\[2\]",
        ),
        (
            np.eye(3, 2) * [1, 2],
            np.array([[1.0, 1.0], [0.0, 0.0], [1.0, 1.0]]),
            {},
            DuplicatePointError,
            r"Y\[0\] and Y\[2\]",
        ),
        (np.array([[0.0, 1.0], [-0.0, 1.0]]), np.eye(2), {}, DuplicatePointError, "X.0. and X.1."),
        (np.eye(2), np.array([[1.0, 0.0], [1.0, -0.0]]), {}, DuplicatePointError, "Y.0. and Y.1."),
        (np.float32([[0.5, 1], [0.5, 1]]), np.eye(2), {}, DuplicatePointError, "X.0. and X.1."),
        ([[0, "1/3"], [0, "2/6"]], np.eye(2), {}, DuplicatePointError, "X.0. and X.1."),
        (np.zeros((0, 2)), np.zeros((0, 2)), {}, ShapeError, "N = 0"),
        (X0, Y0[:, :2], {}, ShapeError, "shape"),
        (X0, Y0[:5], {}, ShapeError, "shape"),
        (np.array([[np.nan, 0.0]]), np.array([[0.0, 0.0]]), {}, NonFiniteError, r"X\[0\]\[0\]"),
        (np.array([[0.0, 0.0]]), np.array([[np.inf, 0.0]]), {}, NonFiniteError, r"Y\[0\]\[0\]"),
        (X0, Y0, {"width": 0}, InputError, "p = 0"),
        (X0, Y0, {"width": True}, InputError, "width"),
        (X0, Y0, {"width": 1.5}, InputError, "width"),
        (X0, Y0, {"time": 0}, InputError, "T = 0"),
        (X0, Y0, {"time": "-1/2"}, InputError, "not positive"),
        (X0, Y0, {"time": float("nan")}, NonFiniteError, "time"),
        (X0, Y0, {"variant": "fast"}, InputError, "variant"),
        (
            np.array([[0.0], [1.0]]),
            np.array([[1.0], [0.0]]),
            {},
            OrderIncompatibleError,
            "increasing",
        ),
        (np.array([[0.0], [1.0]]), np.array([[1.0], [5.0]]), {}, DomainError, "d >= 2"),
    ],
)
def test_bad_input_raises_specific_errors(X, Y, kwargs, error, match):
    width = kwargs.pop("width", 2)
    with pytest.raises(error, match=match):
        construct_interpolation(X, Y, width, **kwargs)
