"""``certified tokens --instance F --C C [--rate sqrt|log|sqrt_log] [--family softmax|hardmax]``.

Decides the token-sample-complexity claim ``sup_{|x|_2 <= R} |Γ[μ_n](x) − Γ[μ](x)|_2 <= C/√n``
(or ``C/log n``, ``C/√(log n)``; the hardmax family bounds the normalised hardmax error, see
:mod:`certified.attention.hardmax_complexity`) for the samples of the instance file:

``{"Q": k×d, "K": k×d, "V": d×d, "R": r, "samples": n×d,
"population": {"gaussian": {"mean": d, "cov": d×d}} | {"uniform": {"lower": d, "upper": d}}}``

The layer is the one of every attention instance (``A = KᵀQ/√k``; theorems.md §9 convention:
the score of key y at query x is ⟨Qy, Kx⟩/√k). No certificate kind covers this claim; the
verdict is the library's (``certificate`` is null in ``--json``).

Exit codes: 0 VERIFIED or REFUTED, 1 UNDECIDED, 2 bad input or I/O error.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

__all__ = ["add_arguments", "run"]

_ATTENTION_KEYS = ("Q", "K", "V", "R")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``certified tokens``."""
    parser.add_argument("--instance", type=Path, required=True, help="instance JSON file")
    parser.add_argument("--C", dest="C", required=True, help="the constant C (exact: '3/2')")
    parser.add_argument("--rate", choices=("sqrt", "log", "sqrt_log"), default="sqrt")
    parser.add_argument("--family", choices=("softmax", "hardmax"), default="softmax")
    parser.add_argument("--rel-tol", default="0.05", help="stop at upper <= (1+tol) lower")
    parser.add_argument("--max-boxes", type=int, default=20000, help="box budget (20000)")
    parser.add_argument("--prec", type=int, default=128, help="working precision in bits")
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")


def _read(path: Path):
    from certified.attention.instance import parse_attention_instance
    from certified.attention.populations import parse_population
    from certified.io import check_keys, exact_matrix, prefixed_errors, read_json, validate_json

    obj = read_json(path)
    with prefixed_errors(str(path)):
        validate_json(obj, "tokens-instance")
        check_keys(obj, "", [*_ATTENTION_KEYS, "samples", "population"])
        inst = parse_attention_instance({k: obj[k] for k in _ATTENTION_KEYS})
        samples = exact_matrix(
            obj["samples"], "samples", cols=inst.d, row_what="tokens", col_what="coordinates"
        )
        population = parse_population(obj["population"])
    return inst, samples, population


def run(args: argparse.Namespace) -> int:
    """Run the subcommand; CertifiedError / OSError propagate to the CLI (exit 2)."""
    from certified.arith.exact import fmpq_to_str
    from certified.attention.sample_complexity import check_rate_claim
    from certified.certificates import command_json, print_json

    t0 = time.perf_counter()
    inst, samples, population = _read(args.instance)
    v = check_rate_claim(
        inst.layer,
        population,
        samples,
        inst.R,
        args.C,
        rate=args.rate,
        family=args.family,
        rel_tol=args.rel_tol,
        max_boxes=args.max_boxes,
        prec=args.prec,
    )
    b = v.bounds
    s = lambda q: None if q is None else fmpq_to_str(q)  # noqa: E731
    if args.json:
        print_json(
            command_json(
                "tokens",
                v.verdict,
                None,
                time.perf_counter() - t0,
                scope=f"the {b.n} samples of {args.instance}, x over the ball of radius R",
                family=args.family,
                rate=args.rate,
                n=b.n,
                lower=s(b.lower),
                upper=s(b.upper),
                threshold=[s(v.threshold_lower), s(v.threshold_upper)],
                witness=[s(x) for x in b.witness],
                boxes=b.boxes,
                resolved=b.resolved,
                norm=b.norm,
                statement=v.statement,
                message=v.message,
            )
        )
    else:
        print(f"tokens ({args.family}, n = {b.n}): {v.verdict}: {v.message}")
        if v.verdict.decided:
            print(f"  asserts: {v.statement}")
    if not v.verdict.decided:
        print(f"certified tokens: {v.message}", file=sys.stderr)
        return 1
    return 0
