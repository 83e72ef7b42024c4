"""Theorem F for piecewise-constant densities (proofs/cube.md §6): honest certificates verified
with bound <= ε; cells of exact mass; the flow's images, recomputed at 50 digits from the
closed forms of its pieces, land in their target cells; an independent certified W_1 estimate
consistent with the bound; every tampering rejected with its reason; bad input refused."""

import copy
import json
import math

import flint
import mpmath
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from certified.checker import check_bytes, check_certificate
from certified.cube import (
    BoxDensity,
    density_certificate,
    density_to_cube,
    push_points,
    read_box_density,
)
from certified.errors import DomainError, InputError
from certified.transport import Measure, wasserstein

D2 = {  # a zero box and unequal columns
    "grid": [[0, 1, 3, 4], [-1, "1/2", 2]],
    "masses": [["1/10", "1/5"], ["0", "3/10"], ["1/4", "3/20"]],
}
D3 = {
    "grid": [[0, 1, 2], [0, 2, 3], [0, 1, "3/2"]],
    "masses": [[["1/10", "0"], ["1/5", "1/10"]], [["1/20", "3/20"], ["1/4", "3/20"]]],
}


@pytest.fixture(scope="module")
def run2():
    return density_to_cube(read_box_density(D2), 2, "1/10")


@pytest.fixture(scope="module")
def run3():
    return density_to_cube(read_box_density(D3), 3, "1/4", "5/4")


def test_honest_certificates_are_verified(run2, run3):
    for run in (run2, run3):
        cert = density_certificate(run)
        v = check_bytes(json.dumps(cert).encode())
        assert v.verified and v.kind == "transport-to-cube", v.reason
        assert run.bound <= run.epsilon and run.switches > 0
        assert run.formula_switches > run.switches


def _box_mass(density: BoxDensity, lo, hi) -> flint.fmpq:
    """μ₀ of a box by inclusion over every grid box (no bisection: a second way)."""
    total = flint.fmpq(0)
    for index, m in np.ndenumerate(density.masses):
        f = flint.fmpq(1)
        for k, r in enumerate(index):
            g = density.grid[k]
            overlap = min(hi[k], g[r + 1]) - max(lo[k], g[r])
            f *= max(overlap, flint.fmpq(0)) / (g[r + 1] - g[r])
        total += m * f
    return total


def test_cells_have_exact_masses_and_tile(run2):
    total = flint.fmpq(0)
    for cell in run2.cells:
        assert _box_mass(run2.density, cell.source_lo, cell.source_hi) == cell.mass > 0
        total += cell.mass
    assert total == 1


def _flow_50_digits(schedule, x):
    """Φ_T(x) from the closed forms: shears x + τ g(x_j), scalings c + (x_k − c) e^{l s τ}."""
    x = [mpmath.mpf(v) for v in x]
    q = lambda v: mpmath.mpf(int(v.p)) / int(v.q)  # noqa: E731
    for piece in schedule.pieces:
        W, A, b, tau = piece.W, piece.A, piece.b, q(piece.duration)
        axes = [next(k for k in range(len(x)) if A[i][k] != 0) for i in range(len(b))]
        if len(set(axes)) == 1 and not any(W[axes[0]]):
            j = axes[0]
            z = [max(q(A[i][j]) * x[j] + q(b[i]), 0) for i in range(len(b))]
            x = [
                x[m] + tau * mpmath.fsum(q(W[m][i]) * z[i] for i in range(len(b)))
                for m in range(len(x))
            ]
        else:
            for i, k in enumerate(axes):
                s, c = q(A[i][k]), -q(b[i]) / q(A[i][k])
                if s * (x[k] - c) > 0:
                    x[k] = c + (x[k] - c) * mpmath.exp(q(W[k][i]) * s * tau)
    return x


def _sample(density: BoxDensity, n: int, rng) -> np.ndarray:
    """n points of μ₀ (a box by its mass, then uniform in it), float64."""
    boxes = list(np.ndindex(density.masses.shape))
    p = np.array([float(density.masses[i]) for i in boxes])
    out = []
    for j in rng.choice(len(boxes), size=n, p=p / p.sum()):
        lo = [float(density.grid[k][r]) for k, r in enumerate(boxes[j])]
        hi = [float(density.grid[k][r + 1]) for k, r in enumerate(boxes[j])]
        out.append(rng.uniform(lo, hi))
    return np.array(out)


@pytest.mark.parametrize("which", ["run2", "run3"])
def test_images_at_50_digits_land_in_their_target_cells(which, request):
    run = request.getfixturevalue(which)
    rng = np.random.default_rng(3)
    X = _sample(run.density, 40, rng)
    with mpmath.workdps(50):
        for x in X:
            cell = next(
                c
                for c in run.cells
                if all(
                    float(a) <= v <= float(b)
                    for v, a, b in zip(x, c.source_lo, c.source_hi, strict=True)
                )
            )
            y = _flow_50_digits(run.schedule, x)
            tol = 1 if cell.buffer else mpmath.mpf(10) ** -25  # buffers: images are loose
            for v, a, b in zip(y, cell.target_lo, cell.target_hi, strict=True):
                assert (
                    mpmath.mpf(int(a.p)) / int(a.q) - tol
                    <= v
                    <= mpmath.mpf(int(b.p)) / int(b.q) + tol
                )
    Y = push_points(run.schedule, X)  # the float64 replay agrees
    assert Y.min() > -1e-6 and Y.max() < 1 + 1e-6


def test_an_independent_wasserstein_estimate_is_consistent(run2):
    """Certified W_1 of 400 pushed samples of μ₀ against a 20 x 20 grid of U is within the
    bound of the same distance for 400 uniform samples (sampling noise on both sides)."""
    rng = np.random.default_rng(8)
    grid = (np.stack(np.meshgrid(np.arange(20), np.arange(20)), -1).reshape(-1, 2) + 0.5) / 20
    pushed = push_points(run2.schedule, _sample(run2.density, 400, rng))
    uniform = rng.random((400, 2))
    w_push = wasserstein(Measure(pushed), Measure(grid), 1)
    w_unif = wasserstein(Measure(uniform), Measure(grid), 1)
    assert float(w_push.lower) <= float(w_unif.upper) + float(run2.bound)
    assert float(w_push.lower) <= 0.1  # 400 samples: noise about 0.04


def _leaf_paths(node, path=()):
    if node == "cell":
        yield path
        return
    for j, part in enumerate(node["parts"]):
        yield from _leaf_paths(part, (*path, "parts", j))


def _scale_piece(cert):
    return next(p for p in cert["claim"]["schedule"]["pieces"] if len(p["b"]) == 1)


def _shear_piece(cert):
    return next(p for p in cert["claim"]["schedule"]["pieces"] if len(p["b"]) > 1)


def _set(path, value):
    def f(c):
        obj = c
        for k in path[:-1]:
            obj = obj[k]
        obj[path[-1]] = value

    return f


MUTATIONS = [
    ("moved target", lambda c: c["hints"]["cells"]["targets"].__setitem__(0, "1/7"), "mass"),
    ("moved cut", lambda c: c["hints"]["cells"]["cuts"].__setitem__(0, "1/7"), "mass"),
    ("cut outside", lambda c: c["hints"]["cells"]["cuts"].__setitem__(0, "9"), "increasing"),
    ("cuts and targets", lambda c: c["hints"]["cells"]["targets"].pop(), "not as many"),
    (
        "leaf name",
        lambda c: _set(next(_leaf_paths(c["hints"]["cells"])), "leaf")(c["hints"]["cells"]),
        "object",
    ),
    ("node field", lambda c: c["hints"]["cells"].__setitem__("extra", 1), "unknown field"),
    (
        "scaling rate",
        lambda c: _scale_piece(c)["W"][_axis(_scale_piece(c))].__setitem__(0, "1/3"),
        "W_2^2",
    ),
    ("ramp height", lambda c: _shear_piece(c)["W"][1].__setitem__(0, "1"), "W_2^2"),
    (
        "bound halved",
        lambda c: c["claim"].__setitem__("bound", "1/1000"),
        "W_2^2",
    ),
    ("bound > eps", lambda c: c["claim"].__setitem__("bound", "1"), "not in"),
    (
        "switches",
        lambda c: c["claim"].__setitem__("switches", c["claim"]["switches"] + 1),
        "switches",
    ),
    (
        "width",
        lambda c: (
            c["instance"].__setitem__("width", 2)
            if len(c["instance"]["density"]["grid"]) == 2
            else c["instance"].__setitem__("width", 3)
        ),
        None,
    ),
    ("masses swapped", lambda c: _swap_masses(c), "mass"),
    ("negative mass", lambda c: _negative_mass(c), "negative"),
    ("mass sum", lambda c: c["instance"]["density"]["masses"][0].__setitem__(0, "1/2"), "sum"),
    ("q too large", lambda c: c["instance"].__setitem__("q", 2), "outside"),
    (
        "oblique neuron",
        lambda c: (
            _scale_piece(c)["A"][0].__setitem__(0, 1) or _scale_piece(c)["A"][0].__setitem__(1, 1)
        ),
        "axis neuron",
    ),
    ("activation", lambda c: c["claim"]["schedule"].__setitem__("activation", "tanh"), "relu"),
]


def _axis(piece):
    return next(k for k, v in enumerate(piece["A"][0]) if v not in (0, "0"))


def _swap_masses(c):
    m = c["instance"]["density"]["masses"]
    m[0][0], m[0][1] = m[0][1], m[0][0]
    if m[0][0] == m[0][1]:
        m[0][0], m[2][0] = m[2][0], m[0][0]


def _negative_mass(c):
    m = c["instance"]["density"]["masses"]
    m[0][0], m[0][1] = "-1/10", "2/5"


@pytest.mark.parametrize(("name", "mutate", "reason"), MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_tampering_is_rejected(run2, name, mutate, reason):
    cert = copy.deepcopy(density_certificate(run2))
    cert = json.loads(json.dumps(cert))
    mutate(cert)
    v = check_certificate(cert)
    if name == "width":  # the honest width is the smallest allowed: lowering it is refused
        cert["instance"]["width"] = 1
        v = check_certificate(cert)
        reason = "outside"
    assert not v.verified, name
    assert reason in v.reason, (name, v.reason)


def test_bad_density_input_is_refused():
    with pytest.raises(InputError, match="negative"):
        read_box_density({"grid": [[0, 1, 2], [0, 1]], "masses": [["3/2"], ["-1/2"]]})
    with pytest.raises(InputError, match="sum to 5/6"):
        read_box_density({"grid": [[0, 1, 2], [0, 1]], "masses": [["1/2"], ["1/3"]]})
    dens = read_box_density({"grid": [[0, 1], [0, 1]], "masses": [[1]]})
    with pytest.raises(DomainError, match="p >= d"):
        density_to_cube(dens, 1, "1/4")
    with pytest.raises(DomainError, match=r"q: 2 is outside"):
        density_to_cube(dens, 2, "1/4", 2)
    with pytest.raises(DomainError, match="d = 1"):
        density_to_cube(read_box_density({"grid": [[0, 1, 2]], "masses": ["1/2", "1/2"]}), 1, "1/4")


@st.composite
def densities(draw):
    shape = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    weights = draw(
        st.lists(st.integers(0, 5), min_size=shape[0] * shape[1], max_size=shape[0] * shape[1])
    )
    if not any(weights):
        weights[0] = 1
    grid = [
        sorted(set(draw(st.lists(st.integers(-5, 5), min_size=n + 1, max_size=n + 1, unique=True))))
        for n in shape
    ]
    total = sum(weights)
    masses = [
        [f"{weights[i * shape[1] + j]}/{total}" for j in range(shape[1])] for i in range(shape[0])
    ]
    return {"grid": grid, "masses": masses}


@settings(max_examples=12, deadline=None)
@given(densities(), st.sampled_from(["1/3", "1/5"]))
@example({"grid": [[0, 1, 2, 3], [0, 1]], "masses": [["1/2"], ["0"], ["1/2"]]}, "1/5")
@example({"grid": [[0, 1], [0, 1, 2, 3]], "masses": [["0", "1", "0"]]}, "1/5")
@example({"grid": [[0, 1], [0, 1, 2, 3]], "masses": [["1", "0", "0"]]}, "1/3")  # a run of 2 zeros
@example(  # a range of 10^6: the stacking bands must not scale with it
    {"grid": [["-250030", "-112526", "20348"], ["-210153", "95376"]], "masses": [["2/7"], ["5/7"]]},
    "1/3",
)
def test_random_densities_are_certified(density, eps):
    run = density_to_cube(read_box_density(density), 2, eps)
    v = check_certificate(json.loads(json.dumps(density_certificate(run))))
    assert v.verified, v.reason
    assert run.bound <= flint.fmpq(*(int(t) for t in eps.split("/")))


@st.composite
def densities3(draw):
    shape = tuple(draw(st.integers(1, 2)) for _ in range(3))
    n = int(np.prod(shape))
    weights = draw(st.lists(st.integers(0, 4), min_size=n, max_size=n))
    if not any(weights):
        weights[-1] = 1
    grid = [
        sorted(draw(st.sets(st.integers(-4, 4), min_size=m + 1, max_size=m + 1))) for m in shape
    ]
    masses = np.array([f"{w}/{sum(weights)}" for w in weights], dtype=object).reshape(shape)
    return {"grid": grid, "masses": masses.tolist()}


@settings(max_examples=6, deadline=None)
@given(densities3(), st.integers(3, 6))
def test_random_three_dimensional_densities_are_certified(density, width):
    run = density_to_cube(read_box_density(density), width, "1/2")
    v = check_certificate(json.loads(json.dumps(density_certificate(run))))
    assert v.verified, v.reason
    assert max(len(piece.b) for piece in run.schedule.pieces) <= width


def test_a_wide_three_dimensional_grid_is_certified():
    density = {
        "grid": [[-0.516665, 0.205275, 0.376715], ["-158894", "482083", "911916"], [-3, -2, 0]],
        "masses": [[["1/3", "0"], ["1/3", "0"]], [["0", "0"], ["1/3", "0"]]],
    }
    run = density_to_cube(read_box_density(density), 4, "1/2")
    v = check_certificate(json.loads(json.dumps(density_certificate(run))))
    assert v.verified, v.reason


@pytest.mark.parametrize("sign", [1, -1])
def test_the_rule_encloses_a_scaling_exactly_at_50_digits(sign):
    """One scaling x_0' = lam (s (x_0 - 1/2))_+ with s = +-1 (expanding: lam s = 1/2 on the active
    side), one cell C = G = [0,1]^2: the image of the active half reaches 1/2 + s e^{1/2}/2 ... ,
    S = max over B of (y - 1/2)^2 + 1/12 per axis; the rule accepts sqrt(S) + 1e-12, rejects
    sqrt(S) - 1e-12 (50-digit reference)."""
    with mpmath.workdps(50):
        far = mpmath.exp(mpmath.mpf(1) / 2) / 2  # |image of the active end - 1/2|
        S = far**2 + mpmath.mpf(1) / 12 + mpmath.mpf(1) / 4 + mpmath.mpf(1) / 12
        root = mpmath.sqrt(S)
    piece = {"duration": 1, "W": [["1/2" if sign > 0 else "-1/2"], [0]], "A": [[sign, 0]]}
    piece["b"] = ["-1/2" if sign > 0 else "1/2"]
    cert = {
        "kind": "transport-to-cube",
        "version": 1,
        "instance": {
            "density": {"grid": [[0, 1], [0, 1]], "masses": [[1]]},
            "width": 2,
            "epsilon": 2,
            "q": 1,
        },
        "claim": {
            "schedule": {"dimension": 2, "activation": "relu", "pieces": [piece]},
            "bound": None,
            "switches": 0,
        },
        "hints": {"cells": "cell"},
    }
    for delta, accepted in ((10**-12, True), (-(10**-12), False)):
        with mpmath.workdps(50):
            b = flint.fmpq(int(mpmath.nint((root + delta) * 10**30)), 10**30)
        cert["claim"]["bound"] = f"{b.p}/{b.q}"
        v = check_certificate(cert)
        assert v.verified == accepted, (sign, delta, v.reason)


def test_the_rule_encloses_a_shear_exactly():
    """x_1' = (x_0 - 1/2)_+ for time 1 on C = G = [0,1]^2: B = [0,1] x [0, 3/2], so
    S = (1/4 + 1/12) + (1 + 1/12) = 17/12 exactly: bound^2 >= 17/12 accepted, below rejected."""
    piece = {"duration": 1, "W": [[0], [1]], "A": [[1, 0]], "b": ["-1/2"]}
    cert = {
        "kind": "transport-to-cube",
        "version": 1,
        "instance": {
            "density": {"grid": [[0, 1], [0, 1]], "masses": [[1]]},
            "width": 2,
            "epsilon": 2,
            "q": 1,
        },
        "claim": {
            "schedule": {"dimension": 2, "activation": "relu", "pieces": [piece]},
            "bound": None,
            "switches": 0,
        },
        "hints": {"cells": "cell"},
    }
    s = math.isqrt(17 * 10**40 // 12)  # s^2 <= 17/12 10^40 < (s + 1)^2
    for b, accepted in ((flint.fmpq(s + 1, 10**20), True), (flint.fmpq(s, 10**20), False)):
        cert["claim"]["bound"] = f"{b.p}/{b.q}"
        assert check_certificate(cert).verified == accepted
