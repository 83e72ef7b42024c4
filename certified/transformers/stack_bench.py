"""``certified bench transformer`` (its stack entries): certified layer stacks against a
float64 forward pass of the same stack (heads batched in numpy), measured in the same run.

The issue's size: 12 layers, d = 16, 4 heads (k = 4, scale 1/2), n = 32 tokens, weights
N(0, 1/fan-in) ("ordinary scale"), tokens N(0, 1). Three stacks: 12 residual attention layers
of step 1; the same layers with step 1/12 (the depth-to-ODE scaling ``x + Γ(x)/L``); 12 pre-LN
blocks as in GPT-2, ``x + attn(LN(x))`` then ``x + MLP(LN(x))`` (attention and MLP layers with a
``norm``, the residual stream un-normed; GELU MLP of width 64). Three engines each: float64
intervals (:func:`enclose_stack`); balls carried from layer to layer (:func:`enclose_stack_arb`,
the certified outputs without a certificate) and the certificate's boxes
(:func:`certify_stack`, the box chain the checker replays), each at the first of 64, 128, 192,
256, 384, 512 bits whose widest output box is <= 1e-10.

Every row also reports ``float64_error``: how far the float64 forward pass itself is from the
exact output (``max |float - mid|`` over a 256-bit ball chain, whose radius is given as
``reference_radius``). Where it exceeds 1e-10, no enclosure built from float64 evaluations of
the layers can have width <= 1e-10 (proofs/stack.md#precision): the bar needs more than double
precision inside the layers, and the 12 step-1 attention layers are such a stack.

The float64 baseline evaluates GELU with a vectorised erf (:func:`~certified.transformers.
stack_eval.erf64`), not a per-element ``math.erf``, which would slow the baseline down and
flatter the ratio.
"""

from __future__ import annotations

import numpy as np

from certified.commands.records import Benchmark, best_seconds

__all__ = ["bench_model", "bench_stack"]

TARGET_WIDTH = 1e-10
PRECISIONS = (64, 128, 192, 256, 384, 512)


def bench_model(
    layers: int, d: int, heads: int, blocks: bool, seed: int = 0, step: str | None = None
) -> dict:
    """The benchmark's model file (decoded JSON); ``step`` the attention layers' residual step
    (default 1). Guarantee: none."""
    rng = np.random.default_rng(seed)
    k = d // heads

    def mat(r: int, c: int) -> list:
        return (rng.standard_normal((r, c)) / np.sqrt(c)).tolist()

    out: list = []
    for _ in range(layers):
        attention = {"type": "attention", "scale": "1/2" if k == 4 else 1,
                     "heads": [{"Q": mat(k, d), "K": mat(k, d), "V": mat(k, d),
                                "W": mat(d, k)} for _ in range(heads)]}  # fmt: skip
        if step is not None:
            attention["step"] = step
        if blocks:  # pre-LN (GPT-2) blocks: x + attn(LN(x)), then x + MLP(LN(x))
            p = 4 * d
            attention["norm"] = {"eps": "1/100000"}
            out += [attention, {"type": "mlp", "norm": {"eps": "1/100000"}, "W1": mat(p, d),
                                "b1": [0.0] * p, "W2": mat(d, p), "b2": [0.0] * d,
                                "activation": "gelu"}]  # fmt: skip
        else:
            out.append(attention)
    return {"dimension": d, "layers": out}


def _ball_width(M) -> float:
    """Widest ball of an arb_mat (diameter, rounded up). Guarantee: upper bound."""
    return max(float((2 * M[i, a].rad()).upper()) for i in range(M.nrows())
               for a in range(M.ncols()))  # fmt: skip


def _box_width(boxes) -> float:
    return max(float((hi - lo).upper()) for row in boxes[-1] for lo, hi in row)


def _first_precision(run, width) -> tuple[int, float]:
    """The first precision of PRECISIONS whose result has width <= TARGET_WIDTH (the last one
    tried when none has)."""
    from certified.errors import CertifiedError

    w = float("inf")
    for prec in PRECISIONS:
        try:
            w = width(run(prec))
        except CertifiedError:  # too wide at this precision (overflow, layer norm near 0)
            continue
        if w <= TARGET_WIDTH:
            break
    return prec, w


def _float_error(stack, X: np.ndarray, Y: np.ndarray) -> tuple[float, float]:
    """(max |Y - mid|, max radius) of the 256-bit ball chain: the float64 forward pass's own
    error, up to the reference's radius. Guarantee: none (a measurement)."""
    import flint

    from certified.transformers.stack_arb import enclose_stack_arb

    B = enclose_stack_arb(stack, X, prec=256)[-1]
    err = rad = 0.0
    for i in range(B.nrows()):
        for a in range(B.ncols()):
            b = B[i, a]
            err = max(err, abs(float((b.mid() - flint.arb(float(Y[i, a]))).mid())))
            rad = max(rad, float(b.rad()))
    return err, rad


def _rows(name: str, model: dict, X: np.ndarray, repeats: int) -> list[Benchmark]:
    from certified.transformers.stack_arb import enclose_stack_arb
    from certified.transformers.stack_certificate import certify_stack
    from certified.transformers.stack_eval import enclose_stack, float_forward
    from certified.transformers.stack_model import parse_stack

    stack = parse_stack(model)
    base = best_seconds(lambda: float_forward(stack, X), 20 * repeats)
    Y = float_forward(stack, X)
    err, ref_rad = _float_error(stack, X, Y)
    common = {"width_target": TARGET_WIDTH, "float64_error": err, "reference_radius": ref_rad}
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
                                                "float_inside": inside, **common}))  # fmt: skip

    def chain(prec):
        return enclose_stack_arb(stack, X, prec=prec)[-1]

    prec, width = _first_precision(chain, _ball_width)
    seconds = best_seconds(lambda: chain(prec), 1)
    out.append(Benchmark(f"{name}: balls at {prec} bits (layer to layer)", seconds,
                         "float64 forward pass", base, seconds / base, 20.0,
                         {"max_width": width, "prec": prec, **common}))  # fmt: skip

    def boxes(prec):
        return certify_stack(stack, X, prec=prec, exact=False)

    prec, width = _first_precision(boxes, _box_width)
    seconds = best_seconds(lambda: boxes(prec), 1)
    out.append(Benchmark(f"{name}: balls at {prec} bits (certificate boxes)", seconds,
                         "float64 forward pass", base, seconds / base, 20.0,
                         {"max_width": width, "prec": prec, **common}))  # fmt: skip
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
    for blocks, step, what in (
        (False, None, "attention layers"),
        (False, f"1/{L}", f"attention layers of step 1/{L}"),
        (True, None, "pre-LN blocks x + attn(LN x), x + MLP(LN x), GELU"),
    ):
        name = f"stack {L} {what}, d={d}, {heads} heads, n={n}"
        out += _rows(name, bench_model(L, d, heads, blocks, step=step), X, 3 if quick else 5)
    return out
