"""Acceptance test of issue 10, "a new field costs a few lines": a field the package has never
seen -- a damped pendulum with a piecewise-constant torque,

    theta'' = -sin(theta) - gamma theta' + tau(t),

as a first-order field on R^2 -- is defined in this file alone with the public API, its flow is
certified from 3 points and from a small box, the enclosures contain 40-digit references, and
its certificate is VERIFIED by ``certified check``. Nothing under ``certified/`` knows this
field.
"""

from __future__ import annotations

import json

import flint
import mpmath
import numpy as np
import pytest

from certified import Interval
from certified.arith.exact import to_fmpq
from certified.certificates import write_certificate
from certified.cli import main
from certified.fields import field, sin
from certified.flow import FlowStatus, enclose_flow, flow_certificate_for

# --- the new field: five lines ----------------------------------------------------------------

pendulum = field(
    2,
    lambda x, p: [x[1], -sin(x[0]) - p.gamma * x[1] + p.torque],
    parameters=["gamma", "torque"],
)
forced = pendulum.on(
    ("1/2", {"gamma": "1/10", "torque": "1/2"}),
    ("1/2", {"gamma": "1/10", "torque": "-1/4"}),
)

POINTS = np.array([[1.0, 0.0], [-0.5, 0.75], [2.5, -1.25]])
CENTRE, RADIUS = np.array([0.25, 0.5]), 2.0**-10
N_SAMPLES = 200

# --- 40-digit references ----------------------------------------------------------------------
# Points: mpmath.odefun. The 200 box samples: odefun costs ~1 s per point here, so a
# fixed-point Taylor integrator of this pendulum (160-bit integers, order 28, steps of 1/32,
# sin/cos of each step's start by mpmath at 50 digits) is used instead, cross-checked against
# odefun at the points and at the box centre to 1e-35.

PIECES = [
    (flint.fmpq(1, 2), flint.fmpq(1, 10), flint.fmpq(1, 2)),
    (flint.fmpq(1, 2), flint.fmpq(1, 10), flint.fmpq(-1, 4)),
]
DPS = 40


def _mp(q: flint.fmpq) -> mpmath.mpf:
    return mpmath.mpf(int(q.p)) / int(q.q)


def odefun_reference(x0) -> list[mpmath.mpf]:
    """Phi_1(x0) by mpmath.odefun at 40 digits, piece by piece."""
    with mpmath.workdps(DPS):
        x = [_mp(flint.fmpq(*float(v).as_integer_ratio())) for v in x0]
        for duration, gamma, torque in PIECES:
            g, tau = _mp(gamma), _mp(torque)
            sol = mpmath.odefun(
                lambda t, u, g=g, tau=tau: [u[1], -mpmath.sin(u[0]) - g * u[1] + tau],
                0,
                x,
                degree=30,
            )
            x = sol(_mp(duration))
        return x


P, H_BITS, ORDER = 160, 5, 28  # fixed point 2^-160, step 2^-5, Taylor order


def _fixed(q: flint.fmpq) -> int:
    return (int(q.p) << P) // int(q.q)


def taylor_reference(x0) -> list[flint.fmpq]:
    """Phi_1(x0) by Taylor series in fixed point: with scaled coefficients u~_k = u_k h^k,
    x~_{k+1} = h y~_k/(k+1), y~_{k+1} = h(-s~_k - gamma y~_k + tau [k = 0])/(k+1),
    (k+1) s~_{k+1} = sum_j (j+1) x~_{j+1} c~_{k-j}, (k+1) c~_{k+1} = -sum_j (j+1) x~_{j+1} s~_{k-j}
    (s = sin x, c = cos x)."""
    x, y = (_fixed(flint.fmpq(*float(v).as_integer_ratio())) for v in x0)
    tail = 0
    for duration, gamma, torque in PIECES:
        g, tau = _fixed(gamma), _fixed(torque)
        steps = duration * 2**H_BITS
        assert steps.q == 1
        for _ in range(int(steps.p)):
            with mpmath.workdps(50):
                theta = mpmath.mpf(x) / 2**P
                s0 = int(mpmath.floor(mpmath.sin(theta) * 2**P))
                c0 = int(mpmath.floor(mpmath.cos(theta) * 2**P))
            X, Y, S, C = [x], [y], [s0], [c0]
            for k in range(ORDER):
                X.append((Y[k] >> H_BITS) // (k + 1))
                force = -S[k] - ((g * Y[k]) >> P) + (tau if k == 0 else 0)
                Y.append((force >> H_BITS) // (k + 1))
                S.append((sum((j + 1) * X[j + 1] * C[k - j] for j in range(k + 1)) >> P) // (k + 1))
                C.append(
                    -(sum((j + 1) * X[j + 1] * S[k - j] for j in range(k + 1)) >> P) // (k + 1)
                )
            tail = max(tail, abs(X[-1]), abs(Y[-1]), abs(X[-2]), abs(Y[-2]))
            x, y = sum(X), sum(Y)
    assert tail < 2 ** (P - 140), "the Taylor series has not converged: smaller steps"
    return [flint.fmpq(x, 2**P), flint.fmpq(y, 2**P)]


def _to_fmpq(v: mpmath.mpf) -> flint.fmpq:
    m, e = v.man_exp  # of |v|
    m, e = (-int(m) if v < 0 else int(m)), int(e)
    return flint.fmpq(m * 2 ** max(e, 0), 2 ** max(-e, 0))


SLACK = flint.fmpq(1, 10**30)


def _inside(value: flint.fmpq, lo: float, hi: float, slack: flint.fmpq = SLACK) -> bool:
    return (
        flint.fmpq(*float(lo).as_integer_ratio()) - slack
        <= value
        <= slack + flint.fmpq(*float(hi).as_integer_ratio())
    )


# --- the test ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def point_flow():
    res = enclose_flow(forced, POINTS)
    assert res.status is FlowStatus.SUCCESS, res.message
    return res


@pytest.fixture(scope="module")
def box():
    return Interval(CENTRE[None, :] - RADIUS, CENTRE[None, :] + RADIUS)


@pytest.fixture(scope="module")
def box_flow(box):
    res = enclose_flow(forced, box)
    assert res.status is FlowStatus.SUCCESS, res.message
    return res


def test_the_field_is_a_few_lines_of_data():
    g = forced.to_json()
    assert g["field"]["dimension"] == 2 and g["field"]["parameters"] == ["gamma", "torque"]
    assert {n[0] for n in g["field"]["nodes"]} <= {"x", "p", "c", "sin", "neg", "mul", "sub", "add"}
    assert [p["parameters"] for p in g["pieces"]] == [["1/10", "1/2"], ["1/10", "-1/4"]]
    assert forced.total_time == 1


def test_points_contain_the_odefun_reference_and_the_taylor_reference_agrees(point_flow):
    assert point_flow.times == ("1",)
    enc = point_flow.final
    assert point_flow.max_width() < 1e-12
    for i, x0 in enumerate(POINTS):
        ref = odefun_reference(x0)
        taylor = taylor_reference(x0)
        for q in range(2):
            exact = _to_fmpq(ref[q])
            assert _inside(exact, enc.lo[i, q], enc.hi[i, q]), (i, q, ref[q])
            assert abs(taylor[q] - exact) < flint.fmpq(1, 10**35), (i, q)


def test_box_contains_200_sampled_inner_points(box_flow, box):
    enc = box_flow.final
    width = enc.hi - enc.lo
    assert np.all(width > 0) and np.all(width < 100 * RADIUS)  # no wrapping blow-up
    centre_ref = odefun_reference(CENTRE)
    centre_taylor = taylor_reference(CENTRE)
    for q in range(2):
        assert abs(centre_taylor[q] - _to_fmpq(centre_ref[q])) < flint.fmpq(1, 10**35)
        assert _inside(_to_fmpq(centre_ref[q]), enc.lo[0, q], enc.hi[0, q])
    rng = np.random.default_rng(10)
    samples = rng.uniform(box.lo[0], box.hi[0], size=(N_SAMPLES, 2))
    corners = np.array(
        [[a, b] for a in (box.lo[0, 0], box.hi[0, 0]) for b in (box.lo[0, 1], box.hi[0, 1])]
    )
    misses = []
    for x0 in np.vstack([corners, samples]):
        image = taylor_reference(x0)
        if not all(_inside(image[q], enc.lo[0, q], enc.hi[0, q]) for q in range(2)):
            misses.append(x0)
    assert not misses, f"{len(misses)} sampled points outside the enclosure, e.g. {misses[0]}"


def test_certificates_are_verified_by_certified_check(point_flow, box_flow, box, tmp_path, capsys):
    paths = []
    for name, start, res in (("points", POINTS, point_flow), ("box", box, box_flow)):
        cert = flow_certificate_for(forced, start, res)
        assert cert is not None and cert["hints"]["method"] == "taylor-lohner"
        path = tmp_path / f"pendulum_{name}.json"
        write_certificate(path, cert)
        paths.append(str(path))
        # the claims contain the references too
        claim = cert["claim"]["enclosures"][-1]
        x0 = POINTS[0] if name == "points" else CENTRE
        ref = taylor_reference(x0)
        for q in range(2):
            lo, hi = (to_fmpq(v) for v in claim[0][q])
            assert lo <= ref[q] <= hi
    capsys.readouterr()
    assert main(["check", *paths]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [f"VERIFIED flow {p}" for p in paths]


def test_the_same_field_through_the_command_line(tmp_path, capsys):
    field_file = tmp_path / "pendulum_field.json"
    field_file.write_text(json.dumps(forced.to_json()))
    points = tmp_path / "points.json"
    points.write_text(json.dumps({"X": POINTS.tolist()}))
    out = tmp_path / "pendulum_cli.json"
    code = main(
        ["flow", "--field", str(field_file), "--points", str(points), "--out", str(out), "--json"]
    )
    payload = json.loads(capsys.readouterr().out)
    assert code == 0 and payload["verdict"] == "VERIFIED" and out.exists()
    assert main(["check", str(out)]) == 0
    assert capsys.readouterr().out == f"VERIFIED flow {out}\n"
