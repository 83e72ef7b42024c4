"""A 50-digit mpmath reference of layer stacks, written from the formulas of
certified/transformers/stack_model.py (not from the package's code): the score of key x_j at
query x_i is s <Q x_j, K x_i>, literally; a layer with a "norm" is x + h f(LN(x)) (queries,
keys, values and the MLP's input all from the normed tokens, the residual from x). Other
stack tests import it; the tests here check the reference against closed forms."""

from __future__ import annotations

from fractions import Fraction

import mpmath
import pytest

mp = mpmath.mp.clone() if hasattr(mpmath.mp, "clone") else mpmath.mp
DPS = 50


def num(x):
    """Exact value of a model-file number (float, int, "p/q" or decimal string)."""
    if isinstance(x, str):
        return Fraction(x)
    return Fraction(x)


def mpf(x):
    q = num(x)
    return mpmath.mpf(q.numerator) / q.denominator


def _matvec(M, v):
    return [mpmath.fsum(mpf(a) * b for a, b in zip(row, v, strict=True)) for row in M]


def _attention(layer, X, w):
    n, d = len(X), len(X[0])
    s = mpf(layer.get("scale", 1))
    h = mpf(layer.get("step", 1))
    mask = layer.get("mask")
    out = [list(x) if layer.get("residual", True) else [mpmath.mpf(0)] * d for x in X]
    for head in layer["heads"]:
        QX = [_matvec(head["Q"], x) for x in X]
        KX = [_matvec(head["K"], x) for x in X]
        VX = [_matvec(head["V"], x) for x in X]
        if "W" in head:
            VX = [_matvec(head["W"], v) for v in VX]
        for i in range(n):
            if mask == "causal":
                cols = range(i + 1)
            elif mask is None:
                cols = range(n)
            else:
                cols = [j for j in range(n) if mask[i][j] == 1]
            scores = {j: s * mpmath.fsum(a * b for a, b in zip(QX[j], KX[i], strict=True))
                      for j in cols}  # fmt: skip
            top = max(scores.values())
            e = {j: w[j] * mpmath.exp(scores[j] - top) for j in cols}
            z = mpmath.fsum(e.values())
            for a in range(d):
                out[i][a] += h * mpmath.fsum(e[j] * VX[j][a] for j in cols) / z
    return out


def _act(name, t):
    if name == "relu":
        return max(t, mpmath.mpf(0))
    if name == "tanh":
        return mpmath.tanh(t)
    return t * mpmath.ncdf(t)


def _mlp(layer, X):
    h = mpf(layer.get("step", 1))
    out = []
    for x in X:
        z = [a + mpf(b) for a, b in zip(_matvec(layer["W1"], x), layer["b1"], strict=True)]
        y = [_act(layer["activation"], t) for t in z]
        f = [a + mpf(b) for a, b in zip(_matvec(layer["W2"], y), layer["b2"], strict=True)]
        base = x if layer.get("residual", True) else [mpmath.mpf(0)] * len(x)
        out.append([a + h * b for a, b in zip(base, f, strict=True)])
    return out


def _layernorm(layer, X):
    d = len(X[0])
    gamma = [mpf(g) for g in layer.get("gamma", [1] * d)]
    beta = [mpf(b) for b in layer.get("beta", [0] * d)]
    eps = mpf(layer.get("eps", 0))
    out = []
    for x in X:
        m = mpmath.fsum(x) / d
        c = [a - m for a in x]
        var = mpmath.fsum(t * t for t in c) / d + eps
        r = 1 / mpmath.sqrt(var)
        out.append([t * r * g + b for t, g, b in zip(c, gamma, beta, strict=True)])
    return out


def _prenormed(layer, X):
    """Y = LN(X) for a layer with a "norm", else X (the sublayer's input)."""
    if "norm" not in layer:
        return X
    return _layernorm(layer["norm"], X)


def _residual_block(layer, X, F):
    """[x_i] + F_i: F computed from the (pre-normed) tokens, the residual from X."""
    if not layer.get("residual", True):
        return F
    return [[a + b for a, b in zip(x, f, strict=True)] for x, f in zip(X, F, strict=True)]


def reference_layers(model, tokens, weights=None, dps=DPS):
    """Tokens after every layer at ``dps`` digits (list of n x d lists of mpf)."""
    with mpmath.workdps(dps):
        n = len(tokens)
        w = [mpmath.mpf(1)] * n if weights is None else [mpf(x) for x in weights]
        X = [[mpf(v) for v in row] for row in tokens]
        out = [X]
        for layer in model["layers"]:
            if layer["type"] == "attention":
                bare = {**layer, "residual": False}
                X = _residual_block(layer, X, _attention(bare, _prenormed(layer, X), w))
            elif layer["type"] == "mlp":
                bare = {**layer, "residual": False}
                X = _residual_block(layer, X, _mlp(bare, _prenormed(layer, X)))
            else:
                X = _layernorm(layer, X)
            out.append(X)
        return out


def test_reference_softmax_of_equal_scores_is_the_weighted_mean():
    model = {"dimension": 2, "layers": [{"type": "attention", "residual": False,
             "heads": [{"Q": [[0, 0]], "K": [[1, 1]], "V": [[1, 0], [0, 1]]}]}]}  # fmt: skip
    out = reference_layers(model, [[1, 2], [3, 5]], ["1/4", "3/4"])[-1]
    for row in out:
        assert row[0] == pytest.approx(float(Fraction(1, 4) * 1 + Fraction(3, 4) * 3), abs=1e-40)
        assert row[1] == pytest.approx(float(Fraction(1, 4) * 2 + Fraction(3, 4) * 5), abs=1e-40)


def test_reference_layernorm_and_gelu_closed_forms():
    ln = reference_layers({"dimension": 2, "layers": [{"type": "layernorm"}]}, [[1, 3]])[-1]
    assert [float(v) for v in ln[0]] == pytest.approx([-1.0, 1.0], abs=1e-40)
    layer = {"type": "mlp", "W1": [[1]], "b1": [0], "W2": [[1]], "b2": [0]}
    mlp = {"dimension": 1, "layers": [{**layer, "activation": "gelu", "residual": False}]}
    out = reference_layers(mlp, [[1]])[-1][0][0]
    with mpmath.workdps(DPS):
        assert abs(out - (1 + mpmath.erf(1 / mpmath.sqrt(2))) / 2) < mpmath.mpf(10) ** -45


def test_gelu_changes_monotonicity_between_minus_076_and_minus_075():
    # proofs/stack.md#gelu: g'(t) = Phi(t) + t phi(t) < 0 at -0.76 and > 0 at -0.75 (arb)
    import flint

    from certified.arith.ball import precision

    with precision(128):
        for t, sign in ((flint.arb("-0.76"), -1), (flint.arb("-0.75"), 1)):
            g1 = (-t / flint.arb(2).sqrt()).erfc() / 2 + t * (-t * t / 2).exp() / (
                2 * flint.arb.pi()
            ).sqrt()
            assert (g1 < 0) if sign < 0 else (g1 > 0)


def test_reference_pre_ln_block_closed_form():
    # d = 2, eps = 0: LN(a, b) = (1, -1) when a > b; uniform attention (Q = 0) on the normed
    # tokens adds h G mean(LN x_j); the residual adds the un-normed token
    layer = {"type": "attention", "norm": {}, "step": "1/2",
             "heads": [{"Q": [[0, 0]], "K": [[1, 1]], "V": [[1, 0], [2, 1]]}]}  # fmt: skip
    out = reference_layers({"dimension": 2, "layers": [layer]}, [[3, 1], [0, 5]])[-1]
    # normed tokens (1, -1), (-1, 1): mean 0, so the layer is the identity
    assert [[float(v) for v in row] for row in out] == [[3, 1], [0, 5]]
    out = reference_layers({"dimension": 2, "layers": [layer]}, [[3, 1], [5, 0]])[-1]
    # both normed (1, -1): G (1, -1) = (1, 1), times h = 1/2
    assert [[float(v) for v in row] for row in out] == [[3.5, 1.5], [5.5, 0.5]]


def test_the_float64_baselines_erf_is_erf():
    # the benchmark's float64 pass evaluates GELU with a vectorised erf (not a guarantee: the
    # baseline must compute the same function as the certified engines, to double accuracy)
    import math

    import numpy as np

    from certified.transformers.stack_eval import erf64

    x = np.concatenate([np.linspace(-7, 7, 20001), [0.0, -0.0, 6.0, -6.0, 1e-300, 40.0, -40.0]])
    ref = np.array([math.erf(t) for t in x])
    assert np.max(np.abs(erf64(x) - ref)) <= 4e-15
    assert np.all(np.abs(erf64(x)) <= 1.0) and np.array_equal(np.sign(erf64(x)), np.sign(ref))
