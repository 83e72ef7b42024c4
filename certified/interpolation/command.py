"""``certified interpolate --data F --width P [--time T] [--variant auto|general|high-dim]
[--float] --out CERT [--json]``.

VERIFIED: the construction's flow maps every x_n to y_n (exactly, or with --float within the
certified error of the float64 parameters), its certificate re-checked by the checker in memory,
then written (exit 0); otherwise UNDECIDED, nothing written (exit 1). Bad input raises a
``CertifiedError`` (the CLI prints one line and exits 2).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from certified.verdict import Outcome

__all__ = ["add_arguments", "demo_check", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``certified interpolate`` (name and help: the command registry)."""
    parser.add_argument("--data", type=Path, required=True, help='dataset {"X": n×d, "Y": n×d}')
    parser.add_argument("--width", type=int, required=True, help="neurons per piece p >= 1")
    parser.add_argument("--time", default="1", help="final time T > 0, exact (1, 1/2, ...)")
    parser.add_argument("--variant", choices=("auto", "general", "high-dim"), default="auto")
    parser.add_argument(
        "--float",
        action="store_true",
        help="export float64 parameters; certify their flow's error instead of exactness",
    )
    parser.add_argument("--out", type=Path, required=True, help="certificate file to write")
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")


def run(args: argparse.Namespace) -> int:
    """Run ``certified interpolate``; CertifiedError / OSError propagate (exit 2)."""
    from certified._progress import Progress
    from certified.arith.exact import fmpq_to_str
    from certified.certificates import command_json, print_json, write_if_accepted
    from certified.interpolation.certificate import interpolation_certificate
    from certified.interpolation.construct import construct_interpolation
    from certified.interpolation.verify import export_float64, verify_interpolation
    from certified.io import read_dataset

    t0 = time.perf_counter()
    progress = Progress("interpolate")
    with progress.stage(f"reading {args.data}"):
        X, Y = read_dataset(args.data)
    with progress.stage(f"constructing (N = {len(X)}, d = {X.shape[1]}, p = {args.width})"):
        interp = construct_interpolation(X, Y, args.width, time=args.time, variant=args.variant)
    schedule = interp.schedule
    if args.float:
        # the error is decided exactly below: the export's own bound is the cheap float one
        with progress.stage("rounding to float64"):
            schedule, _ = export_float64(interp, method="float64")
            if not schedule.is_laminar() and args.variant == "auto":
                # guard: C's export is rebuilt laminar (issue 15), A's rounded pieces are too
                interp = construct_interpolation(
                    X, Y, args.width, time=args.time, variant="general"
                )
                schedule, _ = export_float64(interp, method="float64")
    with progress.stage("verifying exactly"):
        verdict = verify_interpolation(interp.X, interp.Y, schedule)
    path, message = (
        None,
        (
            "the float64 parameters are not laminar (no exact replay, no interpolation "
            "certificate); use --variant general, or certify the flow with `certified flow`"
        ),
    )
    if verdict.max_error_squared is not None:
        with progress.stage("writing the certificate, re-checked by the checker first"):
            cert = interpolation_certificate(interp, schedule, verdict)
            path, check = write_if_accepted(args.out, cert)
        message = "" if check.verified else f"the checker did not accept: {check.reason}"
    ok = path is not None and verdict.verdict is Outcome.VERIFIED
    outcome = Outcome.VERIFIED if ok else Outcome.UNDECIDED
    if args.json:
        out = command_json(
            "interpolate",
            outcome,
            path,
            time.perf_counter() - t0,
            scope=_scope(interp, args.data),
            switches=verdict.switches,
            formula_switches=interp.formula_switches,
            exact=verdict.exact,
            max_error=None if verdict.max_error is None else fmpq_to_str(verdict.max_error),
            variant=interp.variant,
            message=message,
        )
        print_json(out)
    else:
        N, d = interp.X.shape
        err = verdict.max_error
        what = "exactly" if verdict.exact else f"within {float(err):.3g}" if err else "(?)"
        print(
            f"{interp.variant}: N={N} d={d} p={schedule.width}: Phi_T(x_n) = y_n {what}; "
            f"L = {verdict.switches} switches (formula {interp.formula_switches})"
        )
        print(f"{outcome}: certificate written to {path}" if ok else f"{outcome}: {message}")
        if ok:
            print(f"  scope: {_scope(interp, args.data)}")
    if path is None:
        print(f"certified interpolate: {message}", file=sys.stderr)
        return 1
    return 0


def _scope(interp, source) -> str:
    return (
        f"the {interp.X.shape[0]} pairs of {source} and this schedule (one instance of the "
        "theorem, not the theorem)"
    )


def demo_check():
    """``certified demo`` step: 40 random pairs in R^3 interpolated exactly with width 4, the
    certificate re-checked (written as ``interpolation.json`` with --out).

    Guarantee: passed implies the checker accepted the interpolation certificate.
    """
    import numpy as np

    from certified.checker import check_certificate
    from certified.commands.records import DemoCheck
    from certified.interpolation.certificate import interpolation_certificate
    from certified.interpolation.construct import construct_interpolation

    rng = np.random.default_rng(2401_09902)
    X, Y = rng.random((40, 3)), rng.random((40, 3))
    interp = construct_interpolation(X, Y, 4)
    cert = interpolation_certificate(interp)
    verdict = check_certificate(cert)
    certificates = {"interpolation.json": cert} if verdict.verified else {}
    name = f"interpolation N=40 d=3 p=4, L={interp.switches} (certificate re-checked)"
    return DemoCheck(name, verdict.verified, 0.0, verdict.reason, certificates)
