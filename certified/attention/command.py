"""``certified lipschitz --instance F --hypothesis H1|H2|H3|flow --out CERT [--json]``.

H1/H2: attention instance with ``"X"``; a ``lipschitz`` certificate for VERIFIED / REFUTED.
H3: attention instance with ``"mu"`` and ``"nu"``; a ``lipschitz`` certificate of hypothesis H3
for VERIFIED / REFUTED (proofs/lipschitz.md §4). flow: ``{"schedule": ..., "X": n×d}``; the
``flow`` certificate of the enclosures used. Every certificate is re-checked in memory by the
independent checker before it is written.

Exit codes: 0 a certified verdict (VERIFIED or REFUTED), 1 UNDECIDED or a certificate the
checker did not accept (nothing written), 2 bad input or I/O error (nothing written).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from certified.commands.options import add_normalize_argument
from certified.verdict import Outcome

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``certified lipschitz`` (name and help: the command registry)."""
    parser.add_argument("--instance", type=Path, required=True, help="instance JSON file")
    parser.add_argument("--hypothesis", required=True, choices=("H1", "H2", "H3", "flow"))
    parser.add_argument("--out", type=Path, required=True, help="certificate file to write")
    parser.add_argument(
        "--prec", type=int, default=None, help="working precision in bits (128; --domain: 64)"
    )
    parser.add_argument(
        "--domain",
        action="store_true",
        help="H1/H2: decide over all of (B_R)^n (n = rows of X) by adaptive subdivision; "
        "writes a lipschitz-domain certificate (proofs/lipschitz.md section 5)",
    )
    parser.add_argument(
        "--factor",
        default="1",
        help="--domain: multiply the right-hand side by this exact number (default 1)",
    )
    parser.add_argument(
        "--max-cells", type=int, default=200_000, help="--domain: cell budget (200000)"
    )
    parser.add_argument(
        "--seconds", type=float, default=600.0, help="--domain: time budget in seconds (600)"
    )
    parser.add_argument(
        "--search",
        action="store_true",
        help="H1/H2: also search (B_R)^n (n = rows of X) for a large local constant and report "
        "the largest certified lower bound on Lip(f) against H1 and H2",
    )
    add_normalize_argument(parser, "the instance's measures mu and nu (H3)")
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")


def _verdict(args: argparse.Namespace):
    from certified.errors import ShapeError
    from certified.io import prefixed_errors, read_json, validate_json

    obj = read_json(args.instance)
    with prefixed_errors(str(args.instance)):
        if args.hypothesis == "flow":
            from certified.attention.flow_check import check_flow_gronwall, parse_flow_instance

            if isinstance(obj, dict) and "schedule" in obj:  # {"schedule", "X"}: no schema
                validate_json(obj["schedule"], "schedule", where="schedule", bound_error=ShapeError)
            schedule, X = parse_flow_instance(obj)
            return check_flow_gronwall(schedule, X, prec=args.prec)
        from certified.attention.instance import parse_attention_instance

        need = "measures" if args.hypothesis == "H3" else "X"
        validate_json(obj, "attention-instance")
        inst = parse_attention_instance(obj, require=need, normalize=args.normalize)
    if args.hypothesis == "H3":
        from certified.attention.mean_field import check_h3

        return check_h3(inst, prec=args.prec)
    from certified.attention.lipschitz import check_attention_hypothesis, check_on_domain

    if args.domain:
        return check_on_domain(
            inst,
            args.hypothesis,
            prec=args.prec,
            factor=args.factor,
            max_cells=args.max_cells,
            seconds=args.seconds,
        )
    return check_attention_hypothesis(inst, args.hypothesis, prec=args.prec)


def _search(args: argparse.Namespace) -> dict | None:
    """Largest certified lower bound on Lip(f) found by the float search, against H1 and H2."""
    from certified.arith.exact import approx_str, fmpq_to_str
    from certified.attention.family import compare_with_bounds, search_lipschitz_lower
    from certified.attention.instance import read_attention_instance
    from certified.attention.lipschitz import round_down

    inst = read_attention_instance(args.instance, require="X", normalize=args.normalize)
    best = search_lipschitz_lower(inst, inst.X.shape[0], restarts=2, steps=20, prec=args.prec)
    cmp = compare_with_bounds(inst, best, args.prec)
    return {
        "n": best.n,
        "lower": fmpq_to_str(round_down(best.lower)),
        "ratio_lower": {
            h: None if r is None else approx_str(r) for h, r in cmp["ratio_lower"].items()
        },
    }


def run(args: argparse.Namespace) -> int:
    """Run the subcommand; CertifiedError / OSError propagate to the CLI (exit 2)."""
    from certified._progress import Progress
    from certified.arith.ball import check_precision
    from certified.arith.exact import fmpq_to_str, to_fmpq
    from certified.certificates import command_json, print_json, write_if_accepted
    from certified.errors import InputError

    t0 = time.perf_counter()
    if args.prec is None:
        args.prec = 64 if args.domain else 128
    check_precision(args.prec, "--prec")
    if args.domain and (args.max_cells < 1 or not 0 < args.seconds <= 86400):
        raise InputError("--max-cells, --seconds: give at least 1 cell and 0 < seconds <= 86400")
    if (args.search or args.domain) and args.hypothesis not in ("H1", "H2"):
        raise InputError("--search, --domain: only with --hypothesis H1 or H2")
    if args.normalize and args.hypothesis == "flow":
        raise InputError("--normalize: rescales the measures mu, nu of an attention instance; "
                         "a flow instance has none: remove it")  # fmt: skip
    progress = Progress("lipschitz")
    with progress.stage(f"deciding {args.hypothesis}"):
        v = _verdict(args)
    search = None
    if args.search:
        with progress.stage("searching for certified lower bounds"):
            search = _search(args)
    verdict, message, path = v.verdict, v.message, None
    if verdict.decided and v.certificate is not None:
        path, check = write_if_accepted(args.out, v.certificate)
        if not check.verified:
            verdict = Outcome.UNDECIDED
            message = f"the checker did not accept the certificate: {check.reason}"
    seconds = time.perf_counter() - t0
    s = lambda q: None if q is None else fmpq_to_str(q)  # noqa: E731
    if args.json:
        out = command_json(
            "lipschitz",
            verdict,
            path,
            seconds,
            scope=_scope(args),
            hypothesis=v.hypothesis,
            lhs_lower=s(v.lhs_lower),
            lhs_upper=s(v.lhs_upper),
            rhs_lower=s(v.rhs_lower),
            rhs_upper=s(v.rhs_upper),
            bound=s(v.rhs_upper),
            counterexample=verdict is Outcome.REFUTED,
            statement=v.statement if verdict.decided else "",
            message=message,
        )
        if search is not None:
            out["search"] = search
        print_json(out)
    else:
        print(f"{v.hypothesis}: {verdict}: {message}")
        if verdict.decided:
            print(f"  asserts: {v.statement}")
        if path is not None:
            print(f"  certificate written to {path}")
        elif verdict.decided:
            print("  no certificate kind covers this hypothesis in version 1; nothing written")
        if search is not None:
            ratios = ", ".join(f"{h} >= {r}" for h, r in search["ratio_lower"].items())
            lower = float(to_fmpq(search["lower"]))
            print(f"  search: certified Lip(f) >= {lower:.6g} (fraction of each bound: {ratios})")
    if verdict is Outcome.UNDECIDED:
        print(f"certified lipschitz: {message}", file=sys.stderr)
        return 1
    return 0


def _scope(args: argparse.Namespace) -> str:
    """What a lipschitz verdict is about (the statement line says it in full)."""
    if args.domain:
        return f"all inputs in (B_R)^n, for the Q, K, V, R and n of {args.instance}"
    if args.hypothesis == "H3":
        rescaled = " (weights divided by their exact sums: --normalize)" if args.normalize else ""
        return f"the pair of measures mu, nu of {args.instance}{rescaled}"
    if args.hypothesis == "flow":
        return f"all pairs of the points of {args.instance}"
    return f"the input X of {args.instance} only (not the whole ball: see --domain)"


H1_DEMO = {
    "Q": [[0, 1], [0, -1]],
    "K": [[1, 0], [1, 0]],
    "V": [[1, 2], [0, 1]],
    "R": 1,
    "X": [[1, 0], [0, "1/2"], ["-1/2", "-1/2"]],
}
"""QᵀK = 0 with nonzero Q and K: H1's right side is 0, f is X ↦ (V x̄, …, V x̄)."""


def demo_check():
    """``certified demo`` step: the H1 refutation certified and re-checked by the checker.

    Guarantee: passed implies the checker accepted the REFUTED certificate.
    """
    from certified.arith.exact import approx_str
    from certified.attention.instance import parse_attention_instance
    from certified.attention.lipschitz import check_attention_hypothesis
    from certified.checker import check_certificate
    from certified.commands.records import DemoCheck

    v = check_attention_hypothesis(parse_attention_instance(H1_DEMO), "H1")
    check = check_certificate(v.certificate) if v.certificate is not None else None
    ok = v.verdict is Outcome.REFUTED and check is not None and check.verified
    certificates = {"lipschitz_h1_refutation.json": v.certificate} if ok else {}
    detail = f"ratio >= {approx_str(v.lhs_lower)} > H1 bound 0; " + (
        check.reason if check is not None else v.message
    )
    name = "attention H1 refuted (certificate re-checked)"
    return DemoCheck(name, ok, 0.0, detail, certificates)
