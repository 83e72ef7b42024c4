"""``certified gradient --schedule S --points X --targets Y [--eps E] [--prec BITS] --out C
[--json]``: certified enclosures of the loss ``J = (1/N) sum_i |x_i(T) - y_i|^2 / 2 +
(eps/2) sum_l h_l |theta_l|^2`` of a tanh / sigmoid schedule and of its gradient with respect to
every piece's (W, A, b), written as a ``gradient`` certificate re-checked by the checker first.
At 53 bits with the default loss the replay is the checker's float64 one for all points at once
(``hints.arithmetic`` float64, proofs/training.md#sensitivity64); otherwise arb, point by point.

Exit 0 with the certificate written; 1 when the checker refused it (nothing written); 2 on bad
input (targets of the wrong shape, eps < 0, a flow that cannot be enclosed, a ReLU schedule
whose activation pattern cannot be certified: NOT_DIFFERENTIABLE with piece, point and neuron).
A ReLU schedule's certificate carries each point's certified activation pattern
(``instance.relu``, proofs/training.md#relu).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from certified.verdict import Outcome

__all__ = ["add_arguments", "add_problem_arguments", "demo_check", "read_problem", "run"]


def add_problem_arguments(parser: argparse.ArgumentParser) -> None:
    """``--schedule --points --targets --eps --prec`` (shared with ``certified train``)."""
    parser.add_argument(
        "--schedule", type=Path, required=True, help="schedule JSON (tanh, sigmoid)"
    )
    parser.add_argument("--points", type=Path, required=True, help="points x_i (.json, .npz, .csv)")
    parser.add_argument(
        "--targets", type=Path, required=True, help="targets y_i, one per point (same formats)"
    )
    parser.add_argument("--eps", default="0", help="regulariser weight eps >= 0, exact (1/10)")
    parser.add_argument("--prec", type=int, default=53, help="working precision in bits (53)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``certified gradient``."""
    add_problem_arguments(parser)
    parser.add_argument(
        "--loss",
        type=Path,
        help="per-point loss Phi(x, y): an expression graph JSON of dimension 2d (x, then y) "
        "without parameters, its first output Phi (default: the squared error / 2)",
    )
    parser.add_argument("--out", type=Path, required=True, help="certificate file to write")
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")


def read_problem(args: argparse.Namespace):
    """(schedule, points, targets) read exactly from the files of the arguments."""
    from certified.io import read_points
    from certified.models import Schedule

    schedule = Schedule.from_json(args.schedule)
    return schedule, read_points(args.points), read_points(args.targets)


def _pairs(result, schedule) -> list[dict]:
    from certified.arith.exact import fmpq_to_str

    def s(v):
        return [fmpq_to_str(v[0]), fmpq_to_str(v[1])]

    return [
        {
            "W": [[s(v) for v in row] for row in w["W"]],
            "A": [[s(v) for v in row] for row in w["A"]],
            "b": [s(v) for v in w["b"]],
        }
        for w in result.piece_weights(schedule)
    ]


def run(args: argparse.Namespace) -> int:
    """Run the subcommand; CertifiedError / OSError propagate to the CLI (exit 2)."""
    from certified.arith.exact import fmpq_to_str
    from certified.certificates import command_json, print_json, write_if_accepted
    from certified.training.certificate import gradient_certificate
    from certified.training.gradient import certified_gradient

    t0 = time.perf_counter()
    schedule, X, Y = read_problem(args)
    loss = None
    if args.loss is not None:
        from certified.fields import VectorField
        from certified.io import prefixed_errors, read_json

        with prefixed_errors(args.loss):
            loss = VectorField(read_json(args.loss))
    result = certified_gradient(
        schedule, X, Y, eps=args.eps, prec=args.prec, for_certificate=True, loss=loss, method="auto"
    )
    path, check = write_if_accepted(Path(args.out), gradient_certificate(result))
    message = "" if check.verified else f"the checker did not accept: {check.reason}"
    outcome = Outcome.VERIFIED if path is not None else Outcome.UNDECIDED
    seconds = time.perf_counter() - t0
    if args.json:
        print_json(
            command_json(
                "gradient",
                outcome,
                path,
                seconds,
                scope=f"J and its gradient at the schedule {args.schedule}, the "
                f"{X.shape[0]} points of {args.points} and their targets",
                loss=[fmpq_to_str(result.loss[0]), fmpq_to_str(result.loss[1])],
                gradient=_pairs(result, schedule),
                max_width=result.max_width,
                message=message,
            )
        )
    else:
        lo, hi = result.loss
        print(
            f"J in [{float(lo):.17g}, {float(hi):.17g}]; |grad J| <= "
            f"{float(result.norm_upper()):.6g}; widest enclosure {result.max_width:.3g}"
        )
        print(f"{outcome}: certificate written to {path}" if path else f"{outcome}: {message}")
    if path is None:
        print(f"certified gradient: {message}", file=sys.stderr)
        return 1
    return 0


def demo_check():
    """``certified demo`` step: the gradient of a two-piece tanh schedule at two points,
    certificate re-checked by the checker.

    Guarantee: passed implies the checker accepted the certificate.
    """
    from certified.checker import check_certificate
    from certified.commands.records import DemoCheck
    from certified.training.certificate import gradient_certificate
    from certified.training.examples import small_problem
    from certified.training.gradient import certified_gradient

    schedule, X, Y = small_problem()
    result = certified_gradient(schedule, X, Y, eps="1/10", order=12)
    cert = gradient_certificate(result)
    verdict = check_certificate(cert)
    detail = f"J <= {float(result.loss[1]):.6g}, width {result.max_width:.2g}; {verdict.reason}"
    certificates = {"gradient.json": cert} if verdict.verified else {}
    name = "training: certified loss gradient of a tanh schedule (certificate re-checked)"
    return DemoCheck(name, verdict.verified, float(result.loss[1]), detail, certificates)
