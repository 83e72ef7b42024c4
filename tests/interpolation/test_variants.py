"""Interpolation variants: classification (p = 1), semi-autonomous B, autonomous D.

Containment against independent references (exact replays, 50-digit mpmath solutions, brute-force
enumeration), property tests on the public strategies, bad input, deliberately broken inputs.
"""

from __future__ import annotations

import copy
import itertools
import math

import flint
import mpmath
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from certified.arith.exact import to_fmpq
from certified.errors import DomainError, InputError, NonFiniteError, ShapeError
from certified.flow.api import enclose_flow
from certified.interpolation.autonomous import (
    check_probability_lower_bound,
    construct_autonomous,
    event_probability,
    sample_separation_frequency,
    separating_coordinate,
    separation_probability,
)
from certified.interpolation.classification import (
    classification_switch_formula,
    construct_classification,
    verify_classification,
)
from certified.interpolation.semi_autonomous import (
    check_semi_autonomous,
    construct_semi_autonomous,
    displacement_rank_witness,
    is_semi_autonomous,
    refuting_dataset,
    replay_semi_autonomous,
)
from certified.models import Piece, Schedule
from certified.strategies import datasets

# --- classification ---------------------------------------------------------------------------


@st.composite
def labelled(draw, n=(2, 40), d=(2, 5), extreme=False):
    X, _ = draw(datasets(n=n, d=d, extreme=extreme))
    if len(X) < 2:
        X = np.vstack([X, X + 1])
    labels = draw(st.lists(st.integers(0, 1), min_size=len(X), max_size=len(X)))
    labels[0], labels[-1] = 0, 1  # both classes present
    return X, np.array(labels)


def _images(schedule, X):
    """Independent exact replay: the additive composition x + Σ τ w (a·x + b)_+ per piece."""
    Z = np.array([[to_fmpq(v) for v in row] for row in X], dtype=object)
    for p in schedule.pieces:
        pre = Z.dot(p.A[0]) + p.b[0]
        act = np.array([q if q > 0 else flint.fmpq(0) for q in pre], dtype=object)
        Z = Z + p.duration * np.outer(act, p.W[:, 0])
    return Z


@settings(max_examples=25)
@given(labelled(n=(2, 24)), st.integers(0, 4))
@example((np.array([[0.0, 0.0], [1.0, 0.0]]), np.array([0, 1])), 0)
@example((np.array([[float(k), 0.0] for k in range(6)]), np.array([0, 0, 0, 0, 1, 1])), 0)
def test_classification_is_exact_and_within_the_switch_formula(data, j):
    X, labels = data
    d = X.shape[1]
    c = construct_classification(X, labels, coordinate=j % d, time="3/2")
    assert c.verdict.verdict == "VERIFIED" and c.verdict.exact and c.verdict.margin > 0
    m = min(int(labels.sum()), len(labels) - int(labels.sum()))
    assert c.formula_switches == classification_switch_formula(
        int(labels.sum()), len(labels) - int(labels.sum()), d
    )
    assert c.switches == 3 * len(c.groups) - 1
    if all(len(g) == d for g in c.groups[:-1]):  # general position: full groups of d points
        assert len(c.groups) == -(-m // d)
        assert c.switches == 3 * -(-m // d) - 1 <= c.formula_switches
    assert c.schedule.width == 1 and c.schedule.is_laminar()
    assert c.schedule.total_time == flint.fmpq(3, 2)
    Z = _images(c.schedule, X)
    for n in range(len(X)):
        assert (Z[n, j % d] > 1) == bool(labels[n]) and Z[n, j % d] != 1


@settings(max_examples=8)
@given(labelled(n=(2, 12), d=(2, 3), extreme=True))
def test_classification_extreme_magnitudes(data):
    X, labels = data
    assert construct_classification(X, labels).verdict.verdict == "VERIFIED"


def test_classification_matches_the_flow_engine():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(12, 3))
    labels = rng.integers(0, 2, 12)
    labels[:2] = [0, 1]
    c = construct_classification(X, labels, coordinate=2)
    res = enclose_flow(c.schedule, X)
    Z = _images(c.schedule, X)
    for n in range(len(X)):
        for k in range(3):
            lo, hi = to_fmpq(res.final.lo[n, k]), to_fmpq(res.final.hi[n, k])
            assert lo <= Z[n, k] <= hi


def test_classification_refuted_when_labels_are_swapped():
    X = [[0, 0], [1, 0], [0, 1], [2, 3]]
    c = construct_classification(X, [1, 0, 0, 1])
    v = verify_classification(X, [0, 0, 0, 1], c.schedule)
    assert v.verdict == "REFUTED" and v.counterexample == 0 and v.exact


def test_classification_tampered_schedule_is_refuted():
    """Shrinking every duration leaves the points (almost) where they are: point 0 of class 1
    starts at coordinate 0 = 0 < 1, so the verifier must refute; one weakened piece too."""
    X = [[0, 0], [2, 0], [0, 1], [2, 3], [5, -1]]
    labels = [1, 0, 0, 1, 0]
    c = construct_classification(X, labels)
    short = tuple(Piece(p.duration / 10**6, p.W, p.A, p.b) for p in c.schedule.pieces)
    v = verify_classification(X, labels, Schedule(2, "relu", short))
    assert v.verdict == "REFUTED" and v.counterexample is not None
    for k, p in enumerate(c.schedule.pieces):
        weak = Piece(p.duration, p.W * 0, p.A, p.b)
        pieces = list(c.schedule.pieces)
        pieces[k] = weak
        v = verify_classification(X, labels, Schedule(2, "relu", tuple(pieces)))
        images = _images(Schedule(2, "relu", tuple(pieces)), X)
        ok = all((images[n, 0] > 1) == bool(labels[n]) and images[n, 0] != 1 for n in range(5))
        assert (v.verdict == "VERIFIED") == ok


def test_classification_non_laminar_schedule_uses_enclosures():
    s = Schedule(2, "relu", (Piece(1, [[1], [1]], [[1, 0]], [0]),))
    v = verify_classification([[1, 0.5], [-1, 0]], [1, 0], s)
    assert v.verdict == "VERIFIED" and not v.exact and v.margin > 0


@pytest.mark.parametrize(
    ("X", "labels", "kw", "error", "match"),
    [
        ([[0], [1]], [0, 1], {}, DomainError, "d >= 2"),
        ([[0, 0], [1, 1]], [1, 1], {}, InputError, "both classes"),
        ([[0, 0], [1, 1]], [0, 2], {}, InputError, r"labels\[1\]"),
        ([[0, 0], [1, 1]], [0], {}, ShapeError, "labels"),
        ([[0, 0], [0, 0]], [0, 1], {}, InputError, "distinct"),
        ([[0, 0], [1, 1]], [0, 1], {"time": 0}, InputError, "time"),
        ([[0, float("nan")], [1, 1]], [0, 1], {}, NonFiniteError, "X"),
        ([[0, 0], [1, 1]], [0, 1], {"coordinate": 2}, InputError, "coordinate"),
        (np.zeros((0, 2)), [], {}, ShapeError, "N = 0"),
    ],
)
def test_classification_bad_input(X, labels, kw, error, match):
    with pytest.raises(error, match=match):
        construct_classification(X, labels, **kw)


# --- semi-autonomous (B) ----------------------------------------------------------------------


@pytest.mark.parametrize(("p", "d", "N"), [(1, 2, 2), (2, 3, 3), (3, 5, 7), (4, 16, 40)])
def test_semi_autonomous_refuted_with_an_exact_minor(p, d, N):
    X, Y = refuting_dataset(p, d, N)
    v = check_semi_autonomous(X, Y, p)
    assert v.verdict == "REFUTED" and v.rank == min(d, N) > p
    rows, cols = v.witness
    assert len(rows) == len(cols) == p + 1
    # independent check of the witness: the minor of Y - X, by Leibniz over permutations
    D = [[Y[i, c] - X[i, c] for c in cols] for i in rows]
    det = flint.fmpq(0)
    for perm in itertools.permutations(range(p + 1)):
        sign = (-1) ** sum(1 for a, b in itertools.combinations(perm, 2) if a > b)
        det += sign * math.prod((D[r][perm[r]] for r in range(p + 1)), start=flint.fmpq(1))
    assert det == v.determinant != 0


def _leibniz(D):
    k = len(D)
    det = flint.fmpq(0)
    for perm in itertools.permutations(range(k)):
        sign = (-1) ** sum(1 for a, b in itertools.combinations(perm, 2) if a > b)
        det += sign * math.prod((D[r][perm[r]] for r in range(k)), start=flint.fmpq(1))
    return det


@settings(max_examples=30)
@given(datasets(n=(2, 12), d=(3, 6), layout="random"), st.integers(1, 3))
@example(  # regression: a leading submatrix of a nonsingular minor can be singular
    (
        np.array([[0.0, 0.0, 0.0], [5.0, 0.0, 0.0], [0.0, 5.0, 0.0]]),
        np.array([[1.0, 0.0, 0.0], [6.0, 0.0, 1.0], [0.0, 6.0, 0.0]]),
    ),
    1,
)
def test_semi_autonomous_witness_minor_on_general_data(data, p):
    X, Y = data
    v = check_semi_autonomous(X, Y, p) if len({tuple(r) for r in X}) == len(X) else None
    rank = displacement_rank_witness(X, Y)[0]
    if v is None or rank <= p:
        return
    rows, cols = v.witness
    assert len(rows) == len(cols) == p + 1
    D = [[to_fmpq(Y[i, c]) - to_fmpq(X[i, c]) for c in cols] for i in rows]
    assert _leibniz(D) == v.determinant != 0


@settings(max_examples=25)
@given(datasets(n=(1, 25), d=(2, 4)), st.integers(1, 12))
# regression: y_1 - y_0 parallel to u = (1, 1) once made the phase-2 direction impossible
@example((np.array([[0.0, 0.0], [1.0, 0.0]]), np.array([[0.0, 0.0], [1.0, 1.0]])), 4)
@example((np.eye(3)[:2] * [1, 2, 3], np.eye(3)[1:] * [5, 1, 2]), 5)  # d = 3, p = d + 2 < 2d
def test_semi_autonomous_verdicts(data, p):
    X, Y = data
    N, d = X.shape
    v = check_semi_autonomous(X, Y, p)
    rank = displacement_rank_witness(X, Y)[0]
    assert v.rank == rank
    if rank > p:
        assert v.verdict == "REFUTED"
    elif p >= d + 2:
        assert v.verdict == "VERIFIED"
        m = p // (d + 2)
        assert v.switches == 2 * -(-N // m) - 1 and v.schedule.width <= p
        assert is_semi_autonomous(v.schedule)
        images = replay_semi_autonomous(v.schedule, X)
        assert all(images[n, k] == to_fmpq(Y[n, k]) for n in range(N) for k in range(d))
    else:
        assert v.verdict == "UNDECIDED" and "d + 2" in v.message


def test_semi_autonomous_construction_matches_the_flow_engine():
    rng = np.random.default_rng(5)
    X, Y = rng.normal(size=(6, 2)), rng.normal(size=(6, 2))
    s = construct_semi_autonomous(X, Y, 4)
    res = enclose_flow(s, X, method="regions")
    for n in range(6):
        for k in range(2):
            assert to_fmpq(res.final.lo[n, k]) <= to_fmpq(Y[n, k]) <= to_fmpq(res.final.hi[n, k])


def test_semi_autonomous_replay_rejects_tampering():
    rng = np.random.default_rng(6)
    X, Y = rng.normal(size=(5, 2)), rng.normal(size=(5, 2))
    s = construct_semi_autonomous(X, Y, 4)
    p = s.pieces[0]
    b = p.b.copy()
    off_value = min(b)  # switched-off neurons share the lowest bias
    k = next(i for i, q in enumerate(b) if q != off_value)  # an active kink
    b[k] = b[k] + flint.fmpq(1, 7)
    tampered = Schedule(2, "relu", (Piece(p.duration, p.W, p.A, b), *s.pieces[1:]))
    images = replay_semi_autonomous(tampered, X)
    assert images is None or any(images[n, c] != to_fmpq(Y[n, c]) for n in range(5) for c in (0, 1))
    # switching an "off" neuron on makes the active set non-laminar: no exact replay
    off = p.b.copy()
    i = next(i for i, q in enumerate(off) if q == off_value and list(p.A[i]) != list(p.A[0]))
    off[i] = flint.fmpq(10**9)
    broken = Schedule(2, "relu", (Piece(p.duration, p.W, p.A, off), *s.pieces[1:]))
    assert replay_semi_autonomous(broken, X) is None


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        (([[0, 0], [1, 1]], [[0, 1], [1, 0]], 0), InputError, "width"),
        (([[0], [1]], [[2], [3]], 1), DomainError, "d >= 2"),
        (([[0, 0], [0, 0]], [[0, 1], [1, 0]], 4), InputError, "distinct"),
        (([[0, 0], [1, 1]], [[0, 1]], 4), ShapeError, "Y"),
    ],
)
def test_semi_autonomous_bad_input(args, error, match):
    with pytest.raises(error, match=match):
        check_semi_autonomous(*args)


# --- autonomous (D) ---------------------------------------------------------------------------


@pytest.mark.parametrize("N", [1, 2, 3, 4])
def test_separation_probability_by_enumeration(N):
    """Count the orderings of 2N distinct numbers in which each pair is adjacent."""
    good = 0
    for perm in itertools.permutations(range(2 * N)):
        pos = {v: k for k, v in enumerate(perm)}
        good += all(abs(pos[2 * n] - pos[2 * n + 1]) == 1 for n in range(N))
    assert separation_probability(N) == flint.fmpq(good, math.factorial(2 * N))


def test_separation_probability_values():
    assert [separation_probability(n) for n in (1, 2, 3)] == [
        1,
        flint.fmpq(1, 3),
        flint.fmpq(1, 15),
    ]
    assert event_probability(2, 2) == 1 - flint.fmpq(2, 3) ** 2


def test_probability_lower_bound_holds_for_n_up_to_200():
    assert all(check_probability_lower_bound(N) for N in range(1, 201))


def test_probability_lower_bound_is_tight_enough_to_fail_when_broken():
    """A bound 1.1x larger is false for N = 1 (q_1 = 1 < 1.1 e/(2√2) ~ 1.057): arb sees it."""
    from certified.arith.ball import precision

    with precision(128):
        rhs = flint.arb("1.1") * flint.arb(1).exp() / 2 / flint.arb(2).sqrt()
        assert not (flint.arb(separation_probability(1)) - rhs > 0)


def test_monte_carlo_agrees_with_the_exact_probability():
    """Sanity only: 4 standard deviations of a binomial frequency (seeded)."""
    for N, d in [(2, 1), (3, 2), (4, 3)]:
        q = float(event_probability(N, d))
        f = sample_separation_frequency(N, d, 40_000, seed=N)
        assert abs(f - q) < 4 * math.sqrt(q * (1 - q) / 40_000)


def _event_data(rng, N, d, j=0):
    X, Y = rng.random((N, d)), rng.random((N, d))
    X[:, j] = np.arange(N) + 0.1 * rng.random(N)
    Y[:, j] = X[:, j] + 0.8 * rng.random(N) - 0.4
    return X, Y


def _reference_images(schedule, X, j):
    """50-digit solution of ẋ = F(x^j): x^j solves a scalar affine ODE between kinks (the
    trajectories cross none), the other coordinates integrate it."""
    p = schedule.pieces[0]
    T = mpmath.mpf(int(schedule.total_time.p)) / int(schedule.total_time.q)
    out = []
    with mpmath.workdps(50):
        f = lambda q: mpmath.mpf(int(q.p)) / int(q.q)  # noqa: E731
        for x in X:
            z0 = f(to_fmpq(x[j]))
            act = [i for i in range(p.width) if f(p.b[i]) + z0 > 0]
            G = sum(f(p.W[j, i]) * f(p.b[i]) for i in act)
            a = sum(f(p.W[j, i]) for i in act)
            # z' = a z + G: z(t) = (z0 + G/a) e^{at} - G/a; ∫(z + b_i) dt in closed form
            zint = (z0 + G / a) * mpmath.expm1(a * T) / a - G / a * T
            row = []
            for k in range(len(x)):
                if k == j:
                    row.append((z0 + G / a) * mpmath.exp(a * T) - G / a)
                else:
                    row.append(
                        f(to_fmpq(x[k])) + sum(f(p.W[k, i]) * (zint + f(p.b[i]) * T) for i in act)
                    )
            out.append(row)
    return out


@pytest.mark.parametrize(("N", "d", "T"), [(1, 2, 1), (3, 4, 2), (6, 3, "1/3"), (10, 2, 1)])
def test_autonomous_interpolation_certified(N, d, T):
    rng = np.random.default_rng(N)
    X, Y = _event_data(rng, N, d)
    r = construct_autonomous(X, Y, time=T)
    assert r.coordinate == 0 and r.schedule.switches == 0 and r.schedule.width == N
    v = r.verdict
    assert v.verdict == "VERIFIED" and v.max_error < flint.fmpq(1, 10**9)
    ref = _reference_images(r.schedule, X, 0)
    with mpmath.workdps(50):
        for n in range(N):
            err = mpmath.sqrt(sum((ref[n][k] - mpmath.mpf(Y[n, k])) ** 2 for k in range(d)))
            bound = mpmath.mpf(int(v.max_error.p)) / int(v.max_error.q)
            assert err <= bound


def test_autonomous_in_another_coordinate_and_on_exact_data():
    X = [["0", "1/3"], ["5", "2"], ["1", "-1"]]
    Y = [["1/2", "1"], ["7", "3"], ["-4", "-1/2"]]
    assert separating_coordinate(X, Y) == 1
    r = construct_autonomous(X, Y)
    assert r.coordinate == 1 and r.verdict.max_error < flint.fmpq(1, 10**9)


def test_autonomous_outside_the_event_is_refused():
    X, Y = [[0, 0], [1, 1]], [[2, 2], [-1, -1]]  # intervals overlap in both coordinates
    assert separating_coordinate(X, Y) is None
    with pytest.raises(DomainError, match="separation event"):
        construct_autonomous(X, Y)
    with pytest.raises(DomainError, match="coordinate"):
        construct_autonomous([[0, 0], [3, 1]], [[1, 2], [4, -1]], coordinate=1)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_probability_bad_n(bad):
    with pytest.raises(InputError, match="N"):
        separation_probability(bad)


@settings(max_examples=15)
@given(st.integers(0, 2**32), st.integers(2, 4), st.integers(2, 14))
def test_classification_certificate_is_rechecked_and_tamper_evident(seed, d, N):
    from certified.interpolation.classification import (
        check_classification_certificate,
        classification_certificate,
    )

    rng = np.random.default_rng(seed)
    X = rng.random((N, d))
    labels = [int(v) for v in rng.integers(0, 2, N)]
    if len(set(labels)) < 2:
        labels[0] = 1 - labels[1]
    c = construct_classification(X, labels)
    if c.verdict.verdict != "VERIFIED":  # pragma: no cover - degenerate draw
        return
    cert = classification_certificate(X, c)
    v = check_classification_certificate(cert, labels)
    assert v.verdict == "VERIFIED" and v.exact and v.margin == c.verdict.margin
    assert v.switches == c.switches and v.formula_switches == c.formula_switches
    # the labels decide: flipping one gives REFUTED at that point (images are exact)
    flipped = list(labels)
    flipped[0] = 1 - flipped[0]
    r = check_classification_certificate(cert, flipped)
    assert r.verdict == "REFUTED" and r.counterexample == 0
    # an image moved across the level is rejected by the checker, not believed
    forged = copy.deepcopy(cert)
    forged["claim"]["images"][0][0] = "1"
    u = check_classification_certificate(forged, labels)
    assert u.verdict == "UNDECIDED" and u.margin is None and "image" in u.message


def test_autonomous_certificate_is_accepted_and_bounds_the_error():
    from certified.checker import check_certificate
    from certified.interpolation.autonomous import autonomous_certificate, construct_autonomous

    X = [[0, 0], [3, 1], [7, -2]]
    Y = [[1, 2], [4, -1], [9, 0.5]]
    r = construct_autonomous(X, Y)
    cert = autonomous_certificate(X, r)
    assert check_certificate(cert).verified and cert["hints"]["method"] == "relu-regions"
    # the farthest corner of each certified box from y_n bounds the error; it is tiny
    worst = flint.fmpq(0)
    for box, y in zip(cert["claim"]["enclosures"], Y, strict=True):
        far = [
            max(abs(to_fmpq(lo, "lo") - to_fmpq(v, "y")), abs(to_fmpq(hi, "hi") - to_fmpq(v, "y")))
            for (lo, hi), v in zip(box, y, strict=True)
        ]
        worst = max(worst, sum((f * f for f in far), flint.fmpq(0)))
    assert worst < flint.fmpq(1, 10**20)
    # a box shrunk to exclude the true image is rejected
    forged = copy.deepcopy(cert)
    lo, hi = forged["claim"]["enclosures"][0][0]
    assert lo != hi  # a ball of positive radius: [hi, hi] misses the image (inside, not at hi)
    forged["claim"]["enclosures"][0][0] = [hi, hi]
    assert not check_certificate(forged).verified
