"""``certified sinkhorn --mu F --nu F --gamma G [--q Q] [--divergence] --out CERT [--json]``.

Reads two measure files (``{"points": n x d, "weights": n}``), encloses the entropic OT value
``OT_γ(μ, ν)`` (or, with ``--divergence``, the Sinkhorn divergence ``S_γ``) rigorously,
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
    """Declare the options of ``certified sinkhorn`` (name and help: the command registry)."""
    add_measure_pair_arguments(parser)
    parser.add_argument(
        "--gamma", required=True, help="regularisation gamma > 0, exact (1, 0.1, 1/100, ...)"
    )
    parser.add_argument("--q", default="2", help="cost ‖x - y‖^q, q >= 1 exact; default 2")
    parser.add_argument(
        "--divergence",
        action="store_true",
        help="bound S = OT(mu, nu) - OT(mu, mu)/2 - OT(nu, nu)/2 instead of OT(mu, nu)",
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
    from certified.entropic import entropic_ot, sinkhorn_divergence
    from certified.entropic.certificate import entropic_certificate
    from certified.entropic.entropic import check_gamma
    from certified.transport.measure import Measure
    from certified.transport.wasserstein import _check_q

    t0 = time.perf_counter()
    gamma, q = check_gamma(args.gamma), _check_q(args.q)
    mu = Measure.from_file(args.mu, normalize=args.normalize)
    nu = Measure.from_file(args.nu, normalize=args.normalize)
    what = "S_gamma" if args.divergence else "OT_gamma"
    progress = Progress("sinkhorn")
    with progress.stage(f"bounding {what} ({mu.n} x {nu.n} atoms, gamma = {gamma})"):
        solve = sinkhorn_divergence if args.divergence else entropic_ot
        bounds = solve(mu, nu, gamma, q)
    with progress.stage("writing the certificate, re-checked by the checker first"):
        path, check = write_if_accepted(args.out, entropic_certificate(bounds))
    verdict = Outcome.VERIFIED if check.verified else Outcome.UNDECIDED
    message = (
        "" if check.verified else f"the checker did not accept the certificate: {check.reason}"
    )
    seconds = time.perf_counter() - t0
    if args.json:
        out = command_json(
            "sinkhorn", verdict, path, seconds, scope=measure_pair_scope(args, gamma),
            quantity=what, gamma=fmpq_to_str(gamma), q=fmpq_to_str(q),
            lower=fmpq_to_str(bounds.lower), upper=fmpq_to_str(bounds.upper),
            relative_gap=bounds.relative_gap, message=message,
        )  # fmt: skip
        print_json(out)
    else:
        print(
            f"{what}: {mu.n} x {nu.n} atoms in dimension {mu.d}, gamma = {gamma}: in "
            f"[{float(bounds.lower):.17g}, {float(bounds.upper):.17g}] (relative gap "
            f"{bounds.relative_gap:.1e})"
        )
        print(f"{verdict}" + (f": certificate written to {path}" if path else f": {message}"))
        if path is not None:
            print(f"  scope: {measure_pair_scope(args, gamma)}")
    if path is None:
        print(f"certified sinkhorn: {message}", file=sys.stderr)
        return 1
    return 0


def demo_check():
    """``certified demo`` step: certified bounds on OT_0.1 between two clouds of 30 points in
    R^2, re-checked by the independent checker (written as ``sinkhorn.json`` with --out).

    Guarantee: passed implies the checker accepted the entropic certificate.
    """
    import numpy as np

    from certified.checker import check_certificate
    from certified.commands.records import DemoCheck
    from certified.entropic import entropic_ot
    from certified.entropic.certificate import entropic_certificate

    rng = np.random.default_rng(14)
    e = entropic_ot(rng.standard_normal((30, 2)), rng.standard_normal((30, 2)) + 0.5, "1/10")
    cert = entropic_certificate(e)
    verdict = check_certificate(cert)
    certificates = {"sinkhorn.json": cert} if verdict.verified else {}
    detail = f"OT_0.1 in [{float(e.lower):.15g}, {float(e.upper):.15g}]; {verdict.reason}"
    name = "entropic OT, gamma = 0.1, 30 + 30 atoms (certificate re-checked)"
    return DemoCheck(name, verdict.verified, float(e.gap), detail, certificates)
