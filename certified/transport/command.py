"""``certified wasserstein --mu F --nu F [--q Q] --out CERT [--json]``.

Reads two measure files (``{"points": n x d, "weights": n}``), encloses ``W_q`` rigorously,
re-checks the certificate in memory with the independent checker and only then writes it.
Exit codes: 0 verified, 1 not verified (nothing written), 2 bad input (nothing written).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from certified.commands.options import add_measure_pair_arguments
from certified.verdict import Outcome

__all__ = ["add_arguments", "demo_check", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``certified wasserstein`` (name and help: the command registry)."""
    add_measure_pair_arguments(parser)
    parser.add_argument(
        "--q", default="2", help="exponent q >= 1, exact (2, 1, 3/2, ...); default 2"
    )
    parser.add_argument(
        "--solver",
        choices=("auto", "pot", "assignment"),
        default="auto",
        help="untrusted producer (POT, or the built-in assignment solver for uniform measures "
        "of equal size); affects the gap, never validity",
    )
    parser.add_argument("--out", type=Path, required=True, help="certificate file to write")
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")


def run(args: argparse.Namespace) -> int:
    """Run the subcommand; CertifiedError / OSError propagate to the CLI (exit 2)."""
    from certified._progress import Progress
    from certified.arith.exact import fmpq_to_str
    from certified.certificates import (
        command_json,
        measure_pair_scope,
        print_json,
        write_if_accepted,
    )
    from certified.transport.certificate import wasserstein_certificate
    from certified.transport.measure import Measure
    from certified.transport.wasserstein import wasserstein

    t0 = time.perf_counter()
    mu = Measure.from_file(args.mu, normalize=args.normalize)
    nu = Measure.from_file(args.nu, normalize=args.normalize)
    progress = Progress("wasserstein")
    with progress.stage(f"solving W_{args.q} ({mu.n} x {nu.n} atoms)"):
        enclosure = wasserstein(mu, nu, args.q, solver=args.solver)
    with progress.stage("writing the certificate, re-checked by the checker first"):
        cert = wasserstein_certificate(enclosure)
        path, check = write_if_accepted(args.out, cert)
    verdict = Outcome.VERIFIED if check.verified else Outcome.UNDECIDED
    message = (
        "" if check.verified else f"the checker did not accept the certificate: {check.reason}"
    )
    seconds = time.perf_counter() - t0
    e = enclosure
    if args.json:
        out = command_json(
            "wasserstein",
            verdict,
            path,
            seconds,
            scope=measure_pair_scope(args),
            q=fmpq_to_str(e.q),
            lower=fmpq_to_str(e.lower),
            upper=fmpq_to_str(e.upper),
            lower_q=fmpq_to_str(e.lower_q),
            upper_q=fmpq_to_str(e.upper_q),
            relative_gap=e.relative_gap,
            method=e.method,
            message=message or e.message,
        )
        print_json(out)
    else:
        print(
            f"W_{e.q}: {mu.n} x {nu.n} atoms in dimension {mu.d}: W_q in "
            f"[{float(e.lower):.17g}, {float(e.upper):.17g}] (relative gap "
            f"{e.relative_gap:.1e}, {e.method})"
        )
        print(f"{verdict}" + (f": certificate written to {path}" if path else f": {message}"))
        if path is not None:
            print(f"  scope: {measure_pair_scope(args)}")
    if path is None:
        print(f"certified wasserstein: {message}", file=sys.stderr)
        return 1
    return 0


def demo_check():
    """``certified demo`` step: a certified W2 enclosure between two uniform clouds of 40 points
    in R^3, its certificate re-checked by the independent checker (written as
    ``wasserstein.json`` with --out).

    Guarantee: passed implies the checker accepted the Wasserstein certificate.
    """
    import numpy as np

    from certified.checker import check_certificate
    from certified.commands.records import DemoCheck
    from certified.transport import Measure, wasserstein, wasserstein_certificate

    rng = np.random.default_rng(6)
    mu = Measure(rng.standard_normal((40, 3)))
    nu = Measure(rng.standard_normal((40, 3)) + 0.5)
    e = wasserstein(mu, nu, 2)
    cert = wasserstein_certificate(e)
    verdict = check_certificate(cert)
    certificates = {"wasserstein.json": cert} if verdict.verified else {}
    detail = f"W2 in [{float(e.lower):.15g}, {float(e.upper):.15g}]; {verdict.reason}"
    name = "W2, 40 + 40 atoms (certificate re-checked)"
    return DemoCheck(name, verdict.verified, float(e.gap), detail, certificates)
