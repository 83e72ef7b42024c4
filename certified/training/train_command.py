"""``certified train --schedule S --points X --targets Y --lr ETA --steps K [--eps E]
[--stationary TOL] [--prec BITS] --out C [--json]``: gradient descent in which every step is
certified to decrease J; the trace ``(theta_k, [J_k], [|grad J_k|])`` is a ``training`` certificate
re-checked by the checker before it is written.

Exit 0 with the trace written (it stops early, with the reason, at the first step whose
decrease cannot be certified); 1 when ``--stationary TOL`` is not met at the final iterate or
the checker refused (nothing written); 2 on bad input (lr <= 0, steps < 1, targets of the wrong
shape, a ReLU schedule).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from certified.verdict import Outcome

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``certified train``."""
    from certified.training.command import add_problem_arguments

    add_problem_arguments(parser)
    parser.add_argument("--lr", required=True, help="learning rate eta > 0, exact (1/10)")
    parser.add_argument("--steps", type=int, required=True, help="at most this many steps")
    parser.add_argument(
        "--stationary",
        help="TOL: also require a certified bound norm(grad J) <= TOL at the final iterate",
    )
    parser.add_argument("--out", type=Path, required=True, help="certificate file to write")
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")


def run(args: argparse.Namespace) -> int:
    """Run the subcommand; CertifiedError / OSError propagate to the CLI (exit 2)."""
    from certified.arith.exact import fmpq_to_str, to_fmpq
    from certified.certificates import command_json, print_json, write_if_accepted
    from certified.errors import InputError
    from certified.training.certificate import training_certificate
    from certified.training.command import read_problem
    from certified.training.descent import certified_descent

    t0 = time.perf_counter()
    tol = None if args.stationary is None else to_fmpq(args.stationary, "--stationary")
    if tol is not None and not tol > 0:
        raise InputError(f"--stationary: {tol} is not positive")
    schedule, X, Y = read_problem(args)
    trace = certified_descent(
        schedule, X, Y, lr=args.lr, steps=args.steps, eps=args.eps, prec=args.prec, method="auto"
    )
    final = trace.results[-1]
    norm = final.norm_upper()
    met = tol is None or norm <= tol
    message = "" if met else f"|grad J| <= {float(norm):.6g} at the final iterate, not <= {tol}"
    path = None
    if met:
        path, check = write_if_accepted(Path(args.out), training_certificate(trace))
        if path is None:
            message = f"the checker did not accept: {check.reason}"
    outcome = Outcome.VERIFIED if path is not None else Outcome.UNDECIDED
    if args.json:

        def pair(v):
            return [fmpq_to_str(v[0]), fmpq_to_str(v[1])]

        print_json(
            command_json(
                "train",
                outcome,
                path,
                time.perf_counter() - t0,
                scope="the losses of the iterates written in the trace",
                steps=trace.steps,
                stopped=trace.stopped,
                losses=[pair(r.loss) for r in trace.results],
                gradient_norms=[
                    [fmpq_to_str(r.norm_lower()), fmpq_to_str(r.norm_upper())]
                    for r in trace.results
                ],
                final_gradient_norm_upper=fmpq_to_str(norm),
                message=message,
            )
        )
    else:
        for k, r in enumerate(trace.results):
            print(f"step {k}: J in [{float(r.loss[0]):.12g}, {float(r.loss[1]):.12g}], "
                  f"|grad J| <= {float(r.norm_upper()):.6g}")  # fmt: skip
        print(f"stopped: {trace.stopped}")
        print(f"{outcome}: certificate written to {path}" if path else f"{outcome}: {message}")
    if path is None:
        print(f"certified train: {message}", file=sys.stderr)
        return 1
    return 0
