"""The one-pass certificate in the Python API (``certified.flow.api.certify_flow``,
``certified.flow.one_pass``): VERIFIED by a fresh check, its claims contain a 50-digit
reference computed from the schedule itself (``mpmath.odefun`` on W s(A x + b), not the
certificate's graph), the same claims as ``certified flow`` writes, the zonotope route for
boxes, the engine's route for what the pass does not cover (sphere fields, ReLU, a pass the
checker refuses), and mutated claims REJECTED."""

from __future__ import annotations

import contextlib
import io
import json
from fractions import Fraction

import field_reference as fref
import mpmath
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from certified.arith import Interval
from certified.arith.exact import to_fmpq
from certified.checker import check_certificate
from certified.cli import main
from certified.errors import InputError, ShapeError
from certified.fields import field, sphere_neural_field
from certified.flow import api, one_pass
from certified.flow.options import SaveAt
from certified.flow.result import FlowStatus
from certified.models import Schedule

DPS = 50
SIGMA = {"tanh": mpmath.tanh, "sigmoid": lambda z: 1 / (1 + mpmath.exp(-z))}


def _spec(activation: str, d: int = 3, seed: int = 7) -> dict:
    return fref.random_schedule(activation, d, seed, "1/4")


def _points(d: int = 3, n: int = 3, seed: int = 8) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, (n, d))


def _q(v) -> Fraction:
    q = to_fmpq(v)
    return Fraction(int(q.p), int(q.q))


def _mpq(q: Fraction) -> mpmath.mpf:
    return mpmath.mpf(q.numerator) / q.denominator


def _schedule_field(spec: dict, j: int, x: list) -> list:
    """W s(A x + b) of piece j, in mpmath from the schedule's own numbers."""
    s, p = SIGMA[spec["activation"]], spec["pieces"][j]
    W, A = ([[_mpq(Fraction(v)) for v in r] for r in p[k]] for k in ("W", "A"))
    g = [s(sum(a * v for a, v in zip(row, x, strict=True)) + _mpq(Fraction(c)))
         for row, c in zip(A, p["b"], strict=True)]  # fmt: skip
    return [sum(w * v for w, v in zip(row, g, strict=True)) for row in W]


def _contains_reference(spec: dict, X, cert: dict) -> None:
    """Every claim contains the 50-digit Taylor reference (tests/flow/field_reference.py) of
    the certificate's field, which first equals W s(A x + b) of the schedule at the points
    ``X`` (doubles or exact Fractions), the certificate's points exactly."""
    inst, X = cert["instance"], [[Fraction(v) for v in x0] for x0 in X]
    assert [[_q(v) for v in row] for row in inst["points"]] == X
    pieces = [(_q(p["duration"]), [_q(v) for v in p["parameters"]]) for p in inst["pieces"]]
    with mpmath.workdps(DPS + 10):
        tol = mpmath.mpf(10) ** -DPS
        for j, (_, values) in enumerate(pieces):  # the graph is the schedule's field
            for x0 in X:
                x = [_mpq(v) for v in x0]
                got, want = fref.evaluate(inst["field"], values, x), _schedule_field(spec, j, x)
                assert all(abs(u - v) <= tol for u, v in zip(got, want, strict=True))
    times = [_q(t) for t in cert["claim"]["times"]]
    for i, x0 in enumerate(X):
        refs = fref.taylor_flow(inst["field"], pieces, x0, times)
        for k, ref in enumerate(refs):
            lo = [_q(a) for a, _ in cert["claim"]["enclosures"][k][i]]
            hi = [_q(b) for _, b in cert["claim"]["enclosures"][k][i]]
            assert not fref.outside(lo, hi, ref), (i, k, lo, hi)


def _claims_are_the_result(cert: dict, res) -> None:
    for k, rows in enumerate(cert["claim"]["enclosures"]):
        for i, row in enumerate(rows):
            for j, (lo, hi) in enumerate(row):
                assert _q(lo) == Fraction(res.enclosures.lo[k, i, j])
                assert _q(hi) == Fraction(res.enclosures.hi[k, i, j])


class _Spy:
    """Counts the calls of a function it stands in for."""

    def __init__(self, real):
        self.real, self.calls = real, 0

    def __call__(self, *a, **kw):
        self.calls += 1
        return self.real(*a, **kw)


@pytest.fixture
def routes(monkeypatch):
    """(one-pass calls, engine calls) of certify_flow."""
    passes, engine = _Spy(one_pass.one_pass_certificate), _Spy(api.enclose_flow)
    monkeypatch.setattr(one_pass, "one_pass_certificate", passes)
    monkeypatch.setattr(api, "enclose_flow", engine)
    return passes, engine


@pytest.mark.parametrize("activation", ["tanh", "sigmoid"])
def test_api_certificate_is_verified_and_contains_the_reference(activation, routes):
    spec, X = _spec(activation), _points()
    res, cert = api.certify_flow(Schedule.from_json(spec), X, save_at=SaveAt(ts=["1/8", "1/4"]))
    assert routes[0].calls == 1 and routes[1].calls == 0  # the one pass, no engine
    assert res.status is FlowStatus.SUCCESS and res.times == ("1/8", "1/4", "1/2")
    assert check_certificate(cert).verified  # a fresh check: no replay reused
    _contains_reference(spec, X, cert)
    _claims_are_the_result(cert, res)


@settings(max_examples=3 if settings.default.max_examples <= 100 else 30, deadline=None)
@given(seed=st.integers(0, 10**6), activation=st.sampled_from(["tanh", "sigmoid"]),
       save=st.booleans(), n=st.integers(1, 4))  # fmt: skip
@example(seed=0, activation="tanh", save=True, n=2)
def test_exact_points_are_certified_and_contained(seed, activation, save, n):
    """Points that are not doubles ("p/q", read exactly): the pass certifies them exactly
    (the predictor steps from their nearest doubles), VERIFIED by a fresh check, every claim
    contains the reference, the result's enclosures are the claims. Thorough: 30 instances."""
    rng = np.random.default_rng(seed)
    X = [[Fraction(int(rng.integers(-999, 1000)), int(rng.integers(1, 1000))) for _ in range(3)]
         for _ in range(n)]  # fmt: skip
    spec = _spec(activation, seed=seed)
    pts = np.array([[f"{q.numerator}/{q.denominator}" for q in row] for row in X], dtype=object)
    save_at = SaveAt(ts=["1/3"]) if save else None
    res, cert = api.certify_flow(Schedule.from_json(spec), pts, save_at=save_at)
    assert cert["hints"]["apriori"] == "search" and "jacobian_orders" in cert["hints"]
    assert check_certificate(cert).verified
    _contains_reference(spec, X, cert)
    _claims_are_the_result(cert, res)


def test_api_and_cli_give_the_same_certificate(tmp_path):
    spec, X = _spec("tanh", seed=11), _points(seed=12)
    (tmp_path / "s.json").write_text(json.dumps(spec))
    (tmp_path / "p.json").write_text(json.dumps({"X": X.tolist()}))
    out = tmp_path / "c.json"
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(["flow", "--schedule", str(tmp_path / "s.json"), "--points",
                     str(tmp_path / "p.json"), "--save-at", "1/4", "--out", str(out),
                     "--json"])  # fmt: skip
    assert code == 0 and json.loads(buf.getvalue())["verdict"] == "VERIFIED"
    written = json.loads(out.read_text())
    _, cert = api.certify_flow(Schedule.from_json(spec), X, save_at=SaveAt(ts=["1/4"]))
    cert = json.loads(json.dumps(cert))
    assert cert["claim"] == written["claim"] and cert["hints"] == written["hints"]
    assert cert["instance"] == written["instance"]


def _cut(cert: dict, k: int, i: int, j: int, side: int) -> dict:
    bad = json.loads(json.dumps(cert))
    lo, hi = bad["claim"]["enclosures"][k][i][j]
    mid = str((to_fmpq(lo) + to_fmpq(hi)) / 2)
    bad["claim"]["enclosures"][k][i][j] = [mid, hi] if side else [lo, mid]
    return bad


def test_mutated_claims_are_rejected():
    spec, X = _spec("sigmoid", seed=3), _points(seed=4)
    _, cert = api.certify_flow(Schedule.from_json(spec), X, save_at=SaveAt(ts=["1/4"]))
    for k, side in ((0, 0), (1, 1)):  # half of a claim cut off, at either saved time
        verdict = check_certificate(_cut(cert, k, 1, 2, side))
        assert not verdict.verified and "misses the replayed enclosure" in verdict.reason
    moved = json.loads(json.dumps(cert))
    moved["instance"]["points"][0][0] = str(to_fmpq(moved["instance"]["points"][0][0]) + 1)
    assert not check_certificate(moved).verified  # the claims are about the given points


def test_sphere_field_takes_the_engine_route(routes):
    rng = np.random.default_rng(2)
    W, U = (np.round(rng.standard_normal((3, 3)) / 2, 3) for _ in range(2))
    problem = sphere_neural_field([("1/8", W, U, np.round(rng.standard_normal(3), 3))])
    X = np.array([[0.6, 0.8, 0.0], [0.0, 0.6, -0.8]])  # on the sphere
    res, cert = api.certify_flow(problem, X)
    assert routes[0].calls == 0 and routes[1].calls == 1
    assert res.status is FlowStatus.SUCCESS and check_certificate(cert).verified
    with pytest.raises(InputError, match="off the unit sphere"):  # the engine's check
        api.certify_flow(problem, np.array([[1.0, 1.0, 0.0]]))


def test_boxes_take_the_quadratic_route_and_relu_the_engine_route(routes):
    spec = _spec("tanh")
    lo = _points(n=1)
    _, cert = api.certify_flow(Schedule.from_json(spec), Interval(lo, lo + 1e-3))
    assert routes[0].calls == 0 and cert["hints"]["sets"] == "quadratic"  # certified flow --boxes
    assert check_certificate(cert).verified
    relu = Schedule.from_json({**spec, "activation": "relu"})
    _, cert = api.certify_flow(relu, _points(n=2))
    assert routes[0].calls == 0 and routes[1].calls == 2
    assert check_certificate(cert).verified


def test_a_refused_pass_falls_back_to_the_engine(monkeypatch, routes):
    """Predicted hints the checker refuses (variational orders above hints.jacobian_order):
    the pass returns None and the engine's certificate is returned, VERIFIED."""
    fref.refuse_predicted_orders(monkeypatch)
    _, cert = api.certify_flow(Schedule.from_json(_spec("tanh")), _points(n=2))
    assert routes[0].calls == 1 and routes[1].calls == 1
    assert check_certificate(cert).verified


def test_one_pass_certificate_returns_only_accepted_bytes(monkeypatch):
    """The gate: a pass whose bytes the checker rejects (here the check is made to say so)
    returns None, never the certificate."""
    from certified.certificates import writer
    from certified.checker import Verdict

    problem = api.flow_problem(Schedule.from_json(_spec("tanh")))
    assert one_pass.one_pass_certificate(problem, _points(n=1)) is not None
    monkeypatch.setattr(writer, "certificate_bytes",
                        lambda cert: (b"", Verdict(False, "flow", "rejected")))  # fmt: skip
    assert one_pass.one_pass_certificate(problem, _points(n=1)) is None


def test_bad_input_is_refused():
    sched = Schedule.from_json(_spec("tanh"))
    with pytest.raises(ShapeError):
        api.certify_flow(sched, np.zeros((2, 4)))
    with pytest.raises(InputError, match="total time"):
        api.certify_flow(sched, _points(n=1), save_at=SaveAt(t1=1))
    with pytest.raises(InputError, match="SaveAt"):  # a VectorField needs its final time
        from certified.fields import vanderpol

        api.certify_flow(vanderpol(), np.array([[1.0, 0.0]]))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the float64 heuristics overflow
def test_a_failed_flow_raises_with_its_result():
    """No certificate: x' = x^2 from 1 blows up at t = 1 < 2: the pass is refused, the
    engine's flow fails, and NoCertificateError carries its result and what to change."""
    f = field(1, lambda x, p: [x[0] ** 2])
    with pytest.raises(api.NoCertificateError, match="blow up") as err:
        api.certify_flow(f, np.array([[1.0]]), save_at=SaveAt(t1=2))
    assert err.value.result.status is FlowStatus.STEP_REJECTED
