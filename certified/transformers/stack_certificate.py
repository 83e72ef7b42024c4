"""Kind ``stack`` v2 (proofs/stack.md §4), producer side: per-layer boxes as hints (v2: the
model may carry pre-normalised attention and MLP layers; the checker still reads v1).

The boxes are made by the replay the checker performs (``certified/checker/_stack_rule.py``):
layer ``l`` is evaluated in ball arithmetic at ``prec`` bits on the *boxes* ``B_{l-1}`` (not on
the producer's balls), and each resulting ball is widened by 1/16 of its radius plus a few
units in the last place before its endpoints are rounded outward to ``prec`` bits. The checker's
ball is then inside ``B_l`` even where its evaluation order differs by roundings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import flint
import numpy as np

from certified.arith.ball import check_precision, precision
from certified.certificates import exact_number
from certified.transformers.stack_arb import arb_layer
from certified.transformers.stack_eval import token_weights
from certified.transformers.stack_model import Stack, stack_to_json

__all__ = ["StackCertificate", "certify_stack", "stack_certificate"]


@dataclass(frozen=True)
class StackCertificate:
    """Exact boxes of the tokens after every layer and the certificate that carries them.

    Attributes
    ----------
    boxes : list (length L + 1) of n x d x (lo, hi) fmpq pairs; ``boxes[0]`` the tokens
    prec : int
    certificate : dict (kind ``stack``)

    Guarantee: ``boxes[l]`` encloses the tokens after ``l`` layers (the checker's replay is the
    proof: write the certificate through ``write_if_accepted``).
    """

    boxes: list
    prec: int
    certificate: dict

    @property
    def output(self) -> list:
        return self.boxes[-1]

    def max_width(self) -> flint.fmpq:
        """The widest output box side, exactly. Guarantee: exact."""
        return max(hi - lo for row in self.output for lo, hi in row)

    def layer_widths(self) -> list[float]:
        """Widest box side after each layer, rounded up to float. Guarantee: none (display)."""
        return [float(max(hi - lo for row in b for lo, hi in row)) for b in self.boxes]


def _exact(x: flint.arb) -> flint.fmpq:
    """The value of an exact ball (a dyadic) as a rational. Guarantee: exact."""
    m, e = x.man_exp()
    return (
        flint.fmpq(m * flint.fmpz(2) ** int(e))
        if e >= 0
        else flint.fmpq(m, flint.fmpz(2) ** int(-e))
    )


def _widened(b: flint.arb, prec: int) -> tuple[flint.arb, flint.arb]:
    """Exact end points (dyadics of ``prec`` bits) of the ball widened by 1/16 of its radius
    and a few ulps (call at ``prec``). Guarantee: [lo, hi] contains the ball."""
    from certified.errors import RangeOverflowError

    if not b.is_finite():
        raise RangeOverflowError("a token left every finite ball; the stack overflows")
    slack = b.rad() / 16 + abs(b.mid()) * _TWO ** (4 - prec) + _TWO ** (-prec - 64)
    wide = b + flint.arb(0, slack.upper())
    return wide.lower(), wide.upper()


_TWO = flint.arb(2)


def certify_stack(
    stack: Stack, tokens: Any, weights: Any = None, *, prec: int = 128, exact: bool = True
) -> list:
    """Exact boxes after every layer by the checker's replay (module docstring).

    Parameters
    ----------
    tokens : (n, d) exact numbers; weights : (n,) exact > 0 or None; prec : bits (53..4096)
    exact : bool
        True: ``fmpq`` end points, ``boxes[0]`` the tokens; False: the layers' boxes only
        (``L`` entries), end points as exact ``arb`` (no conversion: the benchmark's form).

    Raises
    ------
    ShapeError, InputError, LayerNormDenominatorError, RangeOverflowError, PrecisionError

    Guarantee: entry ``l`` encloses the tokens after ``l`` layers.
    """
    from certified.arith.exact import to_fmpq_array
    from certified.errors import PrecisionError, ShapeError

    prec = check_precision(prec)
    if prec < 53:
        raise PrecisionError(f"--prec: {prec} bits is below 53; give 53 <= prec <= 4096")
    X = to_fmpq_array(tokens, "tokens")
    if X.ndim != 2 or X.shape[1] != stack.d or X.shape[0] < 1:
        raise ShapeError(f"tokens: have shape {X.shape}; the model needs n x {stack.d}")
    n = X.shape[0]
    stack.check_tokens(n)
    wq = token_weights(weights, n)
    layers = []
    with precision(prec):
        w = None if wq is None else [flint.arb(q) for q in wq]
        M = flint.arb_mat([[flint.arb(q) for q in row] for row in X])
        for index, layer in enumerate(stack.layers):
            Y = arb_layer(layer, M, index, w, n)
            B = [[_widened(b, prec) for b in row] for row in Y.tolist()]
            layers.append(B)
            # the checker's balls arb(lo) ∪ arb(hi) (lo, hi exact at prec bits)
            M = flint.arb_mat([[lo.union(hi) for lo, hi in row] for row in B])
    if not exact:
        return layers
    boxes = [[[(q, q) for q in row] for row in X]]
    boxes += [[[(_exact(lo), _exact(hi)) for lo, hi in row] for row in B] for B in layers]
    return boxes


def _box_json(boxes: list) -> list:
    return [[[exact_number(lo), exact_number(hi)] for lo, hi in row] for row in boxes]


def stack_certificate(
    stack: Stack, tokens: Any, weights: Any = None, *, prec: int = 128
) -> StackCertificate:
    """The boxes of :func:`certify_stack` and the ``stack`` certificate carrying them.

    Guarantee: as :func:`certify_stack` once the checker accepts the certificate.
    """
    from certified.arith.exact import to_fmpq_array

    boxes = certify_stack(stack, tokens, weights, prec=prec)
    X = to_fmpq_array(tokens, "tokens")
    w = None if weights is None else to_fmpq_array(weights, "weights")
    cert = {
        "kind": "stack",
        "version": 2,
        "instance": {
            "model": stack_to_json(stack),
            "tokens": [[exact_number(q) for q in row] for row in X],
        },
        "claim": {"output": _box_json(boxes[-1])},
        "hints": {"prec": prec, "layers": [_box_json(b) for b in boxes[1:-1]]},
    }
    if w is not None:
        cert["instance"]["weights"] = [exact_number(q) for q in np.ravel(w)]
    return StackCertificate(boxes, prec, cert)
