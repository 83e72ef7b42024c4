"""Layer stacks as in-context maps (theorems.md §1.4, §9; proofs/stack.md §1): the model.

A stack maps a discrete measure ``μ = Σ_j w_j δ_{x_j}`` on R^d (tokens ``x_1..x_n``, weights
``w_j > 0``) layer by layer; each layer ``Γ`` is an in-context map and the stack is their
composition ``(Γ_2 ◇ Γ_1)[μ] = Γ_2[ξ] ∘ Γ_1[μ]`` with ``ξ = Γ_1[μ]_# μ``: the tokens move, the
weights stay. Layer kinds (``out = [x] + h f(x)``, ``[x]`` with ``residual``, step ``h``):

* ``attention``: ``f(x_i) = Σ_heads W V Σ_{j ∈ S_i} P_ij x_j``,
  ``P_ij = w_j e^{s ⟨Q x_j, K x_i⟩} / Σ_{k ∈ S_i} w_k e^{s ⟨Q x_k, K x_i⟩}`` — **convention**:
  the score of key ``y`` at query ``x`` is ``⟨Qy, Kx⟩`` (theorems.md §9), so the bilinear form
  is ``A = s KᵀQ`` with ``score = x_iᵀ A x_j``; ``s`` is the exact ``scale`` (default 1);
  ``S_i`` is every token, ``{1..i}`` (``"causal"``) or the row of an ``n x n`` 0/1 ``mask``;
* ``mlp``: ``f(x) = W2 σ(W1 x + b1) + b2``, σ ∈ {relu, tanh, gelu}, ``gelu(t) = t Φ(t)``;
* ``layernorm``: ``y = γ ⊙ (x − mean x) / sqrt(var x + ε) + β`` (``var`` with 1/d; ε ≥ 0).

Pre-normalisation: an attention or MLP layer with ``norm`` (a :class:`LayerNorm`) is
``out = [x] + h f(LN(x))``: the sublayer sees the layer-normed tokens (for attention queries,
keys and values all from ``LN(x_j)``, the in-context measure of the normed tokens) and the
residual adds the un-normed ``x`` (the GPT-2 block ``x + attn(LN(x))``, ``x + MLP(LN(x))``).

Parameters are exact rationals (floats are their binary values, strings ``"p/q"`` or decimals).
The step ``h`` and the scale ``s`` are folded into the exact parameters (``G = h W V``,
``A = s KᵀQ``, ``h W2``, ``h b2``) once, in :meth:`AttentionLayer.exact_blocks` and
:meth:`MLPLayer.exact_blocks`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import flint
import numpy as np

from certified.arith.exact import to_fmpq, to_fmpq_array
from certified.attention.model import Head
from certified.errors import InputError, ShapeError

__all__ = [
    "ACTIVATIONS",
    "AttentionLayer",
    "LayerNorm",
    "MLPLayer",
    "Stack",
    "parse_stack",
    "read_stack",
    "stack_to_json",
]

ACTIVATIONS = ("relu", "tanh", "gelu")
_ONE = flint.fmpq(1)
_ZERO = flint.fmpq(0)


def _matrix(x: Any, field: str, shape: tuple[int | None, int | None]) -> np.ndarray:
    a = to_fmpq_array(x, field)
    if a.ndim != 2 or 0 in a.shape:
        raise ShapeError(f"{field}: has shape {a.shape}; give a non-empty matrix (list of rows)")
    for axis, want in enumerate(shape):
        if want is not None and a.shape[axis] != want:
            what = "rows" if axis == 0 else "columns"
            raise ShapeError(f"{field}: has {a.shape[axis]} {what}, expected {want}")
    return a


def _vector(x: Any, field: str, n: int) -> np.ndarray:
    a = to_fmpq_array(x, field)
    if a.shape != (n,):
        raise ShapeError(f"{field}: has shape {a.shape}; give a list of {n} numbers")
    return a


def _flag(x: Any, field: str) -> bool:
    if isinstance(x, int) and not isinstance(x, bool) and x in (0, 1):
        return bool(x)  # certificates write flags as 0 / 1 (no JSON booleans there)
    if not isinstance(x, bool):
        raise InputError(f"{field}: expected true or false (or 1 or 0), got {x!r}")
    return x


def _positive(x: Any, field: str) -> flint.fmpq:
    q = to_fmpq(x, field)
    if not q > 0:
        raise InputError(f"{field}: {q} is not > 0; give a positive number")
    return q


@dataclass(frozen=True, eq=False)
class AttentionLayer:
    """Multi-head softmax attention (formula in the module docstring).

    Parameters
    ----------
    heads : sequence of :class:`certified.attention.Head` (``Q, K``: k x d, ``V``: d_v x d,
        ``W``: d x d_v optional)
    mask : None, ``"causal"`` or an ``n x n`` array of 0/1 (row i: the tokens query i sees)
    scale : exact number > 0 (``s`` in the score ``s ⟨Q x_j, K x_i⟩``)
    residual : bool; step : exact number > 0
    norm : None or a :class:`LayerNorm` of dimension d applied to the tokens before the
        attention (pre-normalisation; the residual adds the un-normed tokens)

    Guarantee: exact (parameters stored exactly).
    """

    heads: tuple
    mask: Any = None
    scale: Any = 1
    residual: bool = True
    step: Any = 1
    norm: Any = None

    def __post_init__(self) -> None:
        heads = tuple(self.heads)
        if not heads or not all(isinstance(h, Head) for h in heads):
            raise InputError("heads: give at least one head {Q, K, V, W?}")
        if len({h.d for h in heads}) != 1:
            raise ShapeError(f"heads: dimensions {[h.d for h in heads]} differ; use one d")
        mask = self.mask
        if mask is not None and not (isinstance(mask, str) and mask == "causal"):
            if isinstance(mask, str):
                raise InputError(f"mask: {mask!r} is not 'causal' or an n x n 0/1 matrix")
            m = to_fmpq_array(mask, "mask")
            if m.ndim != 2 or m.shape[0] != m.shape[1] or 0 in m.shape:
                raise ShapeError(f"mask: has shape {m.shape}; give an n x n matrix of 0/1")
            if not all(v == 0 or v == 1 for v in m.ravel()):
                raise InputError("mask: entries must be 0 or 1 (1: query i sees token j)")
            mask = np.array([[v == 1 for v in row] for row in m], dtype=bool)
            empty = np.flatnonzero(~mask.any(axis=1))
            if empty.size:
                raise InputError(f"mask[{empty[0]}]: token {empty[0]} sees no token; set one 1")
        object.__setattr__(self, "heads", heads)
        object.__setattr__(self, "mask", mask)
        object.__setattr__(self, "scale", _positive(self.scale, "scale"))
        object.__setattr__(self, "step", _positive(self.step, "step"))
        object.__setattr__(self, "residual", _flag(self.residual, "residual"))
        _check_norm(self.norm, self.d)

    @property
    def d(self) -> int:
        return self.heads[0].d

    def mask_for(self, n: int, where: str = "mask") -> np.ndarray | None:
        """The boolean ``n x n`` mask (None: every token sees every token).

        Raises ShapeError when an explicit mask is not ``n x n``. Guarantee: exact."""
        if self.mask is None:
            return None
        if isinstance(self.mask, str):
            return np.tril(np.ones((n, n), dtype=bool))
        if self.mask.shape != (n, n):
            raise ShapeError(
                f"{where}: has shape {self.mask.shape[0]} x {self.mask.shape[1]}, the tokens "
                f"need {n} x {n}; give one row and one column per token"
            )
        return self.mask

    def exact_blocks(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per head ``(A, G) = (s KᵀQ, h W V)`` as exact ``d x d`` arrays (the score of token j
        at query i is ``x_iᵀ A x_j``). Guarantee: exact."""
        cached = getattr(self, "_blocks", None)
        if cached is not None:
            return cached
        out = []
        for h in self.heads:
            A = (h.K.T @ h.Q) * self.scale
            G = (h.V if h.W is None else h.W @ h.V) * self.step
            out.append((np.asarray(A, dtype=object), np.asarray(G, dtype=object)))
        object.__setattr__(self, "_blocks", out)
        return out


@dataclass(frozen=True, eq=False)
class MLPLayer:
    """Token-wise MLP ``[x] + h (W2 σ(W1 x + b1) + b2)``.

    Parameters
    ----------
    W1 : p x d; b1 : p; W2 : d x p; b2 : d (exact); activation : relu | tanh | gelu;
    residual : bool; step : exact number > 0
    norm : None or a :class:`LayerNorm` of dimension d (pre-normalisation:
        ``[x] + h (W2 σ(W1 LN(x) + b1) + b2)``)

    Guarantee: exact.
    """

    W1: Any
    b1: Any
    W2: Any
    b2: Any
    activation: str = "relu"
    residual: bool = True
    step: Any = 1
    norm: Any = None

    def __post_init__(self) -> None:
        W1 = _matrix(self.W1, "W1", (None, None))
        p, d = W1.shape
        object.__setattr__(self, "W1", W1)
        object.__setattr__(self, "b1", _vector(self.b1, "b1", p))
        object.__setattr__(self, "W2", _matrix(self.W2, "W2", (d, p)))
        object.__setattr__(self, "b2", _vector(self.b2, "b2", d))
        if self.activation not in ACTIVATIONS:
            raise InputError(f"activation: {self.activation!r} is not one of {ACTIVATIONS}")
        object.__setattr__(self, "step", _positive(self.step, "step"))
        object.__setattr__(self, "residual", _flag(self.residual, "residual"))
        _check_norm(self.norm, self.d)

    @property
    def d(self) -> int:
        return int(self.W1.shape[1])

    def exact_blocks(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(W1, b1, h W2, h b2)`` exactly. Guarantee: exact."""
        return self.W1, self.b1, self.W2 * self.step, self.b2 * self.step


@dataclass(frozen=True, eq=False)
class LayerNorm:
    """``γ ⊙ (x − mean x) / sqrt(var x + ε) + β`` per token (``var`` with 1/d).

    Parameters
    ----------
    d : int; gamma, beta : d exact numbers (default ones and zeros); eps : exact ≥ 0.

    Guarantee: exact.
    """

    d: int
    gamma: Any = None
    beta: Any = None
    eps: Any = 0

    def __post_init__(self) -> None:
        if isinstance(self.d, bool) or not isinstance(self.d, int) or self.d < 1:
            raise InputError(f"d: expected a positive integer, got {self.d!r}")
        gamma = [_ONE] * self.d if self.gamma is None else self.gamma
        beta = [_ZERO] * self.d if self.beta is None else self.beta
        object.__setattr__(self, "gamma", _vector(gamma, "gamma", self.d))
        object.__setattr__(self, "beta", _vector(beta, "beta", self.d))
        eps = to_fmpq(self.eps, "eps")
        if eps < 0:
            raise InputError(f"eps: {eps} is negative; give eps >= 0")
        object.__setattr__(self, "eps", eps)


def _check_norm(norm: Any, d: int) -> None:
    if norm is None:
        return
    if not isinstance(norm, LayerNorm):
        raise InputError("norm: give a LayerNorm (gamma, beta, eps) or None")
    if norm.d != d:
        raise ShapeError(f"norm: acts on dimension {norm.d}, the layer on d = {d}")


@dataclass(frozen=True, eq=False)
class Stack:
    """A stack of layers on R^d, applied in order. Guarantee: exact."""

    d: int
    layers: tuple

    def __post_init__(self) -> None:
        layers = tuple(self.layers)
        if not layers:
            raise InputError("layers: give at least one layer")
        for i, layer in enumerate(layers):
            if not isinstance(layer, (AttentionLayer, MLPLayer, LayerNorm)):
                raise InputError(f"layers[{i}]: not an attention, mlp or layernorm layer")
            if layer.d != self.d:
                raise ShapeError(
                    f"layers[{i}]: acts on dimension {layer.d}, the stack has d = {self.d}"
                )
        object.__setattr__(self, "layers", layers)

    def check_tokens(self, n: int) -> None:
        """Every explicit mask must be ``n x n``. Raises ShapeError naming the layer."""
        for i, layer in enumerate(self.layers):
            if isinstance(layer, AttentionLayer):
                layer.mask_for(n, f"layers[{i}].mask")


# --- the model file --------------------------------------------------------------------------

_LAYER_KEYS = {
    "attention": (("type", "heads"), ("mask", "scale", "residual", "step", "norm")),
    "mlp": (("type", "W1", "b1", "W2", "b2", "activation"), ("residual", "step", "norm")),
    "layernorm": (("type",), ("gamma", "beta", "eps")),
}


def _prefixed(where: str, fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except InputError as exc:
        raise type(exc)(f"{where}.{exc}") from None


def _layer(obj: Any, i: int, d: int):
    from certified.io import check_keys

    where = f"layers[{i}]"
    if not isinstance(obj, dict) or obj.get("type") not in _LAYER_KEYS:
        raise InputError(f"{where}.type: expected 'attention', 'mlp' or 'layernorm'")
    required, optional = _LAYER_KEYS[obj["type"]]
    check_keys(obj, where, required, optional)
    kind = obj["type"]
    if kind == "layernorm":
        return _prefixed(where, LayerNorm, d, obj.get("gamma"), obj.get("beta"), obj.get("eps", 0))
    options = {k: obj[k] for k in ("residual", "step") if k in obj}
    if "norm" in obj:
        norm = obj["norm"]
        check_keys(norm, f"{where}.norm", (), ("gamma", "beta", "eps"))
        options["norm"] = _prefixed(f"{where}.norm", LayerNorm, d, norm.get("gamma"),
                                    norm.get("beta"), norm.get("eps", 0))  # fmt: skip
    if kind == "mlp":
        return _prefixed(
            where, MLPLayer, obj["W1"], obj["b1"], obj["W2"], obj["b2"], obj["activation"],
            **options,
        )  # fmt: skip
    heads = obj["heads"]
    if not isinstance(heads, list) or not heads:
        raise InputError(f"{where}.heads: give a non-empty list of heads {{Q, K, V, W?}}")
    parsed = []
    for k, h in enumerate(heads):
        hw = f"{where}.heads[{k}]"
        check_keys(h, hw, ("Q", "K", "V"), ("W",))
        head = _prefixed(hw, Head, h["Q"], h["K"], h["V"], h.get("W"))
        if head.d != d:
            raise ShapeError(f"{hw}.Q: has {head.d} columns, the model has dimension {d}")
        parsed.append(head)
    for key in ("mask", "scale"):
        if key in obj:
            options[key] = obj[key]
    return _prefixed(where, AttentionLayer, parsed, **options)


def parse_stack(obj: Any, source: str | None = None) -> Stack:
    """A :class:`Stack` from a decoded model file ``{"dimension": d, "layers": [...]}``
    (format: docs/formats/stack-model.md; schema ``certified.schemas.schema("stack-model")``).

    Raises
    ------
    SchemaError, ShapeError, InputError, NonFiniteError, NumberFormatError
        One line naming the layer and field.

    Guarantee: exact.
    """
    from certified.io import check_keys, validate_json

    validate_json(obj, "stack-model", source)
    check_keys(obj, "", ("dimension", "layers"))
    d = obj["dimension"]
    if isinstance(d, bool) or not isinstance(d, int) or d < 1:
        raise InputError(f"dimension: expected a positive integer, got {d!r}")
    return Stack(d, tuple(_layer(layer, i, d) for i, layer in enumerate(obj["layers"])))


def read_stack(path: Any) -> Stack:
    """Read a model file (JSON). Errors name the file. Guarantee: exact."""
    from certified.io import prefixed_errors, read_json

    with prefixed_errors(path):
        return parse_stack(read_json(path), str(path))


def _q(a: Any) -> Any:
    from certified.arith.exact import fmpq_to_str

    if isinstance(a, np.ndarray):
        return [_q(x) for x in a]
    return fmpq_to_str(a)


def _norm_json(norm: LayerNorm) -> dict[str, Any]:
    return {"gamma": _q(norm.gamma), "beta": _q(norm.beta), "eps": _q(norm.eps)}


def stack_to_json(stack: Stack) -> dict[str, Any]:
    """The model file of ``stack`` with every number an exact string and flags as 1 / 0 (the
    form certificates carry; read back by :func:`parse_stack` to an equal stack).
    Guarantee: exact."""
    layers = []
    for layer in stack.layers:
        if isinstance(layer, LayerNorm):
            layers.append({"type": "layernorm", **_norm_json(layer)})
        elif isinstance(layer, MLPLayer):
            layers.append({"type": "mlp", "W1": _q(layer.W1), "b1": _q(layer.b1),
                           "W2": _q(layer.W2), "b2": _q(layer.b2),
                           "activation": layer.activation, "residual": int(layer.residual),
                           "step": _q(layer.step)})  # fmt: skip
            if layer.norm is not None:
                layers[-1]["norm"] = _norm_json(layer.norm)
        else:
            heads = []
            for h in layer.heads:
                head = {"Q": _q(h.Q), "K": _q(h.K), "V": _q(h.V)}
                if h.W is not None:
                    head["W"] = _q(h.W)
                heads.append(head)
            entry: dict[str, Any] = {"type": "attention", "heads": heads}
            if isinstance(layer.mask, str):
                entry["mask"] = "causal"
            elif layer.mask is not None:
                entry["mask"] = [[int(v) for v in row] for row in layer.mask]
            entry.update(scale=_q(layer.scale), residual=int(layer.residual), step=_q(layer.step))
            if layer.norm is not None:
                entry["norm"] = _norm_json(layer.norm)
            layers.append(entry)
    return {"dimension": stack.d, "layers": layers}
