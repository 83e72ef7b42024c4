"""Adversarial review of rule relu-regions: certificates built to make the checker accept a FALSE
claim (an enclosure just off the true image, computed at 50 digits; hints that skip a
crossing; a point on a hyperplane sent into the wrong region; forged eps, order, grid and
precision hints) must be rejected, while the honest certificates of the same flows verify.
Also the Taylor tail against exact matrix exponentials, and leaky ReLU."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import mpmath
import numpy as np
import pytest
from flint import arb, fmpq
from hypothesis import example, given, settings
from hypothesis import strategies as st

from certified.certificates import exact_number, flow_certificate
from certified.checker import check_certificate
from certified.checker._parse import exact
from certified.checker._relu_rule import _Series
from certified.flow.api import enclose_flow, flow_certificate_for
from certified.models import Schedule

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "flow"))
import references as ref  # 50-digit references (tests/flow/references.py)

DELTA = fmpq(1, 10**30)  # far above the 50-digit reference error, far below the checker's width


def _q(s) -> fmpq:
    return exact(s, "number")


def _exact(v) -> fmpq:
    return fmpq(*float(v).as_integer_ratio()) if isinstance(v, float) else fmpq(v)


def _reference(spec: dict, x0) -> list[mpmath.mpf]:
    """Phi_T(x0) at 50 digits (region by region with mpmath.expm, crossings by findroot)."""
    P = spec["pieces"]
    alpha = spec.get("slope", "1/100") if spec["activation"] == "leaky_relu" else 0
    return ref.piecewise_expm(
        [p["W"] for p in P],
        [p["A"] for p in P],
        [p["b"] for p in P],
        [p["duration"] for p in P],
        [_exact(v) for v in x0],
        alpha=alpha,
    )


def _near(v: mpmath.mpf) -> fmpq:
    """A dyadic within 2^-200 of the reference value."""
    with mpmath.workdps(80):
        return fmpq(int(mpmath.nint(v * 2**200)), 2**200)


def _exact_point(a: arb) -> fmpq:
    """The value of an exact (radius 0) arb."""
    man, exp = a.mid().man_exp()
    return fmpq(int(man)) * fmpq(2) ** int(exp)


def _with_claim(cert: dict, refs, lo_shift=-DELTA, hi_shift=DELTA, at=None) -> dict:
    """The certificate with claim ref + [lo_shift, hi_shift] at coordinate ``at`` (q, k) and
    ref +- DELTA elsewhere."""
    c = copy.deepcopy(cert)
    c["claim"]["enclosures"] = [
        [
            [
                exact_number(_near(v) + (lo_shift if (q, k) == at else -DELTA)),
                exact_number(_near(v) + (hi_shift if (q, k) == at else DELTA)),
            ]
            for k, v in enumerate(row)
        ]
        for q, row in enumerate(refs)
    ]
    return c


def _random_spec(seed: int, d: int, activation: str = "relu", slope: str | None = None) -> dict:
    rng = np.random.default_rng(seed)
    spec = {
        "dimension": d,
        "activation": activation,
        "pieces": [
            {
                "duration": "1/2",
                "W": rng.standard_normal((d, 3)).tolist(),
                "A": rng.standard_normal((3, d)).tolist(),
                "b": (rng.standard_normal(3) / 2).tolist(),
            }
            for _ in range(2)
        ],
    }
    if slope is not None:
        spec["slope"] = slope
    return spec


def _certify(spec: dict, X0, prec: int = 200) -> dict:
    schedule = Schedule.from_json(spec)
    cert = flow_certificate_for(schedule, X0, enclose_flow(schedule, X0, prec=prec))
    assert cert is not None and cert["hints"]["method"] == "relu-regions"
    return cert


def _crossings(cert) -> list[tuple[int, int, int]]:
    return [
        (q, j, k)
        for q, row in enumerate(cert["hints"]["points"])
        for j, e in enumerate(row)
        for k, _ in enumerate(e.get("crossings", []))
    ]


CASES = [
    (0, 2, "relu", None),
    (3, 3, "relu", None),
    (8, 2, "leaky_relu", "1/8"),
    (2, 3, "leaky_relu", None),
]


@pytest.fixture(scope="module", params=CASES, ids=lambda c: f"seed{c[0]}-d{c[1]}-{c[2]}")
def case(request):
    seed, d, activation, slope = request.param
    spec = _random_spec(seed, d, activation, slope)
    X0 = np.random.default_rng(seed + 1000).uniform(-1, 1, (3, d))
    cert = _certify(spec, X0)
    refs = [_reference(spec, x) for x in X0]
    return spec, X0, cert, refs


def test_honest_certificates_verify_and_contain_the_reference(case):
    _, _, cert, refs = case
    assert _crossings(cert), "each case should cross a hyperplane"
    assert check_certificate(cert).verified
    for row, box in zip(refs, cert["claim"]["enclosures"], strict=True):
        for v, (lo, hi) in zip(row, box, strict=True):
            assert _q(lo) <= _near(v) <= _q(hi)
    # the checker is tight: the reference +- 1e-30 is provable (so the rejections below have
    # teeth: they are not caused by a wide replay)
    assert check_certificate(_with_claim(cert, refs)).verified


def test_claims_just_off_the_true_image_are_rejected(case):
    _, _, cert, refs = case
    for q in range(len(refs)):
        for k in range(len(refs[q])):
            above = _with_claim(cert, refs, 2 * DELTA, 3 * DELTA, at=(q, k))
            below = _with_claim(cert, refs, -3 * DELTA, -2 * DELTA, at=(q, k))
            assert not check_certificate(above).verified, (q, k)
            assert not check_certificate(below).verified, (q, k)


def _first_crossing(cert):
    q, j, k = _crossings(cert)[0]
    return q, j, cert["hints"]["points"][q][j], k


def test_hints_that_skip_a_crossing_are_rejected(case):
    _, _, cert, refs = case
    q, j, e, k = _first_crossing(cert)
    lo, hi = e["crossings"][k]["window"]

    def as_step(c):  # the window replaced by a validated step in the region before it
        e2 = c["hints"]["points"][q][j]
        e2["crossings"].pop(k)
        for seg in e2["segments"]:
            for st_ in seg["steps"]:
                if st_[1] == lo:
                    st_[1] = hi
                    return

    def one_region(c):  # no crossing at all: the whole piece in the first region
        e2 = c["hints"]["points"][q][j]
        tau = c["instance"]["schedule"]["pieces"][j]["duration"]
        steps = [s for seg in e2["segments"] for s in seg["steps"]]
        steps += [list(cr["window"]) for cr in e2["crossings"]]
        steps.sort(key=lambda s: _q(s[0]))
        seg = {**e2["segments"][0], "end": tau, "steps": steps}
        e2["segments"], e2["crossings"] = [seg], []

    for edit in (as_step, one_region):
        for claim in (cert, _with_claim(cert, refs)):  # the producer's claim, a tight true one
            c = copy.deepcopy(claim)
            edit(c)
            assert not check_certificate(c).verified, edit.__name__


def test_forged_eps_order_grid_precision_never_accept_a_false_claim(case):
    _, _, cert, refs = case
    false = _with_claim(cert, refs, 2 * DELTA, 3 * DELTA, at=(0, 0))
    edits = [
        ("order", 4),
        ("order", 100),
        ("grid", 1),
        ("grid", 64),
        ("precision", 53),
        ("precision", 4096),
    ]
    for key, value in edits:
        for base in (false, cert):
            c = copy.deepcopy(base)
            c["hints"][key] = value
            v = check_certificate(c)
            assert base is cert or not v.verified, (key, value)
    for eps in ("0", "1*2^-10000", "1/3", "10000000000"):
        c = copy.deepcopy(false)
        for q, j, k in _crossings(c):
            c["hints"]["points"][q][j]["crossings"][k]["eps"] = eps
        assert not check_certificate(c).verified, eps
        t = copy.deepcopy(cert)  # with the producer's (true) claim: any verdict, no exception
        for q, j, k in _crossings(t):
            t["hints"]["points"][q][j]["crossings"][k]["eps"] = eps
        assert "internal error" not in check_certificate(t).reason


# --- a point exactly on a hyperplane, pushed into the other region --------------------------

# neuron 0: plane x1 = 0, w0 = (0, 1); neuron 1: x2 + 1 > 0 near 0, w1 = (-1, 0). From (0, 0)
# the true flow leaves into x1 < 0 (neuron 0 off): x(t) = (-t, 0). The flow of region "++"
# (neuron 0 on) is x(t) = (-sin t, cos t - 1), a wrong image.
ON_PLANE = {
    "dimension": 2,
    "activation": "relu",
    "pieces": [{"duration": "1/2", "W": [[0, -1], [1, 0]], "A": [[1, 0], [0, 1]], "b": [0, 1]}],
}


def test_point_on_a_hyperplane_moving_into_the_other_region():
    cert = _certify(ON_PLANE, np.array([[0.0, 0.0]]))
    e = cert["hints"]["points"][0][0]
    assert e["segments"][0]["region"] == "-+"
    true = [mpmath.mpf(-0.5), mpmath.mpf(0)]
    with mpmath.workdps(50):
        wrong = [-mpmath.sin(mpmath.mpf(1) / 2), mpmath.cos(mpmath.mpf(1) / 2) - 1]
    assert check_certificate(_with_claim(cert, [true])).verified
    assert not check_certificate(_with_claim(cert, [wrong])).verified
    # the wrong side, with its own (wrong) image or a claim holding both images
    both = copy.deepcopy(cert)
    both["claim"]["enclosures"] = [[["-1", "0"], ["-1", "1/16"]]]
    assert check_certificate(both).verified
    for claim in (_with_claim(cert, [wrong]), both):
        c = copy.deepcopy(claim)
        for seg in c["hints"]["points"][0][0]["segments"]:
            seg["region"] = "++"
        assert not check_certificate(c).verified
    c = copy.deepcopy(both)  # nor is it an equilibrium
    c["hints"]["points"][0][0] = {"kind": "equilibrium"}
    assert not check_certificate(c).verified


@pytest.mark.parametrize("offset", [1e-15, -1e-15, 2.0**-60])
def test_points_within_1e_15_of_a_hyperplane(offset):
    X0 = np.array([[offset, 0.25]])
    cert = _certify(ON_PLANE, X0)
    refs = [_reference(ON_PLANE, X0[0])]
    assert check_certificate(cert).verified
    assert check_certificate(_with_claim(cert, refs)).verified
    for k in range(2):
        assert not check_certificate(_with_claim(cert, refs, 2 * DELTA, 3 * DELTA, (0, k))).verified
        assert not check_certificate(
            _with_claim(cert, refs, -3 * DELTA, -2 * DELTA, (0, k))
        ).verified


# --- the Taylor tail against exact matrix exponentials ---------------------------------------


@settings(max_examples=40)
@given(
    st.integers(0, 10**6),
    st.integers(4, 12),
    st.sampled_from([fmpq(1, 2), fmpq(9, 10), fmpq(99, 100)]),
)
@example(seed=1, N=4, frac=fmpq(99, 100))
@example(seed=7553, N=4, frac=fmpq(1, 2))  # an equilibrium: the ball is the point 1/2 exactly
def test_taylor_tail_encloses_the_affine_flow(seed, N, frac):
    """x(h) = e^{hM} x0 + ... lies in the series at h +- T(h), even for m h close to N + 2."""
    rng = np.random.default_rng(seed)
    d = int(rng.integers(1, 4))
    M = [[fmpq(int(v), 8) for v in row] for row in rng.integers(-16, 17, (d, d))]
    c = [fmpq(int(v), 8) for v in rng.integers(-16, 17, d)]
    x0 = [fmpq(int(v), 16) for v in rng.integers(-16, 17, d)]
    m = max(sum((abs(v) for v in row), fmpq(0)) for row in M)
    if m == 0:
        return
    h = frac * (N + 2) / m
    with mpmath.workdps(60):
        Mt = mpmath.zeros(d + 1, d + 1)
        for i in range(d):
            for j in range(d):
                Mt[i, j] = mpmath.mpf(int(M[i][j].p)) / int(M[i][j].q)
            Mt[i, d] = mpmath.mpf(int(c[i].p)) / int(c[i].q)
        y = mpmath.expm(Mt * (mpmath.mpf(int(h.p)) / int(h.q))) * mpmath.matrix(
            [mpmath.mpf(int(v.p)) / int(v.q) for v in x0] + [1]
        )
        exact = [_near(y[i]) for i in range(d)]
    ser = _Series(M, c, [arb(v) for v in x0], N, h)
    for ball, v in zip(ser.coords(arb(h), h), exact, strict=True):
        # endpoints compared exactly (arb <= fmpq rounds the fmpq to the working precision)
        lo, hi = _exact_point(ball.lower()), _exact_point(ball.upper())
        assert lo <= v + fmpq(1, 2**180) and hi >= v - fmpq(1, 2**180)


# --- leaky ReLU ------------------------------------------------------------------------------


def test_leaky_slope_field_is_checked():
    spec = _random_spec(8, 2, "leaky_relu", "1/8")
    X0 = np.random.default_rng(1008).uniform(-1, 1, (2, 2))
    cert = _certify(spec, X0, prec=128)
    assert check_certificate(cert).verified

    def edited(edit):
        c = copy.deepcopy(cert)
        edit(c["instance"]["schedule"])
        return check_certificate(c)

    assert not edited(lambda s: s.update(slope="1/7")).verified
    assert not edited(lambda s: s.pop("slope")).verified  # the default 1/100 is another flow
    for bad in ("0", "1", "-1/8", "3/2", 1.0, "0.125"):
        assert not edited(lambda s, bad=bad: s.update(slope=bad)).verified, bad
    r = edited(lambda s: s.update(activation="relu"))
    assert not r.verified and "slope" in r.reason
    assert not edited(lambda s: (s.update(activation="relu"), s.pop("slope"))).verified


def test_leaky_default_slope_and_laminar_leaky_points():
    spec = _random_spec(2, 3, "leaky_relu")
    a = [1, 2, -1]
    spec["pieces"].append(  # laminar: rows of A parallel, columns of W orthogonal to them
        {
            "duration": "1/4",
            "W": [[1, 0], [0, 1], [1, 2]],
            "A": [a, [-2, -4, 2]],
            "b": ["1/4", "-1/8"],
        }
    )
    X0 = np.random.default_rng(5).uniform(-1, 1, (3, 3))
    cert = _certify(spec, X0, prec=128)
    assert "slope" in cert["instance"]["schedule"]  # written explicitly, 1/100
    assert cert["hints"]["points"][0][2] == {"kind": "laminar"}
    assert check_certificate(cert).verified
    refs = [_reference(spec, x) for x in X0]
    for row, box in zip(refs, cert["claim"]["enclosures"], strict=True):
        for v, (lo, hi) in zip(row, box, strict=True):
            assert _q(lo) <= _near(v) <= _q(hi)
    c = copy.deepcopy(cert)
    del c["instance"]["schedule"]["slope"]  # absent = 1/100: the same statement
    assert check_certificate(c).verified


def test_leaky_laminar_schedule_gives_exact_images():
    a = [1, -1]
    spec = {
        "dimension": 2,
        "activation": "leaky_relu",
        "slope": "1/4",
        "pieces": [{"duration": "1/2", "W": [[1, 3], [1, 3]], "A": [a, a], "b": ["0", "-1/2"]}],
    }
    X0 = np.array([[0.5, 0.75], [1.0, -1.0], [0.0, 0.0]])
    cert = _certify(spec, X0)
    assert check_certificate(cert).verified
    for x, box in zip(X0, cert["claim"]["enclosures"], strict=True):  # exact: [v, v]
        s = fmpq(_exact(x[0]) - _exact(x[1]))
        z = [s, s - fmpq(1, 2)]
        f = sum((zz if zz > 0 else zz / 4) * w for zz, w in zip(z, (1, 3), strict=True))
        assert [_q(lo) for lo, _ in box] == [_q(hi) for _, hi in box]
        assert [_q(lo) for lo, _ in box] == [_exact(v) + f / 2 for v in x]


# --- random flows: honest certificates contain the truth, false claims are rejected --------


@settings(max_examples=12)
@given(
    seed=st.integers(0, 10**6),
    activation=st.sampled_from(["relu", "leaky_relu"]),
    on_plane=st.booleans(),
)
@example(seed=11, activation="relu", on_plane=True)
def test_random_flows_never_verify_a_false_claim(seed, activation, on_plane):
    rng = np.random.default_rng(seed)
    spec = _random_spec(seed, 2, activation, "1/3" if activation == "leaky_relu" else None)
    spec["pieces"] = spec["pieces"][:1]
    X0 = rng.uniform(-1, 1, (2, 2))
    if on_plane:  # put the first point on (or within 1e-15 of) neuron 0's hyperplane
        A, b = spec["pieces"][0]["A"], spec["pieces"][0]["b"]
        X0[0, 1] = -(A[0][0] * X0[0, 0] + b[0]) / A[0][1] + rng.choice([0, 1e-15, -1e-15])
    schedule = Schedule.from_json(spec)
    res = enclose_flow(schedule, X0, prec=160)
    cert = flow_certificate_for(schedule, X0, res)
    if cert is None:  # the engine may decline (tangency); nothing to check
        return
    refs = [_reference(spec, x) for x in X0]
    assert check_certificate(cert).verified
    for row, box in zip(refs, cert["claim"]["enclosures"], strict=True):
        for v, (lo, hi) in zip(row, box, strict=True):
            assert _q(lo) <= _near(v) <= _q(hi)
    k = int(rng.integers(0, 2))
    assert not check_certificate(_with_claim(cert, refs, 2 * DELTA, 3 * DELTA, (1, k))).verified


def test_forged_relu_regions_certificate_from_scratch():
    """A certificate written by hand (not by the producer) for the ON_PLANE flow: claims the
    image of the wrong region with plausible hints at every order and grid; all rejected."""
    for N in (4, 20, 100):
        for G in (1, 8, 64):
            for region in ("++", "-+"):
                steps = [["0", "1/4"], ["1/4", "1/2"]]
                hints = {
                    "precision": 256,
                    "prec": 128,
                    "grid": G,
                    "points": [
                        [
                            {
                                "kind": "regions",
                                "segments": [
                                    {"region": region, "start": "0", "end": "1/2", "steps": steps}
                                ],
                                "crossings": [],
                            }
                        ]
                    ],
                }
                with mpmath.workdps(50):
                    wrong = [-mpmath.sin(mpmath.mpf(1) / 2), mpmath.cos(mpmath.mpf(1) / 2) - 1]
                enc = [[[_near(v) - DELTA, _near(v) + DELTA] for v in wrong]]
                cert = flow_certificate(
                    ON_PLANE, [[0, 0]], enclosures=enc, method="relu-regions", extra_hints=hints
                )
                cert["hints"]["order"] = N
                assert not check_certificate(cert).verified, (N, G, region)


# --- the window lemma with a forged wide window ----------------------------------------------

# xdot = -x_+ - 1 (neuron 1 has a = 0: the constant drift -relu(1)); from x0 = 1/1000 the
# trajectory crosses 0 at t* = log(1 + x0) and then moves with speed 1.
LINE = {
    "dimension": 1,
    "activation": "relu",
    "pieces": [{"duration": "1/500", "W": [[-1, -1]], "A": [[1], [0]], "b": [0, 1]}],
}


def _line_certificate(eps: str, claim) -> dict:
    hints = {
        "prec": 128,
        "grid": 8,
        "points": [
            [
                {
                    "kind": "regions",
                    "segments": [{"region": "+.", "start": "0", "end": "1/500", "steps": []}],
                    "crossings": [{"neurons": [0], "window": ["0", "1/500"], "eps": eps}],
                }
            ]
        ],
    }
    return flow_certificate(
        LINE, [["1/1000"]], enclosures=[claim], method="relu-regions", extra_hints=hints
    )


def test_wide_forged_window_keeps_its_error_bound():
    """One window over the whole piece with the region before the crossing: its flow y differs
    from the true x by about 5e-7 at the end; the window's eps must account for it."""
    with mpmath.workdps(50):
        x0, tau = mpmath.mpf(1) / 1000, mpmath.mpf(1) / 500
        true = -(tau - mpmath.log1p(x0))
        wrong = (1 + x0) * mpmath.exp(-tau) - 1  # the flow of region "+" (no crossing)
        assert abs(true - wrong) > mpmath.mpf(10) ** -7
    tight = [[_near(true) - fmpq(1, 10**12), _near(true) + fmpq(1, 10**12)]]
    false = [[_near(wrong) - fmpq(1, 10**12), _near(wrong) + fmpq(1, 10**12)]]
    generous = [[_near(true) - fmpq(1, 10**4), _near(true) + fmpq(1, 10**4)]]
    assert check_certificate(_line_certificate("1/1000000", generous)).verified
    assert not check_certificate(_line_certificate("1/1000000", false)).verified
    assert not check_certificate(_line_certificate("1/1000000", tight)).verified  # eps ~ 2e-6
    for eps in ("0", "1/10000000", "1/1000", "1000"):  # too small, or sound but wide
        assert not check_certificate(_line_certificate(eps, false)).verified, eps
        assert not check_certificate(_line_certificate(eps, tight)).verified, eps


# --- initial boxes ----------------------------------------------------------------------------

# xdot = w (x1)_+ with w = (0, 1): nothing moves where x1 <= 0; x2 grows by t x1 where x1 > 0.
SHEAR = {
    "dimension": 2,
    "activation": "relu",
    "pieces": [{"duration": "1/2", "W": [[0], [1]], "A": [[1, 0]], "b": [0]}],
}


def _box_certificate(spec, box, claim, region, G=8, N=20) -> dict:
    tau = spec["pieces"][0]["duration"]
    hints = {
        "prec": 128,
        "grid": G,
        "points": [
            [
                {
                    "kind": "regions",
                    "segments": [
                        {"region": region, "start": "0", "end": tau, "steps": [["0", tau]]}
                    ],
                    "crossings": [],
                }
            ]
        ],
    }
    cert = flow_certificate(
        spec, None, enclosures=[claim], boxes=[box], method="relu-regions", extra_hints=hints
    )
    cert["hints"]["order"] = N
    return cert


def test_box_straddling_a_hyperplane_is_not_certified_in_one_region():
    box = [["-1", "1"], ["0", "0"]]
    static = [["-2", "2"], ["-1/100", "1/100"]]  # false: points with x1 > 0 move
    assert not check_certificate(_box_certificate(SHEAR, box, static, "-")).verified
    true = [["-1", "1"], ["0", "1/2"]]  # true, but one region cannot prove it
    assert not check_certificate(_box_certificate(SHEAR, box, true, "+")).verified
    inside = [["1/4", "1"], ["0", "0"]]  # a box inside region + is fine
    assert check_certificate(
        _box_certificate(SHEAR, inside, [["1/5", "11/10"], ["-1/100", "51/100"]], "+")
    ).verified
    assert not check_certificate(
        _box_certificate(SHEAR, inside, [["1/5", "11/10"], ["-1/100", "49/100"]], "+")
    ).verified


def _corners(box):
    import itertools

    return [list(c) for c in itertools.product(*box)]


def _assert_claim_contains_and_is_tight(spec: dict, cert: dict, rng, inner: int) -> None:
    """The 50-digit images of the box's corners and ``inner`` random inner points lie in the
    claimed enclosure, and a claim cut just inside the extreme sampled image is rejected."""
    box = [[_q(lo), _q(hi)] for lo, hi in cert["instance"]["boxes"][0]]
    samples = _corners(box) + [
        [lo + (hi - lo) * fmpq(int(rng.integers(0, 1000)), 1000) for lo, hi in box]
        for _ in range(inner)
    ]
    images = [[_near(v) for v in _reference(spec, x)] for x in samples]
    claim = [[_q(lo), _q(hi)] for lo, hi in cert["claim"]["enclosures"][0]]
    for y in images:
        assert all(claim[k][0] <= y[k] <= claim[k][1] for k in range(2))
    for k in range(2):
        for end, pick in ((1, max), (0, min)):
            cut = copy.deepcopy(cert)
            extreme = pick(y[k] for y in images)
            cut["claim"]["enclosures"][0][k][end] = exact_number(
                extreme - DELTA if end else extreme + DELTA
            )
            assert not check_certificate(cut).verified


def test_relu_regions_boxes_contain_the_images_of_sampled_points():
    """The producer's box certificates (one region per piece, the checker's replay in the form
    centre + J u): VERIFIED, and the 50-digit images of corners and random inner points lie in
    the claim; a claim cut just inside the extreme sampled image is rejected."""
    from certified.arith import Interval

    rng = np.random.default_rng(4)
    found = 0
    for seed in range(40):
        activation = ("relu", "leaky_relu")[seed % 2]
        spec = _random_spec(seed, 2, activation, "1/3" if seed % 2 else None)
        spec["pieces"] = [{**p, "duration": "1/8"} for p in spec["pieces"]]
        c = rng.uniform(-1, 1, 2)
        B = Interval(c[None, :] - 1e-3, c[None, :] + 1e-3)
        schedule = Schedule.from_json(spec)
        res = enclose_flow(schedule, B)
        if res.hints["rejected"]:
            continue
        cert = flow_certificate_for(schedule, B, res)
        assert cert["hints"]["method"] == "relu-regions" and "boxes" in cert["instance"]
        assert check_certificate(cert).verified
        found += 1
        _assert_claim_contains_and_is_tight(spec, cert, rng, 4)
        if found == 4:
            break
    assert found == 4


def test_boxes_through_laminar_and_general_pieces():
    """Laminar pieces before and after general ones: the checker carries the box as c + J u
    through the laminar map (Clarke's mean value theorem, bounds.md#relu-box-laminar) as the
    producer does, so these certificates are accepted (they were rejected while the checker
    flattened the box there); 50-digit images of corners and inner points lie in the claim,
    a claim cut just inside the extreme sampled image is rejected."""
    from certified.arith import Interval

    rng = np.random.default_rng(8)
    found = 0
    for seed in range(60):
        activation = ("relu", "leaky_relu")[seed % 2]
        spec = _random_spec(seed, 2, activation, "1/3" if seed % 2 else None)
        general = [{**p, "duration": "1/8"} for p in spec["pieces"]]
        lam = [  # normal (1, -1), motion along (1, 1): two neurons, kinks near the box
            {"duration": "1/4", "W": [[1, "-1/2"], [1, "-1/2"]], "A": [[1, -1], [1, -1]],
             "b": [str(rng.uniform(-0.2, 0.2)), str(rng.uniform(-0.2, 0.2))]}
            for _ in range(2)
        ]  # fmt: skip
        spec["pieces"] = [lam[0], *general, lam[1]]
        c = rng.uniform(-1, 1, 2)
        B = Interval(c[None, :] - 1e-3, c[None, :] + 1e-3)
        schedule = Schedule.from_json(spec)
        assert schedule.pieces[0].is_laminar() and not schedule.is_laminar()
        res = enclose_flow(schedule, B)
        if res.hints["rejected"]:
            continue
        cert = flow_certificate_for(schedule, B, res)
        assert [e["kind"] for e in cert["hints"]["points"][0]][::3] == ["laminar", "laminar"]
        verdict = check_certificate(cert)
        assert verdict.verified, verdict.reason
        found += 1
        _assert_claim_contains_and_is_tight(spec, cert, rng, 4)
        if found == 4:
            break
    assert found == 4


@pytest.mark.parametrize("activation", ["relu", "leaky_relu"])
def test_box_across_a_laminar_kink_then_a_general_piece(activation):
    """The box straddles the laminar neuron's hyperplane (slopes [alpha, 1] on it): accepted,
    images of corners and inner points inside, a claim cut inside the extreme image rejected
    (a checker that took one slope for a straddling neuron would accept the cut)."""
    from certified.arith import Interval

    spec = {
        "dimension": 2,
        "activation": activation,
        "pieces": [
            {"duration": "1/2", "W": [[1], [1]], "A": [[1, -1]], "b": ["0"]},
            {"duration": "1/8", "W": [[1, "1/2"], ["3/10", -1]], "A": [[1, "1/5"], ["2/5", 1]],
             "b": ["1/10", "1/5"]},
        ],
    }  # fmt: skip
    B = Interval(np.array([[0.29, 0.29]]), np.array([[0.31, 0.31]]))
    schedule = Schedule.from_json(spec)
    res = enclose_flow(schedule, B)
    cert = flow_certificate_for(schedule, B, res)
    assert cert is not None and cert["hints"]["points"][0][0] == {"kind": "laminar"}
    verdict = check_certificate(cert)
    assert verdict.verified, verdict.reason
    _assert_claim_contains_and_is_tight(spec, cert, np.random.default_rng(3), 6)


def test_laminar_exact_boxes():
    """Boxes through laminar pieces (rule laminar-exact): the exact box hull; exact images of
    sampled points lie in it; the producer's certificate verifies; a claim shrunk past the
    image of a corner is rejected."""
    from certified.arith import Interval
    from certified.certificates import laminar_flow_exact

    spec = {
        "dimension": 2,
        "activation": "relu",
        "pieces": [
            {
                "duration": "1/2",
                "W": [[1, -1], [0, 0]],
                "A": [[0, 1], [0, 1]],
                "b": ["1/4", "-1/8"],
            },
            {"duration": "1", "W": [[0], [2]], "A": [[1, 0]], "b": ["1/3"]},
        ],
    }
    schedule = Schedule.from_json(spec)
    rng = np.random.default_rng(0)
    X0 = rng.uniform(-1, 1, (4, 2))
    B = Interval(X0 - 1e-1, X0 + 1e-1)
    cert = flow_certificate_for(schedule, B, enclose_flow(schedule, B))
    assert cert["hints"]["method"] == "laminar-exact" and "boxes" in cert["instance"]
    assert check_certificate(cert).verified
    for q, box in enumerate(cert["instance"]["boxes"]):
        box = [[_q(lo), _q(hi)] for lo, hi in box]
        pts = _corners(box) + [[(lo + hi) / 2 for lo, hi in box]]
        images = laminar_flow_exact(spec, pts)
        enc = cert["claim"]["enclosures"][q]
        for y in images:
            for k in range(2):
                assert _q(enc[k][0]) <= y[k] <= _q(enc[k][1])
        for k in range(2):
            for end, pick in ((1, max), (0, min)):
                c = copy.deepcopy(cert)
                extreme = pick(y[k] for y in images)
                c["claim"]["enclosures"][q][k][end] = exact_number(
                    extreme - DELTA if end else extreme + DELTA
                )
                assert not check_certificate(c).verified
    c = copy.deepcopy(cert)  # boxes claim enclosures, never exact images
    c["claim"] = {"images": [[lo for lo, _ in row] for row in c["claim"]["enclosures"]]}
    assert not check_certificate(c).verified


def test_laminar_box_extremum_at_an_interior_breakpoint():
    """x2 gains F(s) = (s + 1)_+ - 2 (s + 1/2)_+ with s = -x1: on the box x1 in [0, 1] the
    range of F is [0, 1/2], its maximum at the breakpoint s = -1/2 inside the range of s (the
    ends give 0 only), so the image of the box has x2 in [0, 1/2] exactly."""
    spec = {
        "dimension": 2,
        "activation": "relu",
        "pieces": [
            {"duration": "1", "W": [[0, 0], [1, -2]], "A": [[-1, 0], [-1, 0]], "b": ["1", "1/2"]}
        ],
    }
    box = [["0", "1"], ["0", "0"]]

    def cert(x2_hi):
        return flow_certificate(spec, None, enclosures=[[["0", "1"], ["0", x2_hi]]], boxes=[box])

    assert check_certificate(cert("1/2")).verified
    assert not check_certificate(cert("49/100")).verified


def test_exact_laminar_entries_are_charged_against_the_replay_budget():
    """Laminar and equilibrium entries of rule relu-regions replay exact points: their cost is
    charged like rule laminar-exact's (they were free before, so large-height data could take
    minutes); here 2,000 points through 5 laminar pieces with 1,000-digit numbers."""
    big = int("1" * 1000)
    piece = {
        "duration": exact_number(fmpq(1, big)),
        "W": [["0"] * 40, [exact_number(fmpq(k + 1, big)) for k in range(40)]],
        "A": [["1", "0"]] * 40,
        "b": [exact_number(fmpq(k, 10 * big + 7)) for k in range(40)],
    }
    spec = {"dimension": 2, "activation": "relu", "pieces": [piece] * 5}
    n = 2000
    cert = {
        "kind": "flow",
        "version": 1,
        "instance": {
            "schedule": spec,
            "points": [["1", "2"]] * n,
            "time": exact_number(fmpq(5, big)),
        },
        "claim": {"enclosures": [[["-1", "3"], ["-1", "3"]]] * n},
        "hints": {
            "method": "relu-regions",
            "precision": 64,
            "order": 10,
            "grid": 1,
            "points": [[{"kind": "laminar"}] * 5] * n,
        },
    }
    v = check_certificate(cert)
    assert not v.verified and "resource limit" in v.reason
    cert["instance"]["points"] = cert["instance"]["points"][:2]  # small: within the budget
    cert["claim"]["enclosures"] = cert["claim"]["enclosures"][:2]
    cert["hints"]["points"] = cert["hints"]["points"][:2]
    assert check_certificate(cert).verified


# xdot1 = -1 - 4 (-x1)_+: speed 1 while x1 > 0, then accelerating away from 0.
FALL = {
    "dimension": 2,
    "activation": "relu",
    "pieces": [{"duration": "1/2", "W": [[-4, -1], [0, 0]], "A": [[-1, 0], [0, 0]], "b": [0, 1]}],
}


def test_box_whose_edge_crosses_while_its_centre_does_not():
    """Box x1 in [1/4, 1]: its centre stays at x1 > 0 over the piece, but points with x1 < 1/2
    cross; one step in region '-' claims x1 - 1/2 in [-1/4, 1/2], false (x1 = 1/4 ends at
    (1 - e)/4 ~ -0.43). Membership must be certified for the whole box, not the centre."""
    slack = fmpq(1, 100)
    false = [
        [exact_number(-fmpq(1, 4) - slack), exact_number(fmpq(1, 2) + slack)],
        ["-1/100", "1/100"],
    ]
    box = [["1/4", "1"], ["0", "0"]]
    assert not check_certificate(_box_certificate(FALL, box, false, "-.")).verified
    inside = [["3/4", "1"], ["0", "0"]]  # stays at x1 > 0: x1 - 1/2 in [1/4, 1/2]
    true = [[exact_number(fmpq(1, 4) - DELTA), exact_number(fmpq(1, 2) + DELTA)], ["0", "0"]]
    assert check_certificate(_box_certificate(FALL, inside, true, "-.")).verified


def _leaf_paths(obj, path=()):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield path + (k,)
            yield from _leaf_paths(v, path + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _leaf_paths(v, path + (i,))


def _box_golden():
    from certified.arith import Interval

    spec = _random_spec(17, 2, "leaky_relu", "1/3")
    spec["pieces"] = [{**p, "duration": "1/8"} for p in spec["pieces"]]
    c = np.array([[0.25, -0.5], [-0.5, 0.125]])
    B = Interval(c - 1e-3, c + 1e-3)
    schedule = Schedule.from_json(spec)
    res = enclose_flow(schedule, B)
    assert not res.hints["rejected"]
    cert = flow_certificate_for(schedule, B, res)
    assert check_certificate(cert).verified
    return cert


def test_box_golden_tampering():
    """Deleting any field of a leaky-ReLU box certificate, moving any box end outward, any
    piece parameter or the slope by 1/64, is rejected."""
    cert = _box_golden()
    for path in list(_leaf_paths(cert)):
        c = copy.deepcopy(cert)
        parent = c
        for key in path[:-1]:
            parent = parent[key]
        del parent[path[-1]]
        assert not check_certificate(c).verified, path
    for q, box in enumerate(cert["instance"]["boxes"]):
        for k, (lo, hi) in enumerate(box):
            for end, moved in ((0, _q(lo) - fmpq(1, 64)), (1, _q(hi) + fmpq(1, 64))):
                c = copy.deepcopy(cert)
                c["instance"]["boxes"][q][k][end] = exact_number(moved)
                assert not check_certificate(c).verified, (q, k, end)
    for j in range(len(cert["instance"]["schedule"]["pieces"])):
        for key in ("W", "A", "b", "duration"):
            c = copy.deepcopy(cert)
            p = c["instance"]["schedule"]["pieces"][j]
            bump = lambda v: exact_number(_q(v) + fmpq(1, 64))  # noqa: E731
            p[key] = (
                bump(p[key])
                if key == "duration"
                else [bump(v) for v in p[key]]
                if key == "b"
                else [[bump(v) for v in row] for row in p[key]]
            )
            assert not check_certificate(c).verified, (j, key)
    c = copy.deepcopy(cert)
    c["instance"]["schedule"]["slope"] = "1/4"
    assert not check_certificate(c).verified
