"""Layer stacks in ball arithmetic (python-flint ``arb_mat``) at any precision.

Interval arithmetic on a dense attention layer over-estimates the propagation of widths by the
entrywise absolute Jacobian (``|J|``, about 60 per layer for ordinary random weights, against
an O(1) true sensitivity): in float64 a 12-layer stack loses every digit. Ball arithmetic at
``p`` bits starts from widths ``2^-p``, so the same over-estimation leaves ``p - 53`` more bits
(proofs/stack.md#precision). Matrix products are ``arb_mat`` products (C); exponentials,
activations and the layer norm's square root are per entry.

Guarantee of :func:`enclose_stack_arb`: every returned ball matrix encloses the tokens after
that many layers, for every input in the input balls.
"""

from __future__ import annotations

from typing import Any

import flint
import numpy as np

from certified.arith.ball import arb_matrix, check_precision, precision
from certified.transformers.stack_model import AttentionLayer, MLPLayer, Stack

__all__ = ["arb_layer", "enclose_stack_arb"]


def _mat(a: np.ndarray) -> flint.arb_mat:
    return flint.arb_mat([[flint.arb(x) for x in row] for row in a])


def _row(v: np.ndarray, n: int) -> flint.arb_mat:
    r = [flint.arb(x) for x in v]
    return flint.arb_mat([r] * n)


def _exponentials(row: list, visible: Any) -> list:
    # exp(s_ij) without a shift: arb's exponents are unbounded, and a shift would cancel
    if visible is None:
        return [x.exp() for x in row]
    return [x.exp() if v else _ZERO for x, v in zip(row, visible, strict=True)]


_ZERO = flint.arb(0)


def _attention(layer: AttentionLayer, X: flint.arb_mat, w, mask) -> flint.arb_mat:
    """``Σ_h (Σ_j w_j e_ij G x_j) / (Σ_j w_j e_ij)`` (no residual), ``e_ij = exp(x_iᵀ A x_j)``
    on the visible ``j`` (0 elsewhere): two ball-matrix products and a division per row and
    coordinate (proofs/stack.md#softmax)."""
    n, d = X.nrows(), X.ncols()
    out = flint.arb_mat(n, d)
    Xt = X.transpose()
    Wd, wcol = _weights(w, n)
    for A, Gt in _blocks(layer):
        S = (X * A * Xt).tolist()  # S[i][j] = x_iᵀ A x_j: key j at query i
        E = flint.arb_mat([_exponentials(S[i], None if mask is None else mask[i])
                           for i in range(n)])  # fmt: skip
        num = (E * (Wd * (X * Gt))).tolist()
        den = (E * wcol).tolist()
        out = out + flint.arb_mat([[v / den[i][0] for v in num[i]] for i in range(n)])
    return out


def _weights(w: list | None, n: int) -> tuple[flint.arb_mat, flint.arb_mat]:
    """``diag(w)`` and the column ``w`` (identity and ones without weights)."""
    ws = [flint.arb(1)] * n if w is None else w
    diag = flint.arb_mat(n, n)
    for j in range(n):
        diag[j, j] = ws[j]
    return diag, flint.arb_mat([[x] for x in ws])


def _blocks(layer: AttentionLayer) -> list:
    """Per head ``(A, Gᵀ)`` as ball matrices at the current precision (cached per precision:
    the conversions cost as much as a layer)."""
    prec = flint.ctx.prec
    cache = layer.__dict__.setdefault("_arb_blocks", {})
    if prec not in cache:
        cache[prec] = [(_mat(A), _mat(G).transpose()) for A, G in layer.exact_blocks()]
    return cache[prec]


def _relu(z: flint.arb) -> flint.arb:
    if z >= 0:
        return z
    if z <= 0:
        return flint.arb(0)
    return z.union(0)  # contains [0, max z]


def _gelu(z: flint.arb) -> flint.arb:
    return z * (-z / flint.arb(2).sqrt()).erfc() / 2  # t Φ(t), Φ(t) = erfc(-t/√2)/2


_ACT = {"relu": _relu, "tanh": lambda z: z.tanh(), "gelu": _gelu}


def _mlp(layer: MLPLayer, X: flint.arb_mat) -> flint.arb_mat:
    """``h f(X)`` (no residual)."""
    n = X.nrows()
    W1, b1, W2, b2 = layer.exact_blocks()
    Z = X * _mat(W1).transpose() + _row(b1, n)
    act = _ACT[layer.activation]
    Y = flint.arb_mat([[act(z) for z in row] for row in Z.tolist()])
    return Y * _mat(W2).transpose() + _row(b2, n)


def _layernorm(layer, X: flint.arb_mat, label: str) -> flint.arb_mat:
    from certified.transformers.stack_eval import LayerNormDenominatorError

    n, d = X.nrows(), X.ncols()
    gamma = [flint.arb(g) for g in layer.gamma]
    beta = [flint.arb(b) for b in layer.beta]
    eps = flint.arb(layer.eps)
    rows = []
    for i in range(n):
        x = [X[i, a] for a in range(d)]
        mean = sum(x, flint.arb(0)) / d
        c = [xa - mean for xa in x]
        var = sum((ca * ca for ca in c), flint.arb(0)) / d + eps
        if not var > 0:
            raise LayerNormDenominatorError(
                f"{label}: the variance of token {i} is not certified > 0 "
                f"(ball {var.str(5, radius=True)}); give eps > 0 or tokens whose coordinates "
                "are not all equal"
            )
        r = var.rsqrt()
        rows.append([ca * r * g + b for ca, g, b in zip(c, gamma, beta, strict=True)])
    return flint.arb_mat(rows)


def arb_layer(layer: Any, X: flint.arb_mat, index: int, w: list | None, n: int) -> flint.arb_mat:
    """One layer on ball tokens (call inside ``precision(prec)``): ``[X] + h f(Y)`` with
    ``Y = LN(X)`` for a pre-normed layer, else ``Y = X`` (proofs/stack.md#prenorm); a layer
    norm ``LN(X)``. Guarantee: encloses."""
    from certified.transformers.stack_eval import norm_label

    if not isinstance(layer, (AttentionLayer, MLPLayer)):
        return _layernorm(layer, X, norm_label(layer, index))
    Y = X if layer.norm is None else _layernorm(layer.norm, X, norm_label(layer, index))
    if isinstance(layer, AttentionLayer):
        out = _attention(layer, Y, w, layer.mask_for(n))
    else:
        out = _mlp(layer, Y)
    return X + out if layer.residual else out


def enclose_stack_arb(stack: Stack, X: Any, weights: Any = None, *, prec: int) -> list:
    """Ball enclosures of the tokens after every layer at ``prec`` bits.

    Parameters
    ----------
    X : (n, d) exact numbers or an arb_mat of balls; weights : (n,) exact > 0 or None

    Returns
    -------
    list of flint.arb_mat, length L + 1 (index 0: the input balls)

    Raises
    ------
    ShapeError, InputError, LayerNormDenominatorError, PrecisionError

    Guarantee: entry ``l`` encloses the tokens after ``l`` layers, for every input in the
    balls of ``X``.
    """
    from certified.errors import ShapeError
    from certified.transformers.stack_eval import token_weights

    prec = check_precision(prec)
    with precision(prec):
        M = X if isinstance(X, flint.arb_mat) else arb_matrix(X, prec, "tokens")
        if M.ncols() != stack.d:
            raise ShapeError(f"tokens: have {M.ncols()} coordinates; the model has d = {stack.d}")
        n = M.nrows()
        stack.check_tokens(n)
        wq = token_weights(weights, n)
        w = None if wq is None else [flint.arb(q) for q in wq]
        out = [M]
        for index, layer in enumerate(stack.layers):
            out.append(arb_layer(layer, out[-1], index, w, n))
        return out
