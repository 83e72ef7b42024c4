"""flow_jacobian: C^1 enclosures of D Phi_T over boxes for every smooth field.

References (independent of the code under test):

* ``_series_flow`` -- Picard iteration on truncated power series (python-flint ``arb_series``
  exp / division, not the package's Taylor recursions) for the state and the variational
  equation, 30 coefficients per step of length 1/16 at 160 bits (truncation far below 1e-30),
  checked against ``mpmath.odefun`` at 30 digits in ``test_series_reference_matches_odefun``;
* ``_odefun_flow`` -- mpmath.odefun on the variational system at 30 digits (slow: fixed cases);
* ``_vanderpol_variational`` -- mpmath.odefun on Van der Pol and its variational equation.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import flint
import mpmath
import numpy as np
import pytest
from flint import arb, arb_series, fmpq
from hypothesis import example, given, settings
from hypothesis import strategies as st

import certified.flow.taylor._lohner_kernels as LK  # noqa: N812
import certified.flow.taylor.lohner as LO  # noqa: N812
from certified.arith import Interval
from certified.arith.ball import mid_rad, precision
from certified.errors import InputError, NonFiniteError, ShapeError
from certified.fields import vanderpol
from certified.flow import FlowStatus, SaveAt, StepPolicy, flow_jacobian, gronwall_lipschitz
from certified.models import Schedule

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


def _schedule(Ws, As, bs, taus, act="tanh") -> Schedule:
    """The tanh / sigmoid Schedule of the pieces (W_j, A_j, b_j, tau_j)."""
    Ws = [np.atleast_2d(np.asarray(W, dtype=float)) for W in Ws]
    return Schedule.from_json(
        {
            "dimension": Ws[0].shape[0],
            "activation": act,
            "pieces": [
                {
                    "duration": str(tau),
                    "W": W.tolist(),
                    "A": np.atleast_2d(np.asarray(A, dtype=float)).tolist(),
                    "b": np.atleast_1d(np.asarray(b, dtype=float)).tolist(),
                }
                for W, A, b, tau in zip(Ws, As, bs, taus, strict=True)
            ],
        }
    )


def _jacobian(Ws, As, bs, taus, box, act="tanh", **kw):
    return flow_jacobian(_schedule(Ws, As, bs, taus, act), box, **kw)


def _misses(res, J_ref) -> list[tuple[int, int]]:
    """Entries (a, c) whose reference value lies outside the enclosure (beyond TOL), compared
    exactly (the float64 endpoints are exact rationals)."""
    bad = []
    for a, row in enumerate(J_ref):
        for c, v in enumerate(row):
            v = v if isinstance(v, fmpq) else _q(mpmath.nstr(v, 40))
            if not (_q(res.jacobian.lo[a, c]) - TOL <= v <= _q(res.jacobian.hi[a, c]) + TOL):
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
    res = _jacobian(Ws, As, bs, ["1/4", "1/3"], _box(x0, 0.0), act)
    assert res.status is FlowStatus.SUCCESS and res.method == "c1-box"
    _, J_ref = _odefun_flow(Ws, As, bs, ["1/4", "1/3"], x0, act)
    assert _misses(res, J_ref) == []


@pytest.mark.parametrize("act", ["tanh", "sigmoid"])
def test_point_box_is_tight_at_high_order(act):
    Ws, As, bs = _field(11, 3, 3, 2)
    x0 = [0.125, -0.375, 0.5]
    res = _jacobian(Ws, As, bs, ["1/4", "1/2"], _box(x0, 0.0), act, order=30, max_step="1/32")
    assert res.status is FlowStatus.SUCCESS
    _, J_ref = _series_flow(Ws, As, bs, ["1/4", "1/2"], x0, act)
    assert _misses(res, J_ref) == []
    assert np.max(res.jacobian.width_upper()) < 1e-9  # variational order 12, steps 1/32


def test_benchmark_field_small_box():
    """The bench family (d = 3, p = 8, four pieces of 1/4): corners and centre of a small box."""
    rng = np.random.default_rng(7)
    Ws = [rng.standard_normal((3, 8)) / np.sqrt(8) for _ in range(4)]
    As = [rng.standard_normal((8, 3)) for _ in range(4)]
    bs = [rng.standard_normal(8) for _ in range(4)]
    Ws, As, bs = Ws[:2], As[:2], bs[:2]  # two pieces keep the reference fast
    c, r = np.array([0.1, -0.2, 0.3]), 2.0**-10
    res = _jacobian(Ws, As, bs, ["1/4", "1/4"], _box(c, r))
    assert res.status is FlowStatus.SUCCESS
    spread = []
    for u in [(-1, -1, -1), (1, -1, 1)]:
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


_DEFAULT = settings.default.max_examples  # dev 60, ci 100, thorough 2000


@settings(max_examples=max(6, _DEFAULT // 10))
@given(_problems())
@example((*_pinned(), "tanh"))
def test_enclosure_contains_the_jacobian_at_sampled_points(problem):
    Ws, As, bs, taus, centre, radius, offset, act = problem
    res = _jacobian(Ws, As, bs, taus, _box(centre, radius), act)
    assert res.status is FlowStatus.SUCCESS, res.message
    x = centre + radius * offset
    _, J_ref = _series_flow(Ws, As, bs, taus, x, act)
    assert _misses(res, J_ref) == []


@settings(max_examples=max(4, _DEFAULT // 10))
@given(_problems(), st.lists(_OFFSETS, min_size=3, max_size=3))
def test_lipschitz_bound_dominates_pair_ratios_and_is_below_gronwall(problem, other):
    Ws, As, bs, taus, centre, _, offset, act = problem
    radius = 2.0**-6
    d = len(centre)
    res = _jacobian(Ws, As, bs, taus, _box(centre, radius), act)
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
    assert fmpq(*_frac_of(res.upper)) >= res.upper_exact  # the double rounds up
    gronwall = gronwall_lipschitz(Ws, As, taus).upper
    assert res.upper <= gronwall * (1 + 2.0**-20) + 2.0**-20


def _frac_of(v: float):
    f = Fraction(v)
    return f.numerator, f.denominator


# --- an expression field: Van der Pol against an mpmath variational reference -----------------


def _vanderpol_variational(x0, T, mu=1, dps=25):
    """Phi_T(x0) and D Phi_T(x0) for x' = y, y' = mu (1 - x^2) y - x, by mpmath.odefun."""
    with mpmath.workdps(dps):
        mu = mpmath.mpf(mu)

        def rhs(t, z):
            x, y, a, b, c, e = z  # D = [[a, b], [c, e]]
            fx, fy = y, mu * (1 - x * x) * y - x
            jxx, jxy = 0, 1
            jyx, jyy = -2 * mu * x * y - 1, mu * (1 - x * x)
            return [
                fx,
                fy,
                jxx * a + jxy * c,
                jxx * b + jxy * e,
                jyx * a + jyy * c,
                jyx * b + jyy * e,
            ]

        z0 = [mpmath.mpf(float(v)) for v in x0] + [1, 0, 0, 1]
        z = mpmath.odefun(rhs, 0, z0, tol=mpmath.mpf(10) ** (-dps - 2))(mpmath.mpf(T))
        return z[:2], [[z[2], z[3]], [z[4], z[5]]]


def test_vanderpol_jacobian_contains_the_variational_reference():
    """An expression field (not a schedule): the C^1 enclosure over a small box contains
    D Phi_1 at its corners and centre, and the Lipschitz bound dominates pair ratios."""
    c, r = np.array([1.4, 2.4]), 2.0**-12
    res = flow_jacobian(vanderpol(), _box(c, r), save_at=SaveAt(1))
    assert res.status is FlowStatus.SUCCESS, res.message
    images = []
    for u in [(-1, -1), (1, 1), (0, 0)]:
        x = c + r * np.array(u)
        y, J = _vanderpol_variational(x, 1, dps=20)
        assert _misses(res, J) == [], u
        images.append((x, y))
    for (x, px), (y, py) in itertools.pairwise(images):
        num = sum((_q(mpmath.nstr(px[j], 30)) - _q(mpmath.nstr(py[j], 30))) ** 2 for j in range(2))
        den = sum((_q(x[j]) - _q(y[j])) ** 2 for j in range(2))
        assert num <= res.upper_exact**2 * den * (1 + fmpq(1, 10**12))


# --- mutations: a deliberately broken product is caught by the containment test --------------


def _product_cases():
    """Several pieces and several steps, so that the product of the steps' J matters."""
    Ws, As, bs = _field(3, 2, 3, 3)
    return Ws, As, bs, ["1/4", "1/4", "1/4"], np.array([0.25, -0.25])


def _product_misses():
    Ws, As, bs, taus, x0 = _product_cases()
    res = _jacobian(Ws, As, bs, taus, _box(x0, 2.0**-8))
    assert res.status is FlowStatus.SUCCESS
    misses = 0
    for u in [(-1, -1), (1, 1), (0, 0)]:
        _, J_ref = _series_flow(Ws, As, bs, taus, x0 + 2.0**-8 * np.array(u), "tanh")
        misses += len(_misses(res, J_ref))
    return misses


def test_product_configuration_contains_unmutated():
    assert _product_misses() == 0


def test_mutation_product_in_the_wrong_order_is_caught(monkeypatch):
    """imatmul(J_k, P) replaced by P J_k (the chain rule's order reversed)."""
    original = LK.imatmul

    def swapped(Al, Ah, Bl, Bh, Cl, Ch):
        original(Bl, Bh, Al, Ah, Cl, Ch)

    monkeypatch.setattr(LK, "imatmul", swapped)
    assert _product_misses() > 0


def test_mutation_product_of_midpoints_is_caught(monkeypatch):
    """imatmul without the radii (products of midpoints only): the box's spread is lost."""

    def midpoints(Al, Ah, Bl, Bh, Cl, Ch):
        C = np.einsum("qik,qkj->qij", 0.5 * (Al + Ah), 0.5 * (Bl + Bh))
        Cl[...], Ch[...] = C, C

    monkeypatch.setattr(LK, "imatmul", midpoints)
    assert _product_misses() > 0


def test_mutation_jacobian_without_remainder_is_caught(monkeypatch):
    """The variational remainder V_m(B) h^m dropped from J (order 3, large steps)."""
    original = LO._poly

    def without_last(lo, hi, h):
        if lo.ndim == 4:  # the J polynomial: (m + 1, n, d, d)
            return original(lo[:-1], hi[:-1], h)
        return original(lo, hi, h)

    Ws, As, bs = _field(1, 2, 3, 1)
    x0 = np.array([0.25, -0.25])
    kw = dict(step_policy=StepPolicy(order=20, jacobian_order=3, max_step="1/4"))
    _, J_ref = _series_flow(Ws, As, bs, ["1/2"], x0, "tanh")
    assert _misses(_jacobian(Ws, As, bs, ["1/2"], _box(x0, 0.0), **kw), J_ref) == []
    monkeypatch.setattr(LO, "_poly", without_last)
    assert _misses(_jacobian(Ws, As, bs, ["1/2"], _box(x0, 0.0), **kw), J_ref) != []


# --- failures and bad input -------------------------------------------------------------------


def test_a_priori_failure_is_reported_not_guessed(monkeypatch):
    def never(jets, j, X, h, halfwidth, at):
        return X, np.zeros(X.shape[0], dtype=bool), None, None

    monkeypatch.setattr(LO, "_apriori", never)
    res = _jacobian([[[1.0]]], [[[1.0]]], [[0.0]], [1], _box([0.0], 0.0), max_step=1)
    assert res.status is FlowStatus.STEP_REJECTED
    assert res.upper == float("inf") and res.jacobian is None and res.message


def test_overflowing_jacobian_is_reported():
    """x' = 16 tanh(16 x) from its equilibrium 0 to T = 3: D Phi = exp(768) is beyond the
    float64 range; a status saying so, not an exception (nor a NaN bound)."""
    res = _jacobian([[[16.0]]], [[[16.0]]], [[0.0]], [3], _box([0.0], 0.0))
    assert res.status is not FlowStatus.SUCCESS and res.upper == float("inf")
    assert res.message


_OK = dict(Ws=[[[1.0]]], As=[[[1.0]]], bs=[[0.0]], taus=["1/4"])


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda: _jacobian(**_OK, act="relu", box=_box([0.0], 0.1)), InputError, "activation"),
        (lambda: flow_jacobian(_schedule(**_OK), Interval(np.zeros(0))), ShapeError, "X0"),
        (lambda: flow_jacobian(_schedule(**_OK), _box([0.0, 0.0], 0.1)), ShapeError, "X0"),
        (
            lambda: flow_jacobian(_schedule(**_OK), Interval(np.zeros((2, 1)))),
            ShapeError,
            "box",
        ),
        (lambda: flow_jacobian(_schedule(**_OK), [[0.0, 1.0]]), InputError, "Interval"),
        (lambda: flow_jacobian("tanh", _box([0.0], 0.1)), InputError, "field"),
        (lambda: _schedule([[[float("nan")]]], [[[1.0]]], [[0.0]], ["1/4"]), NonFiniteError, "W"),
        (lambda: _schedule([[[1.0]]], [[[1.0]]], [[float("inf")]], ["1/4"]), NonFiniteError, "b"),
        (lambda: _schedule(**{**_OK, "taus": [0]}), InputError, "duration"),
        (lambda: _jacobian(**_OK, box=_box([0.0], 0.1), max_step=0), InputError, "max_step"),
        (lambda: _jacobian(**_OK, box=_box([0.0], 0.1), order=0), InputError, "order"),
        (lambda: _jacobian(**_OK, box=_box([0.0], 0.1), order=2.0), InputError, "order"),
        (lambda: flow_jacobian(vanderpol(), _box([0.0, 0.0], 0.1)), InputError, "save_at"),
        (
            lambda: _jacobian(**_OK, box=_box([0.0], 0.1), save_at=SaveAt(1)),
            InputError,
            "save_at.t1",
        ),
        (
            # options that do not apply are refused, never ignored (as in enclose_flow)
            lambda: _jacobian(
                **_OK, box=_box([0.0], 0.1), step_policy=StepPolicy(order=10), order=30
            ),
            InputError,
            "order",
        ),
    ],
)
def test_bad_input_is_rejected(call, error, words):
    with pytest.raises(error) as info:
        call()
    assert words in str(info.value)
