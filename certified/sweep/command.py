"""``certified sweep SPEC --out DIR [--scheduler ADDRESS] [--workers N] [--redo-exceeded]
[--json]``, ``certified sweep init FAMILY`` and ``certified sweep check DIR``.

Runs every instance of the spec (``proofs/sweep.md``) on an embedded Dask ``LocalCluster``
(``--workers`` processes, one thread each) or on the scheduler at ``--scheduler``; writes
``DIR/certificates/`` (each re-checked by the checker before it is written), the rows to
``DIR/parts/`` as tasks finish, ``DIR/results.parquet``, ``DIR/plots/``; re-running resumes.
A progress bar with ETA on a terminal (quiet otherwise, and when ``CI`` is set), a summary at
the end.

Exit codes: 0 every instance has its row; 1 some tasks failed (their instances have no row,
re-run to retry); 2 bad input (spec, generators, ``--out``, an unreachable scheduler), before
any work and with nothing written.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``certified sweep`` (name and help: the command registry)."""
    parser.add_argument("spec", help="sweep spec (.toml or .json), or `init`, or `check`")
    parser.add_argument(
        "family", nargs="?", help="with `init`: the family of the example; with `check`: DIR"
    )
    parser.add_argument("--out", type=Path, help="output directory (default: the spec's out)")
    parser.add_argument("--scheduler", help="address of a running Dask scheduler (tcp://...)")
    parser.add_argument("--workers", type=int, default=2, help="local worker processes (default 2)")
    parser.add_argument(
        "--redo-exceeded",
        action="store_true",
        help="run again the instances whose row says they exceeded options.time_budget",
    )
    parser.add_argument("--no-plots", action="store_true", help="write no plots")
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")


def _init(family: str | None) -> int:
    from certified.errors import InputError
    from certified.sweep.families import adapter

    if family is None:
        raise InputError("init: name a family, e.g. `certified sweep init lipschitz`")
    print(adapter(family).example, end="")
    return 0


def _check(args: argparse.Namespace) -> int:
    from certified.errors import InputError
    from certified.sweep.recheck import recheck

    if args.family is None:
        raise InputError("check: name a sweep's output directory, `certified sweep check DIR`")
    table = recheck(args.family, scheduler=args.scheduler, workers=args.workers)
    for row in table.itertuples():
        if not row.verified:
            print(f"REJECTED {row.file}: {row.reason}")
    print(f"{int(table['verified'].sum())} VERIFIED, {int((~table['verified']).sum())} REJECTED "
          f"of {len(table)} certificates in {args.family}/certificates")  # fmt: skip
    return 0 if table["verified"].all() else 1


def _overall(counts: dict[str, int], total: int) -> str:
    if counts.get("VERIFIED", 0) == total:
        return "VERIFIED"
    if (
        counts.get("UNDECIDED", 0) == 0
        and counts.get("VERIFIED", 0) + counts.get("REFUTED", 0) == total
    ):
        return "REFUTED"
    return "UNDECIDED"


def run(args: argparse.Namespace) -> int:
    """Run ``certified sweep``; CertifiedError / OSError propagate (exit 2)."""
    if args.spec == "init":  # a spec file named init: write ./init
        return _init(args.family)
    if args.spec == "check":
        return _check(args)
    from certified.errors import InputError

    if args.family is not None:
        raise InputError(f"unexpected argument {args.family!r}; usage: certified sweep SPEC")
    try:
        from certified.sweep.report import ProgressBar, plot_table, summary_lines
        from certified.sweep.run import sweep
    except ImportError as exc:
        from certified.errors import MissingDependencyError

        raise MissingDependencyError(
            f"needs the sweep extra ({exc.name} is missing): pip install 'certified[sweep]'"
        ) from None
    t0 = time.perf_counter()
    table = sweep(
        args.spec,
        args.out,
        scheduler=args.scheduler,
        workers=args.workers,
        progress=ProgressBar(),
        redo_exceeded=args.redo_exceeded,
    )
    seconds = time.perf_counter() - t0
    out = Path(table.attrs["out"])
    plots = [] if args.no_plots else plot_table(table, out)
    failed = table.attrs.get("failed") or []
    counts = {str(k): int(v) for k, v in table["verdict"].value_counts().items()}
    if args.json:
        from certified.certificates import command_json, print_json

        total = len(table) + len(failed)
        print_json(
            command_json(
                "sweep",
                _overall(counts, total),
                None,
                seconds,
                scope="each row: one instance, with its family's scope (no claim of the sweep's)",
                table=str(out / "results.parquet"),
                certificates=str(out / "certificates"),
                counts=counts,
                instances=total,
                computed=table.attrs.get("computed", 0),
                skipped=table.attrs.get("skipped", 0),
                failed=len(failed),
                plots=[str(p) for p in plots],
            )
        )
    else:
        for line in summary_lines(table, seconds):
            print(line)
        print(f"table: {out / 'results.parquet'}; certificates: {out / 'certificates'}")
        if plots:
            print("plots: " + ", ".join(str(p) for p in plots))
    if failed:
        print(f"certified sweep: {len(failed)} instances failed; re-run to retry", file=sys.stderr)
        return 1
    return 0
