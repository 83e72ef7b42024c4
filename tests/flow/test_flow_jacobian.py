"""smooth_flow_jacobian: C^1 enclosures of D Phi_T over boxes for tanh / sigmoid flows.

References (independent of the code under test):

* ``_series_flow`` -- Picard iteration on truncated power series (python-flint ``arb_series``
  exp / division, not the package's Taylor recursions) for the state and the variational
  equation, 30 coefficients per step of length 1/16 at 160 bits (truncation far below 1e-30),
  checked against ``mpmath.odefun`` at 30 digits in ``test_series_reference_matches_odefun``;
* ``_odefun_flow`` -- mpmath.odefun on the variational system at 30 digits (slow: fixed cases).
"""

from __future__ import annotations

from fractions import Fraction

import flint
import mpmath
import numpy as np
import pytest
from flint import arb, arb_series, fmpq
from hypothesis import example, given, settings
from hypothesis import strategies as st

import certified.flow._smooth_jacobian as SJ  # noqa: N812
from certified.arith import Interval
from certified.arith.ball import mid_rad, precision
from certified.errors import InputError, NonFiniteError, PrecisionError, ShapeError
from certified.flow import FlowStatus, gronwall_lipschitz, smooth_flow_jacobian

TOL = fmpq(1, 10**28)  # reference error allowance (the references are good to ~1e-30)


# --- references -------------------------------------------------------------------------------


def _q(v) -> fmpq:
    f = Fraction(v) if isinstance(v, str) else Fraction(float(v))
    return fmpq(f.numerator, f.denominator)


def _series_flow(Ws, As, bs, taus, x0, act, n_coef=32, theta=8):
    """Phi_T(x0) and D Phi_T(x0) as exact midpoints (fmpq), by Picard iteration on series.

    Steps h <= 1/16 with h L <= 1/theta (L = sum_i |w_i| |a_i|), so the truncated terms are
    far below 1e-30; Picard iteration i fixes coefficient i, so it runs on i + 2 terms."""
    d = len(x0)
    with precision(160, cap=n_coef + 2):
        x = [arb(_q(v)) for v in x0]
        J = [[arb(int(a == c)) for c in range(d)] for a in range(d)]
        for W_raw, A_raw, b_raw, tau in zip(Ws, As, bs, taus, strict=True):
            W = [[arb(_q(v)) for v in row] for row in np.atleast_2d(W_raw)]
            A = [[arb(_q(v)) for v in row] for row in np.atleast_2d(A_raw)]
            b = [arb(_q(v)) for v in np.atleast_1d(b_raw)]
            p = len(b)
            tau = _q(tau)
            A_raw = np.array(np.atleast_2d(A_raw), dtype=float)
            rate = float(
                np.linalg.norm(np.atleast_2d(W_raw), axis=0) @ np.linalg.norm(A_raw, axis=1)
            )
            m = max(int((tau * 16).ceil()), int(np.ceil(theta * rate * float(tau))), 1)
            h = arb(tau / m)
            for _ in range(m):
                xs = [arb_series([v]) for v in x]
                Js = [[arb_series([v]) for v in row] for row in J]
                for it in range(n_coef):
                    flint.ctx.cap = it + 2
                    u = [
                        sum((A[i][j] * xs[j] for j in range(d)), arb_series([b[i]]))
                        for i in range(p)
                    ]
                    if act == "tanh":
                        s = [1 - 2 / ((2 * ui).exp() + 1) for ui in u]
                        ds = [1 - si * si for si in s]
                    else:
                        s = [1 / (1 + (-ui).exp()) for ui in u]
                        ds = [si - si * si for si in s]
                    f = [sum((W[r][i] * s[i] for i in range(p)), arb_series([0])) for r in range(d)]
                    M = [
                        [
                            sum((W[r][i] * A[i][c] * ds[i] for i in range(p)), arb_series([0]))
                            for c in range(d)
                        ]
                        for r in range(d)
                    ]
                    xs = [x[r] + f[r].integral() for r in range(d)]
                    Js = [
                        [
                            J[a][c]
                            + sum(
                                (M[a][k] * Js[k][c] for k in range(d)), arb_series([0])
                            ).integral()
                            for c in range(d)
                        ]
                        for a in range(d)
                    ]

                def at_h(series, h=h):
                    coeffs = series.coeffs()[: n_coef + 1]
                    out = arb(0)
                    for cf in reversed(coeffs):
                        out = out * h + cf
                    return out

                x = [at_h(sr) for sr in xs]
                J = [[at_h(sr) for sr in row] for row in Js]
        return [mid_rad(v)[0] for v in x], [[mid_rad(v)[0] for v in row] for row in J]


def _odefun_flow(Ws, As, bs, taus, x0, act, dps=30):
    """Phi_T(x0) and D Phi_T(x0) by mpmath.odefun on the variational system (mpf)."""
    with mpmath.workdps(dps):
        s = mpmath.tanh if act == "tanh" else (lambda v: 1 / (1 + mpmath.exp(-v)))
        d = len(x0)

        def mp(v):
            f = Fraction(v) if isinstance(v, str) else Fraction(float(v))
            return mpmath.mpf(f.numerator) / f.denominator

        y = [mp(v) for v in x0] + [mpmath.mpf(int(a == c)) for a in range(d) for c in range(d)]
        for W, A, b, tau in zip(Ws, As, bs, taus, strict=True):
            W = [[mp(v) for v in row] for row in np.atleast_2d(W)]
            A = [[mp(v) for v in row] for row in np.atleast_2d(A)]
            b = [mp(v) for v in np.atleast_1d(b)]
            p = len(b)

            def rhs(t, z, W=W, A=A, b=b, p=p):
                u = [b[i] + sum(A[i][j] * z[j] for j in range(d)) for i in range(p)]
                sv = [s(v) for v in u]
                dv = [1 - v * v if act == "tanh" else v - v * v for v in sv]
                f = [sum(W[r][i] * sv[i] for i in range(p)) for r in range(d)]
                M = [
                    [sum(W[r][i] * dv[i] * A[i][c] for i in range(p)) for c in range(d)]
                    for r in range(d)
                ]
                dJ = [
                    sum(M[a][k] * z[d + k * d + c] for k in range(d))
                    for a in range(d)
                    for c in range(d)
                ]
                return f + dJ

            y = mpmath.odefun(rhs, 0, y, tol=mpmath.mpf(10) ** (-dps - 2), degree=20)(mp(tau))
        return y[:d], [[y[d + a * d + c] for c in range(d)] for a in range(d)]


# --- helpers ----------------------------------------------------------------------------------


def _exact_bounds(res):
    return [
        [(fmpq(*map(int, _frac(lo))), fmpq(*map(int, _frac(hi)))) for lo, hi in row]
        for row in res.hints["jacobian_exact"]
    ]


def _frac(s: str):
    f = Fraction(s)
    return f.numerator, f.denominator


def _misses(res, J_ref) -> list[tuple[int, int]]:
    """Entries (a, c) whose reference value lies outside the enclosure (beyond TOL), checked on
    both the exact ball endpoints and the float64 Interval."""
    bad = []
    for a, row in enumerate(_exact_bounds(res)):
        for c, (lo, hi) in enumerate(row):
            v = J_ref[a][c]
            v = v if isinstance(v, fmpq) else _q(mpmath.nstr(v, 40))
            if not (lo - TOL <= v <= hi + TOL):
                bad.append((a, c))
            elif not (_q(res.jacobian.lo[a, c]) - TOL <= v <= _q(res.jacobian.hi[a, c]) + TOL):
                bad.append((a, c))
    return bad


def _box(c, r):
    c = np.asarray(c, dtype=float)
    return Interval(c - r, c + r)


def _field(seed, d, p, n):
    rng = np.random.default_rng(seed)
    Ws = [rng.integers(-12, 13, (d, p)) / 8 for _ in range(n)]
    As = [rng.integers(-12, 13, (p, d)) / 8 for _ in range(n)]
    bs = [rng.integers(-8, 9, p) / 8 for _ in range(n)]
    return Ws, As, bs


# --- containment ------------------------------------------------------------------------------


@pytest.mark.parametrize("act", ["tanh", "sigmoid"])
def test_series_reference_matches_odefun(act):
    """The fast series reference agrees with mpmath.odefun (30 digits) to 1e-28."""
    Ws, As, bs = _field(5, 2, 2, 2)
    x0 = [0.25, -0.5]
    x1, J1 = _series_flow(Ws, As, bs, ["1/4", "1/3"], x0, act)
    x2, J2 = _odefun_flow(Ws, As, bs, ["1/4", "1/3"], x0, act)
    with mpmath.workdps(40):
        for a in range(2):
            assert abs(mpmath.mpf(int(x1[a].p)) / int(x1[a].q) - x2[a]) < 1e-28
            for c in range(2):
                assert abs(mpmath.mpf(int(J1[a][c].p)) / int(J1[a][c].q) - J2[a][c]) < 1e-28


@pytest.mark.parametrize("act", ["tanh", "sigmoid"])
def test_point_box_contains_odefun(act):
    Ws, As, bs = _field(5, 2, 2, 2)
    x0 = [0.25, -0.5]
    res = smooth_flow_jacobian(Ws, As, bs, ["1/4", "1/3"], _box(x0, 0.0), activation=act)
    assert res.status is FlowStatus.SUCCESS and res.method == "c1-box"
    _, J_ref = _odefun_flow(Ws, As, bs, ["1/4", "1/3"], x0, act)
    assert _misses(res, J_ref) == []


@pytest.mark.parametrize("act", ["tanh", "sigmoid"])
def test_point_box_is_tight_at_high_order(act):
    Ws, As, bs = _field(11, 3, 3, 2)
    x0 = [0.125, -0.375, 0.5]
    res = smooth_flow_jacobian(
        Ws, As, bs, ["1/4", "1/2"], _box(x0, 0.0), activation=act, order=30, max_step="1/32"
    )
    assert res.status is FlowStatus.SUCCESS
    _, J_ref = _series_flow(Ws, As, bs, ["1/4", "1/2"], x0, act)
    assert _misses(res, J_ref) == []
    widths = [float(hi - lo) for row in _exact_bounds(res) for lo, hi in row]
    assert max(widths) < 1e-24  # 128 bits: far below the float64 output


def test_benchmark_field_small_box():
    """The bench family (d = 3, p = 8, four pieces of 1/4): corners and centre of a small box."""
    rng = np.random.default_rng(7)
    Ws = [rng.standard_normal((3, 8)) / np.sqrt(8) for _ in range(4)]
    As = [rng.standard_normal((8, 3)) for _ in range(4)]
    bs = [rng.standard_normal(8) for _ in range(4)]
    Ws, As, bs = Ws[:2], As[:2], bs[:2]  # two pieces keep the reference fast
    c, r = np.array([0.1, -0.2, 0.3]), 2.0**-10
    res = smooth_flow_jacobian(Ws, As, bs, ["1/4", "1/4"], _box(c, r))
    assert res.status is FlowStatus.SUCCESS
    spread = []
    for u in [(-1, -1, -1), (1, -1, 1), (0, 0, 0)]:
        _, J_ref = _series_flow(Ws, As, bs, ["1/4", "1/4"], c + r * np.array(u), "tanh")
        assert _misses(res, J_ref) == []
        spread.append([[float(v) for v in row] for row in J_ref])
    spread = np.ptp(np.array(spread), axis=0)
    width = res.jacobian.hi - res.jacobian.lo
    assert np.max(width) < 8 * np.max(spread)  # not a loose enclosure: a small multiple


_ACTS = st.sampled_from(["tanh", "sigmoid"])
_EIGHTHS = st.integers(-12, 12).map(lambda k: k / 8)
_DURATIONS = st.sampled_from(["1/8", "1/4", "1/3"])
_RADII = st.sampled_from([0.0, 2.0**-20, 2.0**-6])
_OFFSETS = st.sampled_from([-1.0, -0.5, 0.0, 0.3, 1.0])


@st.composite
def _problems(draw):
    d = draw(st.integers(1, 3))
    n = draw(st.integers(1, 3))
    Ws, As, bs = [], [], []
    for _ in range(n):
        p = draw(st.integers(1, 3))
        Ws.append(np.array(draw(st.lists(_EIGHTHS, min_size=d * p, max_size=d * p))).reshape(d, p))
        As.append(np.array(draw(st.lists(_EIGHTHS, min_size=p * d, max_size=p * d))).reshape(p, d))
        bs.append(np.array(draw(st.lists(_EIGHTHS, min_size=p, max_size=p))))
    taus = [draw(_DURATIONS) for _ in range(n)]
    centre = np.array(draw(st.lists(st.integers(-8, 8), min_size=d, max_size=d))) / 8
    radius = draw(_RADII)
    offset = np.array(draw(st.lists(_OFFSETS, min_size=d, max_size=d)))
    return Ws, As, bs, taus, centre, radius, offset, draw(_ACTS)


def _pinned():
    W = np.array([[1.5, -1.5], [1.5, 1.5]])
    A = np.array([[1.5, 1.5], [-1.5, 1.5]])
    b = np.array([0.5, -0.5])
    return (
        [W, W],
        [A, -A],
        [b, b],
        ["1/3", "1/3"],
        np.array([1.0, -1.0]),
        2.0**-6,
        np.array([1.0, -1.0]),
    )


@settings(max_examples=12)
@given(_problems())
@example((*_pinned(), "tanh"))
def test_enclosure_contains_the_jacobian_at_sampled_points(problem):
    Ws, As, bs, taus, centre, radius, offset, act = problem
    res = smooth_flow_jacobian(Ws, As, bs, taus, _box(centre, radius), activation=act)
    assert res.status is FlowStatus.SUCCESS, res.message
    x = centre + radius * offset
    _, J_ref = _series_flow(Ws, As, bs, taus, x, act)
    assert _misses(res, J_ref) == []


@settings(max_examples=10)
@given(_problems(), st.lists(_OFFSETS, min_size=3, max_size=3))
def test_lipschitz_bound_dominates_pair_ratios_and_is_below_gronwall(problem, other):
    Ws, As, bs, taus, centre, _, offset, act = problem
    radius = 2.0**-6
    d = len(centre)
    res = smooth_flow_jacobian(Ws, As, bs, taus, _box(centre, radius), activation=act)
    assert res.status is FlowStatus.SUCCESS
    x = centre + radius * offset
    y = centre + radius * np.array(other[:d])
    if np.array_equal(x, y):
        y = centre - radius * np.sign(offset + 0.5)
    px, _ = _series_flow(Ws, As, bs, taus, x, act)
    py, _ = _series_flow(Ws, As, bs, taus, y, act)
    num = sum((px[j] - py[j]) ** 2 for j in range(d))
    den = sum((_q(x[j]) - _q(y[j])) ** 2 for j in range(d))
    # |Phi x - Phi y|^2 <= upper^2 |x - y|^2 (exact rationals; the reference error is far below)
    assert num <= res.upper_exact**2 * den * (1 + TOL)
    gronwall = gronwall_lipschitz(Ws, As, taus).upper
    assert res.upper <= gronwall * (1 + 2.0**-20) + 2.0**-20


# --- mutations: each deliberately broken step is caught by a containment test ----------------


def _mutation_cases():
    """Fields and Taylor orders where a wrong variational step shows: the state tube is made
    narrow (state order 30, a sound change) so that the variational error is not masked."""
    return [(_field(1, 2, 3, 1), 3, "1/4"), (_field(3, 2, 3, 1), 2, "1/2")]


def _narrow_state(monkeypatch):
    state = SJ.arb_smooth_piece
    monkeypatch.setattr(
        SJ,
        "arb_smooth_piece",
        lambda c, r, W, A, b, act, tau, m, K, prec: state(c, r, W, A, b, act, tau, m, 30, prec),
    )


def _miss_counts():
    x0 = np.array([0.25, -0.25])
    counts = []
    for (Ws, As, bs), order, max_step in _mutation_cases():
        res = smooth_flow_jacobian(
            Ws, As, bs, ["1/2"], _box(x0, 0.0), order=order, max_step=max_step
        )
        _, J_ref = _series_flow(Ws, As, bs, ["1/2"], x0, "tanh")
        counts.append(len(_misses(res, J_ref)))
    return counts


def test_low_order_large_steps_still_contain(monkeypatch):
    """The configurations the mutation test uses are sound when not mutated."""
    _narrow_state(monkeypatch)
    assert _miss_counts() == [0, 0]


def test_mutation_remainder_over_the_start_set_is_caught(monkeypatch):
    """Using Df(X_k) (the start set) instead of the a priori box B_k (a priori enclosure of
    the fundamental matrix and Taylor remainder)."""
    _narrow_state(monkeypatch)
    original = SJ._step_matrix
    monkeypatch.setattr(SJ, "_step_matrix", lambda X, B, *rest: original(X, X, *rest))
    assert all(n > 0 for n in _miss_counts())


@settings(max_examples=30)
@given(
    st.integers(1, 3).flatmap(lambda d: st.lists(_EIGHTHS, min_size=d * d, max_size=d * d)),
    st.sampled_from(["1/16", "1/4", "1/2"]),
)
def test_a_priori_fundamental_matrix_contains_the_exponential(entries, h):
    """For a constant M, Y_B (if found) contains exp(t M) for t in [0, h] (mpmath expm)."""
    d = round(len(entries) ** 0.5)
    with precision(128):
        M = [[arb(_q(entries[a * d + c])) for c in range(d)] for a in range(d)]
        Y_B = SJ._fundamental_a_priori(M, arb(_q(h)))
    if Y_B is None:
        return
    with mpmath.workdps(30):
        Mm = mpmath.matrix([[entries[a * d + c] for c in range(d)] for a in range(d)])
        for t in (0, Fraction(h) / 3, Fraction(h)):
            E = mpmath.expm(Mm * (mpmath.mpf(t.numerator) / t.denominator if t else 0))
            for a in range(d):
                for c in range(d):
                    v = _q(mpmath.nstr(E[a, c], 30))
                    lo, hi = (
                        mid_rad(Y_B[a][c])[0] - mid_rad(Y_B[a][c])[1],
                        mid_rad(Y_B[a][c])[0] + mid_rad(Y_B[a][c])[1],
                    )
                    assert lo - TOL <= v <= hi + TOL


def test_identity_is_not_an_a_priori_enclosure():
    """The mutation Y_B = I is caught by the containment above (exp(h M) != I)."""
    M = [[arb(1)]]
    with precision(128):
        Y_B = SJ._fundamental_a_priori(M, arb(fmpq(1, 4)))
        assert Y_B is not None and Y_B[0][0].contains(arb(fmpq(1, 4)).exp())
        assert not arb(1).contains(arb(fmpq(1, 4)).exp())


def test_mutation_without_curvature_is_caught(monkeypatch):
    """Dropping the source term of the second variational equation (then H = 0 and the mean
    value form collapses to D Phi(centre))."""
    monkeypatch.setattr(
        SJ,
        "_curvature_source",
        lambda B, J_B, W, A, b, act: [[[arb(0)] * len(B) for _ in B] for _ in B],
    )
    Ws, As, bs = _field(3, 2, 3, 1)
    c, r = np.array([0.25, -0.25]), 2.0**-6
    res = smooth_flow_jacobian(Ws, As, bs, ["1/2"], _box(c, r))
    _, J_ref = _series_flow(Ws, As, bs, ["1/2"], c + r, "tanh")
    assert _misses(res, J_ref) != []


# --- failures and bad input -------------------------------------------------------------------


def test_a_priori_failure_is_reported_not_guessed(monkeypatch):
    monkeypatch.setattr(SJ, "_fundamental_a_priori", lambda M, h: None)
    res = smooth_flow_jacobian(
        [[[1.0]]], [[[1.0]]], [[0.0]], [1], _box([0.0], 0.0), max_step=1, max_halvings=2
    )
    assert res.status is FlowStatus.STEP_REJECTED
    assert res.upper == float("inf") and res.jacobian is None and "max_step" in res.message


def test_overflowing_jacobian_is_reported():
    """exp(T w a) beyond the float64 range: no Interval, a status saying so."""
    res = smooth_flow_jacobian([[[8.0]]], [[[8.0]]], [[0.0]], [12], _box([0.0], 0.0), order=3)
    assert res.status is FlowStatus.UNSUPPORTED and res.upper == float("inf")
    assert "float64 range" in res.message


_OK = dict(W_list=[[[1.0]]], A_list=[[[1.0]]], b_list=[[0.0]], durations=["1/4"])


@pytest.mark.parametrize(
    ("change", "error", "words"),
    [
        ({"activation": "relu"}, InputError, "relu_flow_jacobian"),
        ({"activation": "leaky_relu"}, InputError, "relu_flow_jacobian"),
        ({"activation": "gelu"}, InputError, "activation"),
        ({"box": Interval(np.zeros(0))}, ShapeError, "box"),
        ({"box": _box([0.0, 0.0], 0.1)}, ShapeError, "box"),
        ({"box": [[0.0, 1.0]]}, InputError, "Interval"),
        ({"W_list": 1.0}, InputError, "W_list"),
        ({"W_list": [[[float("nan")]]]}, NonFiniteError, "W_list[0]"),
        ({"b_list": [[float("inf")]]}, NonFiniteError, "b_list[0]"),
        ({"durations": ["nan"]}, InputError, "durations[0]"),
        ({"durations": [0]}, InputError, "durations[0]"),
        ({"durations": []}, InputError, "empty"),
        ({"A_list": [[[1.0, 2.0]]]}, ShapeError, "pieces[0]"),
        ({"W_list": [[[1.0]], [[1.0]]]}, ShapeError, "schedule"),
        ({"max_step": 0}, InputError, "max_step"),
        ({"order": 0}, InputError, "order"),
        ({"order": 2.0}, InputError, "order"),
        ({"prec": 4}, PrecisionError, "prec"),
    ],
)
def test_bad_input_is_rejected(change, error, words):
    kwargs = {**_OK, "box": _box([0.0], 0.1), **change}
    with pytest.raises(error) as info:
        smooth_flow_jacobian(**kwargs)
    assert words in str(info.value)
