"""Lipschitz verdicts: H1 is refuted whenever QᵀK = 0 (certificate accepted by the checker);
H2 verdicts agree with 110-digit references; H3 verdicts agree with brute-force W₂; the flow
check agrees with the Grönwall theorem; the √n family and the search give valid lower bounds."""

from __future__ import annotations

import itertools

import mpmath
import numpy as np
import pytest
from attention_reference import reference_jacobian, reference_map
from hypothesis import event, given, settings
from hypothesis import strategies as st
from mpmath import mp

from certified.attention.family import (
    float_jacobian,
    search_lipschitz_lower,
    sqrt_n_family,
    tightness_configuration,
)
from certified.attention.flow_check import check_flow_gronwall, parse_flow_instance
from certified.attention.instance import parse_attention_instance
from certified.attention.lipschitz import check_attention_hypothesis, round_down, round_up
from certified.attention.mean_field import check_h3
from certified.checker import check_certificate
from certified.errors import InputError


def _q(x):
    return mpmath.mpf(int(x.p)) / int(x.q)


def _norm2(M):
    with mp.workdps(110):
        return max(mpmath.svd_r(mpmath.matrix(M), compute_uv=False))


small = st.floats(-2, 2, allow_nan=False).map(lambda x: round(x, 2))


def _points(draw, n, d, radius=0.9):
    X = np.array([[draw(small) for _ in range(d)] for _ in range(n)])
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    return np.where(norms > radius, X * (radius / np.maximum(norms, 1e-9)), X)


@settings(max_examples=25)
@given(st.data())
def test_h1_is_refuted_when_qtk_is_zero(data):
    d = data.draw(st.integers(1, 3))
    n = data.draw(st.integers(1, 4))
    q = [data.draw(small) for _ in range(d)]
    V = [[data.draw(small) for _ in range(d)] for _ in range(d)]
    if not np.any(V):
        V[0][0] = 1.0
    # rows q and -q with the same key row: KᵀQ = k qᵀ - k qᵀ = 0
    k_row = [data.draw(small) for _ in range(d)]
    inst = parse_attention_instance(
        {
            "Q": [q, [-x for x in q]],
            "K": [k_row, k_row],
            "V": V,
            "R": 1,
            "X": _points(data.draw, n, d).tolist(),
        }
    )
    v = check_attention_hypothesis(inst, "H1")
    assert v.verdict == "REFUTED", v.message
    assert check_certificate(v.certificate).verified
    with mp.workdps(110):  # the certified ratio is below the true ‖V‖₂ (the ratio's value)
        assert _q(v.lhs_lower) <= _norm2(V) * (1 + mpmath.mpf(10) ** -90)
        assert _q(v.lhs_lower) >= _norm2(V) * (1 - mpmath.mpf(10) ** -6)


@settings(max_examples=40)
@given(st.data())
def test_h1_h2_verdicts_agree_with_references(data):
    d, n, k = (
        data.draw(st.integers(1, 2)),
        data.draw(st.integers(1, 3)),
        data.draw(st.integers(1, 2)),
    )
    mat = lambda r, c: [[data.draw(small) for _ in range(c)] for _ in range(r)]  # noqa: E731
    Q, K, V = mat(k, d), mat(k, d), mat(d, d)
    X = _points(data.draw, n, d).tolist()
    inst = parse_attention_instance({"Q": Q, "K": K, "V": V, "R": 1, "X": X})
    heads = [(Q, K, V, None)]
    with mp.workdps(110):
        KtQ = [
            [sum(mpmath.mpf(K[r][a]) * Q[r][b] for r in range(k)) for b in range(d)]
            for a in range(d)
        ]
        nv, nm = _norm2(V), _norm2(KtQ)
        rhs = {
            "H1": nv * nm * mpmath.sqrt(12 * n + 3),
            "H2": mpmath.sqrt(3) * nv * mpmath.sqrt(nm**2 / k * (4 * n + 1) + n),
        }
        jac = _norm2(reference_jacobian(heads, X))
    for h in ("H1", "H2"):
        v = check_attention_hypothesis(inst, h)
        event(f"{h} {v.verdict}")
        with mp.workdps(110):
            assert _q(v.rhs_lower) <= rhs[h] <= _q(v.rhs_upper)
            if v.verdict == "VERIFIED":
                assert jac <= _q(v.lhs_upper) * (1 + mpmath.mpf(10) ** -100)  # reference error
                assert v.lhs_upper == 0 or check_certificate(v.certificate).verified
            elif v.verdict == "REFUTED":
                Xp = v.counterexample["X_prime"].tolist()
                F, G = (
                    reference_map(heads, X),
                    reference_map(heads, [[_q(x) for x in r] for r in Xp]),
                )
                num = sum((F[i][a] - G[i][a]) ** 2 for i in range(n) for a in range(d))
                den = sum(
                    (mpmath.mpf(X[i][a]) - _q(Xp[i][a])) ** 2 for i in range(n) for a in range(d)
                )
                assert mpmath.sqrt(num / den) >= _q(v.lhs_lower) > rhs[h]
                assert check_certificate(v.certificate).verified


def _w2_bruteforce(A, B):
    n = len(A)
    best = min(
        sum(float(np.sum((A[i] - B[p[i]]) ** 2)) for i in range(n))
        for p in itertools.permutations(range(n))
    )
    return np.sqrt(best / n)


@settings(max_examples=15)
@given(st.data())
def test_h3_pushforward_bounds_contain_bruteforce_w2(data):
    n, d = data.draw(st.integers(2, 4)), 2
    rng = np.random.default_rng(data.draw(st.integers(0, 10**6)))
    X = rng.uniform(-0.6, 0.6, (n, d))
    Y = X + rng.normal(0, 0.1, (n, d))
    Q, K, V = (
        rng.standard_normal((2, d)),
        rng.standard_normal((2, d)),
        rng.standard_normal((d, d)),
    )
    inst = parse_attention_instance(
        {
            "Q": Q.tolist(),
            "K": K.tolist(),
            "V": V.tolist(),
            "R": 1,
            "mu": {"points": X.tolist()},
            "nu": {"points": Y.tolist()},
        }
    )
    v = check_h3(inst)
    event(f"H3 {v.verdict}")
    assert v.verdict in ("VERIFIED", "REFUTED", "UNDECIDED")
    FX = np.array(reference_map([(Q, K, V, None)], X.tolist()), dtype=float)
    FY = np.array(reference_map([(Q, K, V, None)], Y.tolist()), dtype=float)
    lo, hi = v.extra["w2_pushforward"]
    w = _w2_bruteforce(FX, FY)
    assert float(lo) <= w * (1 + 1e-9) + 1e-12 and w <= float(hi) * (1 + 1e-9) + 1e-12
    b_lo, b_hi = v.extra["w2_base"]
    wb = _w2_bruteforce(X, Y)
    assert float(b_lo) <= wb * (1 + 1e-9) and wb <= float(b_hi) * (1 + 1e-9)
    if v.verdict == "VERIFIED":
        assert w / wb <= float(v.rhs_lower) * (1 + 1e-9)


def test_h3_identical_measures_undecided():
    inst = parse_attention_instance(
        {
            "Q": [[1, 0]],
            "K": [[0, 1]],
            "V": [[1, 0], [0, 1]],
            "R": 1,
            "mu": {"points": [[0, 0], ["1/2", 0]]},
            "nu": {"points": [["1/2", 0], [0, 0]]},
        }
    )
    v = check_h3(inst)
    assert v.verdict == "UNDECIDED" and "mu = nu" in v.message


def test_flow_check_verifies_gronwall_on_demo_schedules():
    from certified.flow.examples import LAMINAR_DEMO, TANH_DEMO

    for spec in (TANH_DEMO, LAMINAR_DEMO):
        schedule, X = parse_flow_instance(
            {"schedule": spec, "X": [[0, 0], ["1/2", "1/3"], [-1, 1]]}
        )
        v = check_flow_gronwall(schedule, X)
        assert v.verdict == "VERIFIED", v.message
        assert v.lhs_lower <= v.lhs_upper <= v.rhs_lower <= v.rhs_upper
        assert check_certificate(v.certificate).verified


def test_sqrt_n_family_lower_bounds_are_valid():
    inst = parse_attention_instance(
        {"Q": [[2, 0], [0, 1]], "K": [[1, 0], [0, 1]], "V": [[1, 0], [0, 1]], "R": 2}
    )
    points = sqrt_n_family(inst, [2, 4, 8])
    A = np.array([[2.0, 0], [0, 1]]) / np.sqrt(2)
    for p in points:
        s = np.linalg.norm(float_jacobian(A, np.eye(2), p.X.astype(float)), 2)
        assert float(p.lower) <= s * (1 + 1e-9) and s <= float(p.upper) * (1 + 1e-9)
        assert all(sum(x * x for x in row) <= 4 for row in p.X)
    assert tightness_configuration(inst, 3).shape == (3, 2)
    best = search_lipschitz_lower(inst, 3, restarts=1, steps=3)
    assert best.lower <= best.upper and best.lower >= points[0].lower * 0  # valid and certified


def test_rounding_is_outward():
    from flint import fmpq

    for q in (fmpq(1, 3), fmpq(-22, 7), fmpq(10**30, 7), fmpq(1, 10**30)):
        assert round_down(q) <= q <= round_up(q)
        assert round_up(q) - round_down(q) <= abs(q) * fmpq(1, 2**38)


def test_h1_needs_a_point_cloud():
    inst = parse_attention_instance({"Q": [[1]], "K": [[1]], "V": [[1]], "R": 1})
    with pytest.raises(InputError):
        check_attention_hypothesis(inst, "H1")
    with pytest.raises(InputError):
        check_attention_hypothesis(
            parse_attention_instance({"Q": [[1]], "K": [[1]], "V": [[1]], "R": 1, "X": [[0]]}), "H4"
        )


@pytest.mark.parametrize("v", ["3/2", 1])
def test_regression_norm_attained_exactly(v):
    # found by hypothesis: Df = V exactly (A = 0, one token); the Frobenius bound is attained,
    # so the claimed lhs_upper must be strictly above it for the checker's strict test
    inst = parse_attention_instance({"Q": [[0]], "K": [[0]], "V": [[v]], "R": 1, "X": [[0]]})
    for h in ("H1", "H2"):
        verdict = check_attention_hypothesis(inst, h)
        if verdict.verdict == "VERIFIED":
            assert verdict.lhs_upper > to_q(v)
            assert check_certificate(verdict.certificate).verified


def to_q(v):
    from certified.arith.exact import to_fmpq

    return to_fmpq(v)


SMALL_R = {
    "Q": [[1, 0], [0, "1/2"]],
    "K": [["1/2", 1], [0, 1]],
    "V": [[1, "1/3"], [0, 1]],
    "R": "1/4",
    "X": [["1/8", 0], [0, "1/8"], ["-1/8", "1/16"]],
}


def test_h1_fails_for_small_r_even_with_nonzero_qtk():
    # f ≈ (V x̄, ..., V x̄) + O(‖A‖R²): Lip ≈ ‖V‖₂ while H1's right side is O(R²)
    v = check_attention_hypothesis(parse_attention_instance(SMALL_R), "H1")
    assert v.verdict == "REFUTED" and v.rhs_upper > 0
    assert check_certificate(v.certificate).verified


def test_domain_check_h2_small_r_and_reference():
    from certified.attention.lipschitz import check_on_domain

    inst = parse_attention_instance(SMALL_R)
    v = check_on_domain(inst, "H2")
    assert v.verdict == "VERIFIED" and check_certificate(v.certificate).verified
    # the sup bound dominates ‖Df‖₂ at sampled configurations of the domain
    rng = np.random.default_rng(0)
    A = inst.K.T.astype(float) @ inst.Q.astype(float) / np.sqrt(2)
    for _ in range(20):
        X = rng.uniform(-1, 1, (3, 2))
        X *= 0.25 / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 0.25)
        s = np.linalg.norm(float_jacobian(A, inst.V.astype(float), X), 2)
        assert s <= float(v.lhs_upper)
    wide = parse_attention_instance({**SMALL_R, "R": 3, "X": [[0, 0]]})
    # H2 closes at the root at any R (bounds.md #domain-structure); 1/5 of its right side,
    # still above the sup found, does not within 30 cells
    assert check_on_domain(wide, "H2", 4, max_cells=30).verdict == "VERIFIED"
    assert check_on_domain(wide, "H2", 4, factor="1/5", max_cells=30).verdict == "UNDECIDED"
    with pytest.raises(InputError):
        check_on_domain(wide, "H2", 0)


def test_cli_domain_flag(tmp_path, capsys):
    import json

    from certified.cli import main

    path = tmp_path / "i.json"
    path.write_text(json.dumps(SMALL_R))
    rc = main(
        [
            "lipschitz",
            "--instance",
            str(path),
            "--hypothesis",
            "H2",
            "--domain",
            "--out",
            str(tmp_path / "c.json"),
            "--json",
        ]
    )
    data = json.loads(capsys.readouterr().out)
    assert rc == 0 and data["verdict"] == "VERIFIED" and data["certificate"] is not None
    assert check_certificate(json.loads((tmp_path / "c.json").read_text())).verified
