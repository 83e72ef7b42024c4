"""Layer stacks in vectorised float64 interval arithmetic, and the float64 forward pass.

:func:`enclose_stack` pushes the token measure through every layer of a
:class:`~certified.transformers.stack_model.Stack` as arrays of intervals
(:mod:`certified.arith.interval`: outward-rounded elementwise kernels, midpoint-radius matrix
products with an a priori rounding bound, exp by a kernel with a proved remainder); heads are
batched into single matrix products. GELU's ``Φ`` comes from arb's ``erfc``
(proofs/stack.md#gelu). :func:`float_forward` is the same stack in plain float64 (heuristic,
the benchmark's baseline and the Lipschitz search's proposal).

Every layer's result encloses the exact layer applied to every token configuration in the
input boxes (proofs/stack.md#layers); by induction the last boxes enclose the stack's output.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import flint
import numpy as np

from certified.arith import interval as iv
from certified.arith.interval import Interval
from certified.errors import DomainError, InputError, ShapeError
from certified.transformers.stack_model import AttentionLayer, MLPLayer, Stack

__all__ = [
    "LayerNormDenominatorError",
    "StackEnclosure",
    "enclose_stack",
    "float_forward",
    "erf64",
    "gelu_interval",
    "interval_layer",
    "layernorm_interval",
    "norm_label",
    "token_weights",
]


class LayerNormDenominatorError(DomainError):
    """A layer norm's ``var + eps`` is not certified > 0 for some token."""


def _iv(a: np.ndarray) -> Interval:
    return Interval.from_exact(a)


def _stacked(lo: np.ndarray, hi: np.ndarray) -> Interval:
    return Interval(lo, hi)


class CompiledLayer:
    """Float64 interval enclosures of a layer's exact parameters, computed once (``norm``: the
    compiled pre-normalisation of an attention or MLP layer, or None)."""

    def __init__(self, layer: Any) -> None:
        self.layer = layer
        norm = getattr(layer, "norm", None)
        self.norm = None if norm is None else CompiledLayer(norm)
        if isinstance(layer, AttentionLayer):
            blocks = layer.exact_blocks()
            self.H = len(blocks)
            # [A_1 | ... | A_H] (d x H d) and [G_1ᵀ | ... | G_Hᵀ] (d x H d)
            self.A = _iv(np.hstack([A for A, _ in blocks]))
            self.Gt = _iv(np.hstack([G.T for _, G in blocks]))
            self.exact = blocks
        elif isinstance(layer, MLPLayer):
            W1, b1, W2, b2 = layer.exact_blocks()
            self.W1t, self.b1 = _iv(W1.T), _iv(b1)
            self.W2t, self.b2 = _iv(W2.T), _iv(b2)
        else:
            d = layer.d
            center = np.array(
                [[flint.fmpq(int(a == b)) - flint.fmpq(1, d) for b in range(d)] for a in range(d)],
                dtype=object,
            )
            self.center = _iv(center)  # I - 11ᵀ/d: x ↦ x - mean(x) as one product
            self.inv_d = _iv(np.array([flint.fmpq(1, d)], dtype=object))
            self.gamma, self.beta = _iv(layer.gamma), _iv(layer.beta)
            self.eps = _iv(np.array([layer.eps], dtype=object))


def compile_stack(stack: Stack) -> list[CompiledLayer]:
    """Interval enclosures of every layer's parameters. Guarantee: encloses."""
    cache = getattr(stack, "_compiled", None)
    if cache is None:
        cache = [CompiledLayer(layer) for layer in stack.layers]
        object.__setattr__(stack, "_compiled", cache)
    return cache


def token_weights(weights: Any, n: int) -> np.ndarray | None:
    """Exact positive weights (any positive total: softmax is homogeneous in them), or None
    for uniform weights. Raises ShapeError / InputError. Guarantee: exact."""
    if weights is None:
        return None
    from certified.arith.exact import to_fmpq_array

    w = to_fmpq_array(weights, "weights")
    if w.shape != (n,):
        raise ShapeError(f"weights: has {w.shape[0] if w.ndim else 0} entries; give one per "
                         f"token ({n})")  # fmt: skip
    for j, wj in enumerate(w):
        if not wj > 0:
            raise InputError(f"weights[{j}]: {wj} is not > 0; drop tokens of weight 0")
    return w


# --- one layer ---------------------------------------------------------------------------------


def _blocks_to_rows(a: np.ndarray, n: int, H: int, d: int) -> np.ndarray:
    """(n, H d) -> (H n, d): head h's block of columns becomes rows h n .. h n + n - 1."""
    return a.reshape(n, H, d).transpose(1, 0, 2).reshape(H * n, d)


def _rows_to_blocks(a: np.ndarray, n: int, H: int) -> np.ndarray:
    """(H n, n) -> (n, H n): head h's rows become block h of the columns."""
    return a.reshape(H, n, n).transpose(1, 0, 2).reshape(n, H * n)


def softmax_intervals(S: Interval, w: Interval | None, mask: np.ndarray | None) -> Interval:
    """Rows of ``P_ij = w_j e^{S_ij} / Σ_k w_k e^{S_ik}`` over the visible ``j``; 0 elsewhere.

    ``P_ij = a_j / (a_j + B_j)`` with ``a_j = w_j e^{S_ij - c}`` and ``B_j = Σ_{k≠j} a_k`` is
    increasing in ``a_j`` and decreasing in ``B_j`` (proofs/stack.md#softmax)."""
    lo, hi = S.lo, S.hi
    visible = None if mask is None else np.broadcast_to(mask, lo.shape)
    top = hi if visible is None else np.where(visible, hi, -np.inf)
    c = top.max(axis=1, keepdims=True)  # any exact shift: it cancels
    if visible is not None:  # masked scores may be large: keep them out of exp (zeroed below)
        S = Interval(np.where(visible, lo, c), np.where(visible, hi, c))
    a = iv.exp(S - c)
    if w is not None:
        a = a * w
    a_lo, a_hi = a.lo, a.hi
    if visible is not None:
        a_lo, a_hi = np.where(visible, a_lo, 0.0), np.where(visible, a_hi, 0.0)
    total = iv.isum(Interval(a_lo, a_hi), axis=1)
    b_hi = (Interval(total.hi[:, None]) - Interval(a_hi)).hi
    b_lo = np.maximum((Interval(total.lo[:, None]) - Interval(a_lo)).lo, 0.0)
    # denominators a + B > 0 wherever a token is visible (its a_hi > 0; b > 0 or a > 0 below)
    den_lo = (Interval(a_lo) + Interval(b_hi)).hi
    den_hi = (Interval(a_hi) + Interval(b_lo)).lo
    safe_lo = np.where(den_lo > 0, den_lo, 1.0)
    safe_hi = np.where(den_hi > 0, den_hi, 1.0)
    p_lo = np.where(den_lo > 0, (Interval(a_lo) / Interval(safe_lo)).lo, 0.0)
    p_hi = np.where(den_hi > 0, np.minimum((Interval(a_hi) / Interval(safe_hi)).hi, 1.0), 1.0)
    if visible is not None:
        p_lo, p_hi = np.where(visible, p_lo, 0.0), np.where(visible, p_hi, 0.0)
    return Interval(np.maximum(p_lo, 0.0), p_hi)


def _attention(c: CompiledLayer, X: Interval, w: Interval | None, mask: Any) -> Interval:
    """``h f(X)`` (no residual)."""
    n, d = X.shape
    H = c.H
    T = iv.matmul(X, c.A)  # row i, block h: (A_hᵀ x_i)ᵀ... as x_iᵀ A_h
    Ts = _stacked(_blocks_to_rows(T.lo, n, H, d), _blocks_to_rows(T.hi, n, H, d))
    S = iv.matmul(Ts, X.T)  # S[h n + i, j] = x_iᵀ A_h x_j: key j at query i
    P = softmax_intervals(S, w, None if mask is None else np.tile(mask, (H, 1)))
    # [P_1 | ... | P_H] (n x H n) @ [X G_1ᵀ; ...; X G_Hᵀ] (H n x d) = Σ_h P_h X G_hᵀ
    XG = iv.matmul(X, c.Gt)
    XGs = _stacked(_blocks_to_rows(XG.lo, n, H, d), _blocks_to_rows(XG.hi, n, H, d))
    Pc = _stacked(_rows_to_blocks(P.lo, n, H), _rows_to_blocks(P.hi, n, H))
    return iv.matmul(Pc, XGs)


def gelu_interval(Z: Interval) -> Interval:
    """``gelu(t) = t Φ(t)`` over intervals: decreasing on ``(-∞, -0.76]``, increasing on
    ``[-0.75, ∞)`` (proofs/stack.md#gelu); elsewhere the product of ``t`` and ``Φ``'s
    interval. ``Φ(t) = erfc(-t/√2)/2`` by arb at 64 bits, endpoints rounded outward.

    Guarantee: encloses."""
    lo, hi = Z.lo.ravel(), Z.hi.ravel()
    out_lo = np.empty_like(lo)
    out_hi = np.empty_like(hi)
    from certified.arith.ball import precision

    with precision(64):
        s = flint.arb(2).sqrt()
        for k in range(lo.size):
            a, b = flint.arb(float(lo[k])), flint.arb(float(hi[k]))
            pa, pb = (-a / s).erfc() / 2, (-b / s).erfc() / 2
            ga, gb = a * pa, b * pb
            if lo[k] >= -0.75:
                r_lo, r_hi = ga.lower(), gb.upper()
            elif hi[k] <= -0.76:
                r_lo, r_hi = gb.lower(), ga.upper()
            else:  # t in [a, b], Φ(t) in [Φ(a), Φ(b)]
                ball = a.union(b) * pa.union(pb)
                r_lo, r_hi = ball.lower(), ball.upper()
            # float() rounds to nearest; one step outward gives a bound (bounds.md#pred-succ)
            out_lo[k] = np.nextafter(float(r_lo), -np.inf)
            out_hi[k] = np.nextafter(float(r_hi), np.inf)
    return Interval(out_lo.reshape(Z.shape), out_hi.reshape(Z.shape))


def _activation(name: str, Z: Interval) -> Interval:
    if name == "relu":
        return iv.maximum(Z, 0.0)
    if name == "tanh":
        return iv.tanh(Z)
    return gelu_interval(Z)


def _mlp(c: CompiledLayer, X: Interval) -> Interval:
    """``h f(X)`` (no residual)."""
    Z = iv.matmul(X, c.W1t) + c.b1
    return iv.matmul(_activation(c.layer.activation, Z), c.W2t) + c.b2


def norm_label(layer: Any, index: int) -> str:
    """``layers[i] (layernorm)`` or ``layers[i].norm (attention's pre-norm)`` for messages."""
    if isinstance(layer, (AttentionLayer, MLPLayer)):
        kind = "attention" if isinstance(layer, AttentionLayer) else "mlp"
        return f"layers[{index}].norm ({kind}'s pre-norm)"
    return f"layers[{index}] (layernorm)"


def layernorm_interval(c: CompiledLayer, X: Interval, label: str) -> Interval:
    """The layer norm of ``c`` over interval tokens; LayerNormDenominatorError naming ``label``
    and the token when a variance is not certified > 0. Guarantee: encloses."""
    C = iv.matmul(X, c.center)
    var = iv.isum(iv.sqr(C), axis=1) * c.inv_d + c.eps
    bad = np.flatnonzero(var.lo <= 0)
    if bad.size:
        raise LayerNormDenominatorError(
            f"{label}: the variance of token {bad[0]} is not certified > 0 "
            f"(enclosure [{var.lo[bad[0]]:.3g}, {var.hi[bad[0]]:.3g}]); give eps > 0 or tokens "
            "whose coordinates are not all equal"
        )
    sigma = iv.sqrt(var)
    Y = C / Interval(sigma.lo[:, None], sigma.hi[:, None])
    return Y * c.gamma + c.beta


# --- the stack ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class StackEnclosure:
    """Interval enclosures of the tokens after every layer.

    Attributes
    ----------
    layers : list of Interval, length L + 1
        ``layers[0]`` the input boxes, ``layers[l]`` the tokens after layer ``l`` (n x d).

    Guarantee: ``layers[l]`` encloses the image after ``l`` layers of every input in
    ``layers[0]``.
    """

    layers: list

    @property
    def output(self) -> Interval:
        return self.layers[-1]

    def max_width(self) -> float:
        """Upper bound on the widest output interval. Guarantee: upper bound."""
        return float(np.max(self.output.width_upper()))


def _input_boxes(X: Any, d: int) -> Interval:
    if isinstance(X, Interval):
        boxes = X
    elif isinstance(X, np.ndarray) and X.dtype == np.float64:
        boxes = Interval(X)  # doubles are exact
    else:
        boxes = Interval.from_exact(X)
    if boxes.ndim != 2 or boxes.shape[1] != d or boxes.shape[0] < 1:
        raise ShapeError(f"tokens: have shape {boxes.shape}; the model needs n x {d}")
    return boxes


def enclose_stack(stack: Stack, X: Any, weights: Any = None) -> StackEnclosure:
    """Certified images of every token through every layer.

    Parameters
    ----------
    stack : Stack
    X : (n, d) exact numbers (tokens) or an :class:`Interval` of boxes
    weights : (n,) exact positive numbers, optional (uniform when omitted)

    Raises
    ------
    ShapeError
        Tokens or a mask of the wrong shape, weights of the wrong length.
    LayerNormDenominatorError
        A layer norm's denominator is not certified > 0 (the layer and token are named).
    RangeOverflowError
        A value leaves the float64 range.

    Guarantee: ``result.layers[l]`` encloses the tokens after ``l`` layers, for every input
    token configuration in the boxes of ``X``.
    """
    boxes = _input_boxes(X, stack.d)
    n = boxes.shape[0]
    stack.check_tokens(n)
    w = token_weights(weights, n)
    w_iv = None if w is None else Interval.from_exact(w.reshape(1, n))
    out = [boxes]
    for index, c in enumerate(compile_stack(stack)):
        out.append(interval_layer(c, out[-1], index, w_iv, n))
    return StackEnclosure(out)


def interval_layer(c: CompiledLayer, X: Interval, index: int, w: Interval | None, n: int):
    """One layer on interval tokens: ``[X] + h f(Y)``, ``Y = LN(X)`` with a pre-norm, else
    ``Y = X`` (proofs/stack.md#prenorm); a layer norm ``LN(X)``. Guarantee: encloses."""
    layer = c.layer
    if c.norm is None and not isinstance(layer, (AttentionLayer, MLPLayer)):
        return layernorm_interval(c, X, norm_label(layer, index))
    Y = X if c.norm is None else layernorm_interval(c.norm, X, norm_label(layer, index))
    if isinstance(layer, AttentionLayer):
        out = _attention(c, Y, w, layer.mask_for(n))
    else:
        out = _mlp(c, Y)
    return X + out if layer.residual else out


# --- float64 (heuristic) -------------------------------------------------------------------------


class FloatStack:
    """The stack's parameters rounded to float64, heads batched (no guarantee)."""

    def __init__(self, stack: Stack) -> None:
        from certified.arith.exact import fmpq_array_to_float

        def f(a):
            return fmpq_array_to_float(a, "nearest")

        def norm(ln):
            return None if ln is None else (f(ln.gamma), f(ln.beta), float(ln.eps))

        self.layers = []
        for layer in stack.layers:
            if isinstance(layer, AttentionLayer):
                blocks = layer.exact_blocks()
                A = np.stack([f(a) for a, _ in blocks])
                Gt = np.stack([f(g).T for _, g in blocks])
                self.layers.append(("attention", norm(layer.norm), A, Gt, layer))
            elif isinstance(layer, MLPLayer):
                W1, b1, W2, b2 = (f(a) for a in layer.exact_blocks())
                self.layers.append(("mlp", norm(layer.norm), W1.T.copy(), b1, W2.T.copy(), b2,
                                    layer))  # fmt: skip
            else:
                self.layers.append(("layernorm", norm(layer)))

    @staticmethod
    def _norm(X: np.ndarray, params: tuple) -> np.ndarray:
        gamma, beta, eps = params
        C = X - X.mean(axis=1, keepdims=True)
        return C / np.sqrt((C * C).mean(axis=1, keepdims=True) + eps) * gamma + beta

    def forward(self, X: np.ndarray, w: np.ndarray | None = None, all_layers: bool = False):
        """Float64 forward pass; ``w`` float weights or None. Guarantee: none (heuristic)."""
        n = X.shape[0]
        logw = None if w is None else np.log(w)
        outs = [X]
        for entry in self.layers:
            if entry[0] == "layernorm":
                X = self._norm(X, entry[1])
                if all_layers:
                    outs.append(X)
                continue
            Y = X if entry[1] is None else self._norm(X, entry[1])
            if entry[0] == "attention":
                _, _, A, Gt, layer = entry
                S = (Y @ A) @ Y.T  # (H, n, n)
                if logw is not None:
                    S = S + logw
                mask = layer.mask_for(n)
                if mask is not None:
                    S = np.where(mask, S, -np.inf)
                S = np.exp(S - S.max(axis=2, keepdims=True))
                S /= S.sum(axis=2, keepdims=True)
                out = (S @ (Y @ Gt)).sum(axis=0)
            else:
                _, _, W1t, b1, W2t, b2, layer = entry
                Z = Y @ W1t + b1
                if layer.activation == "relu":
                    Z = np.maximum(Z, 0.0)
                elif layer.activation == "tanh":
                    Z = np.tanh(Z)
                else:
                    Z = Z * (0.5 + 0.5 * erf64(Z * _SQRT_HALF))
                out = Z @ W2t + b2
            X = X + out if layer.residual else out
            if all_layers:
                outs.append(X)
        return outs if all_layers else X


_SQRT_HALF = 0.7071067811865476
_ERF_WIDTH = 0.125  # erf on [0, 6] by 48 pieces of degree 9 in the local variable u ∈ [-1, 1]
_ERF_DEGREE = 9
_ERF_TABLE: np.ndarray | None = None


def _erf_table() -> np.ndarray:
    """Monomial coefficients (highest first) of the Chebyshev interpolants of erf on the
    pieces ``[k w, (k + 1) w]`` (heuristic; built once from math.erf)."""
    global _ERF_TABLE
    if _ERF_TABLE is None:
        from math import erf

        from numpy.polynomial import chebyshev

        f = np.vectorize(erf)
        rows = []
        for k in range(round(6 / _ERF_WIDTH)):
            a = k * _ERF_WIDTH

            def g(u, a=a):
                return f(a + (u + 1) * (_ERF_WIDTH / 2))

            poly = np.zeros(_ERF_DEGREE + 1)
            coef = chebyshev.cheb2poly(chebyshev.chebinterpolate(g, _ERF_DEGREE))
            poly[: coef.size] = coef
            rows.append(poly[::-1])
        _ERF_TABLE = np.array(rows)
    return _ERF_TABLE


def erf64(x: np.ndarray) -> np.ndarray:
    """Vectorised float64 erf (piecewise polynomials, |error| about 1e-16; ±1 beyond |x| = 6,
    where ``erfc(6) < 2.2e-17``). The benchmark's float64 baseline for GELU, in place of a
    per-element ``math.erf``. Guarantee: none (heuristic)."""
    table = _erf_table()
    a = np.abs(x)
    k = np.minimum((a * (1 / _ERF_WIDTH)).astype(np.intp), table.shape[0] - 1)
    u = (a - k * _ERF_WIDTH) * (2 / _ERF_WIDTH) - 1.0
    c = table[k]
    y = c[..., 0]
    for j in range(1, _ERF_DEGREE + 1):
        y = y * u + c[..., j]
    y = np.where(a >= 6.0, 1.0, np.minimum(y, 1.0))
    y = np.where(a < 2.0**-28, a * _TWO_OVER_SQRT_PI, y)  # erf(x) = 2x/√π (1 - x²/3 + ...)
    return np.copysign(y, x)


_TWO_OVER_SQRT_PI = 1.1283791670955126


def float_forward(stack: Stack, X: Any, weights: Any = None, all_layers: bool = False):
    """The stack in float64 (parameters rounded to nearest). Guarantee: none (heuristic)."""
    fs = getattr(stack, "_float", None)
    if fs is None:
        fs = FloatStack(stack)
        object.__setattr__(stack, "_float", fs)
    w = None if weights is None else np.asarray([float(q) for q in weights], dtype=float)
    return fs.forward(np.asarray(X, dtype=float), w, all_layers)
