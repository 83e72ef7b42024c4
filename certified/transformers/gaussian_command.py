"""``certified transformer gaussian-pde --params P --time T [--save-at t1,..] [--prec BITS]
--out CERT [--json]``: the Gaussian Transformer PDE (certified.transformers.gaussian_pde).

VERIFIED: the flow certificate of the moment ODE (rule taylor-lohner), re-checked by the
checker before it is written (exit 0); UNDECIDED: the engine could not certify the flow (it
never returns a wrong enclosure), nothing written (exit 1). Bad input (a covariance that is not
symmetric positive definite, decided exactly; shapes; a time past a closed-form blow-up, with
the certified interval of the blow-up time): one line, exit 2, nothing written.

``--json`` (enclosures as decimal strings rounded outward, exact when read exactly): ``mean``
(d x [lo, hi]), ``cov`` (d x d x [lo, hi]), ``eigenvalues`` (increasing, [lo, hi]),
``condition_number`` ([lo, hi] or null), ``w2`` ({lower, upper} to the target, or null),
``max_width``, ``blow_up`` (the closed form's decision), ``save_at`` (the same per earlier time).
"""

from __future__ import annotations

import argparse
import sys
import time
from decimal import ROUND_CEILING, ROUND_FLOOR, Context, Decimal
from typing import Any

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``certified transformer gaussian-pde`` (beside the shared ones)."""
    parser.add_argument(
        "--params",
        help='gaussian-pde: JSON {"mean", "cov", "Q", "K", "V" | "heads" | "pieces", '
        '"target"?} (certified/transformers/gaussian_pde.py)',
    )
    parser.add_argument("--time", help="gaussian-pde: final time T > 0 (exact)")
    parser.add_argument("--prec", type=int, help="gaussian-pde, stack: working precision in bits")


def _digits(prec: int) -> int:
    return max(20, int(prec * 0.30103) + 4)


def _down(q, digits: int) -> str:
    ctx = Context(prec=digits, rounding=ROUND_FLOOR)
    return str(ctx.divide(Decimal(int(q.p)), Decimal(int(q.q))))


def _up(q, digits: int) -> str:
    ctx = Context(prec=digits, rounding=ROUND_CEILING)
    return str(ctx.divide(Decimal(int(q.p)), Decimal(int(q.q))))


def _interval(lo, hi, digits: int) -> list[str]:
    return [_down(lo, digits), _up(hi, digits)]


def moments_json(pde, result, k: int, prec: int) -> dict[str, Any]:
    """The certified statements at time index k as JSON (decimal strings, outward).

    Guarantee: every [lo, hi] encloses its quantity."""
    from certified.arith.exact import fmpq_to_str, to_fmpq
    from certified.transformers.gaussian_moments import (
        condition_number,
        covariance_eigenvalues,
        w2_to_target,
    )
    from certified.transformers.gaussian_pde import moments_at

    n = _digits(prec)
    g = moments_at(pde, result, k)
    eigs = covariance_eigenvalues(g, max(prec, 128))
    kappa = condition_number(eigs)
    w2 = None
    if pde.target is not None:
        w = w2_to_target(g, eigs, *pde.target, prec=max(prec, 128))
        w2 = None if w is None else {"lower": _down(w.lower, n), "upper": _up(w.upper, n)}
    return {
        "time": fmpq_to_str(to_fmpq(result.times[k], "time")),
        "mean": [_interval(lo, hi, n) for lo, hi in g.mean],
        "cov": [[_interval(lo, hi, n) for lo, hi in row] for row in g.cov],
        "eigenvalues": [_interval(lo, hi, n) for lo, hi in eigs],
        "condition_number": None if kappa is None else _interval(*kappa, n),
        "w2": w2,
        "max_width": _up(g.max_width(), 17),
    }


def run(args: argparse.Namespace) -> int:
    """Run ``certified transformer gaussian-pde``; CertifiedError / OSError propagate to the
    CLI (exit 2)."""
    from pathlib import Path

    from certified._progress import Progress
    from certified.arith.ball import check_precision
    from certified.arith.exact import approx_str, to_fmpq
    from certified.certificates import command_json, print_json, write_if_accepted
    from certified.errors import InputError
    from certified.flow import flow_certificate_for
    from certified.transformers.gaussian_pde import blowup_time, gaussian_pde_flow, read_params
    from certified.verdict import Outcome

    t0 = time.perf_counter()
    progress = Progress("transformer gaussian-pde")
    if args.params is None or args.out is None:
        raise InputError("gaussian-pde: --params P.json and --out CERT are required")
    prec = 53 if args.prec is None else check_precision(args.prec, "--prec")
    with progress.stage(f"reading {args.params}"):
        pde = read_params(args.params, time=args.time)
    ts = []
    if args.save_at:
        ts = sorted({to_fmpq(t.strip(), "--save-at") for t in args.save_at.split(",")
                     if t.strip()})  # fmt: skip
        if any(not 0 < t < pde.total_time for t in ts):
            raise InputError(f"--save-at: times must lie in (0, {pde.total_time})")
    with progress.stage(f"certifying the moment ODE (d = {pde.d})"):
        result = gaussian_pde_flow(pde, ts=ts, prec=prec)  # BlowUpError: exit 2
    blow = blowup_time(pde)
    fields: dict[str, Any] = {
        "blow_up": None if blow is None else {"family": blow.family, "within_time": False}
    }
    path, message = None, ""
    if result.status.name != "SUCCESS":
        message = f"{result.message} (near a blow-up of the moment ODE the engine stops)"
    else:
        with progress.stage("certified eigenvalues and distances"):
            saves = [moments_json(pde, result, k, prec) for k in range(len(result.times))]
        fields.update({k: v for k, v in saves[-1].items() if k != "time"})
        fields["save_at"] = saves[:-1]
        cert = flow_certificate_for(pde.problem, pde.state(), result)
        with progress.stage("writing the certificate, re-checked by the checker first"):
            path, check = write_if_accepted(Path(args.out), cert)
        if path is None:
            message = f"the checker did not accept: {check.reason}"
    outcome = Outcome.VERIFIED if path is not None else Outcome.UNDECIDED
    seconds = time.perf_counter() - t0
    scope = f"N(mean, cov) of {args.params} under the Transformer PDE, at t = {pde.total_time}"
    if args.json:
        print_json(command_json("transformer gaussian-pde", outcome, path, seconds, scope=scope,
                                **fields, message=message))  # fmt: skip
    elif path is not None:
        ev = ", ".join(f"[{a}, {b}]" for a, b in fields["eigenvalues"])
        print(f"{outcome}: certificate written to {path} (t = {approx_str(pde.total_time)}, "
              f"max width {fields['max_width']}); eigenvalues of Sigma: {ev}")  # fmt: skip
    else:
        print(f"{outcome}: {message}")
    if path is None:
        print(f"certified transformer gaussian-pde: {message}", file=sys.stderr)
        return 1
    return 0
