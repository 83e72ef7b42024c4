"""The float64-interval replay of rule taylor-lohner (checker.ivec, jets64, lohner64): every
operation contains the exact result (rationals, 40-digit mpmath), the batched Taylor
coefficients contain the 200-bit arb reference of field_jets, and the batched Lohner step
contains the arb step's enclosure (proofs/checker_soundness.md#float-intervals)."""

from __future__ import annotations

import flint
import mpmath
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from certified.checker.duals64 import unpack
from certified.checker.ivec import Iv, dn, exp_points, from_fmpq, matmul, matrix_mr, up
from certified.checker.jets64 import Program, _monotone, jets64
from certified.checker.lohner import SUPPORTED, replay_flow, supported
from certified.checker.taylor import OPERATIONS, ReplayError, field_jets
from certified.strategies import expression_fields

_SLOW = [HealthCheck.too_slow, HealthCheck.data_too_large]
Q = flint.fmpq

finite = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300)
small = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e6, max_value=1e6)


def _q(x: float) -> flint.fmpq:
    return Q(*x.as_integer_ratio())


def _iv(pairs) -> Iv:
    lo = np.array([min(a, b) for a, b in pairs])
    hi = np.array([max(a, b) for a, b in pairs])
    return Iv(lo, hi)


def _contains(iv: Iv, i: int, exact: flint.fmpq) -> bool:
    return _q(float(iv.lo.ravel()[i])) <= exact <= _q(float(iv.hi.ravel()[i]))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(finite, finite, finite, finite), min_size=1, max_size=8))
@example([(1.0, 1.0, 3 * 2.0**-54, 3 * 2.0**-54)])  # a sum that rounds (RN: up)
@example([(2.0**-1074, 2.0**-1074, 0.5, 0.5)])  # subnormal product
@example([(0.1, 0.3, -0.7, 0.2)])  # straddling zero
def test_elementary_operations_contain_the_exact_results(rows):
    a = _iv([(r[0], r[1]) for r in rows])
    b = _iv([(r[2], r[3]) for r in rows])
    ops = {"add": a + b, "sub": a - b, "mul": a * b}
    for i in range(len(rows)):
        ends_a = (_q(float(a.lo[i])), _q(float(a.hi[i])))
        ends_b = (_q(float(b.lo[i])), _q(float(b.hi[i])))
        for name, out in ops.items():
            if not (np.isfinite(out.lo[i]) and np.isfinite(out.hi[i])):
                continue  # overflow: the replay rejects non-finite values
            for x in ends_a:
                for y in ends_b:
                    exact = x + y if name == "add" else x - y if name == "sub" else x * y
                    assert _contains(out, i, exact), (name, x, y)
        if not (b.lo[i] <= 0 <= b.hi[i]):
            out = a / b
            if np.isfinite(out.lo[i]) and np.isfinite(out.hi[i]):
                for x in ends_a:
                    for y in ends_b:
                        assert _contains(out, i, x / y)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(finite, finite, finite, finite), min_size=1, max_size=8))
@example([(0.0, -0.0, -0.0, 0.0)])  # signed zeros: the same zero as the reference
@example([(-2.0, 3.0, -5.0, 7.0)])  # both straddle zero
def test_products_are_the_archived_formula_bit_for_bit(rows):
    """The products (computed into their own temporaries since issue 18) equal the formula
    the archived certificates were replayed with: min / max of the four end-point products,
    then dn / up; arrays and 0-d values alike; products by positive doubles likewise."""
    a = _iv([(r[0], r[1]) for r in rows])
    b = _iv([(r[2], r[3]) for r in rows])
    with np.errstate(all="ignore"):
        for x, y in ((a, b), (a[0], b[0]), (a[:, None], b[None, :])):
            p = (x.lo * y.lo, x.lo * y.hi, x.hi * y.lo, x.hi * y.hi)
            lo = dn(np.minimum(np.minimum(p[0], p[1]), np.minimum(p[2], p[3])))
            hi = up(np.maximum(np.maximum(p[0], p[1]), np.maximum(p[2], p[3])))
            out = x * y
            pos = np.abs(y.lo) + 1.0  # positive doubles: scale_pos is scale
            sp, sc = x.scale_pos(pos), x.scale(pos)
            assert np.array_equal(sp.lo, sc.lo, equal_nan=True)
            assert np.array_equal(sp.hi, sc.hi, equal_nan=True)
            for got, want in ((out.lo, lo), (out.hi, hi)):
                assert np.array_equal(got, want, equal_nan=True)
                assert np.array_equal(np.signbit(got), np.signbit(want))


def test_matmul_with_the_matrix_prepared_once_is_the_same():
    rng = np.random.default_rng(3)
    M = rng.standard_normal((4, 5))
    Mlo, Mhi = M - 1e-3, M + 1e-3
    V = rng.standard_normal((5, 6, 2))
    V = Iv(V, V + 1e-9)
    plain, pre = matmul(Mlo, Mhi, V), matmul(Mlo, Mhi, V, matrix_mr(Mlo, Mhi))
    assert np.array_equal(plain.lo, pre.lo) and np.array_equal(plain.hi, pre.hi)


@settings(max_examples=100, deadline=None)
@given(st.lists(small, min_size=1, max_size=40), st.integers(1, 3))
@example([1.0, 2.0**-53, 2.0**-53, 2.0**-53], 1)  # each addition alone would round away
def test_sums_and_matrix_products_contain_the_exact_results(values, rows):
    x = np.array(values)
    v = Iv(x, x.copy())
    s = v.sum(axis=0)
    exact = sum((_q(float(t)) for t in values), Q(0))
    assert _contains(s, 0, exact)
    rng = np.random.default_rng(len(values))
    M = rng.standard_normal((rows, len(values))) * 10.0 ** rng.integers(-5, 5)
    out = matmul(M, M, Iv(x[:, None], x[:, None].copy()))
    for r in range(rows):
        e = sum((_q(float(M[r, j])) * _q(float(values[j])) for j in range(len(values))), Q(0))
        assert _contains(out, r, e)


edge = st.sampled_from([0.0, -0.0, 1e-300, -1e-300, 5e-324, -745.0, -745.5, -746.0, 708.9,
                        709.0, 0.34657359027997264, -0.34657359027997264, 1.0, -1.0])  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.one_of(edge, st.floats(min_value=-800, max_value=800)))
def test_exp_tanh_and_sigmoid_contain_40_digit_values(p):
    mpmath.mp.dps = 40
    x = mpmath.mpf(p)
    E = exp_points(np.array([p]))
    ref = {"exp": mpmath.exp(x), "tanh": mpmath.tanh(x), "sigmoid": 1 / (1 + mpmath.exp(-x))}
    assert mpmath.mpf(float(E.lo[0])) <= ref["exp"]
    assert np.isinf(E.hi[0]) or ref["exp"] <= mpmath.mpf(float(E.hi[0]))
    if -700 < p < 700:  # tight: ~1e-16 relative near 0, k ulps of ln 2 for exp(k ln 2 + r)
        assert E.hi[0] - E.lo[0] <= (8e-15 + 1e-15 * abs(p)) * E.hi[0] + 1e-300
    for op in ("tanh", "sigmoid"):
        y = _monotone(op, Iv(np.array([p]), np.array([p])))
        assert mpmath.mpf(float(y.lo[0])) <= ref[op] <= mpmath.mpf(float(y.hi[0])), op
        assert y.hi[0] - y.lo[0] <= 1e-14


def test_from_fmpq_brackets_non_dyadic_rationals():
    values = [Q(1, 3), Q(-2, 7), Q(10**30 + 1, 3), Q(1, 10**40), Q(5, 1), Q(2) ** 2000]
    iv = from_fmpq(values)
    for i, q in enumerate(values):
        assert _q(float(iv.lo[i])) <= q
        assert np.isinf(iv.hi[i]) or q <= _q(float(iv.hi[i]))


def _supported_fields():
    return expression_fields(d=(1, 3), depth=4, parameters=(0, 2)).filter(
        lambda p: supported(p.field.expression)
    )


@settings(max_examples=60, deadline=None, suppress_health_check=_SLOW)
@given(_supported_fields(), st.integers(0, 2**32 - 1))
def test_batched_jets_contain_the_200_bit_reference(problem, seed):
    field = problem.field.expression
    d, rng = field.dimension, np.random.default_rng(seed)
    n, order = 3, 5
    lo = rng.uniform(-0.5, 0.5, (n, d))
    hi = lo + rng.uniform(0, 1e-3, (n, d)) * rng.integers(0, 2, (n, d))
    seeds = np.broadcast_to(np.eye(d), (n, d, d)).copy()
    with flint.ctx.workprec(53):
        P = from_fmpq([q for p in problem.pieces[:1] for q in p.values])
    try:
        got = jets64(Program(field), P, Iv(lo, hi), Iv(seeds, seeds.copy()), order)
    except ReplayError:
        assume(False)  # a domain failure in float64 is a rejection, never a wrong value
    with flint.ctx.workprec(200):
        ps = [flint.arb(v) for v in problem.pieces[0].values]
        for i in range(n):
            # the coefficients at a point of the box (its lower corner) lie in its enclosure
            box = [flint.arb(float(a)) for a in lo[i]]
            ident = [[flint.arb(int(r == c)) for c in range(d)] for r in range(d)]
            ref = field_jets(field, ps, box, ident, order)
            for k in range(order + 1):
                for q in range(d):
                    for g in range(d + 1):
                        ball = ref[k][q][g]
                        assert ball.rad() < 1e-30  # a 200-bit reference at a point
                        assert float(got[k].lo[i, q, g]) <= ball.mid() <= float(got[k].hi[i, q, g])


def test_the_float64_replay_needs_53_bits_and_supported_operations():
    assert set(SUPPORTED) == set(OPERATIONS)  # every operation of the graph language
    from certified.fields import read_field

    field = read_field("lorenz", time="1/8").field.expression
    with flint.ctx.workprec(64), pytest.raises(ReplayError, match="53 bits"):
        replay_flow(field, [], [], [], [], 4, 2, [], arithmetic="float64")


def _supported64_fields():
    from certified.checker.sensitivity64 import supported64

    return expression_fields(d=(1, 2), depth=3, parameters=(1, 2)).filter(
        lambda p: supported64(p.field.expression)
    )


@settings(
    max_examples=30, deadline=None, suppress_health_check=[*_SLOW, HealthCheck.filter_too_much]
)
@given(_supported64_fields(), st.integers(0, 2**32 - 1))
def test_the_reverse_sweep_contains_the_200_bit_gradient(problem, seed):
    # sensitivity64.theta_adjoint: the gradients of sum_k w_k . X_k in the start and in the
    # parameters contain the 200-bit duals of the augmented field (every operation of OPS64)
    from certified.checker.sensitivity import augmented_field
    from certified.checker.sensitivity64 import ThetaProgram, theta_adjoint

    field = problem.field.expression
    d, P, rng = field.dimension, len(field.names), np.random.default_rng(seed)
    n, order = 2, 4
    x = rng.uniform(-0.5, 0.5, (n, d))
    w = rng.uniform(-1, 1, (order + 1, n, d))
    tp, values, tape = ThetaProgram(field), problem.pieces[0].values, {}
    try:
        jets64(tp.prog, from_fmpq(list(values)), Iv(x, x.copy()), None, order, tape)
        gt, gx = theta_adjoint(tp, tape, [Iv(wk, wk.copy()) for wk in w], order)
    except ReplayError:
        assume(False)
    assume(gt.finite() and gx.finite())
    aug, D = augmented_field(field), d + P
    with flint.ctx.workprec(200):
        ident = [[flint.arb(int(r == c)) for c in range(D)] for r in range(D)]
        for i in range(n):
            z = [flint.arb(float(v)) for v in x[i]] + [flint.arb(v) for v in values]
            ref = field_jets(aug, [], z, ident, order)
            for c in range(D):
                terms = (flint.arb(float(w[k, i, q])) * ref[k][q][1 + c]
                         for k in range(order + 1) for q in range(d))  # fmt: skip
                g = sum(terms, flint.arb(0))
                assert g.rad() < 1e-30
                got, col = (gx, c) if c < d else (gt, c - d)
                assert (
                    flint.arb(float(got.lo[i, col])) <= g.mid() <= flint.arb(float(got.hi[i, col]))
                )


def _second_reference(field, ps, x, V, W, order):
    """``D^2 x_k (V_a, V_b) + D x_k W_ab`` at the point x (arb balls, 400 bits): central
    differences of the first-order jets along V_b (step 2^-100: error ~2^-200) plus the jets
    seeded with W."""
    d, g, eps = len(x), V.shape[1], flint.arb(2) ** -100
    Vs = [[flint.arb(float(V[r, c])) for c in range(g)] for r in range(d)]
    Ws = [[flint.arb(float(W[r, a, b])) for a in range(g) for b in range(g)] for r in range(d)]
    base = field_jets(field, ps, x, Ws, order)
    out = [[[[None] * g for _ in range(g)] for _ in range(d)] for _ in range(order + 1)]
    for b in range(g):
        jp = field_jets(field, ps, [x[r] + eps * Vs[r][b] for r in range(d)], Vs, order)
        jm = field_jets(field, ps, [x[r] - eps * Vs[r][b] for r in range(d)], Vs, order)
        for k in range(order + 1):
            for q in range(d):
                for a in range(g):
                    fd = (jp[k][q][1 + a] - jm[k][q][1 + a]) / (2 * eps)
                    out[k][q][a][b] = fd + base[k][q][1 + a * g + b]
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=_SLOW)
@given(_supported_fields(), st.integers(0, 2**32 - 1))
def test_hyper_dual_jets_contain_the_second_derivatives(problem, seed):
    """The second-order parts of jets64 (duals64, rule taylor-lohner's quadratic sets) contain
    ``D^2 x_k (V_a, V_b) + D x_k W_ab`` at a point, for every operation but logsumexp (which
    the second-order replay refuses), random seeds V and symmetric W."""
    field = problem.field.expression
    d, rng = field.dimension, np.random.default_rng(seed)
    n, order, g = 2, 4, 2
    x = rng.uniform(-0.5, 0.5, (n, d))
    V = rng.normal(size=(n, d, g))
    W = rng.normal(size=(n, d, g, g))
    W = W + np.swapaxes(W, 2, 3)
    with flint.ctx.workprec(53):
        P = from_fmpq([q for p in problem.pieces[:1] for q in p.values])
    uses_lse = any(node[0] == "logsumexp" for node in field.nodes)
    try:
        got = jets64(Program(field), P, Iv(x, x.copy()), Iv(V, V.copy()), order,
                     second=Iv(W, W.copy()))  # fmt: skip
    except ReplayError as exc:
        assert uses_lse or "leaves its domain" in str(exc), exc
        return
    assert not uses_lse
    with flint.ctx.workprec(400):
        ps = [flint.arb(v) for v in problem.pieces[0].values]
        for i in range(n):
            ref = _second_reference(field, ps, [flint.arb(float(a)) for a in x[i]], V[i], W[i],
                                    order)  # fmt: skip
            for k in range(order + 1):
                full = unpack(got[k][i, :, 1 + g :], g)
                lo, hi = full.lo, full.hi
                for q in range(d):
                    for a in range(g):
                        for b in range(g):
                            ball = ref[k][q][a][b]
                            assert ball.rad() < 1e-40
                            assert lo[q, a, b] <= ball.mid() <= hi[q, a, b], (k, q, a, b)
