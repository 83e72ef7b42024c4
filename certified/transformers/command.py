"""``certified transformer flow --instance F --out CERT [--save-at t1,..] [--json]`` and
``certified transformer cluster --instance F --eps E --out CERT [--samples K] [--json]``.

flow: the certified flow of the tokens (attention dynamics of the instance, proofs/
transformers.md §1) through the generic rule ``taylor-lohner``; VERIFIED writes the re-checked
certificate (exit 0), UNDECIDED writes nothing (exit 1). ``--no-certificate`` (no ``--out``):
certified enclosures only, attention-only softmax instances by Taylor steps vectorised over the
tokens (proofs/particles.md §6), any size.
cluster: the hemisphere theorem's instance check (V = I, B = beta I): VERIFIED (hemisphere
witness and certified diameter at T <= eps; the ``transformer-cluster`` certificate, re-checked,
is written; exit 0), REFUTED (certified diameter > eps; exit 1, certificate written) or
UNDECIDED (exit 1, nothing written). Bad input (tokens off the sphere, non-finite numbers,
weights not summing to 1, parameters outside the theorem's setting, eps <= 0) exits 2 with one
line, nothing written.

Standard library only at module level (the registry imports it to build the parser).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

__all__ = ["add_arguments", "demo_check", "run"]

# subcommands defined in their own modules: gaussian-pde (gaussian_command), depth-limit
_DELEGATED = {
    "gaussian-pde": "certified.transformers.gaussian_command",
    "depth-limit": "certified.transformers.depth_command",
    "stack": "certified.transformers.stack_command",
    "match": "certified.transformers.match_command",
}


# `transformer flow --out`: above this many coordinates (n d) the generic engine's certificate
# is refused at once (n = 8, d = 3 takes seconds; at n = 64, d = 8 one order-1 pass of the
# Jacobian duals alone took minutes, and a flow needs hundreds of full steps)
GENERIC_MAX_COORDINATES = 256


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``certified transformer``."""
    from certified.transformers import (
        depth_command,
        gaussian_command,
        match_command,
        stack_command,
    )

    parser.add_argument("action", choices=("flow", "cluster", *_DELEGATED), help="what to certify")
    parser.add_argument(
        "--instance",
        type=Path,
        help='instance JSON {"tokens": n×d, "weights"?, "pieces": [{"duration", "V", "B", '
        '"W"?, "U"?, "b"?, "activation"?, "heads"?}], "geometry"?, "normalisation"?, '
        '"causal"?} or {"measures": [{"tokens", "weights"?}], ...} (proofs/transformers.md)',
    )
    parser.add_argument("--eps", help="cluster: diameter threshold eps > 0 (exact)")
    parser.add_argument(
        "--samples",
        type=int,
        default=16,
        help="cluster: equally spaced times searched for the first certified diameter <= eps",
    )
    parser.add_argument("--save-at", help="flow: comma-separated earlier times also enclosed")
    parser.add_argument("--out", type=Path, help="certificate file to write")
    parser.add_argument(
        "--no-certificate",
        action="store_true",
        help="flow: certified enclosures only, no certificate (attention-only softmax instances "
        "by Taylor steps vectorised over the tokens: n = 64, d = 8 in seconds)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    gaussian_command.add_arguments(parser)
    depth_command.add_arguments(parser)
    stack_command.add_arguments(parser)
    match_command.add_arguments(parser)


def _enclosures(instance, result) -> list:
    from certified.transformers.flow import token_enclosures

    return _boxes_json(token_enclosures(instance, result))


def _boxes_json(boxes) -> list:
    """Per token, per coordinate [lo, hi] as exact strings, measure after measure."""
    from certified.arith.exact import fmpq_to_str, to_fmpq

    def exact_number(v: float) -> str:
        return fmpq_to_str(to_fmpq(v))

    out = []
    for box in boxes:
        for lo, hi in zip(box.lo.tolist(), box.hi.tolist(), strict=True):
            out.append([[exact_number(a), exact_number(b)] for a, b in zip(lo, hi, strict=True)])
    return out


def _enclosures_of(result) -> list:
    """Per initial point, per coordinate [lo, hi] at the final time as exact strings."""
    from certified.arith.exact import fmpq_to_str, to_fmpq

    def box(lo: list, hi: list) -> list:
        return [
            [fmpq_to_str(to_fmpq(a)), fmpq_to_str(to_fmpq(b))] for a, b in zip(lo, hi, strict=True)
        ]

    return [
        box(lo, hi)
        for lo, hi in zip(result.final.lo.tolist(), result.final.hi.tolist(), strict=True)
    ]


def _max_width(result) -> str:
    from certified.flow.command import decimal_upper

    w = result.final.hi - result.final.lo
    return decimal_upper(float(w.max()))


def run(args: argparse.Namespace) -> int:
    """Run the subcommand; CertifiedError / OSError propagate to the CLI (exit 2)."""
    from certified._progress import Progress
    from certified.arith.exact import to_fmpq
    from certified.certificates import command_json, print_json, write_if_accepted
    from certified.errors import InputError
    from certified.transformers.instance import read_instance
    from certified.verdict import Outcome

    if args.action in _DELEGATED:
        import importlib

        return importlib.import_module(_DELEGATED[args.action]).run(args)
    no_cert = getattr(args, "no_certificate", False)
    if no_cert and (args.action != "flow" or args.out is not None or args.save_at is not None):
        raise InputError("--no-certificate: only for 'transformer flow', without --out, --save-at")
    if args.instance is None or (args.out is None and not no_cert):
        raise InputError(f"{args.action}: --instance F and --out CERT are required")
    t0 = time.perf_counter()
    progress = Progress("transformer")
    if args.action == "cluster" and args.eps is None:
        raise InputError("--eps: the cluster check needs the diameter threshold eps > 0")
    if args.action == "flow" and args.eps is not None:
        raise InputError("--eps: only for 'certified transformer cluster'")
    if args.action == "cluster" and args.save_at is not None:
        raise InputError("--save-at: only for 'certified transformer flow'")
    if not isinstance(args.samples, int) or not 1 <= args.samples <= 1000:
        raise InputError(f"--samples: expected an integer in [1, 1000], got {args.samples}")
    with progress.stage(f"reading {args.instance}"):
        instance = read_instance(args.instance)
    if args.action == "cluster":
        from certified.transformers.cluster import check_theorem_setting

        check_theorem_setting(instance)
        to_fmpq(args.eps, "--eps")
        return _cluster(args, instance, progress, t0)
    ts = []
    if args.save_at:
        ts = [to_fmpq(t.strip(), "--save-at") for t in args.save_at.split(",") if t.strip()]
        if any(not 0 < t < instance.total_time for t in ts):
            raise InputError(f"--save-at: times must lie in (0, {instance.total_time})")
        ts = sorted(set(ts))
    if no_cert:
        return _enclosures_only(args, instance, progress, t0)
    from certified.flow import flow_certificate_for
    from certified.transformers.flow import transformer_flow

    fields: dict = {}
    path, message, result = None, "", None
    n_coords = sum(instance.sizes) * instance.d
    if n_coords > GENERIC_MAX_COORDINATES:  # said at once, not after hours of work
        message = (
            f"no certificate: the generic engine's cost grows like n^3 d^2 per step and n d = "
            f"{n_coords} tokens x coordinates is over its reach ({GENERIC_MAX_COORDINATES}); use "
            "--no-certificate for certified enclosures (Taylor steps over the tokens), or fewer "
            "tokens per instance"
        )
    else:
        with progress.stage(f"certifying the flow (n = {sum(instance.sizes)}, d = {instance.d})"):
            result = transformer_flow(instance, ts=ts)
    if result is not None and result.status.name != "SUCCESS":
        message = result.message
    elif result is not None:
        cert = flow_certificate_for(instance.problem, instance.state(), result)
        with progress.stage("writing the certificate, re-checked by the checker first"):
            path, check = write_if_accepted(Path(args.out), cert)
        if path is None:
            message = f"the checker did not accept: {check.reason}"
        fields = {"enclosures": _enclosures(instance, result), "max_width": _max_width(result)}
    outcome = Outcome.VERIFIED if path is not None else Outcome.UNDECIDED
    seconds = time.perf_counter() - t0
    scope = f"the tokens of {args.instance}, at t = {instance.total_time}"
    if args.json:
        print_json(command_json("transformer flow", outcome, path, seconds, scope=scope,
                                **fields, message=message))  # fmt: skip
    elif path is not None:
        print(f"{outcome}: certificate written to {path} (max width {fields['max_width']})")
    else:
        print(f"{outcome}: {message}")
    if path is None:
        print(f"certified transformer flow: {message}", file=sys.stderr)
        return 1
    return 0


def _enclosures_only(args, instance, progress, t0) -> int:
    """``--no-certificate``: certified enclosures at the final time, no certificate (exit 0),
    by Taylor steps vectorised over the tokens (``proofs/particles.md`` §6) when the instance is
    attention-only softmax, else by the generic engine."""
    from certified.certificates import command_json, print_json
    from certified.flow.command import decimal_upper
    from certified.transformers.sphere_taylor import sphere_supported, sphere_taylor_flow
    from certified.verdict import Outcome

    n, d = sum(instance.sizes), instance.d
    with progress.stage(f"enclosing the flow (n = {n}, d = {d}; no certificate)"):
        if sphere_supported(instance) is None:
            method = "taylor steps over tokens"
            boxes = [enc.box() for enc in sphere_taylor_flow(instance)]
            message = ""
        else:
            from certified.transformers.flow import token_enclosures, transformer_flow

            method = "generic taylor-lohner engine"
            result = transformer_flow(instance)
            message = "" if result.status.name == "SUCCESS" else result.message
            boxes = token_enclosures(instance, result) if not message else []
    outcome = Outcome.UNDECIDED if message else Outcome.VERIFIED
    fields: dict = {"method": method}
    if not message:
        fields["enclosures"] = _boxes_json(boxes)
        fields["max_width"] = decimal_upper(max(float((b.hi - b.lo).max()) for b in boxes))
    seconds = time.perf_counter() - t0
    scope = (f"the tokens of {args.instance}, at t = {instance.total_time} (enclosures computed "
             "in rigorous arithmetic; no certificate: not re-checked by the checker)")  # fmt: skip
    if args.json:
        print_json(command_json("transformer flow", outcome, None, seconds, scope=scope,
                                **fields, message=message))  # fmt: skip
    elif message:
        print(f"{outcome}: {message}")
    else:
        print(f"{outcome}: enclosures only, no certificate (max width {fields['max_width']}; "
              f"{method})")  # fmt: skip
    if message:
        print(f"certified transformer flow: {message}", file=sys.stderr)
        return 1
    return 0


def _cluster(args, instance, progress, t0) -> int:
    from certified.arith.exact import fmpq_to_str
    from certified.certificates import command_json, print_json, write_if_accepted
    from certified.flow.command import decimal_upper
    from certified.transformers.cluster import hemisphere_cluster
    from certified.transformers.cluster_certificate import cluster_certificate
    from certified.verdict import Outcome

    with progress.stage(f"certifying the flow (n = {sum(instance.sizes)}, d = {instance.d})"):
        verdict = hemisphere_cluster(instance, args.eps, samples=args.samples)
    path, message = None, verdict.reason
    outcome = verdict.outcome
    if outcome is not Outcome.UNDECIDED:
        with progress.stage("writing the certificate, re-checked by the checker first"):
            cert = cluster_certificate(instance, args.eps, verdict)
            path, check = write_if_accepted(Path(args.out), cert)
        if path is None:
            outcome, message = Outcome.UNDECIDED, f"the checker did not accept: {check.reason}"
    fields: dict = {"reason": message}
    if verdict.diameter_sq_upper is not None:
        from flint import arb

        up = arb(verdict.diameter_sq_upper).sqrt().upper()
        fields["diameter_upper"] = decimal_upper(float(up.mid() + up.rad()))
        fields["diameter_squared_upper"] = fmpq_to_str(verdict.diameter_sq_upper)
        fields["diameter_squared_lower"] = fmpq_to_str(verdict.diameter_sq_lower)
        fields["first_time"] = None if verdict.first_time is None else fmpq_to_str(
            verdict.first_time)  # fmt: skip
        fields["enclosures"] = _enclosures(instance, verdict.result)
        fields["max_width"] = _max_width(verdict.result)
    fields["hemisphere_witness"] = (
        None if verdict.witness is None else [fmpq_to_str(q) for q in verdict.witness]
    )
    fields["switches"] = len(instance.pieces) - 1
    seconds = time.perf_counter() - t0
    scope = f"the tokens of {args.instance}, diameter at t = {instance.total_time}"
    if args.json:
        print_json(command_json("transformer cluster", outcome, path, seconds, scope=scope,
                                **fields))  # fmt: skip
    else:
        print(f"{outcome}: {message}" + (f"; certificate written to {path}" if path else ""))
    if outcome is not Outcome.VERIFIED:
        if path is None:
            print(f"certified transformer cluster: {message}", file=sys.stderr)
        return 1
    return 0


def demo_check():
    """``certified demo`` step: three orthonormal tokens on S^2 under self-attention (V = I,
    B = I) for t = 1/4, the flow certificate re-checked by the checker.

    Guarantee: passed implies the checker accepted the certificate.
    """
    from certified.checker import check_certificate
    from certified.commands.records import DemoCheck
    from certified.flow import flow_certificate_for
    from certified.transformers import parse_instance, transformer_flow

    E = [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
    inst = parse_instance({"tokens": E[:2], "pieces": [{"duration": "1/4", "V": E, "B": E}]})
    res = transformer_flow(inst)
    cert = flow_certificate_for(inst.problem, inst.state(), res)
    verdict = check_certificate(cert) if cert is not None else None
    ok = verdict is not None and verdict.verified
    width = float((res.final.hi - res.final.lo).max())
    name = "self-attention: 2 tokens on S^2, t = 1/4 (certificate re-checked)"
    detail = verdict.reason if verdict is not None else res.message
    return DemoCheck(name, ok, width, detail, {"transformer_flow.json": cert} if ok else {})
