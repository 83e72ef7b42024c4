"""Attention layers as exact parameter sets (theorems.md section 1.4 and section 5).

A head ``h`` has query, key and value matrices ``Q_h, K_h`` (``k x d``), ``V_h``
(``d_v x d``) and an optional output projection ``W_h`` (``d x d_v``; ``d_v = d`` without it).
Its bilinear form is ``A_h = K_hᵀ Q_h / sqrt(k)`` (Castin, Ablin, Peyré, arXiv 2312.14820;
``scaled=False`` drops the ``1/sqrt(k)``), so that the score of a query ``x`` against a key
``y`` is ``xᵀ A_h y = ⟨K_h x, Q_h y⟩ / sqrt(k)``: as in theorems.md, ``K`` acts on the query
token and ``Q`` on the attended one (the reverse of the usual machine-learning naming).
A layer maps tokens ``x_1..x_n`` (weights ``w_j > 0``, uniform for a point cloud) to

.. math::

    F(X)_i = [x_i] + \\sum_h W_h \\sum_{j \\in S_i} P^h_{ij} V_h x_j, \\qquad
    P^h_{ij} = \\frac{w_j e^{x_iᵀ A_h x_j}}{\\sum_{k \\in S_i} w_k e^{x_iᵀ A_h x_k}},

with ``S_i = {1..n}`` (unmasked) or ``{1..i}`` (causal), ``[x_i]`` present with ``residual``.
Only the product ``G_h = W_h V_h`` enters the map, which is how the ball arithmetic uses it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import flint
import numpy as np

from certified.arith.exact import to_fmpq_array
from certified.errors import InputError, ShapeError

__all__ = ["Attention", "Head"]


def _exact(x: Any, field: str) -> np.ndarray:
    a = to_fmpq_array(x, field)
    if a.ndim != 2 or 0 in a.shape:
        raise ShapeError(f"{field}: has shape {a.shape}; give a non-empty 2-D array (a matrix)")
    return a


@dataclass(frozen=True, eq=False)
class Head:
    """One attention head with exact (rational) parameters.

    Parameters
    ----------
    Q, K : array_like, shape (k, d)
    V : array_like, shape (d_v, d)
    W : array_like, shape (d, d_v), optional
        Output projection; without it ``d_v`` must equal ``d``.

    Entries are read exactly (floats are their binary value, strings ``"p/q"`` or decimals).

    Raises
    ------
    ShapeError, NonFiniteError, NumberFormatError

    Guarantee: exact (the stored matrices are exactly the given numbers).
    """

    Q: Any
    K: Any
    V: Any
    W: Any = None

    def __post_init__(self) -> None:
        Q, K, V = _exact(self.Q, "Q"), _exact(self.K, "K"), _exact(self.V, "V")
        if K.shape != Q.shape:
            raise ShapeError(f"K: has shape {K.shape}, Q has {Q.shape}; give both as k x d")
        d = Q.shape[1]
        if V.shape[1] != d:
            raise ShapeError(
                f"V: has {V.shape[1]} columns, Q and K have d = {d}; give V as d_v x d"
            )
        W = None
        if self.W is not None:
            W = _exact(self.W, "W")
            if W.shape != (d, V.shape[0]):
                raise ShapeError(
                    f"W: has shape {W.shape}; the output projection must be d x d_v = "
                    f"{d} x {V.shape[0]}"
                )
        elif V.shape[0] != d:
            raise ShapeError(
                f"V: has shape {V.shape}; without an output projection W it must be d x d = "
                f"{d} x {d}"
            )
        for name, value in (("Q", Q), ("K", K), ("V", V), ("W", W)):
            object.__setattr__(self, name, value)

    @property
    def d(self) -> int:
        return int(self.Q.shape[1])

    @property
    def k(self) -> int:
        return int(self.Q.shape[0])

    def bilinear_unscaled(self) -> np.ndarray:
        """``Kᵀ Q`` exactly (a ``d x d`` object array of fmpq). Guarantee: exact."""
        return (self.K.T @ self.Q).astype(object)

    def value_output(self) -> np.ndarray:
        """``G = W V`` (or ``V`` without projection) exactly, ``d x d``. Guarantee: exact."""
        return self.V if self.W is None else (self.W @ self.V).astype(object)


@dataclass(frozen=True, eq=False)
class Attention:
    """A (multi-head) attention layer: heads, residual connection, causal mask, scaling.

    Parameters
    ----------
    heads : sequence of Head
        At least one; all with the same ``d``.
    residual : bool
        Add ``x_i`` to the output (``x + Attn(x)``).
    causal : bool
        Token ``i`` attends to tokens ``1..i`` only (masked attention).
    scaled : bool
        ``A = KᵀQ/sqrt(k)`` (default) or ``A = KᵀQ``.

    Raises
    ------
    InputError, ShapeError

    Guarantee: exact.
    """

    heads: tuple[Head, ...]
    residual: bool = False
    causal: bool = False
    scaled: bool = True

    def __post_init__(self) -> None:
        heads = tuple(self.heads)
        if not heads or not all(isinstance(h, Head) for h in heads):
            raise InputError("heads: give at least one Head")
        if len({h.d for h in heads}) != 1:
            raise ShapeError(f"heads: dimensions {[h.d for h in heads]} differ; use one d")
        for name in ("residual", "causal", "scaled"):
            if not isinstance(getattr(self, name), bool):
                raise InputError(f"{name}: expected True or False")
        object.__setattr__(self, "heads", heads)

    @classmethod
    def single(cls, Q: Any, K: Any, V: Any, W: Any = None, **options: Any) -> Attention:
        """A one-head layer (the setting of theorems.md section 5 when W is None and the
        options are left at their defaults). Guarantee: exact."""
        return cls((Head(Q, K, V, W),), **options)

    @property
    def d(self) -> int:
        return self.heads[0].d

    def arb_parameters(self, prec: int) -> list[tuple[flint.arb_mat, flint.arb_mat]]:
        """Per head, balls ``(A_h, G_h)`` at ``prec`` bits (call inside ``precision(prec)``).

        Guarantee: each ball matrix contains the exact ``A_h`` and ``G_h``.
        """
        out = []
        for h in self.heads:
            A = flint.arb_mat(h.bilinear_unscaled().tolist())
            if self.scaled:
                A = A * (1 / flint.arb(h.k).sqrt())
            out.append((A, flint.arb_mat(h.value_output().tolist())))
        return out
