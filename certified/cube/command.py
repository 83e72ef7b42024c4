"""``certified transport-to-cube --measure F --width p --epsilon E [--q Q] [--normalize] --out CERT
[--json]``.

Theorem F (theorems.md §3): VERIFIED writes a ``transport-to-cube`` certificate (exact ReLU
schedule, W_q(Φ_T#μ, U([0,1]^d)) <= bound <= ε), re-checked by the checker first (exit 0), for
an empirical measure (laminar interpolation, proofs/cube.md §5) or a piecewise-constant density
on a grid of boxes (axis shears and coordinate scalings, §6); UNDECIDED writes nothing (exit 1):
a certificate the checker refused. Bad input (weights or masses not summing to 1, negative
masses, p < d, ε <= 0, q outside [1, d/(d−1)), too few atoms for ε) exits 2, nothing written.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from certified.commands.options import add_normalize_argument
from certified.verdict import Outcome

__all__ = ["add_arguments", "demo_check", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``certified transport-to-cube``."""
    parser.add_argument(
        "--measure",
        type=Path,
        required=True,
        help='measure JSON {"points", "weights"} or a box density {"grid", "masses"}',
    )
    parser.add_argument("--width", type=int, required=True, help="neurons per piece, p >= d")
    parser.add_argument("--epsilon", required=True, help="target W_q bound ε > 0, exact (0.05)")
    parser.add_argument("--q", default="1", help="exponent 1 <= q < d/(d-1), exact; default 1")
    add_normalize_argument(parser, "the measure")
    parser.add_argument("--out", type=Path, required=True, help="certificate file to write")
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")


def _read(path: Path, normalize: bool = False):
    """A Measure (``normalize``: weights divided exactly by their sum, recorded), or a
    BoxDensity (validated) when the file has a "grid" key."""
    from certified.cube.density import read_box_density
    from certified.io import read_json
    from certified.transport.measure import Measure

    obj = read_json(path)
    if isinstance(obj, dict) and "grid" in obj:
        return read_box_density(obj, os.fspath(path))
    return Measure.from_file(path, normalize=normalize)


def _report(args, outcome, path, seconds, result, message) -> None:
    from certified.arith.exact import fmpq_to_str
    from certified.certificates import command_json, print_json

    density = result is not None and hasattr(result, "density")
    cells = None if result is None else len(result.cells if density else result.partition.cells)
    if args.json:
        fields = {"message": message}
        if result is not None:
            extra = (
                {"parts_per_axis": result.parts}
                if density
                else {"bound_squared": fmpq_to_str(result.bound_squared)}
            )
            fields = {
                "bound": fmpq_to_str(result.bound),
                **extra,
                "epsilon": fmpq_to_str(result.epsilon),
                "q": fmpq_to_str(result.q),
                "switches": result.switches,
                "formula_switches": result.formula_switches,
                "cells": cells,
                **fields,
            }
        scope = _scope(args, density)
        print_json(command_json("transport-to-cube", outcome, path, seconds, scope=scope, **fields))
        return
    if result is not None:
        L = result.formula_switches
        what = (
            f"density d={result.density.d}"
            if density
            else f"N={result.measure.n} d={result.measure.d}"
        )
        print(
            f"{what} p={result.width}: W_q(Phi_T#mu, U) <= "
            f"{float(result.bound):.6g} <= epsilon = {fmpq_to_str(result.epsilon)} "
            f"({cells} cells); L = {result.switches} switches (formula "
            f"{L if L is not None else '> 10^10000'})"
        )
    print(f"{outcome}: certificate written to {path}" if path else f"{outcome}: {message}")
    if path:
        print(f"  scope: {_scope(args, density)}")


def _scope(args, density: bool = False) -> str:
    if density:
        return (
            f"the density {args.measure} (its grid and exact masses): W_q <= W_2 <= bound for "
            "every q in [1, 2]; not other measures"
        )
    weights = (
        "weights divided by their exact sum: --normalize"
        if getattr(args, "normalize", False)
        else "exact weights"
    )
    return (
        f"the empirical measure {args.measure} (its atoms and {weights}), every q >= 1; "
        "not a density, not other measures"
    )


def run(args: argparse.Namespace) -> int:
    """Run the subcommand; CertifiedError / OSError propagate to the CLI (exit 2)."""
    from certified._progress import Progress
    from certified.certificates import write_if_accepted
    from certified.cube.certificate import cube_certificate, density_certificate
    from certified.cube.construct import transport_to_cube
    from certified.cube.density import BoxDensity
    from certified.cube.density_flow import density_to_cube

    t0 = time.perf_counter()  # --out over the input: refused by certified.cli, for every command
    progress = Progress("transport-to-cube")
    with progress.stage(f"reading {args.measure}"):
        mu = _read(args.measure, args.normalize)
    if isinstance(mu, BoxDensity):
        with progress.stage(f"constructing (density, d = {mu.d}, p = {args.width})"):
            result = density_to_cube(mu, args.width, args.epsilon, args.q)
        cert = density_certificate(result)
    else:
        with progress.stage(f"constructing (n = {mu.n}, d = {mu.d}, p = {args.width})"):
            result = transport_to_cube(mu, args.width, args.epsilon, args.q)
        cert = cube_certificate(result)
    with progress.stage("writing the certificate, re-checked by the checker first"):
        path, check = write_if_accepted(Path(args.out), cert)
    message = "" if check.verified else f"the checker did not accept: {check.reason}"
    outcome = Outcome.VERIFIED if path is not None else Outcome.UNDECIDED
    _report(args, outcome, path, time.perf_counter() - t0, result, message)
    if path is None:
        print(f"certified transport-to-cube: {message}", file=sys.stderr)
        return 1
    return 0


def demo_check():
    """``certified demo`` step: 400 Gaussian atoms in R^2 pushed within W_q <= 0.2 of
    U([0,1]^2) by an exact width-2 schedule, the certificate re-checked by the checker.

    Guarantee: passed implies the checker accepted the certificate.
    """
    import numpy as np

    from certified.checker import check_certificate
    from certified.commands.records import DemoCheck
    from certified.cube import cube_certificate, transport_to_cube

    mu = np.random.default_rng(14).standard_normal((400, 2))
    result = transport_to_cube(mu, 2, "1/5")
    cert = cube_certificate(result)
    verdict = check_certificate(cert)
    certificates = {"transport_to_cube.json": cert} if verdict.verified else {}
    detail = f"W_q <= {float(result.bound):.6g}, L = {result.switches}; {verdict.reason}"
    name = "theorem F: 400 atoms onto U([0,1]^2) (certificate re-checked)"
    return DemoCheck(name, verdict.verified, float(result.bound), detail, certificates)
