"""``certified bench transformer`` (its stack entries): certified layer stacks against a
float64 forward pass of the same stack (heads batched in numpy), measured in the same run.

The issue's size: 12 layers, d = 16, 4 heads (k = 4, scale 1/2), n = 32 tokens, weights
N(0, 1/fan-in) ("ordinary scale"), tokens N(0, 1). Two stacks: 12 residual attention layers,
and 12 pre-LN blocks (layer norm, attention, layer norm, ReLU MLP of width 64). Two engines
each: float64 intervals (:func:`enclose_stack`) and balls (:func:`certify_stack`, the boxes of
the certificate) at the first of 64, 128, 192, 256, 384, 512 bits whose widest output box is
<= 1e-10. The float64 interval engine over-estimates the propagation of widths by the
entrywise absolute Jacobian of every layer (proofs/stack.md#precision), so on these stacks
its widths exceed 1e-10: the ball engine is the one that meets the width, at a higher ratio.
"""

from __future__ import annotations

import numpy as np

from certified.commands.records import Benchmark, best_seconds

__all__ = ["bench_stack", "bench_model"]

TARGET_WIDTH = 1e-10


def bench_model(layers: int, d: int, heads: int, blocks: bool, seed: int = 0) -> dict:
    """The benchmark's model file (decoded JSON). Guarantee: none."""
    rng = np.random.default_rng(seed)
    k = d // heads

    def mat(r: int, c: int) -> list:
        return (rng.standard_normal((r, c)) / np.sqrt(c)).tolist()

    out: list = []
    for _ in range(layers):
        attention = {"type": "attention", "scale": "1/2" if k == 4 else 1,
                     "heads": [{"Q": mat(k, d), "K": mat(k, d), "V": mat(k, d),
                                "W": mat(d, k)} for _ in range(heads)]}  # fmt: skip
        if blocks:
            p = 4 * d
            out += [{"type": "layernorm", "eps": "1/100000"}, attention,
                    {"type": "layernorm", "eps": "1/100000"},
                    {"type": "mlp", "W1": mat(p, d), "b1": [0.0] * p, "W2": mat(d, p),
                     "b2": [0.0] * d, "activation": "relu"}]  # fmt: skip
        else:
            out.append(attention)
    return {"dimension": d, "layers": out}


def _pair(name: str, model: dict, X: np.ndarray, repeats: int) -> list[Benchmark]:
    from certified.transformers.stack_certificate import certify_stack
    from certified.transformers.stack_eval import enclose_stack, float_forward
    from certified.transformers.stack_model import parse_stack

    stack = parse_stack(model)
    base = best_seconds(lambda: float_forward(stack, X), 20 * repeats)
    Y = float_forward(stack, X)
    out = []
    try:
        enc = enclose_stack(stack, X)
        width = enc.max_width()
        inside = bool(np.all((enc.output.lo <= Y) & (Y <= enc.output.hi)))
        seconds = best_seconds(lambda: enclose_stack(stack, X), repeats)
        status = "ok"
    except Exception as exc:  # a layer norm not certified > 0 or an overflow: too wide
        width, inside, status = float("inf"), False, type(exc).__name__
        seconds = best_seconds(lambda: _attempt(enclose_stack, stack, X), repeats)
    out.append(Benchmark(f"{name}: float64 intervals", seconds, "float64 forward pass", base,
                         seconds / base, 20.0, {"max_width": width, "status": status,
                                                "float_inside": inside,
                                                "width_target": TARGET_WIDTH}))  # fmt: skip
    from certified.errors import CertifiedError

    for prec in (64, 128, 192, 256, 384, 512):
        try:
            boxes = certify_stack(stack, X, prec=prec, exact=False)
        except CertifiedError:  # too wide at this precision (overflow, layer norm near 0)
            continue
        width = max(float((hi - lo).upper()) for row in boxes[-1] for lo, hi in row)
        if width <= TARGET_WIDTH:
            break
    seconds = best_seconds(lambda: certify_stack(stack, X, prec=prec, exact=False), 1)
    out.append(Benchmark(f"{name}: balls at {prec} bits (certificate boxes)", seconds,
                         "float64 forward pass", base, seconds / base, 20.0,
                         {"max_width": width, "prec": prec,
                          "width_target": TARGET_WIDTH}))  # fmt: skip
    return out


def _attempt(f, *args) -> None:
    try:
        f(*args)
    except Exception:
        pass


def bench_stack(quick: bool = False) -> list[Benchmark]:
    """The workloads of the module docstring (quick: 3 layers, n = 8). Guarantee: none."""
    L, n = (3, 8) if quick else (12, 32)
    d, heads = 16, 4
    X = np.random.default_rng(1).standard_normal((n, d))
    out = []
    for blocks, what in ((False, "attention layers"), (True, "pre-LN blocks + ReLU MLP")):
        name = f"stack {L} {what}, d={d}, {heads} heads, n={n}"
        out += _pair(name, bench_model(L, d, heads, blocks), X, 3 if quick else 5)
    return out
