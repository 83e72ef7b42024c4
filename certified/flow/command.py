"""``certified flow (--schedule F | --field F|NAME) (--points F | --boxes F) [--time T]
[--save-at t1,t2,...] [--prec BITS] --out CERT [--json]``.

Verdicts: VERIFIED (the enclosures' certificate re-checked by the checker in memory, then
written; exit 0), UNDECIDED (no certificate: the message says why; nothing written; exit 1).
Bad input raises a ``CertifiedError`` (the CLI prints one line and exits 2), writing nothing.

Only the standard library is imported at module level: the command registry imports this module
to build the ``flow`` parser, and ``certified --help`` must stay fast.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

__all__ = ["add_arguments", "decimal_upper", "run"]


def decimal_upper(x) -> str:
    """A decimal string (17 significant digits, readable by float()) whose exact value is at
    least x (an fmpq or a float): widths in --json stay upper bounds when read exactly.

    Guarantee: upper bound.
    """
    from decimal import ROUND_CEILING, Context, Decimal

    from certified.arith.exact import fmpq_to_float

    up = x if isinstance(x, float) else fmpq_to_float(x, "up")
    return str(Context(prec=17, rounding=ROUND_CEILING).plus(Decimal(up)))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``certified flow`` on ``parser``."""
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--schedule", type=Path, help="schedule JSON file (x' = W s(A x + b))")
    what.add_argument(
        "--field",
        help="expression-field JSON file (docs: the 'Vector field' format, formats/field; its "
        "grammar: 'Certificate file format' section 7, theory/format, from proofs/format.md), "
        "or a shipped example: lorenz, vanderpol, rossler",
    )
    start = parser.add_mutually_exclusive_group(required=True)
    start.add_argument(
        "--points",
        type=Path,
        help='points: .json {"X": n×d} or .npz (exact doubles), or .csv (each field the exact '
        "decimal it spells). A certificate holds as many points as the checker's replay "
        "budget allows: with too many, the refusal says 'at most about N'; split the points "
        "into files of N",
    )
    start.add_argument(
        "--boxes",
        type=Path,
        help='boxes of initial conditions: .json {"lo": n×d, "hi": n×d} or .npz. Wide boxes '
        "and long times can fail after minutes: use smaller boxes (split each box), a "
        "shorter time (--time of an autonomous field), or fewer boxes per file (docs: "
        "families/flows)",
    )
    parser.add_argument(
        "--time",
        help="final time T > 0 (needed for autonomous fields; for schedules and piecewise "
        "fields, their total time)",
    )
    parser.add_argument(
        "--save-at",
        help="comma-separated earlier times also enclosed and certified (smooth fields)",
    )
    parser.add_argument(
        "--prec",
        type=int,
        help="working precision in bits, 53 to 4096 (default 53: ReLU by the vectorised engine, "
        "certificate rule relu-vectorised, smooth fields by the compiled float64 kernels; "
        "other values run the ReLU region engine / the same smooth method in arb)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        help="certificate file to write (omit it, or pass --no-certificate, for certified "
        "enclosures without a certificate)",
    )
    parser.add_argument(
        "--no-certificate",
        action="store_true",
        help="certified enclosures only: no certificate, no replay (fast; at any size)",
    )
    parser.add_argument(
        "--tight-claims",
        action="store_true",
        help="claim the checker's own replayed enclosures (replayed here first: about twice "
        "the time to write); by default, for certificates whose replay costs more than about a "
        "second, the engine's enclosures are claimed, widened (up to 4x as wide for smooth "
        "fields), and the replay is done once, by the writer's check. Without this option, "
        "points of smooth fields at 53 bits claim the replay's own enclosures in one replay "
        "(steps from a float64 predictor; the engine's route when that replay fails); with "
        "it, they take the engine's steps and the hints name the a priori factors",
    )
    parser.add_argument(
        "--enclosures",
        type=Path,
        help="also write the enclosures at every saved time: .csv (t, set, lo_0, hi_0, ...), "
        ".npz (lo, hi, times) or .json; bounds rounded outward",
    )
    parser.add_argument(
        "--max-splits",
        type=int,
        help="boxes: at most this many bisections per file (default 64); boxes of smooth "
        "fields are split where their enclosure grows past 1.5x its linear part, ReLU boxes "
        "where they straddle a switching plane; each box's enclosure is the narrower of its own "
        "and the hull of its sub-boxes' (the certificate carries the partition)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")


def flow_scope(n: int, what: str, source, times: list[str]) -> str:
    """What a flow verdict is about: these initial sets, these times (nothing in between,
    nothing else)."""
    at = ", ".join(times)
    return f"the flow from the {n} initial {what} of {source}, at t = {at} only"


PREC_RANGE = (53, 4096)  # hints.precision of rules taylor-lohner and relu-regions


def _require_doubles(schedule, source) -> None:
    """Every engine's step heuristics work with the parameters' nearest doubles: a parameter
    beyond the double range (a string "1e400" is read exactly) is refused before any work,
    naming the file and the field."""
    import numpy as np

    from certified.arith.exact import fmpq_to_float
    from certified.errors import RangeOverflowError

    for j, piece in enumerate(schedule.pieces):
        for name in ("W", "A", "b"):
            values = getattr(piece, name)
            for index in np.ndindex(values.shape):
                try:
                    fmpq_to_float(values[index], "nearest")
                except RangeOverflowError:
                    where = "".join(f"[{i}]" for i in index)
                    raise RangeOverflowError(
                        f"{source}: pieces[{j}].{name}{where}: beyond the double range "
                        "(|v| < 1.8e308) that the flow engines need; rescale the schedule"
                    ) from None


def run(args: argparse.Namespace) -> int:
    """Run ``certified flow``; return the exit code (raises CertifiedError on bad input)."""
    if args.prec is not None and not PREC_RANGE[0] <= args.prec <= PREC_RANGE[1]:
        from certified.errors import PrecisionError

        raise PrecisionError(
            f"--prec: {args.prec} is outside [{PREC_RANGE[0]}, {PREC_RANGE[1]}] bits, the "
            "precisions at which certificates are replayed (proofs/format.md)"
        )
    from certified._progress import Progress
    from certified.arith.exact import fmpq_to_str, to_fmpq
    from certified.certificates import command_json, print_json, write_if_accepted
    from certified.errors import InputError
    from certified.flow.api import enclose_flow, flow_certificate_for
    from certified.flow.enclosures_file import check_enclosures_path
    from certified.io import read_boxes, read_points
    from certified.models import Schedule

    t0 = time.perf_counter()
    if args.no_certificate and args.out is not None:
        raise InputError("--out, --no-certificate: a certificate or none; give one of them")
    if args.enclosures is not None:
        check_enclosures_path(args.enclosures)
    if args.max_splits is not None and not 0 <= args.max_splits <= 100_000:
        raise InputError(f"--max-splits: {args.max_splits} is not in [0, 100000]")
    if args.field is not None or args.save_at is not None:
        return _run_field(args, t0)
    schedule = Schedule.from_json(args.schedule)
    _require_doubles(schedule, args.schedule)
    if not schedule.activation.is_piecewise_linear:  # tanh / sigmoid: the Taylor-Lohner path
        return _run_field(args, t0, schedule)
    if args.boxes is not None:
        from certified.arith import Interval
        from certified.arith.exact import fmpq_array_to_float

        lo, hi = read_boxes(args.boxes)
        # outward to doubles: the certificate is about boxes containing the given ones
        start = Interval(fmpq_array_to_float(lo, "down"), fmpq_array_to_float(hi, "up"))
        n, d, source = lo.shape[0], lo.shape[1], args.boxes
    else:
        start = points = read_points(args.points)
        n, d, source = points.shape[0], points.shape[1], args.points
    if d != schedule.dimension:
        raise InputError(
            f"{source}: {'boxes' if args.boxes else 'points'} have {d} coordinates, the "
            f"schedule's dimension is {schedule.dimension}"
        )
    if args.time is not None and to_fmpq(args.time, field="--time") != schedule.total_time:
        raise InputError(
            f"--time: version 1 certifies the whole schedule, T = {schedule.total_time}; "
            "omit --time or give that value"
        )
    progress = Progress("flow")
    what = "boxes" if args.boxes is not None else "points"
    if args.out is None:  # enclosures only: the fastest engine that applies
        fast = _vectorised_applies(schedule, args.prec)
        with progress.stage(f"enclosing the flow of {n} {what}"):
            if fast:  # 53 bits: the vectorised engine (boxes in mean-value form), any number
                result = enclose_flow(
                    schedule, start, method="vectorised", max_splits=args.max_splits
                )
            else:
                result = enclose_flow(schedule, start, prec=args.prec)
        return _enclosures_only(args, result, n, what, source, t0)
    vec = _vectorised_applies(schedule, args.prec)  # rule relu-vectorised (53 bits)
    refusal = (_relu_vec_over_budget if vec else _relu_over_budget)(schedule, n, what, args.prec)
    with progress.stage(f"enclosing the flow of {n} {what}"):
        if vec:  # the vectorised engine: its step plan makes a certificate (refused: at once)
            result = (
                None
                if refusal
                else enclose_flow(schedule, start, method="vectorised", max_splits=args.max_splits)
            )
        elif refusal is None:  # the region engine: its hints make a certificate
            result = enclose_flow(schedule, start, prec=args.prec, method="regions")
        else:  # no certificate can be accepted: the vectorised engine's enclosures, if it applies
            result = _vectorised_or_none(schedule, start, args.prec)
    cert, cert_error = None, None
    if not refusal:
        try:  # rule relu-vectorised: the engine's claims first, re-checked by the writer
            with progress.stage("building the certificate"):
                fast = vec and args.boxes is None and not args.tight_claims  # boxes: straddles
                cert = flow_certificate_for(schedule, start, result, replay=not fast)
        except InputError as exc:  # over the checker's limit after all, or a step not repaired
            cert_error = str(exc)
    verdict, path = "UNDECIDED", None
    message = refusal or cert_error or result.message
    if refusal and result is not None:
        message += (
            "; the enclosures shown are the vectorised engine's (53 bits), with no certificate"
        )
    if cert is not None:
        gc.freeze()  # millions of live objects (points, claims): no collection walks them
        try:
            with progress.stage("writing the certificate, re-checked by the checker first"):
                path, check = write_if_accepted(args.out, cert)
        finally:
            gc.unfreeze()
        if vec and not check.verified and "resource limit" not in check.reason:
            try:  # the checker's own replay as the claims, failing steps repaired
                with progress.stage("replaying the steps as the checker does, for the claims"):
                    cert = flow_certificate_for(schedule, start, result)
                with progress.stage("writing the certificate, re-checked by the checker first"):
                    path, check = write_if_accepted(args.out, cert)
            except InputError as exc:
                check = type(check)(False, "flow", str(exc))
        if check.verified:
            verdict = "VERIFIED"
            _save_enclosures(args, result)
        else:
            message = f"the certificate was not accepted by the checker: {check.reason}"
    elif refusal is None and cert_error is None and result.status.value == "success":
        message = (
            "no checker rule covers boxes of tanh / sigmoid flows (points are covered)"
            if args.boxes is not None and schedule.activation.value in ("tanh", "sigmoid")
            else "no checker rule covers this schedule yet"
        )
    seconds = time.perf_counter() - t0
    ok = result is not None and result.status.value == "success"
    enc = result.final if ok else None
    if args.json:
        scope = flow_scope(n, what, source, [str(schedule.total_time)])
        out = command_json("flow", verdict, path, seconds, scope=scope, message=message)
        if ok:
            out["enclosures"] = [
                [
                    [fmpq_to_str(to_fmpq(lo)), fmpq_to_str(to_fmpq(hi))]
                    for lo, hi in zip(a, b, strict=True)
                ]
                for a, b in zip(enc.lo.tolist(), enc.hi.tolist(), strict=True)
            ]
            out["max_width"] = decimal_upper(result.max_width())
        print_json(out)
    else:
        if ok:
            print(
                f"{n} {what}, T = {schedule.total_time}: max enclosure width "
                f"{result.max_width():.3e}"
            )
        print(f"{verdict}" + (f": certificate written to {path}" if path else f": {message}"))
        if verdict == "VERIFIED":
            print(f"  scope: {flow_scope(n, what, source, [str(schedule.total_time)])}")
    if verdict == "VERIFIED":
        return 0
    print(f"certified flow: {message}", file=sys.stderr)
    return 1


def _relu_over_budget(schedule, n: int, what: str, prec) -> str | None:
    """Why no relu-regions certificate of these sets can be accepted (the checker's replay
    budget, known before any work), or None."""
    from certified.arith.ball import check_precision
    from certified.certificates import flow as producer
    from certified.flow.relu import DEFAULT_PREC

    if schedule.activation.value == "relu" and schedule.is_laminar():
        return None  # rule laminar-exact, with its own budget
    prec = DEFAULT_PREC if prec is None else check_precision(prec)
    need = producer.relu_regions_min_ops(schedule, n, what == "boxes", prec)
    limit = producer.RELU_REGIONS_MAX_OPS
    if need <= limit:
        return None
    return (
        f"no certificate: rule relu-regions would charge at least {need:.2g} operations for "
        f"{n} {what}, over the checker's limit {limit:.0g} (at most {n * limit // need} "
        f"{what} of this schedule per certificate)"
    )


def _vectorised_applies(schedule, prec) -> bool:
    """Rule relu-vectorised: 53 bits (the default), double parameters, not an exact laminar
    ReLU schedule (rule laminar-exact)."""
    if prec not in (None, 53) or not all(p.parameters_float_exact for p in schedule.pieces):
        return False
    return not (schedule.activation.value == "relu" and schedule.is_laminar())


def _relu_vec_over_budget(schedule, n: int, what: str, prec=None) -> str | None:
    """Why no relu-vectorised certificate of these sets can be accepted (a lower bound of the
    checker's cost, known before any work), with what to do; or None."""
    from certified.certificates.flow import relu_vectorised_min_cost
    from certified.checker.flow import relu_vectorised_limits

    need, limit = relu_vectorised_min_cost(schedule, n), relu_vectorised_limits()[0]
    if need <= limit:
        return None
    most = max(1, int(n * limit / need / 1.5))  # honest plans take ~1.5 steps per piece
    return (
        f"no certificate: rule relu-vectorised would cost at least {need:.2g} units for {n} "
        f"{what}, over the checker's limit {limit:.0g}; split the {what} into files of at "
        f"most about {most}, or omit --out for enclosures without a certificate"
    )


def _vectorised_or_none(schedule, start, prec):
    """The vectorised engine's enclosures (53 bits, no certificate), or None when it does
    not apply (a --prec other than 53, parameters that are not doubles)."""
    from certified.errors import InputError
    from certified.flow.api import enclose_flow

    if prec not in (None, 53):
        return None
    try:
        return enclose_flow(schedule, start, method="vectorised")
    except InputError:
        return None


def _read_start(args, d: int, what: str):
    """The initial points (exact) or boxes (outward to doubles) and their count."""
    from certified.errors import InputError
    from certified.io import read_boxes, read_points

    if args.boxes is not None:
        from certified.arith import Interval
        from certified.arith.exact import fmpq_array_to_float

        lo, hi = read_boxes(args.boxes)
        start, source = (
            Interval(fmpq_array_to_float(lo, "down"), fmpq_array_to_float(hi, "up")),
            args.boxes,
        )
        n, dd = lo.shape
    else:
        start = read_points(args.points)
        (n, dd), source = start.shape, args.points
    if dd != d:
        kind = "boxes" if args.boxes is not None else "points"
        raise InputError(f"{source}: {kind} have {dd} coordinates, the {what}'s dimension is {d}")
    return start, n


def _run_field(args, t0: float, schedule=None) -> int:
    """``certified flow --field`` (and smooth schedules with --save-at): rule taylor-lohner."""
    from certified._progress import Progress
    from certified.arith.exact import fmpq_to_str, to_fmpq
    from certified.certificates import command_json, print_json, write_if_accepted
    from certified.certificates.field_flow import FieldCertificateError
    from certified.errors import InputError
    from certified.fields import neural_field, read_field
    from certified.flow.api import enclose_flow, flow_certificate_for
    from certified.flow.options import SaveAt
    from certified.models import Schedule

    if args.field is not None:
        problem = read_field(args.field, time=args.time)
    else:
        schedule = schedule or Schedule.from_json(args.schedule)
        if schedule.activation.is_piecewise_linear:
            raise InputError("--save-at: the ReLU engines certify the final time only")
        problem = neural_field(schedule)
        if args.time is not None and to_fmpq(args.time, "--time") != problem.total_time:
            raise InputError(f"--time: the schedule's total time is {problem.total_time}")
    ts = []
    if args.save_at:
        ts = [to_fmpq(t.strip(), "--save-at") for t in args.save_at.split(",") if t.strip()]
    save_at = SaveAt(problem.total_time, [t for t in ts if t != problem.total_time])
    start, n = _read_start(args, problem.dimension, "field")
    what = "boxes" if args.boxes is not None else "points"
    source = args.boxes if args.boxes is not None else args.points
    if what == "boxes" and not ts and args.prec in (None, 53):  # quadratic sets, split (issue 18)
        from certified.checker.lohner import supported
        from certified.flow.taylor.boxes import run_smooth_boxes

        if supported(problem.field.expression):
            return run_smooth_boxes(args, problem, start, n, source, t0)
    progress = Progress("flow")
    one = None
    if (
        args.out is not None
        and what == "points"
        and args.prec in (None, 53)
        and not args.tight_claims
    ):
        one = _one_pass(args, problem, start, save_at, progress)
    if one is not None:  # the single replay's claims, accepted (issue 18)
        result, cert, written = one
    else:
        with progress.stage(f"enclosing the flow of {n} {what}"):
            result = enclose_flow(problem, start, save_at=save_at, prec=args.prec)
    if args.out is None:
        return _enclosures_only(args, result, n, what, source, t0)
    verdict, path, message, claims = "UNDECIDED", None, result.message, None
    if one is not None:
        verdict, path, claims = "VERIFIED", written, cert["claim"]["enclosures"][-1]
        _save_enclosures(args, result)
    elif result.status.value == "success":
        try:  # the engine's claims first (float64 replay), re-checked by the writer
            with progress.stage("building the certificate"):
                cert = flow_certificate_for(problem, start, result, precision=args.prec,
                                            replay=args.tight_claims or None)  # fmt: skip
        except FieldCertificateError as exc:
            cert, message = None, str(exc)
        if cert is not None:
            with progress.stage("writing the certificate, re-checked by the checker first"):
                path, check = write_if_accepted(args.out, cert)
            if cert["hints"].get("apriori") == "search" and not check.verified:
                cert, path, check = _wider_claims(problem, start, result, args, cert, path, check,
                                                  progress)  # fmt: skip
            if cert["hints"].get("apriori") == "search" and not check.verified:
                try:  # the checker's own replay as the claims (and its factors)
                    with progress.stage("replaying the steps as the checker does, for the claims"):
                        cert = flow_certificate_for(problem, start, result, precision=args.prec)
                    with progress.stage("writing the certificate, re-checked by the checker first"):
                        path, check = write_if_accepted(args.out, cert)
                except FieldCertificateError as exc:
                    check = type(check)(False, "flow", str(exc))
            if check.verified:
                verdict, claims = "VERIFIED", cert["claim"]["enclosures"][-1]
                _save_enclosures(args, result)
            else:
                message = f"the certificate was not accepted by the checker: {check.reason}"
    seconds = time.perf_counter() - t0
    width = None
    if claims is not None:
        width = max(to_fmpq(hi) - to_fmpq(lo) for row in claims for lo, hi in row)
    if args.json:
        scope = flow_scope(n, what, source, list(result.times))
        out = command_json("flow", verdict, path, seconds, scope=scope, message=message)
        if claims is not None:
            out["enclosures"] = [
                [[fmpq_to_str(to_fmpq(lo)), fmpq_to_str(to_fmpq(hi))] for lo, hi in row]
                for row in claims
            ]
            out["max_width"] = decimal_upper(width)
            out["times"] = list(result.times)
        print_json(out)
    else:
        if width is not None:
            print(f"{n} {what}, T = {problem.total_time}: max enclosure width {float(width):.3e}")
        print(f"{verdict}" + (f": certificate written to {path}" if path else f": {message}"))
        if verdict == "VERIFIED":
            print(f"  scope: {flow_scope(n, what, source, list(result.times))}")
    if verdict == "VERIFIED":
        return 0
    print(f"certified flow: {message}", file=sys.stderr)
    return 1


def _one_pass(args, problem, start, save_at, progress):
    """The one-pass writer of smooth fields at 53 bits (float64 replay, points;
    :func:`certified.flow.one_pass.one_pass`): the claims are the checker's own replay of the
    predicted steps, and the written bytes are re-checked inside the pass, reusing that replay.
    Returns (result, certificate, path) when written, None (nothing written) to take the
    engine's route instead.
    Guarantee: a written file holds bytes the checker accepted."""
    from certified.certificates import write_if_accepted
    from certified.flow.one_pass import one_pass

    with one_pass(problem, start, save_at, progress) as one:
        if one is None:
            return None
        path, check = write_if_accepted(args.out, one[1])
    return (*one, path) if check.verified else None


def _wider_claims(problem, start, result, args, cert, path, check, progress):
    """Claims of the engine's enclosures widened less than 4x and missed by the checker's
    replay (``field_flow.claim_widening``): the 4x claims, checked once more (one replay,
    where the replayed claims cost two); (cert, path, check) as given when they are 4x
    already or missed again."""
    from certified.certificates import write_if_accepted
    from certified.certificates.field_flow import claim_widening, field_flow_certificate
    from certified.flow.api import flow_problem
    from certified.flow.options import SaveAt, initial_set

    if claim_widening(problem.field.expression) >= 4.0:
        return cert, path, check
    pb = flow_problem(problem, SaveAt(t1=result.times[-1]))
    sets = initial_set(start, pb.dimension)
    wide = field_flow_certificate(pb, sets, result, precision=args.prec, replay=False, widening=4.0)
    with progress.stage("writing the certificate (claims 4x the engine's), re-checked first"):
        at, again = write_if_accepted(args.out, wide)
    return (wide, at, again) if again.verified else (cert, path, check)


def _save_enclosures(args, result) -> None:
    """``--enclosures FILE``: the engine's enclosures at every saved time (a certificate's
    claims, replayed in arb, may be tighter)."""
    if args.enclosures is not None and result.status.value == "success":
        result.save(args.enclosures)


def _enclosures_only(args, result, n: int, what: str, source, t0: float) -> int:
    """No ``--out`` (or ``--no-certificate``): the certified enclosures, printed and, with
    ``--enclosures``, written; no certificate and no replay. Exit 0 when the flow succeeded."""
    from certified.arith.exact import fmpq_to_str, to_fmpq
    from certified.certificates import command_json, print_json

    ok = result.status.value == "success"
    verdict = "VERIFIED" if ok else "UNDECIDED"
    message = "" if ok else result.message
    if ok:
        _save_enclosures(args, result)
    scope = flow_scope(n, what, source, list(result.times)) + (
        " (enclosures computed in rigorous arithmetic; no certificate: not re-checked by the "
        "checker)"
    )
    seconds = time.perf_counter() - t0
    if args.json:
        out = command_json("flow", verdict, None, seconds, scope=scope, message=message)
        if ok:
            enc = result.final
            exact = fmpq_to_str
            out["enclosures"] = [
                [[exact(to_fmpq(x)), exact(to_fmpq(y))] for x, y in zip(a, b, strict=True)]
                for a, b in zip(enc.lo.tolist(), enc.hi.tolist(), strict=True)
            ]
            out["max_width"] = decimal_upper(result.max_width())
            out["times"] = list(result.times)
            out["enclosures_file"] = None if args.enclosures is None else str(args.enclosures)
        print_json(out)
    else:
        if ok:
            T = result.times[-1]
            print(f"{n} {what}, T = {T}: max enclosure width {result.max_width():.3e}")
            if args.enclosures is not None:
                print(f"VERIFIED: enclosures written to {args.enclosures} (no certificate)")
            else:
                print("VERIFIED: enclosures only (no certificate); --enclosures FILE writes them")
            print(f"  scope: {scope}")
        else:
            print(f"UNDECIDED: {message}")
    if ok:
        return 0
    print(f"certified flow: {message}", file=sys.stderr)
    return 1
