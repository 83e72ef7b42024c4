"""``certified separate --mu F --nu F --out CERT [--max-prec BITS] [--json]``.

Verdicts (``proofs/separation.md`` §4): VERIFIED (a witness; its certificate re-checked by the
checker in memory, then written; exit 0), REFUTED (mu = nu exactly: no witness can exist;
nothing written; exit 1), UNDECIDED (distinct, no witness within the limits; nothing written;
exit 1). Bad input raises (the CLI prints one line and exits 2), writing nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TextIO

from certified.commands.options import add_measure_pair_arguments
from certified.verdict import Outcome

__all__ = ["PTE_DEMO", "add_arguments", "demo_check", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``certified separate`` (name and help: the command registry)."""
    add_measure_pair_arguments(parser)
    parser.add_argument("--out", type=Path, required=True, help="certificate file to write")
    parser.add_argument("--max-prec", type=int, default=4096, help="largest precision, bits")
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run ``certified separate``; return the exit code (raises CertifiedError on bad input)."""
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    from certified._progress import Progress
    from certified.certificates import (
        command_json,
        exact_number,
        measure_pair_scope,
        print_json,
        write_if_accepted,
    )
    from certified.errors import ShapeError
    from certified.io import read_measure_file
    from certified.moments.separation import separation_witness

    t0 = time.perf_counter()
    files = {"mu": read_measure_file(args.mu, normalize=args.normalize),
             "nu": read_measure_file(args.nu, normalize=args.normalize)}  # fmt: skip
    mu, nu = files["mu"][:2], files["nu"][:2]
    if mu[0].shape[1] != nu[0].shape[1]:
        raise ShapeError(
            f"{args.nu}: points have {nu[0].shape[1]} coordinates, those of {args.mu} have "
            f"{mu[0].shape[1]}; give two measures in the same dimension"
        )
    with Progress("separate", err).stage("searching for a separation witness"):
        result = separation_witness(mu, nu, max_prec=args.max_prec)
    verdict, path, reason = result.verdict, None, result.reason
    if result.certificate is not None:
        for name, f in files.items():  # --normalize: the sums the weights were divided by
            if f.normalized_from is not None:
                record = exact_number(f.normalized_from)
                result.certificate["instance"][name]["normalized_from_sum"] = record
        path, check = write_if_accepted(args.out, result.certificate)
        if not check.verified:  # pragma: no cover - the search only returns accepted ones
            verdict, reason = (
                Outcome.UNDECIDED,
                f"the checker rejected the certificate: {check.reason}",
            )
    seconds = time.perf_counter() - t0
    witness = result.witness.to_json() if result.witness is not None and path else None
    if args.json:
        payload = command_json(
            "separate",
            verdict,
            path,
            seconds,
            scope=measure_pair_scope(args),
            witness=witness,
            reason=reason,
            first_differing_moment=result.first_differing_moment,
        )
        print_json(payload, out)
    elif path is not None:
        w = result.witness
        print(
            f"{Outcome.VERIFIED}: q = [{', '.join(witness['q'])}], coordinate {w.coordinate}: "
            f"G_mu in [{', '.join(witness['mu'])}], G_nu in [{', '.join(witness['nu'])}]",
            file=out,
        )
        print(f"certificate written to {path}", file=out)
        print(f"  scope: {measure_pair_scope(args)}", file=out)
    else:
        print(f"{verdict}: {reason}", file=out)
    if verdict is Outcome.VERIFIED:
        return 0
    print(f"certified separate: {verdict}: {reason}", file=err)
    return 1


PTE_DEMO = ([0, 4, 9, 17, 22, 26], [1, 2, 12, 14, 24, 25])
"""A Prouhet-Tarry-Escott pair: equal sums of k-th powers for k = 1..5, so the uniform
measures on them share their first 5 moments (and cumulants)."""


def demo_check():
    """``certified demo`` step: the PTE pair separated, its certificate re-checked.

    Guarantee: passed implies the checker accepted the separation certificate.
    """
    from certified.checker import check_certificate
    from certified.commands.records import DemoCheck
    from certified.moments.separation import separation_witness

    result = separation_witness((PTE_DEMO[0], None), (PTE_DEMO[1], None))
    verdict = check_certificate(result.certificate) if result.certificate else None
    ok = verdict is not None and verdict.verified
    certificates = {"separation_pte.json": result.certificate} if ok else {}
    width = 0.0
    if result.witness is not None:
        (a, b), (c, d) = result.witness.mu_enclosure, result.witness.nu_enclosure
        width = float(max(b - a, d - c))
    detail = verdict.reason if verdict is not None else result.reason
    name = "PTE pair sharing 5 moments separated (re-checked)"
    return DemoCheck(name, ok, width, detail, certificates)
