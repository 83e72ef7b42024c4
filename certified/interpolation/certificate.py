"""Certificates of kind ``interpolation`` (v1, proofs/interpolation.md), producer side, and the
``certified interpolate`` command.

The certificate holds the data (``X``, ``Y``), the schedule (the schedule file format), the
claim (``result`` "exact" or "max-error", ``max_error_squared`` = max_n |Φ_T(x_n) − y_n|^2
exactly, switch counts, variant) and, as hints, the phases: consecutive pieces sharing a
normal, which the checker replays as ``x + G(a·x)`` (certified/checker/_interpolation_rule.py).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from certified.arith.exact import fmpq_to_str
from certified.certificates import exact_number
from certified.errors import InputError
from certified.interpolation.construct import Interpolation, construct_interpolation
from certified.interpolation.verify import InterpolationVerdict, verify_interpolation
from certified.models import Schedule

__all__ = ["add_parser", "demo_check", "interpolation_certificate", "run"]


def _numbers(a: np.ndarray) -> list:
    return np.vectorize(exact_number, otypes=[object])(a).tolist()


def _schedule_json(schedule: Schedule) -> dict[str, Any]:
    return {
        "dimension": schedule.dimension,
        "activation": schedule.activation.value,
        "pieces": [
            {
                "duration": exact_number(p.duration),
                "W": _numbers(p.W),
                "A": _numbers(p.A),
                "b": _numbers(p.b),
            }
            for p in schedule.pieces
        ],
    }


def interpolation_certificate(
    interp: Interpolation,
    schedule: Schedule | None = None,
    verdict: InterpolationVerdict | None = None,
) -> dict[str, Any]:
    """The ``interpolation`` certificate of a construction (or of ``schedule``, e.g. its
    :func:`export_float64`, with the construction's phases).

    Raises
    ------
    InputError
        The schedule is not laminar ReLU (no exact replay: use ``certified flow``).

    Guarantee: none (producer); ``certified check`` decides.
    """
    schedule = interp.schedule if schedule is None else schedule
    if verdict is None:
        verdict = verify_interpolation(interp.X, interp.Y, schedule)
    if verdict.max_error_squared is None or schedule.activation.value != "relu":
        raise InputError(
            "schedule: not laminar ReLU, so no exact interpolation certificate; certify its "
            "flow with `certified flow` instead"
        )
    phases = []
    for phase in interp.hints["phases"]:
        lo, hi = phase["pieces"]
        phases.append({"pieces": [lo, hi], "normal": _numbers(schedule.pieces[lo].A[0])})
    return {
        "kind": "interpolation",
        "version": 1,
        "instance": {
            "X": _numbers(interp.X),
            "Y": _numbers(interp.Y),
            "schedule": _schedule_json(schedule),
        },
        "claim": {
            "result": "exact" if verdict.exact else "max-error",
            "max_error_squared": exact_number(verdict.max_error_squared),
            "switches": schedule.switches,
            "formula_switches": interp.formula_switches,
            "variant": interp.variant,
        },
        "hints": {"phases": phases},
    }


# --- command line ------------------------------------------------------------------------------


def add_parser(sub) -> None:
    """Register ``certified interpolate`` on the ``certified`` parser's subparsers."""
    c = sub.add_parser(
        "interpolate",
        help="exact interpolation of point pairs by a ReLU neural ODE, with a certificate",
    )
    c.add_argument("--data", type=Path, required=True, help='dataset {"X": n×d, "Y": n×d}')
    c.add_argument("--width", type=int, required=True, help="neurons per piece p >= 1")
    c.add_argument("--time", default="1", help="final time T > 0, exact (1, 1/2, ...)")
    c.add_argument("--variant", choices=("auto", "general", "high-dim"), default="auto")
    c.add_argument(
        "--float",
        action="store_true",
        help="export float64 parameters; certify their flow's error instead of exactness",
    )
    c.add_argument("--out", type=Path, required=True, help="certificate file to write")
    c.add_argument("--json", action="store_true", help="print one JSON object on stdout")


def run(args: argparse.Namespace) -> int:
    """Run ``certified interpolate``; CertifiedError / OSError propagate (exit 2)."""
    from certified._progress import Progress
    from certified.certificates import command_json, print_json, write_if_accepted
    from certified.interpolation.verify import export_float64
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
                # C's direction u is a long integer vector: its doubles are not laminar; A's are
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
    ok = path is not None and verdict.verdict == "VERIFIED"
    if args.json:
        out = command_json(
            "interpolate",
            "VERIFIED" if ok else "UNDECIDED",
            path,
            time.perf_counter() - t0,
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
        print(f"VERIFIED: certificate written to {path}" if ok else f"UNDECIDED: {message}")
    if path is None:
        print(f"certified interpolate: {message}", file=sys.stderr)
        return 1
    return 0


def demo_check():
    """``certified demo`` step: 40 random pairs in R^3 interpolated exactly with width 4, the
    certificate re-checked (written as ``interpolation.json`` with --out).

    Guarantee: passed implies the checker accepted the interpolation certificate.
    """
    from certified.checker import check_certificate
    from certified.demo import CERTIFICATES, DemoCheck

    rng = np.random.default_rng(2401_09902)
    X, Y = rng.random((40, 3)), rng.random((40, 3))
    interp = construct_interpolation(X, Y, 4)
    cert = interpolation_certificate(interp)
    verdict = check_certificate(cert)
    if verdict.verified:
        CERTIFICATES["interpolation.json"] = cert
    name = f"interpolation N=40 d=3 p=4, L={interp.switches} (certificate re-checked)"
    return DemoCheck(name, verdict.verified, 0.0, verdict.reason)
