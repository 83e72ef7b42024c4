"""Attention dynamics as expression fields (theorems.md §1.3-1.4): the transformer ODE of n
tokens, coupled, over the whole n x d state.

Token i of measure g (tokens x_1..x_n of each measure are the rows of the state, measure after
measure; a measure only attends to its own tokens) moves by

.. math::

    \\dot x_i = P_i \\Big( \\sum_h V_h A^h_i + W \\sigma(U x_i + b) \\Big), \\qquad
    A^h_i = \\frac{\\sum_{j} m_j e^{\\langle B_h x_i, x_j \\rangle} x_j}{Z_i},

with ``P_i = I - x_i x_iᵀ`` on the sphere (``geometry="sphere"``) or ``P_i = I`` (Euclidean),
``Z_i = Σ_j m_j e^{<B_h x_i, x_j>}`` (``normalisation="softmax"``) or ``Z_i = 1`` (the
unnormalised ``"mean"`` variant of Geshkovski et al.: ``(1/n) Σ_j e^{...} x_j`` for uniform
masses ``m_j = 1/n``), sums over ``j <= i`` with ``causal=True``. The score convention is
``<B x_i, x_j> = x_jᵀ B x_i`` (theorems.md §1.4, §9: the score of key y at query x is
``<Qy, Kx>``, so B = QᵀK; tests/attention/test_convention.py). Parameters: ``V{h}[r][c]``,
``B{h}[r][c]`` per head, and ``W[r][k]``, ``U[k][c]``, ``b[k]`` for a hidden width p >= 1.

Guarantee: exact (the graph is the formula above; masses enter as exact constants).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import flint

from certified.arith.exact import to_fmpq
from certified.errors import InputError
from certified.fields.expr import GraphBuilder, exp, sigmoid, tanh, total
from certified.fields.field import VectorField

__all__ = ["attention_field", "attention_parameter_names"]

_ACT = {"tanh": tanh, "sigmoid": sigmoid}


def attention_parameter_names(d: int, heads: int = 1, hidden: int = 0) -> list[str]:
    """The parameter names of :func:`attention_field`, in order. Guarantee: exact."""
    names = []
    for h in range(heads):
        names += [f"V{h}[{r}][{c}]" for r in range(d) for c in range(d)]
        names += [f"B{h}[{r}][{c}]" for r in range(d) for c in range(d)]
    names += [f"W[{r}][{k}]" for r in range(d) for k in range(hidden)]
    names += [f"U[{k}][{c}]" for k in range(hidden) for c in range(d)]
    names += [f"b[{k}]" for k in range(hidden)]
    return names


def attention_field(
    sizes: Sequence[int],
    d: int,
    *,
    heads: int = 1,
    hidden: int = 0,
    activation: str = "tanh",
    geometry: str = "sphere",
    normalisation: str = "softmax",
    causal: bool = False,
    masses: Sequence[Sequence[Any]] | None = None,
) -> VectorField:
    """The transformer ODE of the module docstring for measures of ``sizes[g]`` tokens in R^d
    (state dimension ``sum(sizes) * d``); ``masses[g]`` the exact token masses of measure g
    (None: uniform 1/n_g).

    Guarantee: exact.
    """
    if geometry not in ("sphere", "euclidean"):
        raise InputError(f"geometry: expected 'sphere' or 'euclidean', got {geometry!r}")
    if normalisation not in ("softmax", "mean"):
        raise InputError(f"normalisation: expected 'softmax' or 'mean', got {normalisation!r}")
    if hidden and activation not in _ACT:
        raise InputError(f"activation: expected one of {sorted(_ACT)}, got {activation!r}")
    if not sizes or any(not isinstance(n, int) or n < 1 for n in sizes) or d < 1:
        raise InputError(f"sizes: expected token counts >= 1 and d >= 1, got {sizes}, {d}")
    if heads < 0 or hidden < 0 or heads + hidden < 1:
        raise InputError(
            f"heads >= 0 and hidden >= 0 (not both 0) expected, got {heads}, {hidden}; heads = 0 "
            "is the sphere neural ODE (V = 0)"
        )
    names = attention_parameter_names(d, heads, hidden)
    b = GraphBuilder(sum(sizes) * d, names)
    P = b.param
    out: list[Any] = []
    start = 0
    for g, n in enumerate(sizes):
        m = _masses(masses[g] if masses is not None else None, n, g)
        X = [[b.x[(start + i) * d + c] for c in range(d)] for i in range(n)]
        logm = None if len(set(m)) == 1 else m  # uniform masses cancel in the softmax
        for i in range(n):
            keys = range(i + 1) if causal else range(n)
            terms: list[list[Any]] = [[] for _ in range(d)]
            for h in range(heads):
                Bx = [total([P(f"B{h}[{r}][{c}]") * X[i][c] for c in range(d)]) for r in range(d)]
                s = [total([Bx[r] * X[j][r] for r in range(d)]) for j in keys]
                if normalisation == "softmax":
                    # exp(s_ij - s_ii) / sum_k exp(s_ik - s_ii): the self score s_ii shifts the
                    # exponents (exact; every node has a float64 form, so the checker's replay
                    # can run in float64 intervals: proofs/transformers.md §1)
                    e = [
                        b.const(m[j]) * exp(sj - s[keys.index(i)])
                        if logm is not None
                        else exp(sj - s[keys.index(i)])
                        for sj, j in zip(s, keys, strict=True)
                    ]
                    z = total(e)
                    w = [ej / z for ej in e]
                else:
                    w = [b.const(m[j]) * exp(sj) for sj, j in zip(s, keys, strict=True)]
                A = [total([wj * X[j][c] for wj, j in zip(w, keys, strict=True)]) for c in range(d)]
                for r in range(d):
                    terms[r] += [P(f"V{h}[{r}][{c}]") * A[c] for c in range(d)]
            if hidden:
                z = [
                    _ACT[activation](
                        total([P(f"U[{k}][{c}]") * X[i][c] for c in range(d)] + [P(f"b[{k}]")])
                    )
                    for k in range(hidden)
                ]
                for r in range(d):
                    terms[r] += [P(f"W[{r}][{k}]") * z[k] for k in range(hidden)]
            v = [total(t) for t in terms]
            if geometry == "sphere":
                xv = total([X[i][r] * v[r] for r in range(d)])
                out += [v[r] - X[i][r] * xv for r in range(d)]
            else:
                out += v
        start += n
    name = f"attention-{geometry}-{normalisation}" + ("-causal" if causal else "")
    return VectorField(b.graph(out), name=name)


def _masses(m: Sequence[Any] | None, n: int, g: int) -> list[flint.fmpq]:
    if m is None:
        return [flint.fmpq(1, n)] * n
    q = [to_fmpq(v, f"measures[{g}].weights[{j}]") for j, v in enumerate(m)]
    if len(q) != n or any(not v > 0 for v in q):
        raise InputError(f"measures[{g}].weights: expected {n} positive masses, got {len(q)}")
    return q
