"""Attention maps and their Jacobians in ball arithmetic (python-flint ``arb``).

The layer is :class:`certified.attention.model.Attention` (formula in its module docstring).
Every function takes the working precision ``prec`` explicitly and restores python-flint's
global precision. Inputs are exact numbers (floats mean their binary value) or ``arb`` balls;
with balls the results enclose the map for *every* point of the balls.

Jacobian (proofs/bounds.md#attention-jacobian). With ``m_i = Σ_j P_ij x_j``,
``Cov_i = Σ_j P_ij (x_j - m_i)(x_j - m_i)ᵀ`` and ``G = W V``, the ``d x d`` block of
``∂F_i/∂x_l`` of one head is

.. math::

    J_{il} = P_{il} G + P_{il} G (x_l - m_i) x_iᵀ A + δ_{il} G\\,Cov_i Aᵀ

(Castin, Ablin, Peyré, arXiv 2312.14820, for ``G = V``); heads add up and the residual
adds the identity.
"""

from __future__ import annotations

from typing import Any

import flint
import numpy as np

from certified.arith.ball import arb_matrix, check_precision, precision
from certified.arith.exact import to_fmpq_array
from certified.attention.model import Attention
from certified.errors import InputError, ShapeError

__all__ = [
    "attention_jacobian",
    "attention_jvp",
    "attention_map",
    "attention_measure_map",
    "softmax_rows",
]

DEFAULT_PREC = 128
"""Default working precision (bits)."""


def _points(X: Any, d: int, prec: int, field: str = "X") -> flint.arb_mat:
    M = arb_matrix(X, prec, field)
    if M.ncols() != d:
        raise ShapeError(f"{field}: points have {M.ncols()} coordinates, the layer has d = {d}")
    return M


def _weights(weights: Any, n: int, field: str = "weights") -> list[flint.fmpq] | None:
    if weights is None:
        return None
    w = to_fmpq_array(weights, field)
    if w.shape != (n,):
        raise ShapeError(f"{field}: has shape {w.shape}; give one weight per point ({n})")
    for j, wj in enumerate(w):
        if wj <= 0:
            raise InputError(f"{field}[{j}]: {wj} is not > 0; drop atoms of weight 0")
    return list(w)


def softmax_rows(
    S: flint.arb_mat, weights: list[flint.fmpq] | None, causal: bool
) -> list[list[flint.arb]]:
    """Rows ``P_ij = w_j e^{S_ij} / Σ_k w_k e^{S_ik}`` (``j <= i`` if causal; 0 beyond).

    Call at the working precision. Shifting by an exact constant per row changes nothing
    mathematically and keeps the exponentials moderate (proofs/bounds.md#attention-map).

    Guarantee: encloses the weighted softmax for every matrix in the ball ``S``.
    """
    m, n = S.nrows(), S.ncols()
    rows = []
    for i in range(m):
        cols = range(min(i + 1, n)) if causal else range(n)
        shift = max((S[i, j].mid() for j in cols), key=float)
        e = [(S[i, j] - shift).exp() for j in cols]
        if weights is not None:
            e = [ej * flint.arb(weights[j]) for j, ej in zip(cols, e, strict=True)]
        total = sum(e[1:], e[0])
        row = [ej / total for ej in e] + [flint.arb(0)] * (n - len(e))
        rows.append(row)
    return rows


def _head_terms(A, G, Xq, Y, weights, causal):
    S = Xq * (A * Y.transpose())
    P = softmax_rows(S, weights, causal)
    YG = Y * G.transpose()  # row l is (G y_l)ᵀ
    return P, YG, flint.arb_mat(P) * YG


def attention_map(
    layer: Attention, X: Any, *, weights: Any = None, prec: int = DEFAULT_PREC
) -> flint.arb_mat:
    """The layer applied to tokens ``X`` (rows), each attending to all tokens (or to the
    previous ones if causal).

    Parameters
    ----------
    layer : Attention
    X : (n, d) array of exact numbers, arb balls, or an arb_mat
    weights : (n,) exact positive numbers, optional
        Token weights ``w_j`` (a weighted discrete measure; uniform if omitted).
    prec : int
        Working precision in bits.

    Returns
    -------
    flint.arb_mat
        ``(n, d)``; row ``i`` encloses ``F(X)_i``.

    Raises
    ------
    ShapeError, InputError, NonFiniteError, PrecisionError

    Guarantee: encloses ``F(X)`` (for every ``X`` in the balls given).
    """
    prec = check_precision(prec)
    with precision(prec):
        Xa = _points(X, layer.d, prec)
        w = _weights(weights, Xa.nrows())
        out = Xa if layer.residual else flint.arb_mat(Xa.nrows(), Xa.ncols())
        for A, G in layer.arb_parameters(prec):
            out = out + _head_terms(A, G, Xa, Xa, w, layer.causal)[2]
        return out


def attention_measure_map(
    layer: Attention, points: Any, weights: Any, queries: Any, *, prec: int = DEFAULT_PREC
) -> flint.arb_mat:
    """``Γ_μ`` at query points for the measure ``μ = Σ_j w_j δ_{y_j}`` (theorems.md §5):
    ``[x] + Σ_h G_h Σ_j w_j e^{xᵀA_h y_j} y_j / Σ_j w_j e^{xᵀA_h y_j}``.

    Parameters
    ----------
    points : (n, d) atoms ``y_j``; weights : (n,) positive (None: uniform)
    queries : (m, d) query points ``x``

    Raises
    ------
    InputError
        The layer is causal (a mask has no meaning for a query against a measure).

    Guarantee: encloses ``Γ_μ(x)`` for every query (and every point of ball inputs).
    """
    prec = check_precision(prec)
    if layer.causal:
        raise InputError("layer.causal: a measure has no token order; use causal=False")
    with precision(prec):
        Y = _points(points, layer.d, prec, "points")
        Xq = _points(queries, layer.d, prec, "queries")
        w = _weights(weights, Y.nrows())
        out = Xq if layer.residual else flint.arb_mat(Xq.nrows(), Xq.ncols())
        for A, G in layer.arb_parameters(prec):
            out = out + _head_terms(A, G, Xq, Y, w, False)[2]
        return out


def attention_jacobian(
    layer: Attention, X: Any, *, weights: Any = None, prec: int = DEFAULT_PREC
) -> flint.arb_mat:
    """Jacobian of ``X -> F(X)`` (weights fixed), an ``(n d) x (n d)`` ball matrix.

    Row ``i*d + a`` is output coordinate ``a`` of token ``i``; column ``l*d + b`` is input
    coordinate ``b`` of token ``l`` (row-major flattening of ``X``). Analytic formula in the
    module docstring (proof: proofs/bounds.md#attention-jacobian).

    Returns
    -------
    flint.arb_mat

    Raises
    ------
    ShapeError, InputError, NonFiniteError, PrecisionError

    Guarantee: encloses ``DF(X)`` (for every ``X`` in the balls given).
    """
    prec = check_precision(prec)
    with precision(prec):
        Xa = _points(X, layer.d, prec)
        n, d = Xa.nrows(), Xa.ncols()
        w = _weights(weights, n)
        J = [[flint.arb(0)] * (n * d) for _ in range(n * d)]
        if layer.residual:
            for r in range(n * d):
                J[r][r] = flint.arb(1)
        for A, G in layer.arb_parameters(prec):
            P, XG, F = _head_terms(A, G, Xa, Xa, w, layer.causal)
            U = Xa * A  # row i is (Aᵀ x_i)ᵀ
            M = flint.arb_mat(P) * Xa  # row i is m_i
            At = A.transpose()
            for i in range(n):
                cols = range(i + 1) if layer.causal else range(n)
                Dc = flint.arb_mat([[Xa[j, b] - M[i, b] for b in range(d)] for j in cols])
                Dw = flint.arb_mat(
                    [[P[i][j] * Dc[t, b] for b in range(d)] for t, j in enumerate(cols)]
                )
                C = G * (Dc.transpose() * Dw) * At  # proof: proofs/bounds.md#attention-jacobian
                for m in cols:
                    p = P[i][m]
                    for a in range(d):
                        g = XG[m, a] - F[i, a]
                        row = J[i * d + a]
                        for b in range(d):
                            v = p * (G[a, b] + g * U[i, b])
                            if m == i:
                                v += C[a, b]
                            row[m * d + b] += v
        return flint.arb_mat(J)


def attention_jvp(
    layer: Attention, X: Any, U: Any, *, weights: Any = None, prec: int = DEFAULT_PREC
) -> flint.arb_mat:
    """Directional derivative ``DF(X)[U]`` (an ``(n, d)`` ball matrix) without forming DF.

    Forward mode (proofs/bounds.md#attention-jacobian): ``dS = U A Xᵀ + X A Uᵀ``,
    ``dP_ij = P_ij (dS_ij − Σ_k P_ik dS_ik)``, ``dF = Σ_h (dP_h (X G_hᵀ) + P_h (U G_hᵀ))``
    (+ U with a residual). O(n² d) ball operations, so it scales to thousands of tokens where
    the full Jacobian does not.

    Guarantee: encloses ``DF(X)[U]`` (for every X in the balls given; U exact or balls).
    """
    prec = check_precision(prec)
    with precision(prec):
        Xa = _points(X, layer.d, prec)
        Ua = _points(U, layer.d, prec, "U")
        n = Xa.nrows()
        if Ua.nrows() != n:
            raise ShapeError(f"U: has {Ua.nrows()} rows, X has {n}; give one direction per token")
        w = _weights(weights, n)
        out = Ua if layer.residual else flint.arb_mat(n, Xa.ncols())
        for A, G in layer.arb_parameters(prec):
            P = softmax_rows(Xa * (A * Xa.transpose()), w, layer.causal)
            dS = Ua * (A * Xa.transpose()) + Xa * (A * Ua.transpose())
            dP = []
            for i in range(n):
                cols = range(i + 1) if layer.causal else range(n)
                mean = sum((P[i][j] * dS[i, j] for j in cols), flint.arb(0))
                dP.append(
                    [P[i][j] * (dS[i, j] - mean) if j in cols else flint.arb(0) for j in range(n)]
                )
            GT = G.transpose()
            out = out + flint.arb_mat(dP) * (Xa * GT) + flint.arb_mat(P) * (Ua * GT)
        return out


def to_numpy_mid(M: flint.arb_mat) -> np.ndarray:
    """Midpoints of a ball matrix as float64 (heuristic use only). Guarantee: none."""
    return np.array([[float(M[i, j].mid()) for j in range(M.ncols())] for i in range(M.nrows())])
