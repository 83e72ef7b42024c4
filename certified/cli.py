"""The ``certified`` command (see ``README.md`` and the CLI contract in the design notes).

Exit codes: 0 success, 1 a check failed (REJECTED / not verified), 2 usage, input or I/O error.
Errors print one line on stderr; nothing is written on failure.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from certified import __version__
from certified.errors import CertifiedError

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # usage errors exit 2 with one line, as argparse does
        self.print_usage(sys.stderr)
        self.exit(2, f"certified: error: {message}\n")


def _build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="certified",
        description="Rigorous numerics for neural ODEs and transformers: certified enclosures, "
        "theorem-instance verdicts and re-checkable certificates.",
    )
    p.add_argument("--version", action="version", version=f"certified {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    d = sub.add_parser("demo", help="run the main job on embedded defaults and re-check it")
    d.add_argument("--out", type=Path, help="directory for the demo's output files")
    d.add_argument("--json", action="store_true", help="print one JSON object on stdout")

    c = sub.add_parser(
        "check",
        help="re-check certificate files with the independent checker",
        description="One line per file: 'VERIFIED <kind> <file>' or 'REJECTED <file>: <reason>'. "
        "Exit 0 all verified, 1 some rejected, 2 usage or I/O error.",
    )
    c.add_argument("files", nargs="+", metavar="FILE", help="certificate files")

    from certified.bench import SUITES
    from certified.flow.command import add_arguments as add_flow_arguments

    add_flow_arguments(
        sub.add_parser(
            "flow", help="certified enclosures of a schedule's flow map, with a certificate"
        )
    )

    b = sub.add_parser("bench", help="benchmarks: ratios against float64 in the same run")
    b.add_argument("suite", choices=sorted(SUITES), help="which hot paths to measure")
    b.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    b.add_argument("--quick", action="store_true", help="smaller sizes (for smoke tests)")
    from certified.moments.command import add_parser as add_separate_parser

    add_separate_parser(sub)
    from certified.transport.command import add_parser as add_wasserstein_parser

    add_wasserstein_parser(sub)
    from certified.attention.command import add_parser as add_lipschitz_parser

    add_lipschitz_parser(sub)
    from certified.interpolation.certificate import add_parser as add_interpolate_parser

    add_interpolate_parser(sub)
    return p


def _demo(args: argparse.Namespace) -> int:
    from certified._progress import Progress
    from certified.certificates import command_json, print_json
    from certified.demo import run_demo, write_summary

    t0 = time.perf_counter()
    with Progress("demo").stage("building, certifying and re-checking each family"):
        checks = run_demo()
    all_ok = all(c.passed for c in checks)
    path = write_summary(checks, args.out) if args.out is not None and all_ok else None
    seconds = time.perf_counter() - t0
    verdict = "VERIFIED" if all_ok else "REFUTED"
    if args.json:
        checks_json = [
            {"name": c.name, "passed": c.passed, "max_width": repr(c.max_width)} for c in checks
        ]
        print_json(command_json("demo", verdict, path, seconds, checks=checks_json))
    else:
        print(f"certified {__version__} demo: rigorous arithmetic, re-checked in 256-bit arb")
        for c in checks:
            mark = "ok  " if c.passed else "FAIL"
            print(f"  [{mark}] {c.name:40s} max width {c.max_width:.3e}  {c.detail}")
        print(f"{verdict}: {sum(c.passed for c in checks)}/{len(checks)} checks in {seconds:.2f} s")
        if path is not None:
            print(f"summary written to {path}")
    return 0 if all_ok else 1


def _bench(args: argparse.Namespace) -> int:
    from certified._progress import Progress
    from certified.bench import run_suite
    from certified.certificates import command_json, print_json

    t0 = time.perf_counter()
    with Progress("bench").stage(f"running suite {args.suite}"):
        results = run_suite(args.suite, quick=args.quick)
    seconds = time.perf_counter() - t0
    if args.json:
        print_json(
            command_json(
                "bench",
                "VERIFIED",
                None,
                seconds,
                suite=args.suite,
                benchmarks=[r.to_json() for r in results],
            )
        )
        return 0
    print(f"certified bench {args.suite}: ratio = seconds / baseline seconds, same run")
    print(f"  {'benchmark':46s} {'seconds':>10s} {'baseline':>16s} {'base s':>10s} {'ratio':>8s}")
    for r in results:
        target = "" if r.target is None else f"  (target <= {r.target:g})"
        print(
            f"  {r.name:46s} {r.seconds:10.5f} {r.baseline:>16s} {r.baseline_seconds:10.5f} "
            f"{r.ratio:8.2f}{target}"
        )
        for key, value in r.extra.items():
            print(f"      {key} = {value}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = _build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    if args.command == "check":  # the trusted checker: same lines and exit codes as
        from certified.checker._cli import check_paths  # python -m certified.checker

        return check_paths(args.files, sys.stdout)
    try:
        if args.command == "demo":
            return _demo(args)
        if args.command == "flow":
            from certified.flow.command import run as run_flow

            return run_flow(args)
        if args.command == "bench":
            return _bench(args)
        if args.command == "separate":
            from certified.moments.command import run as run_separate

            return run_separate(args)
        if args.command == "wasserstein":
            from certified.transport.command import run as run_wasserstein

            return run_wasserstein(args)
        if args.command == "interpolate":
            from certified.interpolation.certificate import run as run_interpolate

            return run_interpolate(args)
        if args.command == "lipschitz":
            from certified.attention.command import run as run_lipschitz

            return run_lipschitz(args)
    except CertifiedError as exc:
        print(f"certified {args.command}: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"certified {args.command}: I/O error: {exc}", file=sys.stderr)
        return 2
    parser.error(f"unknown command {args.command!r}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
