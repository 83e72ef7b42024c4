"""Rule taylor-lohner (kind flow v1), the generic checker rule for expression fields: golden
certificates are VERIFIED; every single numeric edit is either rejected or leaves a claim that
is still true (decided independently by a 40-digit mpmath.odefun reference of the edited
instance); tight claims, malformed hints, failing Picard boxes and hostile costs are rejected.
"""

from __future__ import annotations

import ast
import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import flint
import mpmath
import numpy as np
import pytest
from checker_golden import containers, get, leaves, replaced, structural_edits
from hypothesis import settings

import certified.checker
import certified.checker._field_rule as field_rule
from certified.arith import Interval
from certified.arith.exact import to_fmpq
from certified.certificates import exact_number
from certified.checker import check_certificate
from certified.checker.lohner import replay_flow
from certified.checker.taylor import Rejected, parse_field
from certified.fields import sphere_neural_field, vanderpol
from certified.flow import enclose_flow
from certified.flow.api import flow_certificate_for
from certified.flow.options import SaveAt

DPS = 40
WORDS = ("kind", "method")  # string leaves that are words, not numbers

# --- the golden certificates ------------------------------------------------------------------


def _vanderpol_certificate() -> dict[str, Any]:
    """Van der Pol (mu = 1) from 2 points to T = 1/2, also saved at t = 1/4."""
    pts = np.array([[1.0, 0.5], [-0.5, 0.25]])
    res = enclose_flow(vanderpol(), pts, save_at=SaveAt("1/2", ["1/4"]))
    return flow_certificate_for(vanderpol(), pts, res)


W1, U1, B1 = [[0, 1], [-1, "1/2"]], [[1, "1/4"], ["-1/2", 1]], ["1/8", "-1/4"]
W2, U2, B2 = [["1/2", -1], [1, "1/4"]], [["3/4", 0], ["1/4", -1]], [0, "1/2"]


def _sphere_certificate() -> dict[str, Any]:
    """The sphere neural ODE x' = P_x^perp W tanh(U x + b) on S^1, two pieces of 1/8, from a
    box of radius 2^-20 around (0.6, 0.8)."""
    problem = sphere_neural_field([("1/8", W1, U1, B1), ("1/8", W2, U2, B2)])
    c = np.array([[0.6, 0.8]])
    X0 = Interval(c - 2.0**-20, c + 2.0**-20)
    res = enclose_flow(problem, X0)
    return flow_certificate_for(problem, X0, res)


@pytest.fixture(scope="module")
def goldens() -> dict[str, dict[str, Any]]:
    return {"vanderpol-points": _vanderpol_certificate(), "sphere-box": _sphere_certificate()}


@pytest.fixture(scope="module", params=["vanderpol-points", "sphere-box"])
def golden_boxes(request, goldens) -> dict[str, Any]:
    """The golden with explicit a priori boxes (hints.boxes) instead of factors: the arb replay
    at 64 bits (the float64 replay builds its boxes from hints.apriori)."""
    cert = goldens[request.param]
    inst = cert["instance"]
    problem = sphere_neural_field([("1/8", W1, U1, B1), ("1/8", W2, U2, B2)]) if "boxes" in inst \
        else vanderpol()  # fmt: skip
    if "boxes" in inst:
        c = np.array([[0.6, 0.8]])
        X0: Any = Interval(c - 2.0**-20, c + 2.0**-20)
        res = enclose_flow(problem, X0, prec=64)
    else:
        X0 = np.array([[1.0, 0.5], [-0.5, 0.25]])
        res = enclose_flow(problem, X0, save_at=SaveAt("1/2", ["1/4"]), prec=64)
    out = flow_certificate_for(problem, X0, res)
    assert "boxes" in out["hints"] and "arithmetic" not in out["hints"]
    return out


@pytest.fixture(scope="module", params=["vanderpol-points", "sphere-box"])
def golden(request, goldens) -> dict[str, Any]:
    return goldens[request.param]


# --- an independent reference: the graph in mpmath, integrated by mpmath.odefun ---------------


def _mp(v: Any) -> mpmath.mpf:
    q = to_fmpq(v)
    return mpmath.mpf(int(q.p)) / int(q.q)


def _to_fmpq(v: mpmath.mpf) -> flint.fmpq:
    m, e = v.man_exp  # of |v|
    m, e = (-int(m) if v < 0 else int(m)), int(e)
    return flint.fmpq(m * 2 ** max(e, 0), 2 ** max(-e, 0))


_UNARY = {
    "neg": lambda a: -a,
    "sqr": lambda a: a * a,
    "sqrt": mpmath.sqrt,
    "exp": mpmath.exp,
    "log": mpmath.log,
    "tanh": mpmath.tanh,
    "sigmoid": lambda a: 1 / (1 + mpmath.exp(-a)),
    "sin": mpmath.sin,
    "cos": mpmath.cos,
}
_BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
}


def _rhs(graph: dict[str, Any], params: list[mpmath.mpf]):
    """The field of a (valid) JSON graph as a function for mpmath.odefun; written from
    proofs/format.md section 7, sharing no code with the package."""
    nodes, outputs = graph["nodes"], graph["outputs"]
    consts = {i: _mp(n[1]) for i, n in enumerate(nodes) if n[0] == "c"}

    def f(_t, x):
        v: list[Any] = []
        for i, (op, *a) in enumerate(nodes):
            if op == "x":
                v.append(x[a[0]])
            elif op == "p":
                v.append(params[a[0]])
            elif op == "c":
                v.append(consts[i])
            elif op in _UNARY:
                v.append(_UNARY[op](v[a[0]]))
            elif op in _BINARY:
                v.append(_BINARY[op](v[a[0]], v[a[1]]))
            elif op == "sum":
                v.append(mpmath.fsum(v[j] for j in a))
            elif op == "logsumexp":
                v.append(mpmath.log(mpmath.fsum(mpmath.exp(v[j]) for j in a)))
            else:  # pragma: no cover - the checker rejects unknown operations first
                raise AssertionError(op)
        return [v[o] for o in outputs]

    return f


_REFERENCES: dict[str, list[list[mpmath.mpf]]] = {}


def _reachable(graph: dict[str, Any]) -> dict[str, Any]:
    """The graph without the nodes its outputs do not use, renumbered (the same field: a key
    for the cache of references, so that an appended unused node costs no new reference)."""
    nodes, keep = graph["nodes"], set()
    todo = list(graph["outputs"])
    while todo:
        i = todo.pop()
        if i not in keep:
            keep.add(i)
            if nodes[i][0] not in ("x", "p", "c"):
                todo.extend(nodes[i][1:])
    new = {old: k for k, old in enumerate(sorted(keep))}
    renumbered = [
        n if n[0] in ("x", "p", "c") else [n[0], *(new[a] for a in n[1:])]
        for i, n in enumerate(nodes)
        if i in keep
    ]
    return {**graph, "nodes": renumbered, "outputs": [new[o] for o in graph["outputs"]]}


def reference_flow(instance: dict[str, Any], x0: list[Any], times: list[Any]):
    """``Phi_t(x0)`` at each of ``times`` (within the pieces), at 40 digits (cached)."""
    graph = _reachable(instance["field"])
    key = json.dumps([graph, instance["pieces"], [str(v) for v in x0], times])
    if key in _REFERENCES:
        return _REFERENCES[key]
    out = []
    with mpmath.workdps(DPS):
        x = [_mp(v) for v in x0]
        start, pending = mpmath.mpf(0), [_mp(t) for t in times]
        for piece in instance["pieces"]:
            params = [_mp(v) for v in piece["parameters"]]
            sol = mpmath.odefun(_rhs(graph, params), 0, x, degree=30)
            end = start + _mp(piece["duration"])
            while pending and pending[0] <= end:
                out.append(sol(pending.pop(0) - start))
            x, start = sol(end - start), end
        assert not pending, "a claimed time after the end of the pieces"
    _REFERENCES[key] = out
    return out


def samples(instance: dict[str, Any]) -> list[list[Any]]:
    """The initial points, or the centre and two opposite corners of each box (fmpq)."""
    if "points" in instance:
        return [[to_fmpq(v) for v in row] for row in instance["points"]]
    out = []
    for box in instance["boxes"]:
        lo = [to_fmpq(a) for a, _ in box]
        hi = [to_fmpq(b) for _, b in box]
        out.append([(a + b) / 2 for a, b in zip(lo, hi, strict=True)])
        out.append(lo)
        out.append(hi)
    return out


def claim_is_true(cert: dict[str, Any]) -> bool:
    """Do the claimed enclosures contain the 40-digit reference images of the (edited)
    instance's points (resp. box centres and corners) at every claimed time?"""
    inst, claim = cert["instance"], cert["claim"]
    starts = samples(inst)
    per_set = 1 if "points" in inst else 3
    slack = flint.fmpq(1, 10**30)
    for s, x0 in enumerate(starts):
        images = reference_flow(inst, x0, claim["times"])
        for k, image in enumerate(images):
            for q, value in enumerate(image):
                lo, hi = (to_fmpq(v) for v in claim["enclosures"][k][s // per_set][q])
                if not lo - slack <= _to_fmpq(value) <= hi + slack:
                    return False
    return True


def test_golden_certificates_are_verified_and_true(golden):
    v = check_certificate(golden)
    assert v.verified, v.reason
    assert v.kind == "flow" and "rule taylor-lohner" in v.reason
    assert golden["hints"]["method"] == "taylor-lohner"
    assert claim_is_true(golden)
    # and the claim is tight: every enclosure narrower than 1e-5
    for per_time in golden["claim"]["enclosures"]:
        for row in per_time:
            for lo, hi in row:
                assert 0 <= to_fmpq(hi) - to_fmpq(lo) < flint.fmpq(1, 10**5)


def test_golden_shapes(goldens):
    a, b = goldens["vanderpol-points"], goldens["sphere-box"]
    assert a["claim"]["times"] == ["1/4", "1/2"] and len(a["instance"]["points"]) == 2
    assert len(b["instance"]["pieces"]) == 2 and len(b["instance"]["boxes"]) == 1
    assert len(b["hints"]["steps"]) == 2 and all(len(s) >= 1 for s in b["hints"]["steps"])


def test_the_reference_tells_a_false_claim(goldens):
    # the truth oracle of the tampering tests is not vacuous
    cert = goldens["vanderpol-points"]
    path = ("instance", "points", 0, 0)
    assert not claim_is_true(replaced(cert, path, moved(get(cert, path))))
    cert = goldens["sphere-box"]
    lo, hi = (to_fmpq(v) for v in cert["claim"]["enclosures"][0][0][0])
    shifted = [exact_number(lo + 2 * (hi - lo)), exact_number(hi + 2 * (hi - lo))]
    assert not claim_is_true(replaced(cert, ("claim", "enclosures", 0, 0, 0), shifted))


# --- single numeric edits: rejected, or still true --------------------------------------------


def _is_number(path: tuple, value: Any) -> bool:
    if isinstance(value, bool) or any(w in path for w in WORDS):
        return False
    if isinstance(value, int):
        return True
    if not isinstance(value, str) or ("parameters" in path and "pieces" not in path):
        return False
    try:
        to_fmpq(value)
    except Exception:
        return False
    return True


def moved(value: Any) -> Any:
    """+1 for JSON integers, +1/1000 relative for exact numbers (+1/1000 for 0)."""
    if isinstance(value, int):
        return value + 1
    q = to_fmpq(value)
    return exact_number(q * flint.fmpq(1001, 1000) if q != 0 else flint.fmpq(1, 1000))


def _numeric_edits(golden: dict[str, Any], every: bool):
    """The numeric leaves (path, value): all of them, or the first two of each kind (the path
    with its indices as *: points, claims, nodes, parameters, steps, orders, ...)."""
    seen: dict[tuple, int] = {}
    for path, value in leaves(golden):
        if _is_number(path, value):
            kind = tuple("*" if isinstance(p, int) else p for p in path)
            seen[kind] = seen.get(kind, 0) + 1
            if every or seen[kind] <= 2:
                yield path, value


def test_every_numeric_edit_is_rejected_or_still_true(golden):
    """The ci and dev profiles: the first two edits of each kind of number (~30 a golden); the
    thorough profile: every numeric leaf (~110 for the sphere box, whose claims' 40-digit
    references dominate the cost)."""
    every = settings.default.max_examples > 100
    edits = accepted = 0
    for path, value in _numeric_edits(golden, every):
        edits += 1
        edited = replaced(golden, path, moved(value))
        v = check_certificate(edited)
        if v.verified:
            accepted += 1
            assert claim_is_true(edited), f"accepted a false claim after editing {path}"
    assert edits >= (40 if every else 20)
    assert accepted < edits  # most edits of a tight certificate must be noticed


def test_every_structural_edit_is_rejected_or_still_true(golden):
    for what, path, edited in structural_edits(golden):
        v = check_certificate(edited)
        if v.verified:
            assert claim_is_true(edited), f"{what} at {path} accepted with a false claim"
        optional = what == "delete field" and path[-2:] in (
            ("hints", "arithmetic"),  # optional: the replay in arb (tighter) instead
            ("hints", "jacobian_orders"),  # optional: every step at the largest order
        )
        if what in ("delete field", "add field") and not optional:
            assert not v.verified, (what, path)


def _slot(golden: dict[str, Any], path: tuple, value: Any) -> str:
    """What a leaf holds: "exact" (any exact number), "integer" (indices, sizes, orders) or
    "word" (names, kinds, operations)."""
    node = path[-4:-2] == ("field", "nodes") and get(golden, path[:-1])
    if node and path[-1] == 1 and node[0] == "c":
        return "exact"
    if isinstance(value, int) and not isinstance(value, bool):
        return "integer"
    return "exact" if _is_number(path, value) else "word"


def _same_type(slot: str, bad: Any) -> bool:
    """Is ``bad`` a value of the slot's own type (an edit of the value, not of the type)?"""
    is_int = isinstance(bad, int) and not isinstance(bad, bool)
    if slot == "integer":
        return is_int
    if slot == "word":
        return isinstance(bad, str)
    return is_int or (isinstance(bad, str) and _is_number((), bad))


@pytest.mark.parametrize("bad", [None, True, 1.5, [], {}, "x", 0, "1"], ids=repr)
def test_wrong_types_are_rejected(golden, bad):
    for path, value in leaves(golden):
        if _same_type(_slot(golden, path, value), bad):
            continue
        v = check_certificate(replaced(golden, path, bad))
        assert not v.verified, (path, bad)
    for path, _ in containers(golden):
        if path and not isinstance(bad, (list, dict)):
            v = check_certificate(replaced(golden, path, bad))
            assert not v.verified, (path, bad)


def test_kind_version_method_words(golden):
    for path, word in [
        (("kind",), "flows"),
        (("version",), 2),
        (("hints", "method"), "taylor"),
        (("hints", "method"), "laminar-exact"),
        (("instance", "field", "nodes", 2, 0), "cube"),
    ]:
        v = check_certificate(replaced(golden, path, word))
        assert not v.verified, path
    v = check_certificate(replaced(golden, ("instance", "field", "nodes", 2, 0), "cube"))
    assert "unknown operation 'cube'" in v.reason


# --- the claim's ends are sharp: the replay's exact ends pass, one step inside fails ------------


def _replayed(cert: dict[str, Any]):
    """The checker's own replay (public checker.lohner.replay_flow) of a golden certificate."""
    inst, hints = cert["instance"], cert["hints"]
    field = parse_field(inst["field"])
    if "points" in inst:
        starts = [[(to_fmpq(v), to_fmpq(v)) for v in row] for row in inst["points"]]
    else:
        starts = [[(to_fmpq(a), to_fmpq(b)) for a, b in box] for box in inst["boxes"]]
    steps = [[to_fmpq(h) for h in s] for s in hints["steps"]]
    boxes = apriori = None
    if "boxes" in hints:
        boxes = [
            [[[(to_fmpq(a), to_fmpq(b)) for a, b in box] for box in per_step] for per_step in bs]
            for bs in hints["boxes"]
        ]
    else:
        apriori = [[to_fmpq(a) for a in row] for row in hints["apriori"]]
    times = [to_fmpq(t) for t in cert["claim"]["times"]]
    old = flint.ctx.prec
    flint.ctx.prec = hints["precision"]
    try:
        pieces = [
            (to_fmpq(p["duration"]), [flint.arb(to_fmpq(v)) for v in p["parameters"]])
            for p in inst["pieces"]
        ]
        out = replay_flow(
            field,
            pieces,
            starts,
            steps,
            boxes,
            hints["order"],
            hints["jacobian_order"],
            times,
            hints.get("jacobian_orders"),
            hints.get("arithmetic", "arb"),
            apriori,
        )
        return [
            [[(_arb_exact(b.lower()), _arb_exact(b.upper())) for b in hull] for hull in per_t]
            for per_t in out
        ]
    finally:
        flint.ctx.prec = old


def _arb_exact(a: flint.arb) -> flint.fmpq:
    m, e = (int(v) for v in a.mid().man_exp())
    return flint.fmpq(m * 2 ** max(e, 0), 2 ** max(-e, 0))


def test_shrinking_any_claimed_end_inside_the_replay_is_rejected(golden):
    replay = _replayed(golden)
    exact_ends = copy.deepcopy(golden)
    for k, per_time in enumerate(replay):
        for i, hull in enumerate(per_time):
            for q, (lo, hi) in enumerate(hull):
                claimed = golden["claim"]["enclosures"][k][i][q]
                assert to_fmpq(claimed[0]) <= lo <= hi <= to_fmpq(claimed[1])
                exact_ends["claim"]["enclosures"][k][i][q] = [exact_number(lo), exact_number(hi)]
                eps = (hi - lo) / 2**10 if hi > lo else flint.fmpq(1, 2**200)
                for end, value in ((0, lo + eps), (1, hi - eps)):
                    path = ("claim", "enclosures", k, i, q, end)
                    v = check_certificate(replaced(golden, path, exact_number(value)))
                    assert not v.verified, path
                    assert f"claim.enclosures[{k}][{i}][{q}]" in v.reason
    v = check_certificate(exact_ends)  # the replay's own ends are accepted
    assert v.verified, v.reason


# --- malformed hints and instances ------------------------------------------------------------


def _reason(cert: dict[str, Any], path: tuple, value: Any) -> str:
    v = check_certificate(replaced(cert, path, value))
    assert not v.verified, (path, value)
    return v.reason


def test_steps_must_sum_to_the_durations_and_be_positive(golden):
    for j, steps in enumerate(golden["hints"]["steps"]):
        qs = [to_fmpq(h) for h in steps]
        longer = [*steps[:-1], exact_number(qs[-1] + flint.fmpq(1, 64))]
        assert "do not sum" in _reason(golden, ("hints", "steps", j), longer)
        shorter = [*steps[:-1], exact_number(qs[-1] / 2)]
        assert "do not sum" in _reason(golden, ("hints", "steps", j), shorter)
        if len(qs) >= 2:
            zero = [exact_number(qs[0] + qs[1]), "0", *steps[2:]]
            assert "not positive" in _reason(golden, ("hints", "steps", j), zero)
            neg = [exact_number(qs[0] + 2 * qs[1]), exact_number(-qs[1]), *steps[2:]]
            assert "not positive" in _reason(golden, ("hints", "steps", j), neg)
        fewer = steps[:-1] or ["1/1000"]
        _reason(golden, ("hints", "steps", j), fewer)  # boxes no longer match either
    _reason(golden, ("hints", "steps"), golden["hints"]["steps"][:-1])


def test_a_priori_factors_out_of_range_or_shape_are_rejected(golden):
    rows = golden["hints"]["apriori"]
    for value in ("0", "-1/4", "65", "x", None):
        assert "hints.apriori" in _reason(golden, ("hints", "apriori", 0, 0), value)
    _reason(golden, ("hints", "apriori", 0), rows[0][:-1])  # a step without its factor
    _reason(golden, ("hints", "apriori"), rows[:-1] if len(rows) > 1 else [])
    arb_replay = replaced(golden, ("hints", "arithmetic"), "arb")
    assert "only with hints.arithmetic float64" in check_certificate(arb_replay).reason
    both = copy.deepcopy(golden)
    both["hints"]["boxes"] = []
    assert not check_certificate(both).verified  # factors and boxes: one of them


def test_a_shrunk_a_priori_factor_fails_the_picard_test(golden):
    for j, per_piece in enumerate(golden["hints"]["apriori"]):
        for s, _ in enumerate(per_piece):
            reason = _reason(golden, ("hints", "apriori", j, s), "1/1000000")
            assert "Picard" in reason and f"piece {j}, step {s}, set" in reason, reason


def test_boxes_of_the_wrong_shape_are_rejected(golden_boxes):
    golden = golden_boxes
    boxes = golden["hints"]["boxes"]
    box = boxes[0][0][0]  # piece 0, step 0, set 0: d pairs
    d = len(box)
    bad_boxes = {
        "a set too many": [*boxes[0][0], box],
        "a set too few": boxes[0][0][1:] or [],
        "a coordinate too many": [[*box, box[0]], *boxes[0][0][1:]],
        "a coordinate too few": [box[:-1], *boxes[0][0][1:]],
        "a pair of three": [[[*box[0], box[0][1]], *box[1:]], *boxes[0][0][1:]],
        "a pair of one": [[[box[0][0]], *box[1:]], *boxes[0][0][1:]],
        "lo > hi": [[[box[0][1], box[0][0]], *box[1:]], *boxes[0][0][1:]],
        "not a list": "box",
    }
    for name, value in bad_boxes.items():
        if name == "lo > hi" and box[0][0] == box[0][1]:
            continue
        _reason(golden, ("hints", "boxes", 0, 0), value)
    _reason(golden, ("hints", "boxes", 0), boxes[0][:-1])  # a step without its box
    _reason(golden, ("hints", "boxes"), boxes[:-1] if len(boxes) > 1 else [])
    start = "points" if "points" in golden["instance"] else "boxes"
    rows = golden["instance"][start]
    _reason(golden, ("instance", start), [r[:-1] for r in rows])
    _reason(golden, ("instance", start), [[*r, r[0]] for r in rows])
    if start == "boxes":
        _reason(golden, ("instance", "boxes", 0, 0), [*rows[0][0], rows[0][0][0]])
        _reason(golden, ("instance", "boxes", 0, 0), [rows[0][0][1], rows[0][0][0]])
    assert d == golden["instance"]["field"]["dimension"]


def test_a_graph_with_an_unknown_operator_or_bad_arity_is_rejected(golden):
    nodes = golden["instance"]["field"]["nodes"]
    for i, node in enumerate(nodes):
        if node[0] in ("x", "p", "c"):
            continue
        reason = _reason(golden, ("instance", "field", "nodes", i, 0), "pow")
        assert f"instance.field.nodes[{i}]: unknown operation 'pow'" in reason
        if node[0] in ("sum", "logsumexp"):
            continue  # n-ary: one more argument is another valid field
        reason = _reason(golden, ("instance", "field", "nodes", i), [*node, 0])
        assert f"instance.field.nodes[{i}]: {node[0]} takes" in reason
    reason = _reason(golden, ("instance", "field", "nodes", 0), ["x", 99])
    assert "coordinate" in reason
    reason = _reason(golden, ("instance", "field", "nodes", 1), ["c", "nan"])
    assert "instance.field.nodes[1][1]" in reason


@pytest.mark.parametrize(
    "key, values",
    [
        ("order", [1, 0, -3, 61, 1000, "20", 20.0, True]),
        ("jacobian_order", [0, -1, "order+1", "8", 8.0]),
        ("precision", [52, 0, 4097, 10**6, "53", 53.0]),
    ],
)
def test_order_and_precision_out_of_range(golden, key, values):
    for value in values:
        if value == "order+1":
            value = golden["hints"]["order"] + 1
        reason = _reason(golden, ("hints", key), value)
        assert f"hints.{key}" in reason, reason


def test_a_shrunk_a_priori_box_fails_the_picard_test(golden_boxes):
    golden = golden_boxes
    for j, per_piece in enumerate(golden["hints"]["boxes"]):
        for s, per_step in enumerate(per_piece):
            for i, box in enumerate(per_step):
                shrunk = []
                for a, b in box:
                    lo, hi = to_fmpq(a), to_fmpq(b)
                    mid, rad = (lo + hi) / 2, (hi - lo) / 2**21
                    shrunk.append([exact_number(mid - rad), exact_number(mid + rad)])
                reason = _reason(golden, ("hints", "boxes", j, s, i), shrunk)
                assert "Picard" in reason and f"piece {j}, step {s}, set {i}" in reason, reason


def test_the_resource_limit_rejects_costly_replays(goldens, monkeypatch):
    cert = goldens["vanderpol-points"]
    # a hostile certificate: the largest orders and precision, and many steps
    hostile = copy.deepcopy(cert)
    hostile["hints"].update(order=60, jacobian_order=60, precision=4096)
    for key in ("jacobian_orders", "arithmetic", "apriori"):  # every step at order 60, in arb
        hostile["hints"].pop(key, None)
    n_steps = 256
    hostile["hints"]["steps"] = [[exact_number(flint.fmpq(1, 2 * n_steps))] * n_steps]
    wide = [[["-8", "8"], ["-8", "8"]]] * 2
    hostile["hints"]["boxes"] = [[wide] * n_steps]

    def never(*args, **kwargs):
        raise AssertionError("the budget must refuse before replaying")

    with monkeypatch.context() as m:
        m.setattr(field_rule, "replay_flow", never)
        v = check_certificate(hostile)
    assert not v.verified and "resource limit" in v.reason, v.reason
    # the limit is what decides: below the golden's cost it is refused, above it passes
    monkeypatch.setattr(field_rule, "MAX_TAYLOR_OPS", 1)
    v = check_certificate(cert)
    assert not v.verified and "resource limit" in v.reason
    monkeypatch.setattr(field_rule, "MAX_TAYLOR_OPS", 10**15)
    assert check_certificate(cert).verified


def test_the_golden_costs_are_far_below_the_limit(goldens, monkeypatch):
    # honest files pass with a hundredth of the limit (the budget refuses hostile files only)
    monkeypatch.setattr(field_rule, "MAX_TAYLOR_OPS", field_rule.MAX_TAYLOR_OPS // 100)
    for cert in goldens.values():
        assert check_certificate(cert).verified


def test_instance_time_and_claim_times(golden):
    inst = golden["instance"]
    t = to_fmpq(inst["time"])
    assert "instance.time" in _reason(golden, ("instance", "time"), exact_number(t * 2))
    times = golden["claim"]["times"]
    _reason(golden, ("claim", "times"), list(reversed(times)) if len(times) > 1 else ["1/3"])
    _reason(golden, ("claim", "times"), [*times, times[-1]])
    reason = _reason(golden, ("claim", "times", 0), exact_number(to_fmpq(times[0]) / 3))
    assert "claim" in reason or "time" in reason


# --- the checker stays independent ------------------------------------------------------------

CHECKER_DIR = Path(certified.checker.__file__).resolve().parent


def test_the_field_rule_and_taylor_modules_import_only_stdlib_flint_and_the_checker():
    allowed = set(sys.stdlib_module_names) | {"flint"}
    for name in ("taylor.py", "lohner.py", "_field_rule.py", "flow.py"):
        tree = ast.parse((CHECKER_DIR / name).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                mods = [(0, a.name) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                mods = [(node.level, node.module or "")]
            else:
                continue
            for level, mod in mods:
                assert level > 0 or mod.split(".")[0] in allowed, f"{name}: imports {mod}"


@pytest.mark.parametrize("arithmetic", ["float64", "arb"])
def test_checking_a_field_certificate_loads_nothing_outside_the_checker(
    goldens, tmp_path, arithmetic
):
    cert = copy.deepcopy(goldens["sphere-box"])
    assert cert["hints"].get("arithmetic") == "float64"  # the producer's choice at 53 bits
    if arithmetic == "arb":  # the same steps replayed in arb (a verdict either way): no numpy
        del cert["hints"]["arithmetic"]
    path = tmp_path / "field_flow.json"
    path.write_text(json.dumps(cert))
    banned = ("numba", "mpmath") + (("numpy",) if arithmetic == "arb" else ())
    probe = (
        "import sys\n"
        "from certified.checker import check_file\n"
        f"v = check_file({str(path)!r})\n"
        f"assert v.verified or {arithmetic == 'arb'}, v.reason\n"
        "bad = [m for m in sys.modules if m.startswith('certified.')\n"
        "       and not m.startswith('certified.checker')]\n"
        f"bad += [m for m in {banned!r} if m in sys.modules]\n"
        "assert not bad, bad\n"
        "print('ok')\n"
    )
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout == "ok\n", r.stderr


def test_parse_field_is_strict_about_the_graph_object():
    with pytest.raises(Rejected, match=r"instance\.field"):
        parse_field({"dimension": 1, "nodes": [["x", 0]], "outputs": [0]}, "instance.field")


def test_search_leaves_the_a_priori_factors_to_the_replay(golden):
    # the producer's replay picks factors by the same rule as the checker's search: same claims
    search = replaced(golden, ("hints", "apriori"), "search")
    assert check_certificate(search).verified
    for value in ("Search", "", "searching"):
        assert "hints.apriori" in _reason(golden, ("hints", "apriori"), value)
    arb_search = replaced(search, ("hints", "arithmetic"), "arb")
    assert "only with hints.arithmetic float64" in check_certificate(arb_search).reason


def test_a_certificate_without_a_replay_claims_the_engine_enclosures_widened():
    pts = np.array([[1.0, 0.5], [-0.5, 0.25]])
    res = enclose_flow(vanderpol(), pts, save_at=SaveAt("1/2", ["1/4"]))
    cert = flow_certificate_for(vanderpol(), pts, res, replay=False)
    assert cert["hints"]["apriori"] == "search" and cert["hints"]["arithmetic"] == "float64"
    assert check_certificate(cert).verified
    for k in range(2):  # each claim contains the engine's enclosure, four times as wide
        for i in range(2):
            for q in range(2):
                lo, hi = (to_fmpq(v) for v in cert["claim"]["enclosures"][k][i][q])
                elo, ehi = (
                    to_fmpq(float(res.enclosures.lo[k, i, q])),
                    to_fmpq(float(res.enclosures.hi[k, i, q])),
                )
                assert lo <= elo and ehi <= hi and hi - lo >= 4 * (ehi - elo)
    # claims that miss the replay are rejected (the command then falls back to the replay)
    tight = replaced(cert, ("claim", "enclosures", 1, 0, 0),
                     [cert["claim"]["enclosures"][1][0][0][0]] * 2)  # fmt: skip
    assert "misses the replayed enclosure" in check_certificate(tight).reason


def test_a_factor_search_that_keeps_failing_is_cut_off(golden, monkeypatch):
    import certified.checker.lohner64 as lohner64

    honest, calls = lohner64.apriori64, [0]

    def every_other(prog, P, S, hb, rho):  # the first try of every step fails (the hull itself)
        calls[0] += 1
        return S.hull(with_centre=True) if calls[0] % 2 else honest(prog, P, S, hb, rho)

    monkeypatch.setattr(lohner64, "apriori64", every_other)
    search = replaced(golden, ("hints", "apriori"), "search")
    monkeypatch.setattr(lohner64, "MAX_FAILED_TRIES", 0)  # steps / 4 failed tries allowed
    v = check_certificate(search)
    assert not v.verified and "resource limit: the a priori factor search failed" in v.reason


def test_reusing_replays_reuses_only_equal_instance_hints_and_times(goldens, monkeypatch):
    """checker.flow.reusing_replays (the one-pass writer's re-check,
    proofs/checker_soundness.md#replay-reuse): inside the block a check of the same instance,
    hints and claim.times reuses the replay, still comparing the claims (cut claims REJECTED);
    other hints replay again; outside the block every check replays."""
    from certified.checker.flow import reusing_replays

    cert, calls = goldens["vanderpol-points"], []
    real = field_rule.replay_flow

    def counted(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(field_rule, "replay_flow", counted)
    lo, hi = cert["claim"]["enclosures"][-1][0][0]
    mid = exact_number((to_fmpq(lo) + to_fmpq(hi)) / 2)
    cut = replaced(cert, ("claim", "enclosures", -1, 0, 0), [mid, hi])
    other = replaced(cert, ("hints", "order"), cert["hints"]["order"] - 1)
    with reusing_replays() as kept:
        assert check_certificate(cert).verified and len(calls) == 1 and len(kept) == 1
        assert check_certificate(cert).verified and len(calls) == 1
        verdict = check_certificate(cut)
        assert not verdict.verified and "misses the replayed enclosure" in verdict.reason
        assert len(calls) == 1
        check_certificate(other)
        assert len(calls) == 2 and len(kept) == 2
    assert check_certificate(cert).verified and len(calls) == 3
    assert not check_certificate(cut).verified and len(calls) == 4
