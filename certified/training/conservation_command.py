"""``certified conservation --architecture NAME --widths n,r,...,m [--at THETA] [--laws F]
[--json]``: certified lower and upper bounds on the number of independent conservation laws of
gradient flows near a rational point (exact polynomial arithmetic; proofs/training.md).

Exit 0 when the bounds meet (COMPLETE: the count is certified), 1 when a gap remains (both
bounds printed), 2 on bad input (unknown architecture, widths < 1, a point that is not rational
or of the wrong length, a law that is not conserved or not a polynomial). Nothing is written.
"""

from __future__ import annotations

import argparse
import time

from certified.verdict import Outcome

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``certified conservation``."""
    from certified.training.conservation import ARCHITECTURES

    model = parser.add_mutually_exclusive_group(required=True)
    model.add_argument(
        "--architecture",
        choices=ARCHITECTURES,
        help="relu (n,r,m), linear (n,r_1,...,m), attention (d,k), neural-ode (d,p)",
    )
    model.add_argument(
        "--phi",
        help='JSON file {"variables": [names], "phi": [polynomials]}: the factorisation as '
        "polynomial expressions (laws then come from --laws)",
    )
    parser.add_argument("--widths", help="comma-separated widths, e.g. 2,2,1 (with --architecture)")
    parser.add_argument(
        "--at",
        help="the point theta_0: comma-separated exact rationals (1/2,-3,...) or a JSON file "
        "holding a list; default a fixed rational point",
    )
    parser.add_argument(
        "--laws",
        help="JSON file: a list of polynomial laws (strings in the variables) used for the lower "
        "bound instead of the architecture's known laws",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")


def _widths(text: str) -> list[int]:
    from certified.errors import InputError

    try:
        return [int(v) for v in text.split(",")]
    except ValueError:
        raise InputError(f"--widths: expected comma-separated integers, got {text!r}") from None


def _point(text: str | None):
    import os

    from certified.errors import InputError
    from certified.io import read_json

    if text is None:
        return None
    if os.path.exists(text):
        values = read_json(text)
        if not isinstance(values, list):
            raise InputError(f"--at {text}: expected a JSON list of numbers")
        return values
    return [v.strip() for v in text.split(",")]


def run(args: argparse.Namespace) -> int:
    """Run the subcommand; CertifiedError / OSError propagate to the CLI (exit 2)."""
    from certified.certificates import command_json, print_json
    from certified.errors import InputError
    from certified.io import read_json
    from certified.training.conservation import architecture, at_strings, count_laws

    t0 = time.perf_counter()
    if args.phi is not None and args.widths is not None:
        raise InputError("--widths: only with --architecture (a --phi file names its variables)")
    if args.phi is not None:
        from certified.io import check_keys, prefixed_errors
        from certified.training.conservation import polynomial_factorisation

        obj = read_json(args.phi)
        with prefixed_errors(args.phi):
            if not isinstance(obj, dict):
                raise InputError('expected {"variables": [...], "phi": [...]}')
            obj = check_keys(obj, "", ["variables", "phi"], [])
            if not all(isinstance(v, list) for v in obj.values()):
                raise InputError('"variables" and "phi" must be lists of strings')
            fact = polynomial_factorisation(obj["variables"], obj["phi"])
        name, widths = "polynomial", str(args.phi)
    else:
        if args.widths is None:
            raise InputError("--widths: required with --architecture")
        fact = architecture(args.architecture, _widths(args.widths))
        name, widths = args.architecture, args.widths
    if args.phi is not None and args.laws is None:
        laws_given = []
    else:
        laws_given = None
    laws = laws_given
    if args.laws is not None:
        laws = read_json(args.laws)
        if not isinstance(laws, list) or not all(isinstance(h, str) for h in laws):
            raise InputError(f"--laws {args.laws}: expected a JSON list of polynomial strings")
    count = count_laws(fact, _point(args.at), laws, name=name)
    outcome = Outcome.VERIFIED if count.verdict == "COMPLETE" else Outcome.UNDECIDED
    if args.json:
        print_json(
            command_json(
                "conservation",
                outcome,
                None,
                time.perf_counter() - t0,
                scope=f"gradient flows of {name} {widths} near the point theta_0 (a local count)",
                laws=count.laws,
                lower=count.lower,
                upper=count.upper,
                status=count.verdict,
                expressions=list(count.expressions),
                variables=list(count.names),
                at=at_strings(count),
            )
        )
    else:
        D = len(count.names)
        print(
            f"{name} {widths}: D = {D} parameters; {count.lower} <= "
            f"independent conservation laws <= {count.upper} near theta_0 "
            f"({count.brackets} bracket fields)"
        )
        if count.verdict == "COMPLETE":
            print(f"COMPLETE: exactly {count.laws} laws, e.g. {', '.join(count.expressions[:3])}")
        else:
            print(f"GAP: between {count.lower} and {count.upper}")
    return 0 if count.verdict == "COMPLETE" else 1
