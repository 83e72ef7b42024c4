"""Soundness of layer-stack enclosures: random models and token sets (public strategies of
certified.transformers.stack_strategies) contained in the 50-digit mpmath reference, by the
float64-interval engine, the ball engine and the certificate boxes; the depth-1 stack against
one residual layer computed in exact rationals where the inputs allow it; the score convention.
The thorough profile runs the searches with 2,000 examples (HYPOTHESIS_PROFILE=thorough)."""

from __future__ import annotations

from fractions import Fraction

import mpmath
import numpy as np
import pytest
import test_stack_reference as ref
from hypothesis import example, given, settings
from hypothesis import strategies as st

from certified.arith.exact import to_fmpq
from certified.errors import RangeOverflowError
from certified.transformers.stack_certificate import certify_stack
from certified.transformers.stack_eval import LayerNormDenominatorError, enclose_stack
from certified.transformers.stack_model import parse_stack
from certified.transformers.stack_strategies import stack_models, token_sets

# the searches run 40 / 25 examples, all of the profile's in the thorough one (2,000)
_THOROUGH = settings.default.max_examples >= 1000


def _examples(n: int) -> int:
    return settings.default.max_examples if _THOROUGH else n


def _mp_in(v, lo, hi) -> bool:
    with mpmath.workdps(100):
        lo_, hi_ = ref.mpf(str(to_fmpq(lo))), ref.mpf(str(to_fmpq(hi)))
        return lo_ <= v <= hi_


def _check_interval_layers(layers, reference):
    for B, R in zip(layers, reference, strict=True):
        for i, row in enumerate(R):
            for a, v in enumerate(row):
                assert _mp_in(v, float(B.lo[i, a]), float(B.hi[i, a])), (i, a)


def _check_box_layers(boxes, reference):
    for B, R in zip(boxes, reference, strict=True):
        for i, row in enumerate(R):
            for a, v in enumerate(row):
                lo, hi = B[i][a]
                assert _mp_in(v, lo, hi), (i, a)


@st.composite
def instances(draw):
    d = draw(st.integers(1, 3))
    n = draw(st.integers(1, 4))
    model = draw(stack_models(d, n, max_layers=3))
    tokens = draw(token_sets(n, d))
    weights = None
    if draw(st.booleans()):
        raw = draw(st.lists(st.integers(1, 4), min_size=n, max_size=n))
        weights = [f"{k}/{sum(raw)}" if k != sum(raw) else 1 for k in raw]
    return model, tokens, weights


_PINNED = (
    {"dimension": 2, "layers": [
        {"type": "attention", "mask": "causal", "heads": [{"Q": [[1, -2]], "K": [[0.5, 1]],
                                                           "V": [[1, 0], [0.25, -1]]}]},
        {"type": "mlp", "W1": [[1, 1]], "b1": [-0.75], "W2": [[1], [-1]], "b2": [0, 0.5],
         "activation": "gelu"},
        {"type": "layernorm", "eps": "1/1000"}]},
    [[0.5, -1.0], [1.5, 2.0], [-0.25, 0.75]],
    ["1/2", "1/4", "1/4"],
)  # fmt: skip


_PINNED_PRE_LN = (
    {"dimension": 3, "layers": [
        {"type": "attention", "norm": {"eps": "1/1000", "gamma": [1, -0.5, 2],
                                       "beta": [0, 0.25, -1]},
         "heads": [{"Q": [[1, -2, 0.5]], "K": [[0.5, 1, 1]], "V": [[1, 0.25, -1]],
                    "W": [[1], [0], [0.5]]}]},
        {"type": "mlp", "norm": {"eps": "1/10"}, "W1": [[1, 1, 0], [0, -1, 1]],
         "b1": [-0.75, 0.5], "W2": [[1, 0], [-1, 0.5], [0, 1]], "b2": [0, 0.5, 0],
         "activation": "gelu", "step": "1/2"},
        {"type": "attention", "mask": "causal", "residual": False, "norm": {"eps": 1},
         "heads": [{"Q": [[2, 0, -1]], "K": [[1, 1, 1]], "V": [[1, 0, 0], [0, 1, 0],
                                                              [0, 0, 1]]}]}]},
    [[0.5, -1.0, 2.0], [1.5, 2.0, -0.5], [-0.25, 0.75, 0.0]],
    ["1/2", "1/4", "1/4"],
)  # fmt: skip


@settings(max_examples=_examples(40))
@given(instances())
@example(_PINNED)
@example(_PINNED_PRE_LN)
def test_interval_and_ball_engines_contain_the_50_digit_reference(inst):
    model, tokens, weights = inst
    stack = parse_stack(model)
    reference = ref.reference_layers(model, tokens, weights)
    try:
        layers = enclose_stack(stack, tokens, weights).layers
    except (LayerNormDenominatorError, RangeOverflowError):
        layers = None  # float64 intervals may be too wide: the ball engine must still work
    if layers is not None:
        _check_interval_layers(layers, reference)
    boxes = certify_stack(stack, tokens, weights, prec=64)
    _check_box_layers(boxes, reference)


@pytest.mark.slow
@settings(max_examples=_examples(25))
@given(instances())
def test_certificate_boxes_contain_the_reference_at_200_bits(inst):
    model, tokens, weights = inst
    boxes = certify_stack(parse_stack(model), tokens, weights, prec=200)
    # 200 bits is 60 digits: the reference needs more than its default 50
    _check_box_layers(boxes, ref.reference_layers(model, tokens, weights, dps=90))
    widths = [hi - lo for row in boxes[-1] for lo, hi in row]
    assert max(widths) < to_fmpq("1e-30")


# --- depth 1 against exact rationals ---------------------------------------------------------


def _exact_attention_uniform(X, G, w, h):
    """x_i + h G Σ_j w_j x_j / Σ_j w_j: a residual layer whose scores are all 0 (Q = 0)."""
    total = sum(w)
    mean = [sum(wj * x[a] for wj, x in zip(w, X, strict=True)) / total for a in range(len(X[0]))]
    Gm = [sum(Fraction(g) * m for g, m in zip(row, mean, strict=True)) for row in G]
    return [[x[a] + h * Gm[a] for a in range(len(x))] for x in X]


def _exact_relu_mlp(X, W1, b1, W2, b2, h):
    out = []
    for x in X:
        z = [sum(Fraction(a) * v for a, v in zip(r, x, strict=True)) + Fraction(b)
             for r, b in zip(W1, b1, strict=True)]  # fmt: skip
        y = [max(t, Fraction(0)) for t in z]
        f = [sum(Fraction(a) * v for a, v in zip(r, y, strict=True)) + Fraction(b)
             for r, b in zip(W2, b2, strict=True)]  # fmt: skip
        out.append([v + h * t for v, t in zip(x, f, strict=True)])
    return out


def _assert_equal_exactly(boxes, exact, tol=Fraction(1, 10**30)):
    for row, erow in zip(boxes, exact, strict=True):
        for (lo, hi), v in zip(row, erow, strict=True):
            q = to_fmpq(f"{v.numerator}/{v.denominator}")
            assert lo <= q <= hi and hi - lo <= to_fmpq(f"{tol.numerator}/{tol.denominator}")


@given(token_sets(3, 2), st.lists(st.integers(1, 5), min_size=3, max_size=3))
def test_depth_one_attention_is_one_residual_layer_in_exact_rationals(tokens, raw):
    G = [[1, "1/3"], [-2, "1/2"]]
    model = {"dimension": 2, "layers": [{"type": "attention", "step": "1/3",
             "heads": [{"Q": [[0, 0]], "K": [[1, -1]], "V": G}]}]}  # fmt: skip
    w = [f"{k}/{sum(raw)}" for k in raw]
    X = [[Fraction(v) for v in row] for row in tokens]
    exact = _exact_attention_uniform(X, [[Fraction(g) for g in r] for r in G],
                                     [Fraction(x) for x in w], Fraction(1, 3))  # fmt: skip
    boxes = certify_stack(parse_stack(model), tokens, w, prec=128)
    _assert_equal_exactly(boxes[-1], exact)
    layers = enclose_stack(parse_stack(model), tokens, w).layers
    for i, row in enumerate(exact):
        for a, v in enumerate(row):
            assert Fraction(layers[-1].lo[i, a]) <= v <= Fraction(layers[-1].hi[i, a])


@given(token_sets(4, 3))
def test_depth_one_relu_mlp_is_one_residual_layer_in_exact_rationals(tokens):
    W1, b1 = [[1, -1, 0.5], [0, 2, -1]], [0.25, -0.5]
    W2, b2 = [[1, 0], [-1, 1], [0.5, 0.5]], [0, 1, -1]
    layer = {"type": "mlp", "W1": W1, "b1": b1, "W2": W2, "b2": b2, "activation": "relu"}
    model = {"dimension": 3, "layers": [{**layer, "step": "1/2"}]}
    X = [[Fraction(v) for v in row] for row in tokens]
    exact = _exact_relu_mlp(X, W1, b1, W2, b2, Fraction(1, 2))
    boxes = certify_stack(parse_stack(model), tokens, None, prec=128)
    _assert_equal_exactly(boxes[-1], exact)


@given(st.lists(st.tuples(st.integers(-8, 8), st.booleans()), min_size=3, max_size=3),
       st.lists(st.integers(1, 5), min_size=3, max_size=3))  # fmt: skip
def test_depth_one_pre_ln_blocks_are_residual_layers_in_exact_rationals(draw, raw):
    # tokens (t + 3, t - 3) or (t - 3, t + 3), t a multiple of 1/4: variance 9, eps = 16
    tokens = [[Fraction(t, 4) + (3 if up else -3), Fraction(t, 4) - (3 if up else -3)]
              for t, up in draw]  # fmt: skip
    gamma, beta = ["1/2", 2], [1, "-1/4"]
    G = [[1, "-1/3"], [1, "-1/3"]]  # equal rows: x + attn(LN x) keeps the variance 9
    W1, b1, W2, b2 = [[1, -1], [0.5, 2]], [0.25, -0.5], [[1, 0], [-1, 1]], [0, 1]
    norm = {"gamma": gamma, "beta": beta, "eps": 16}
    model = {"dimension": 2, "layers": [
        {"type": "attention", "norm": norm, "heads": [{"Q": [[0, 0]], "K": [[1, -1]], "V": G}]},
        {"type": "mlp", "norm": norm, "W1": W1, "b1": b1, "W2": W2, "b2": b2,
         "activation": "relu", "step": "1/2"}]}  # fmt: skip
    w = [Fraction(k, sum(raw)) for k in raw]

    def ln(x):
        m = sum(x) / 2
        var = sum((v - m) ** 2 for v in x) / 2 + 16
        assert var == 25  # the square root is exact
        return [
            Fraction(g) * (v - m) / 5 + Fraction(b) for v, g, b in zip(x, gamma, beta, strict=True)
        ]

    Gq = [[Fraction(g) for g in r] for r in G]
    # x + attn(LN x): uniform scores, so attn(LN x)_i = G Σ_j w_j LN(x_j)
    mean = [sum(wj * y[a] for wj, y in zip(w, map(ln, tokens), strict=True)) for a in range(2)]
    X1 = [[x[a] + sum(Gq[a][b] * mean[b] for b in range(2)) for a in range(2)] for x in tokens]
    # x + MLP(LN x): the ReLU MLP on the normed token, the residual on the un-normed one
    mlp = _exact_relu_mlp([ln(x) for x in X1], W1, b1, W2, b2, Fraction(1, 2))
    exact = [[x[a] + m[a] - y[a] for a in range(2)]
             for x, y, m in zip(X1, map(ln, X1), mlp, strict=True)]  # fmt: skip
    boxes = certify_stack(parse_stack(model), tokens, [str(q) for q in w], prec=128)
    _assert_equal_exactly(boxes[1], X1)
    _assert_equal_exactly(boxes[-1], exact)
    layers = enclose_stack(parse_stack(model), tokens, [str(q) for q in w]).layers
    for i, row in enumerate(exact):
        for a, v in enumerate(row):
            assert Fraction(layers[-1].lo[i, a]) <= v <= Fraction(layers[-1].hi[i, a])


# --- the score convention ----------------------------------------------------------------------


def test_the_score_is_q_of_the_key_against_k_of_the_query():
    Q, K = [[1, 0], [0, 0]], [[0, 1], [0, 0]]  # KᵀQ = [[0, 0], [1, 0]] is not symmetric
    tokens = [[1, 0], [0, 2], [1, 1]]

    def model(Qm, Km):
        return {"dimension": 2, "layers": [{"type": "attention", "residual": False,
                "heads": [{"Q": Qm, "K": Km, "V": [[1, 0], [0, 1]]}]}]}  # fmt: skip

    out = certify_stack(parse_stack(model(Q, K)), tokens, prec=128)[-1]
    swapped = certify_stack(parse_stack(model(K, Q)), tokens, prec=128)[-1]
    # by hand: query x_2 = (0, 2): K x_2 = (2, 0); keys Q x_j = (x_j1, 0): scores 2 x_j1
    with mpmath.workdps(40):
        e = [mpmath.exp(2 * x[0]) for x in tokens]
        expected = sum(ej * x[0] for ej, x in zip(e, tokens, strict=True)) / sum(e)
    assert _mp_in(expected, *out[1][0])
    # the swapped reading <Q x_i, K x_j> scores key j by 2 x_j2 at this query... different
    assert not _mp_in(expected, *swapped[1][0])
    with mpmath.workdps(40):
        assert abs(ref.reference_layers(model(Q, K), tokens)[-1][1][0] - expected) < 1e-35


def test_enclosures_are_narrow_on_an_ordinary_two_block_stack():
    rng = np.random.default_rng(0)
    d, k, p = 4, 2, 8

    def mat(r, c, s):
        return (rng.standard_normal((r, c)) / np.sqrt(s)).tolist()

    layers = []
    for _ in range(2):
        layers += [{"type": "layernorm", "eps": "1/100000"},
                   {"type": "attention", "scale": "1/2", "heads": [
                       {"Q": mat(k, d, d), "K": mat(k, d, d), "V": mat(d, d, d)}
                       for _ in range(2)]},
                   {"type": "layernorm", "eps": "1/100000"},
                   {"type": "mlp", "W1": mat(p, d, d), "b1": [0.0] * p, "W2": mat(d, p, p),
                    "b2": [0.0] * d, "activation": "gelu"}]  # fmt: skip
    model = {"dimension": d, "layers": layers}
    tokens = rng.standard_normal((6, d)).tolist()
    boxes = certify_stack(parse_stack(model), tokens, prec=128)
    _check_box_layers(boxes, ref.reference_layers(model, tokens))
    assert max(hi - lo for row in boxes[-1] for lo, hi in row) < to_fmpq("1e-25")


def test_masked_scores_never_reach_the_exponential():
    # the hidden (future) tokens score 400 * 10 * 10 at query 0: exp would overflow float64
    model = {"dimension": 1, "layers": [{"type": "attention", "mask": "causal",
             "heads": [{"Q": [[20]], "K": [[20]], "V": [[1]]}]}]}  # fmt: skip
    tokens = [[1], [10], [-3]]
    layers = enclose_stack(parse_stack(model), tokens).layers
    _check_interval_layers(layers, ref.reference_layers(model, tokens))
    assert layers[-1].lo[0, 0] <= 2.0 <= layers[-1].hi[0, 0] < 2.0 + 1e-14  # x_0 + x_0
