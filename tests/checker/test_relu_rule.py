"""Rule relu-regions: certificates of non-laminar ReLU flows produced by certified.flow.relu are
verified by the independent checker; meaningful tampering and malformed hints are rejected."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from certified.checker import check_certificate
from certified.flow.api import enclose_flow, flow_certificate_for
from certified.models import Schedule


def _schedule(seed: int, d: int, laminar_tail: bool = False) -> Schedule:
    rng = np.random.default_rng(seed)
    pieces = [
        {
            "duration": "1/2",
            "W": rng.standard_normal((d, 3)).tolist(),
            "A": rng.standard_normal((3, d)).tolist(),
            "b": (rng.standard_normal(3) / 2).tolist(),
        }
        for _ in range(2)
    ]
    if laminar_tail:  # a laminar piece: rows of A equal a, columns of W orthogonal to a
        a = [1] + [0] * (d - 1)
        w = [0] + [1] * (d - 1)
        pieces.append(
            {"duration": "1/4", "W": [[c, -c] for c in w], "A": [a, a], "b": ["1/4", "-1/8"]}
        )
    return Schedule.from_json({"dimension": d, "activation": "relu", "pieces": pieces})


def _golden(seed: int, d: int, n: int = 3, laminar_tail: bool = False):
    schedule = _schedule(seed, d, laminar_tail)
    X0 = np.random.default_rng(seed + 1000).uniform(-1, 1, (n, d))
    res = enclose_flow(schedule, X0)
    cert = flow_certificate_for(schedule, X0, res)
    assert cert is not None and cert["hints"]["method"] == "relu-regions"
    return cert


def _crossings(cert):
    return [
        (q, j, k)
        for q, row in enumerate(cert["hints"]["points"])
        for j, e in enumerate(row)
        for k, _ in enumerate(e.get("crossings", []))
    ]


# seeds whose trajectories cross hyperplanes (checked below)
CASES = [(0, 2, True), (3, 3, False), (6, 3, True), (8, 2, False), (2, 3, False)]


@pytest.fixture(scope="module", params=CASES, ids=lambda c: f"seed{c[0]}-d{c[1]}")
def golden(request):
    seed, d, lam = request.param
    return _golden(seed, d, laminar_tail=lam)


def test_golden_relu_certificate_is_verified(golden):
    assert _crossings(golden), "the golden case should cross a hyperplane"
    v = check_certificate(golden)
    assert v.verified, v.reason
    assert "relu-regions" in v.reason


def test_many_random_cases_verify():
    for seed in range(10):
        for d in (2, 3):
            v = check_certificate(_golden(seed, d, n=2))
            assert v.verified, (seed, d, v.reason)


def _rejected(cert, edit):
    c = copy.deepcopy(cert)
    edit(c)
    v = check_certificate(c)
    assert not v.verified
    return v.reason


def _first_crossing(c):
    q, j, k = _crossings(c)[0]
    return c["hints"]["points"][q][j], k


def test_tampered_parameters_rejected(golden):
    def edit(c):
        W = c["instance"]["schedule"]["pieces"][0]["W"]
        W[0] = [_bump(x) for x in W[0]]

    _rejected(golden, edit)


def _bump(x: str) -> str:
    from flint import fmpq

    from certified.certificates import exact_number
    from certified.checker._parse import exact

    return exact_number(exact(x, "x") + fmpq(1, 64))


def test_tampered_point_rejected(golden):
    def edit(c):
        c["instance"]["points"][0][0] = _bump(c["instance"]["points"][0][0])

    _rejected(golden, edit)


def test_tampered_region_sign_rejected(golden):
    def edit(c):
        e, _ = _first_crossing(c)
        seg = e["segments"][-1]
        r = seg["region"]
        i = next(i for i, ch in enumerate(r) if ch in "+-")
        seg["region"] = r[:i] + ("-" if r[i] == "+" else "+") + r[i + 1 :]

    _rejected(golden, edit)


def test_tampered_crossing_window_rejected(golden):
    def shift(c):
        e, k = _first_crossing(c)
        lo, hi = e["crossings"][k]["window"]
        e["crossings"][k]["window"] = [lo, _bump(hi)]

    _rejected(golden, shift)

    def as_step(c):  # claim no crossing: a validated step through the window instead
        e, k = _first_crossing(c)
        lo, hi = e["crossings"].pop(k)["window"]
        for seg in e["segments"]:
            for st in seg["steps"]:
                if st[1] == lo:
                    st[1] = hi
                    return
        e["segments"][0]["steps"].append([lo, hi])

    _rejected(golden, as_step)


def test_tampered_radius_rejected(golden):
    def edit(c):
        for q, j, k in _crossings(c):
            cr = c["hints"]["points"][q][j]["crossings"][k]
            cr["eps"] = "0"

    reason = _rejected(golden, edit)
    assert "eps" in reason or "region" in reason or "enclos" in reason


def test_tampered_enclosure_rejected(golden):
    def edit(c):
        lo, hi = c["claim"]["enclosures"][0][0]
        c["claim"]["enclosures"][0][0] = [hi, hi] if lo != hi else [_bump(hi), _bump(hi)]

    _rejected(golden, edit)

    def shifted(c):
        lo, hi = c["claim"]["enclosures"][-1][-1]
        c["claim"]["enclosures"][-1][-1] = [_bump(lo), _bump(hi)]

    _rejected(golden, shifted)


def test_images_claim_and_activation_rejected(golden):
    def images(c):
        c["claim"] = {"images": [[lo for lo, _ in row] for row in c["claim"]["enclosures"]]}

    assert "enclosures" in _rejected(golden, images)

    def leaky(c):
        c["instance"]["schedule"]["activation"] = "leaky_relu"

    _rejected(golden, leaky)


@pytest.mark.parametrize(
    "edit",
    [
        lambda c: c["hints"].pop("grid"),
        lambda c: c["hints"].pop("order"),
        lambda c: c["hints"].pop("precision"),
        lambda c: c["hints"].update(extra=1),
        lambda c: c["hints"].update(grid=0),
        lambda c: c["hints"].update(order="40"),
        lambda c: _first_crossing(c)[0].pop("crossings"),
        lambda c: _first_crossing(c)[0].update(foo=[]),
        lambda c: _first_crossing(c)[0]["segments"][0].pop("steps"),
        lambda c: _first_crossing(c)[0]["segments"][0].update(steps=3),
        lambda c: _first_crossing(c)[0]["segments"][0].update(region="+"),
        lambda c: _first_crossing(c)[0]["crossings"][0].pop("eps"),
        lambda c: _first_crossing(c)[0]["crossings"][0].update(eps="-1"),
        lambda c: _first_crossing(c)[0]["crossings"][0].update(neurons=[99]),
        lambda c: _first_crossing(c)[0].update(kind="region"),
        lambda c: c["hints"]["points"][0].append({"kind": "laminar"}),
        lambda c: c["hints"]["points"].pop(),
        lambda c: c["hints"]["points"][0].__setitem__(0, {"kind": "laminar"}),
        lambda c: c["hints"]["points"][0].__setitem__(0, {"kind": "equilibrium"}),
        lambda c: c["hints"]["points"][0].__setitem__(0, "laminar"),
    ],
)
def test_malformed_hints_rejected(edit):
    cert = _golden(3, 3, laminar_tail=True)
    _rejected(cert, edit)


def test_equilibrium_and_laminar_kinds():
    pieces = [
        {
            "duration": "1",
            "W": [[1, 2, 0], [0, 1, 3]],
            "A": [[1, 0], [0, 1], [1, 1]],
            "b": ["0", "-1", "-1/2"],
        },
    ]
    schedule = Schedule.from_json({"dimension": 2, "activation": "relu", "pieces": pieces})
    X0 = np.array([[0.0, 0.0], [0.5, 0.25]])
    cert = flow_certificate_for(schedule, X0, enclose_flow(schedule, X0))
    assert cert is not None
    assert cert["hints"]["points"][0][0] == {"kind": "equilibrium"}
    assert check_certificate(cert).verified
    c = copy.deepcopy(cert)  # a moving point is no equilibrium
    c["hints"]["points"][1][0] = {"kind": "equilibrium"}
    assert not check_certificate(c).verified


def test_every_numeric_field_edit_is_decided_correctly():
    """Each number of a golden relu-regions certificate (one point with crossings), in turn,
    moved by 1/1000 (+1 for integers): rejected, or its claim is true — the claimed enclosure
    contains the 50-digit region-by-region reference image of the edited instance."""
    import sys
    from fractions import Fraction
    from pathlib import Path

    from certified.arith.exact import to_fmpq
    from certified.certificates import exact_number

    sys.path.insert(0, str(Path(__file__).parent.parent / "flow"))
    import references as ref

    cert = _golden(0, 2, n=3)
    assert check_certificate(cert).verified and _crossings(cert)

    def leaves(node, path=()):
        if isinstance(node, dict):
            for k, v in node.items():
                yield from leaves(v, (*path, k))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                yield from leaves(v, (*path, i))
        elif isinstance(node, int) and not isinstance(node, bool):
            yield path
        elif isinstance(node, str) and any(c.isdigit() for c in node):
            try:
                to_fmpq(node)
            except Exception:
                return
            yield path

    def frac(s):
        q = to_fmpq(s)
        return Fraction(int(q.p), int(q.q))

    paths = list(leaves(cert))
    accepted, refs = 0, {}
    for path in paths:
        bad = copy.deepcopy(cert)
        node = bad
        for key in path[:-1]:
            node = node[key]
        v = node[path[-1]]
        node[path[-1]] = (
            v + 1 if isinstance(v, int) else exact_number(to_fmpq(v) + to_fmpq("1/1000"))
        )
        if not check_certificate(bad).verified:
            continue
        accepted += 1
        key = repr(bad["instance"])
        if key not in refs:
            pcs = bad["instance"]["schedule"]["pieces"]
            conv = lambda m: [[frac(x) for x in row] for row in m]  # noqa: E731
            refs[key] = [
                ref.piecewise_expm(
                    [conv(p["W"]) for p in pcs],
                    [conv(p["A"]) for p in pcs],
                    [[frac(x) for x in p["b"]] for p in pcs],
                    [frac(p["duration"]) for p in pcs],
                    [frac(x) for x in x0],
                )
                for x0 in bad["instance"]["points"]
            ]
        for n, image in enumerate(refs[key]):
            for k, y in enumerate(image):
                lo, hi = (frac(e) for e in bad["claim"]["enclosures"][n][k])
                man, exp = y.man_exp
                yq = Fraction(int(man)) * Fraction(2) ** int(exp) * (-1 if y < 0 else 1)
                tol = Fraction(1, 10**40)
                assert lo - tol <= yq <= hi + tol, path
    assert accepted < len(paths) / 2, (accepted, len(paths))
