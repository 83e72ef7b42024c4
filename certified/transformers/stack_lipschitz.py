"""Certified Lipschitz constants of a layer stack on a domain of token configurations
(proofs/stack.md §3).

Domain: ``D = {X : |X_ia - x_ia| <= r}`` around the given tokens (weights fixed), norm: the
Euclidean norm of the ``n d`` entries (Frobenius). The domain is pushed through the layers in
float64 interval arithmetic, giving boxes ``D_l`` that contain the image of ``D`` after ``l``
layers. On each box the layer's Jacobian (a slope matrix for ReLU) is enclosed by an interval
matrix ``J_l`` (proofs/stack.md#jacobians). By the mean-value theorem on convex boxes:

* per layer ``Lip(F_l; D_{l-1}) <= sup_{M ∈ J_l} ‖M‖₂``, and the product of these bounds;
* the composition ``F(X) - F(Y) = S_L ... S_1 (X - Y)`` with ``S_l ∈ J_l``, so
  ``Lip(F; D) <= sup ‖J_L ... J_1‖₂`` (an interval matrix product): the direct bound;
* a lower bound ``‖F(X) - F(Y)‖ / ‖X - Y‖`` for pairs in ``D`` (centre and points along the
  float Jacobian's top singular vector, corners, random directions), both images enclosed in
  ball arithmetic.

Spectral norms of interval matrices: ``‖M‖₂² = ρ(MᵀM) <= ‖(MᵀM)^k‖_∞^{1/k}``, with ``MᵀM``
enclosed by one interval product and ``k = 1, 2, 4, ...`` by repeated squaring
(proofs/stack.md#spectral-power), the smallest bound kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import flint
import numpy as np

from certified.arith import interval as iv
from certified.arith.interval import Interval
from certified.transformers.stack_eval import (
    CompiledLayer,
    compile_stack,
    enclose_stack,
    float_forward,
    layernorm_interval,
    norm_label,
    softmax_intervals,
    token_weights,
)
from certified.transformers.stack_model import AttentionLayer, MLPLayer, Stack

__all__ = ["StackLipschitz", "interval_spectral_upper", "layer_jacobian", "stack_lipschitz"]


def _up(x: flint.arb) -> float:
    return float(np.nextafter(float(x.upper()), np.inf))


def _dn(x: flint.arb) -> float:
    return float(np.nextafter(float(x.lower()), -np.inf))


def _mag(M: Interval) -> np.ndarray:
    return np.maximum(np.abs(M.lo), np.abs(M.hi))


def interval_spectral_upper(M: Interval, squarings: int = 6) -> float:
    """Upper bound on ``‖M'‖₂`` for every matrix ``M'`` in the interval matrix ``M``.

    Guarantee: upper bound (proofs/stack.md#spectral-power)."""
    mag = _mag(M)
    best = _up(flint.arb(float(iv.isum(iv.sqr(Interval(mag))).hi)).sqrt())  # Frobenius
    C = iv.matmul(M.T, M)
    s, k = 0, 1
    for _ in range(squarings + 1):
        norm = float(np.max(iv.isum(Interval(_mag(C)), axis=1).hi))
        if not np.isfinite(norm):
            break
        if norm == 0.0:
            return 0.0
        bound = (flint.arb(norm) * flint.arb(2) ** s).root(2 * k)
        best = min(best, _up(bound))
        e = int(np.floor(np.log2(norm)))
        if abs(e) > 900:  # a scaling by 2^-e would leave the float64 range: stop here
            break
        Cs = C * np.ldexp(1.0, -e)  # outward-rounded (exact unless entries turn subnormal)
        C = iv.matmul(Cs, Cs)
        s, k = 2 * (s + e), 2 * k
    return best


def _blocks_full(blocks: Interval, n: int, d: int) -> Interval:
    """Block-diagonal (n d x n d) interval matrix from (n, d, d) blocks."""
    lo = np.zeros((n, d, n, d))
    hi = np.zeros((n, d, n, d))
    for i in range(n):
        lo[i, :, i, :] = blocks.lo[i]
        hi[i, :, i, :] = blocks.hi[i]
    return Interval(lo.reshape(n * d, n * d), hi.reshape(n * d, n * d))


def _attention_jacobian(c: CompiledLayer, X: Interval, w, mask) -> Interval:
    """``J_il = P_il (G + G (x_l - m_i) (Aᵀ x_i)ᵀ) + δ_il G Cov_i Aᵀ`` summed over heads
    (proofs/stack.md#jacobians), without the residual's identity."""
    n, d = X.shape
    total = None
    for A_exact, G_exact in c.exact:
        A, G = Interval.from_exact(A_exact), Interval.from_exact(G_exact)
        U = iv.matmul(X, A)  # row i: (Aᵀ x_i)ᵀ
        S = iv.matmul(U, X.T)
        P = softmax_intervals(S, w, mask)
        m = iv.matmul(P, X)
        XG = iv.matmul(X, G.T)  # row l: (G x_l)ᵀ
        MG = iv.matmul(m, G.T)  # row i: (G m_i)ᵀ
        Pb = P[:, None, :, None]
        J = Pb * G[None, :, None, :]
        E = XG.T[None, :, :] - MG[:, :, None]  # E[i, a, l] = (G (x_l - m_i))_a
        J = J + (P[:, None, :] * E)[:, :, :, None] * U[:, None, None, :]
        Dx = X[None, :, :] - m[:, None, :]  # x_j - m_i
        Wd = P[:, :, None] * Dx
        Cov = iv.isum(Wd[:, :, :, None] * Dx[:, :, None, :], axis=1)  # (n, d, d)
        diag_lo, diag_hi = np.empty((n, d, d)), np.empty((n, d, d))
        for i in range(n):
            Di = iv.matmul(iv.matmul(G, Cov[i]), A.T)
            diag_lo[i], diag_hi[i] = Di.lo, Di.hi
        full = J.reshape(n * d, n * d) + _blocks_full(Interval(diag_lo, diag_hi), n, d)
        total = full if total is None else total + full
    return total


def _activation_slopes(name: str, Z: Interval) -> Interval:
    """Enclosure of σ' over each interval (for ReLU the slopes of its chords: [0, 1])."""
    if name == "relu":
        lo = np.where(Z.lo > 0, 1.0, 0.0)
        hi = np.where(Z.hi < 0, 0.0, 1.0)
        return Interval(lo, hi)
    if name == "tanh":
        t = iv.tanh(Z)
        return 1.0 - iv.sqr(t)
    from certified.arith.ball import precision

    out_lo, out_hi = np.empty(Z.size), np.empty(Z.size)
    with precision(64):
        s2 = flint.arb(2).sqrt()
        c = 1 / (2 * flint.arb.pi()).sqrt()

        def slope(t):
            return (-t / s2).erfc() / 2 + t * c * (-t * t / 2).exp()  # Φ(t) + t φ(t)

        # g' ranges over [g'(-√2), g'(√2)] on all of R (proofs/stack.md#gelu): a cap for
        # wide (or overflowing) arguments
        low, high = _dn(slope(-s2)), _up(slope(s2))
        for k, (a, b) in enumerate(zip(Z.lo.ravel(), Z.hi.ravel(), strict=True)):
            g = slope(flint.arb(float(a)).union(flint.arb(float(b))))
            out_lo[k], out_hi[k] = max(_dn(g), low), min(_up(g), high)
    return Interval(out_lo.reshape(Z.shape), out_hi.reshape(Z.shape))


def _mlp_jacobian(c: CompiledLayer, X: Interval) -> Interval:
    n, d = X.shape
    Z = iv.matmul(X, c.W1t) + c.b1
    slopes = _activation_slopes(c.layer.activation, Z)
    W1, W2 = c.W1t.T, c.W2t.T
    lo, hi = np.empty((n, d, d)), np.empty((n, d, d))
    for i in range(n):
        Ji = iv.matmul(W2 * slopes[i][None, :], W1)
        lo[i], hi[i] = Ji.lo, Ji.hi
    return _blocks_full(Interval(lo, hi), n, d)


def _layernorm_jacobian(c: CompiledLayer, X: Interval, label: str) -> Interval:
    from certified.transformers.stack_eval import LayerNormDenominatorError

    n, d = X.shape
    C = iv.matmul(X, c.center)
    var = iv.isum(iv.sqr(C), axis=1) * c.inv_d + c.eps
    if np.any(var.lo <= 0):
        i = int(np.flatnonzero(var.lo <= 0)[0])
        raise LayerNormDenominatorError(
            f"{label}: the variance of token {i} is not certified > 0 over "
            "the Lipschitz domain; give a smaller --radius or eps > 0"
        )
    sigma = iv.sqrt(var)[:, None]
    Y = C / sigma
    yy = Y[:, :, None] * Y[:, None, :] * c.inv_d
    blocks = (c.center[None, :, :] - yy) * (c.gamma[None, :, None] / sigma[:, :, None])
    return _blocks_full(blocks, n, d)


def layer_jacobian(stack: Stack, index: int, X: Interval, weights: Any = None) -> Interval:
    """Interval enclosure of layer ``index``'s Jacobian (slopes for ReLU) over the boxes ``X``
    (n x d), flattened row-major to ``(n d, n d)``. A pre-normed layer ``[x] + f(LN(x))`` gets
    ``[I] + J_f(Y) J_LN(X)`` with ``Y ⊇ LN(X)`` (proofs/stack.md#prenorm-lipschitz).

    Guarantee: encloses ``DF_l(X')`` for every ``X'`` in ``X`` and every slope matrix ``S``
    with ``F_l(X') - F_l(X'') = S (X' - X'')`` for two points of ``X`` built as in
    proofs/stack.md#jacobians."""
    c = compile_stack(stack)[index]
    n, d = X.shape
    label = norm_label(c.layer, index)
    if not isinstance(c.layer, (AttentionLayer, MLPLayer)):
        return _layernorm_jacobian(c, X, label)
    Y = X if c.norm is None else layernorm_interval(c.norm, X, label)
    if isinstance(c.layer, AttentionLayer):
        wq = token_weights(weights, n)
        w = None if wq is None else Interval.from_exact(wq.reshape(1, n))
        J = _attention_jacobian(c, Y, w, c.layer.mask_for(n))
    else:
        J = _mlp_jacobian(c, Y)
    if c.norm is not None:
        J = iv.matmul(J, _layernorm_jacobian(c.norm, X, label))
    return J + np.eye(n * d) if c.layer.residual else J


@dataclass(frozen=True)
class StackLipschitz:
    """Lipschitz bounds of the stack on the domain (Frobenius norm on n d entries).

    Guarantee: ``lower <= Lip(F; D) <= composition_upper`` and ``Lip(F; D) <= product_upper``.
    """

    radius: flint.fmpq
    per_layer: list = field(default_factory=list)
    product_upper: float = np.inf
    composition_upper: float = np.inf
    lower: float = 0.0


def _pair_lower(stack: Stack, X0: np.ndarray, Y: np.ndarray, weights, prec: int) -> float:
    from certified.arith.exact import to_fmpq
    from certified.transformers.stack_certificate import certify_stack

    bx = certify_stack(stack, X0, weights, prec=prec)[-1]
    by = certify_stack(stack, Y, weights, prec=prec)[-1]
    num = flint.fmpq(0)
    for rx, ry in zip(bx, by, strict=True):
        for (a_lo, a_hi), (b_lo, b_hi) in zip(rx, ry, strict=True):
            gap = max(flint.fmpq(0), a_lo - b_hi, b_lo - a_hi)
            num += gap * gap
    den = sum((to_fmpq(y) - to_fmpq(x)) ** 2 for x, y in zip(X0.ravel(), Y.ravel(), strict=True))
    if den == 0:
        return 0.0
    return _dn((flint.arb(num) / flint.arb(den)).sqrt())


def _in_domain(Y: np.ndarray, X: np.ndarray, r: flint.fmpq) -> bool:
    from certified.arith.exact import to_fmpq

    pairs = zip(Y.ravel(), X.ravel(), strict=True)
    return all(abs(to_fmpq(y) - x) <= r for y, x in pairs)


def stack_lipschitz(
    stack: Stack,
    tokens: Any,
    weights: Any = None,
    *,
    radius: Any = "1/1024",
    samples: int = 8,
    prec: int = 128,
    seed: int = 0,
) -> StackLipschitz:
    """Per-layer product, direct composition bound and certified lower bound (module
    docstring) on ``D = {X : |X - tokens|_∞ <= radius}``.

    Raises
    ------
    InputError
        radius <= 0; LayerNormDenominatorError when a layer norm's variance is not certified
        > 0 over the domain.

    Guarantee: ``lower <= Lip(F; D) <= min(product_upper, composition_upper)``.
    """
    from certified.arith.exact import to_fmpq, to_fmpq_array
    from certified.errors import InputError
    from certified.transformers.stack_eval import LayerNormDenominatorError

    r = to_fmpq(radius, "--radius")
    if not r > 0:
        raise InputError(f"--radius: {r} is not > 0; give the half-width of the domain")
    X = to_fmpq_array(tokens, "tokens")
    n, d = X.shape
    D0 = Interval.from_exact(X - r, X + r)
    try:
        boxes = enclose_stack(stack, D0, weights).layers
    except LayerNormDenominatorError as exc:
        msg = f"{exc} (over the Lipschitz domain: or a smaller --radius)"
        raise LayerNormDenominatorError(msg) from None
    per_layer, product = [], flint.arb(1)
    comp = None
    for index in range(len(stack.layers)):
        J = layer_jacobian(stack, index, boxes[index], weights)
        per_layer.append(interval_spectral_upper(J))
        product *= flint.arb(per_layer[-1])
        comp = J if comp is None else iv.matmul(J, comp)
    composition = interval_spectral_upper(comp)
    # lower bound: pairs of points of D (exact floats), images enclosed in ball arithmetic
    from certified.arith.exact import fmpq_array_to_float

    X0 = fmpq_array_to_float(X, "nearest")  # a point of D (nearest doubles of the tokens)
    lower = 0.0
    if _in_domain(X0, X, r):
        rf = float(r) * (1 - 2.0**-20)
        dirs = []
        _, _, vt = np.linalg.svd(0.5 * (comp.lo + comp.hi))
        dirs.append(vt[0].reshape(n, d))
        rng = np.random.default_rng(seed)
        dirs += [rng.standard_normal((n, d)) for _ in range(samples)]
        for v in dirs:
            for vv in (v / np.max(np.abs(v)), np.sign(v)):
                Y = X0 + rf * vv
                if _in_domain(Y, X, r):
                    lower = max(lower, _pair_lower(stack, X0, Y, weights, prec))
    return StackLipschitz(r, per_layer, _up(product), composition, lower)


def float_jacobian_norm(stack: Stack, X: np.ndarray, weights=None, h: float = 1e-6) -> float:
    """Central-difference estimate of ‖DF(X)‖₂ (heuristic). Guarantee: none."""
    n, d = X.shape
    cols = []
    for k in range(n * d):
        E = np.zeros(n * d)
        E[k] = h
        E = E.reshape(n, d)
        cols.append(((float_forward(stack, X + E, weights) - float_forward(stack, X - E, weights))
                     / (2 * h)).ravel())  # fmt: skip
    return float(np.linalg.norm(np.array(cols).T, 2))
