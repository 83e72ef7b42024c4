"""Rule taylor-lognorm: smooth-flow certificates produced by certified.flow.smooth are verified
by the independent checker, and meaningful tampering is rejected."""

from __future__ import annotations

import copy

import flint
import numpy as np
import pytest

from certified.certificates import flow_certificate
from certified.checker import check_certificate
from certified.flow.smooth import smooth_flow
from certified.models import Schedule


def _golden(activation: str, seed: int = 7, n: int = 3):
    rng = np.random.default_rng(seed)
    pieces = []
    for _ in range(2):
        pieces.append(
            {
                "duration": "1/8",
                "W": (rng.standard_normal((2, 3)) / 2).tolist(),
                "A": rng.standard_normal((3, 2)).tolist(),
                "b": rng.standard_normal(3).tolist(),
            }
        )
    schedule = Schedule.from_json({"dimension": 2, "activation": activation, "pieces": pieces})
    X0 = rng.uniform(-1, 1, (n, 2))
    res = smooth_flow(
        [p.W for p in schedule.pieces],
        [p.A for p in schedule.pieces],
        [p.b for p in schedule.pieces],
        [p.duration for p in schedule.pieces],
        X0,
        activation=activation,
        order=16,
        max_step="1/16",
    )
    enc = np.stack([res.final.lo, res.final.hi], axis=-1)
    hints = {"order": 16, "precision": 96, "chains": res.hints["chains"]}
    return flow_certificate(
        schedule.to_json(), X0, enclosures=enc, method="taylor-lognorm", extra_hints=hints
    )


@pytest.fixture(scope="module", params=["tanh", "sigmoid"])
def golden(request):
    return _golden(request.param)


def test_golden_smooth_certificate_is_verified(golden):
    v = check_certificate(golden)
    assert v.verified, v.reason
    assert "taylor-lognorm" in v.reason


def _edit(cert, path, fn):
    c = copy.deepcopy(cert)
    node = c
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = fn(node[path[-1]])
    return c


def _shift(s: str, delta: str = "1/1000") -> str:
    from certified.arith.exact import to_fmpq
    from certified.certificates import exact_number

    return exact_number(to_fmpq(s) + to_fmpq(delta))


MUTATIONS = [
    (
        "parameter W moved",
        ("instance", "schedule", "pieces", 0, "W", 0, 1),
        lambda s: _shift(s, "1/2"),
    ),
    ("bias moved", ("instance", "schedule", "pieces", 1, "b", 2), lambda s: _shift(s, "-1/3")),
    ("point moved", ("instance", "points", 1, 0), lambda s: _shift(s, "1/1000000000")),
    ("radius zeroed", ("hints", "chains", 0, "radii", 1, 2), lambda s: "0"),
    ("centre moved", ("hints", "chains", 1, "centres", 1, 0, 1), lambda s: _shift(s, "1/1000000")),
    ("box shrunk", ("hints", "chains", 0, "boxes", 0, 1, 0, 1), lambda s: _shift(s, "-1/10")),
    ("enclosure shrunk", ("claim", "enclosures", 2, 1, 0), lambda s: _shift(s, "1/100000000")),
    ("order lowered", ("hints", "order"), lambda k: 2),
]


def _half(s: str) -> str:
    from certified.arith.exact import to_fmpq
    from certified.certificates import exact_number

    return exact_number(to_fmpq(s) / 2)


@pytest.mark.parametrize(("name", "path", "fn"), MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_meaningful_tampering_is_rejected(golden, name, path, fn):
    bad = _edit(golden, path, fn)
    assert bad != golden
    v = check_certificate(bad)
    assert not v.verified, f"{name}: accepted ({v.reason})"


@pytest.mark.parametrize("field", ["order", "precision", "chains"])
def test_missing_or_unknown_hint_fields_are_rejected(golden, field):
    bad = copy.deepcopy(golden)
    del bad["hints"][field]
    assert not check_certificate(bad).verified
    extra = copy.deepcopy(golden)
    extra["hints"]["extra"] = 1
    assert not check_certificate(extra).verified


def test_rule_needs_a_smooth_activation_and_enclosures(golden):
    bad = copy.deepcopy(golden)
    bad["instance"]["schedule"]["activation"] = "relu"
    assert "tanh or sigmoid" in check_certificate(bad).reason
    worse = copy.deepcopy(golden)
    worse["claim"] = {"images": [[p[0][0], p[1][0]] for p in golden["claim"]["enclosures"]]}
    assert not check_certificate(worse).verified


# --- every numeric field in turn --------------------------------------------------------------


def _numeric_leaves(node, path=()):
    """Paths of every number of a certificate (exact strings and JSON integers)."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _numeric_leaves(v, (*path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _numeric_leaves(v, (*path, i))
    elif isinstance(node, int | str) and not isinstance(node, bool):
        if isinstance(node, int) or any(c.isdigit() for c in node):
            yield path


def _true_images(cert) -> list:
    """Phi_T of every point of the (possibly edited) instance by mpmath.odefun, 30 digits."""
    import mpmath

    from certified.arith.exact import to_fmpq

    sched = cert["instance"]["schedule"]
    act = mpmath.tanh if sched["activation"] == "tanh" else (lambda z: 1 / (1 + mpmath.exp(-z)))

    def q(x):
        f = to_fmpq(x)
        return mpmath.mpf(int(f.p)) / int(f.q)

    out = []
    with mpmath.workdps(30):
        for x0 in cert["instance"]["points"]:
            y = [q(v) for v in x0]
            for pc in sched["pieces"]:
                W = [[q(v) for v in row] for row in pc["W"]]
                A = [[q(v) for v in row] for row in pc["A"]]
                b = [q(v) for v in pc["b"]]

                def f(t, y, W=W, A=A, b=b):
                    s = [act(sum(a * v for a, v in zip(row, y, strict=True)) + bi)
                         for row, bi in zip(A, b, strict=True)]  # fmt: skip
                    return [sum(w * si for w, si in zip(row, s, strict=True)) for row in W]

                y = list(mpmath.odefun(f, 0, y)(q(pc["duration"])))
            out.append(y)
    return out


def test_every_numeric_field_edit_is_decided_correctly():
    """Each number of a golden certificate (one point, tanh), in turn, moved by 1/1000: the
    checker either rejects the edited certificate or its claim is true (the claimed enclosures
    contain 30-digit odefun images of the edited instance). Hint edits that keep a valid proof
    (a wider a priori box, a larger radius) are legitimately accepted; none may be false."""
    from certified.arith.exact import to_fmpq

    cert = _golden("tanh", n=1)
    assert check_certificate(cert).verified
    leaves = list(_numeric_leaves(cert))
    accepted, refs = [], {}
    for path in leaves:
        bad = _edit(cert, path, lambda v: v + 1 if isinstance(v, int) else _shift(v))
        if not check_certificate(bad).verified:
            continue
        accepted.append(path)
        key = repr(bad["instance"])
        if key not in refs:
            refs[key] = _true_images(bad)
        tol = flint.fmpq(1, 10**25)  # the reference's accuracy, far below the widths (~1e-15)
        for n, image in enumerate(refs[key]):
            for k, v in enumerate(image):
                lo, hi = (to_fmpq(e) for e in bad["claim"]["enclosures"][n][k])
                x = to_fmpq(mpmath_str(v))
                assert lo - tol <= x <= hi + tol, (path, lo, x, hi)
    # most numbers matter: the instance, the claim's ends and the centres are all checked
    assert len(accepted) < len(leaves) / 2, (len(accepted), len(leaves))
    assert not any(p[0] == "instance" for p in accepted), accepted


def mpmath_str(v) -> str:
    """An mpf as an exact decimal string readable by to_fmpq."""
    import mpmath

    return mpmath.nstr(v, 28, strip_zeros=False, min_fixed=-30, max_fixed=30)
