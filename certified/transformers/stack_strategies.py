"""Hypothesis strategies of layer-stack models and token sets (public: for property tests of
:mod:`certified.transformers` in anyone's suite). Hypothesis is imported here, so this module
is not imported by ``certified`` itself.

Numbers are dyadic floats of moderate size (exact binary values), so that references at any
precision see exactly the model the package certifies.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

__all__ = ["stack_models", "token_sets"]


def _number(scale: float) -> st.SearchStrategy[float]:
    # multiples of 2^-8 in [-scale, scale]: exact doubles, short strings
    k = int(scale * 256)
    return st.integers(-k, k).map(lambda i: i / 256)


def _matrix(rows: int, cols: int, scale: float) -> st.SearchStrategy[list]:
    return st.lists(
        st.lists(_number(scale), min_size=cols, max_size=cols), min_size=rows, max_size=rows
    )


@st.composite
def _attention(draw: Any, d: int, n: int, scale: float) -> dict:
    heads = []
    for _ in range(draw(st.integers(1, 2))):
        k = draw(st.integers(1, d))
        head = {"Q": draw(_matrix(k, d, scale)), "K": draw(_matrix(k, d, scale))}
        if draw(st.booleans()):
            dv = draw(st.integers(1, d))
            head["V"] = draw(_matrix(dv, d, scale))
            head["W"] = draw(_matrix(d, dv, scale))
        else:
            head["V"] = draw(_matrix(d, d, scale))
        heads.append(head)
    layer: dict = {"type": "attention", "heads": heads}
    mask = draw(st.sampled_from(["none", "causal", "explicit"]))
    if mask == "causal":
        layer["mask"] = "causal"
    elif mask == "explicit":
        rows = []
        for i in range(n):
            row = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
            row[i] = 1  # every token sees itself
            rows.append(row)
        layer["mask"] = rows
    if draw(st.booleans()):
        layer["step"] = draw(st.sampled_from(["1/2", "1/4", 1]))
    if draw(st.booleans()):
        layer["residual"] = False
    if draw(st.booleans()):
        layer["scale"] = "1/2"
    if draw(st.booleans()):
        layer["norm"] = draw(_norm(d, scale))
    return layer


@st.composite
def _norm(draw: Any, d: int, scale: float) -> dict:
    """A pre-normalisation ``{"gamma"?, "beta"?, "eps"}`` (eps > 0)."""
    norm: dict = {"eps": draw(st.sampled_from(["1/1000", "1/10", 1]))}
    if draw(st.booleans()):
        norm["gamma"] = draw(st.lists(_number(scale), min_size=d, max_size=d))
        norm["beta"] = draw(st.lists(_number(scale), min_size=d, max_size=d))
    return norm


@st.composite
def _mlp(draw: Any, d: int, scale: float) -> dict:
    p = draw(st.integers(1, 4))
    layer = {
        "type": "mlp",
        "W1": draw(_matrix(p, d, scale)),
        "b1": draw(st.lists(_number(scale), min_size=p, max_size=p)),
        "W2": draw(_matrix(d, p, scale)),
        "b2": draw(st.lists(_number(scale), min_size=d, max_size=d)),
        "activation": draw(st.sampled_from(["relu", "tanh", "gelu"])),
    }
    if draw(st.booleans()):
        layer["step"] = "1/2"
    if draw(st.booleans()):
        layer["residual"] = False
    if draw(st.booleans()):
        layer["norm"] = draw(_norm(d, scale))
    return layer


@st.composite
def _layernorm(draw: Any, d: int, scale: float) -> dict:
    return {"type": "layernorm", **draw(_norm(d, scale))}


@st.composite
def stack_models(draw: Any, d: int, n: int, max_layers: int = 4, scale: float = 1.0) -> dict:
    """Model files (decoded JSON) on R^d for n tokens: 1..max_layers layers of every kind
    (attention with 1-2 heads, optional output projection, causal or explicit masks, steps,
    scales; MLPs with relu / tanh / gelu; layer norms with eps > 0; attention and MLP layers
    pre-normalised, ``x + h f(LN(x))``, about half of the time). Guarantee: none."""
    layers = []
    for _ in range(draw(st.integers(1, max_layers))):
        kind = draw(st.sampled_from(["attention", "mlp", "layernorm"]))
        if kind == "attention":
            layers.append(draw(_attention(d, n, scale)))
        elif kind == "mlp":
            layers.append(draw(_mlp(d, scale)))
        else:
            layers.append(draw(_layernorm(d, scale)))
    return {"dimension": d, "layers": layers}


def token_sets(n: int, d: int, scale: float = 2.0) -> st.SearchStrategy[list]:
    """``n x d`` token coordinates (dyadic floats in [-scale, scale]). Guarantee: none."""
    return _matrix(n, d, scale)
