"""``certified transformer stack --model M.json --tokens X.csv [--weights w.csv] [--lipschitz
[--radius R]] [--prec BITS] --out C [--json]``.

The certified image of every token under the layer stack of the model file (format:
docs/formats/stack-model.md; convention: the score of key y at query x is ``s <Qy, Kx>``),
carried by a ``stack`` certificate whose per-layer boxes the checker replays; VERIFIED writes
it (exit 0). ``--lipschitz``: certified Lipschitz bounds on the tokens' ``--radius``
neighbourhood, two ways (product of per-layer bounds, direct bound on the composition) and a
certified lower bound. Pre-LN blocks are attention / MLP layers with a ``norm``
(``x + h f(LN(x))``). Bad input (shapes, masks, weights, a layer norm or pre-norm whose
denominator is not certified > 0) exits 2 with one line, nothing written.

Standard library only at module level (the registry imports the command module).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

__all__ = ["add_arguments", "run"]

AUTO_PRECISIONS = (64, 128, 192, 256, 384, 512, 1024)
TARGET_WIDTH = 1e-10


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``certified transformer stack`` beside the shared ones (``--model``,
    ``--tokens`` of depth-limit, ``--prec`` of gaussian-pde, ``--out``, ``--json``)."""
    parser.add_argument(
        "--weights", type=Path, help="stack: token weights (.csv one per line, or JSON list)"
    )
    parser.add_argument(
        "--lipschitz", action="store_true", help="stack: certified Lipschitz bounds too"
    )
    parser.add_argument(
        "--radius", help="stack --lipschitz: half-width of the domain around the tokens "
        "(exact, default 1/1048576)",
    )  # fmt: skip


def _read_weights(path: Path, n: int):
    from certified.errors import InputError, ShapeError
    from certified.io import exact_vector, prefixed_errors, read_json, read_points

    with prefixed_errors(path):
        if path.suffix.lower() == ".json":
            obj = read_json(path)
            if isinstance(obj, dict) and set(obj) == {"weights"}:
                obj = obj["weights"]
            w = exact_vector(obj, "weights")
        else:
            W = read_points(path)
            if W.shape[1] != 1:
                raise ShapeError(f"weights: {W.shape[1]} columns; give one weight per line")
            w = W[:, 0]
        if w.shape != (n,):
            raise ShapeError(f"weights: {w.shape[0]} weights for {n} tokens; give one per token")
        for j, q in enumerate(w):
            if not q > 0:
                raise InputError(f"weights[{j}]: {q} is not > 0; drop tokens of weight 0")
        if sum(w) != 1:
            raise InputError(f"weights: they sum to {sum(w)}, not exactly 1; rescale them")
    return w


def _boxes_json(boxes) -> list:
    from certified.arith.exact import fmpq_to_str

    return [[[fmpq_to_str(lo), fmpq_to_str(hi)] for lo, hi in row] for row in boxes]


def run(args: argparse.Namespace) -> int:
    """Run ``certified transformer stack``; CertifiedError / OSError propagate (exit 2)."""
    from certified._progress import Progress
    from certified.arith.ball import check_precision
    from certified.certificates import command_json, print_json, write_if_accepted
    from certified.errors import InputError
    from certified.flow.command import decimal_upper
    from certified.io import prefixed_errors, read_points
    from certified.transformers.stack_certificate import stack_certificate
    from certified.transformers.stack_model import read_stack
    from certified.verdict import Outcome

    t0 = time.perf_counter()
    progress = Progress("transformer stack")
    for name in ("model", "tokens", "out"):
        if getattr(args, name) is None:
            raise InputError(f"--{name}: required by 'certified transformer stack'")
    if args.radius is not None and not args.lipschitz:
        raise InputError("--radius: only with --lipschitz")
    precs = AUTO_PRECISIONS
    if args.prec is not None:
        prec = check_precision(args.prec, "--prec")
        if prec < 53:
            raise InputError(f"--prec: {prec} bits is below 53; give 53 <= BITS <= 4096")
        precs = (prec,)
    radius = "1/1048576" if args.radius is None else args.radius
    if args.lipschitz:
        from certified.arith.exact import to_fmpq

        r = to_fmpq(radius, "--radius")
        if not r > 0:
            raise InputError(f"--radius: {r} is not > 0; give the half-width of the domain")
    model, tokens = Path(args.model), Path(args.tokens)
    stack = read_stack(model)
    X = read_points(tokens)
    n = X.shape[0]
    with prefixed_errors(tokens):
        if X.shape[1] != stack.d:
            from certified.errors import ShapeError

            raise ShapeError(f"tokens: {X.shape[1]} coordinates; the model has d = {stack.d}")
    with prefixed_errors(model):
        stack.check_tokens(n)
    w = None if args.weights is None else _read_weights(args.weights, n)
    from certified.errors import RangeOverflowError
    from certified.transformers.stack_eval import LayerNormDenominatorError

    result = None
    for k, prec in enumerate(precs):
        last = k == len(precs) - 1
        with progress.stage(f"enclosing {n} tokens through {len(stack.layers)} layers, {prec} "
                            "bits"):  # fmt: skip
            try:
                result = stack_certificate(stack, X, w, prec=prec)
            except (RangeOverflowError, LayerNormDenominatorError):
                # balls too wide at this precision: the next one may decide; the last raises
                if last:
                    raise
                continue
        if float(result.max_width()) <= TARGET_WIDTH:
            break
    fields: dict = {
        "enclosures": _boxes_json(result.output),
        "max_width": decimal_upper(result.max_width()),
        "layer_max_widths": [decimal_upper(x) for x in result.layer_widths()],
        "prec": result.prec,
        "convention": "score of key y at query x: s <Qy, Kx>",
    }
    if args.lipschitz:
        from certified.errors import CertifiedError
        from certified.flow.command import decimal_upper as up
        from certified.transformers.stack_lipschitz import stack_lipschitz

        try:
            with progress.stage("Lipschitz bounds on the domain"):
                lip = stack_lipschitz(stack, X, w, radius=radius)
        except CertifiedError as exc:
            # the domain's boxes grew too wide in float64 intervals (a layer norm's variance,
            # an overflow): no bound, said so; the enclosure and its certificate stand
            fields["lipschitz"] = {"radius": str(r), "undecided": str(exc)}
        else:
            fields["lipschitz"] = {
                "radius": str(lip.radius),
                "norm": "Frobenius on the n d entries",
                "per_layer_upper": [up(x) for x in lip.per_layer],
                "product_upper": up(lip.product_upper),
                "composition_upper": up(lip.composition_upper),
                "lower": _decimal_lower(lip.lower),
            }
    with progress.stage("writing the certificate, re-checked by the checker first"):
        path, check = write_if_accepted(Path(args.out), result.certificate)
    message = "" if path is not None else f"the checker did not accept: {check.reason}"
    outcome = Outcome.VERIFIED if path is not None else Outcome.UNDECIDED
    seconds = time.perf_counter() - t0
    scope = f"the {n} tokens of {tokens} through the {len(stack.layers)} layers of {model}"
    if args.json:
        print_json(command_json("transformer stack", outcome, path, seconds, scope=scope,
                                **fields, message=message))  # fmt: skip
    elif path is not None:
        print(f"{outcome}: certificate written to {path} (max width {fields['max_width']})")
        lip_f = fields.get("lipschitz", {})
        if "undecided" in lip_f:
            print(f"  Lipschitz on the domain: undecided ({lip_f['undecided']})")
        elif lip_f:
            print(f"  Lipschitz on the domain: >= {lip_f['lower']}, <= "
                  f"{lip_f['composition_upper']} (composition), <= {lip_f['product_upper']} "
                  "(product of layers)")  # fmt: skip
    else:
        print(f"{outcome}: {message}")
    if path is None:
        print(f"certified transformer stack: {message}", file=sys.stderr)
        return 1
    return 0


def _decimal_lower(x: float) -> str:
    from decimal import ROUND_FLOOR, Context, Decimal

    return str(Context(prec=17, rounding=ROUND_FLOOR).plus(Decimal(x)))
