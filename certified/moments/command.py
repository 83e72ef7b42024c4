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

__all__ = ["PTE_DEMO", "add_parser", "demo_check", "run"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the ``separate`` subcommand."""
    s = sub.add_parser(
        "separate",
        help="certified separation witness of two discrete measures, with a certificate",
        description="Find q and a coordinate k where G_mu(q)_k and G_nu(q)_k (G = grad log Z) "
        "lie in disjoint certified intervals. VERIFIED writes the certificate (exit 0); "
        "REFUTED (mu = nu exactly) and UNDECIDED write nothing (exit 1); bad input exits 2.",
    )
    s.add_argument("--mu", type=Path, required=True, help='measure JSON {"points", "weights"}')
    s.add_argument("--nu", type=Path, required=True, help="second measure, same dimension")
    s.add_argument("--out", type=Path, required=True, help="certificate file to write")
    s.add_argument("--max-prec", type=int, default=4096, help="largest precision, bits")
    s.add_argument("--json", action="store_true", help="print one JSON object on stdout")


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run ``certified separate``; return the exit code (raises CertifiedError on bad input)."""
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    from certified._progress import Progress
    from certified.certificates import command_json, print_json, write_if_accepted
    from certified.errors import ShapeError
    from certified.io import read_measure
    from certified.moments.separation import separation_witness

    t0 = time.perf_counter()
    mu, nu = read_measure(args.mu), read_measure(args.nu)
    if mu[0].shape[1] != nu[0].shape[1]:
        raise ShapeError(
            f"{args.nu}: points have {nu[0].shape[1]} coordinates, those of {args.mu} have "
            f"{mu[0].shape[1]}; give two measures in the same dimension"
        )
    with Progress("separate", err).stage("searching for a separation witness"):
        result = separation_witness(mu, nu, max_prec=args.max_prec)
    verdict, path, reason = result.verdict, None, result.reason
    if result.certificate is not None:
        path, check = write_if_accepted(args.out, result.certificate)
        if not check.verified:  # pragma: no cover - the search only returns accepted ones
            verdict, reason = "UNDECIDED", f"the checker rejected the certificate: {check.reason}"
    seconds = time.perf_counter() - t0
    witness = result.witness.to_json() if result.witness is not None and path else None
    if args.json:
        payload = command_json(
            "separate",
            verdict,
            path,
            seconds,
            witness=witness,
            reason=reason,
            first_differing_moment=result.first_differing_moment,
        )
        print_json(payload, out)
    elif path is not None:
        w = result.witness
        print(
            f"VERIFIED: q = [{', '.join(witness['q'])}], coordinate {w.coordinate}: "
            f"G_mu in [{', '.join(witness['mu'])}], G_nu in [{', '.join(witness['nu'])}]",
            file=out,
        )
        print(f"certificate written to {path}", file=out)
    else:
        print(f"{verdict}: {reason}", file=out)
    if verdict == "VERIFIED":
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
    from certified.demo import CERTIFICATES, DemoCheck
    from certified.moments.separation import separation_witness

    result = separation_witness((PTE_DEMO[0], None), (PTE_DEMO[1], None))
    verdict = check_certificate(result.certificate) if result.certificate else None
    ok = verdict is not None and verdict.verified
    if ok:
        CERTIFICATES["separation_pte.json"] = result.certificate
    width = 0.0
    if result.witness is not None:
        (a, b), (c, d) = result.witness.mu_enclosure, result.witness.nu_enclosure
        width = float(max(b - a, d - c))
    detail = verdict.reason if verdict is not None else result.reason
    return DemoCheck("PTE pair sharing 5 moments separated (re-checked)", ok, width, detail)
