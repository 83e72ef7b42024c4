"""``certified transformer match --instance F --targets F --eps E --out CERT [--json]``:
Theorem 1.1 of arXiv 2411.04551 on the measures of F (``"measures"`` or ``"tokens"``; any
``"pieces"`` are not used) and the Dirac targets ``{"targets": N x d, "omega"?: d}``.

VERIFIED: the construction's schedule is certified and every measure is within W_2 <= eps of
its target; the ``transformer-match`` certificate, re-checked by the checker first, is written
(exit 0). UNDECIDED: the reason names the lemma whose hypothesis fails and where (or the flow
/ the bound that did not decide, or, at once, a certificate whose replay is forecast over the
checker's budget: where and what to do, :mod:`certified.transformers.match_cost`); nothing
written, exit 1. Bad input (d < 3, tokens or targets
off the sphere, non-finite numbers, an omega on a support, equal measures with different
targets, eps <= 0): one line, exit 2, nothing written.

Standard library only at module level.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``certified transformer match`` (beside the shared ones)."""
    parser.add_argument(
        "--targets", type=Path, help='match: JSON {"targets": N×d, "omega"?: d} (one per measure)'
    )


def run(args: argparse.Namespace) -> int:
    """Run ``certified transformer match``; errors propagate to the CLI (exit 2)."""
    from certified._progress import Progress
    from certified.arith.exact import fmpq_to_str, to_fmpq
    from certified.certificates import command_json, print_json, write_if_accepted
    from certified.errors import InputError
    from certified.flow.command import decimal_upper
    from certified.transformers.match import (
        NoCertificateError,
        match_certificate,
        match_measures,
        read_measures,
        read_targets,
        switch_budget,
    )
    from certified.verdict import Outcome

    t0 = time.perf_counter()
    for opt in ("instance", "targets", "eps", "out"):
        if getattr(args, opt) is None:
            raise InputError(f"--{opt}: required by 'certified transformer match'")
    if args.save_at is not None:
        raise InputError("--save-at: only for 'certified transformer flow'")
    eps = to_fmpq(args.eps, "--eps")
    if not eps > 0:
        raise InputError(f"--eps: {args.eps} is not positive")
    progress = Progress("transformer")
    with progress.stage(f"reading {args.instance} and {args.targets}"):
        instance = read_measures(args.instance)
        targets = read_targets(args.targets, instance)
    from certified.flow import StepPolicy

    # fewer atoms per flow (the checker bounds the replay cost of one flow) and shorter steps
    # when the replay refuses a step (cost and tightness only); coupled flows of clustered
    # measures: steps bounded from the first attempt on (match_cluster.cluster_steps)
    attempts = ((None, 16), (StepPolicy(max_step="1/64"), 6), (StepPolicy(max_step="1/256"), 2))
    if max(instance.sizes) > 1:
        from certified.transformers.match_cluster import cluster_steps

        steps = cluster_steps(max(instance.sizes))
        attempts = tuple((StepPolicy(max_step=h), 16) for h in steps)
    for policy, chunk in attempts:
        with progress.stage(f"building and certifying the schedule ({sum(instance.sizes)} atoms)"):
            verdict = match_measures(instance, targets, eps, step_policy=policy, chunk=chunk)
        path, message = None, verdict.reason
        outcome = verdict.outcome
        if outcome is not Outcome.VERIFIED:
            break
        try:
            cert = match_certificate(instance, targets, eps, verdict)
        except NoCertificateError as e:
            outcome, message = Outcome.UNDECIDED, f"no certificate the checker replays: {e}"
            if e.retry:
                continue
            break
        with progress.stage("writing the certificate, re-checked by the checker first"):
            path, check = write_if_accepted(Path(args.out), cert)
        if path is None:
            outcome = Outcome.UNDECIDED
            message = f"the checker did not accept: {check.reason}"
        break
    reference = switch_budget(instance.d, len(instance.measures))
    fields: dict = {
        "reason": message,
        "switches": verdict.switches,
        "switch_reference_dN": reference,
    }
    if verdict.w2_squared is not None:
        from flint import arb

        from certified.transformers.command import _enclosures_of, _max_width

        fields["w2_squared_upper"] = [fmpq_to_str(b) for b in verdict.w2_squared]
        fields["w2_upper"] = [decimal_upper(float(arb(b).sqrt().upper())) for b in
                              verdict.w2_squared]  # fmt: skip
        from types import SimpleNamespace

        lo, hi = verdict.final_boxes()
        boxes = SimpleNamespace(final=SimpleNamespace(lo=lo, hi=hi))
        fields["enclosures"] = _enclosures_of(boxes)
        fields["max_width"] = _max_width(boxes)
    seconds = time.perf_counter() - t0
    scope = f"the measures of {args.instance} and the targets of {args.targets}"
    if args.json:
        print_json(command_json("transformer match", outcome, path, seconds, scope=scope,
                                **fields))  # fmt: skip
    else:
        print(f"{outcome}: {message} ({verdict.switches} switches)"
              + (f"; certificate written to {path}" if path else ""))  # fmt: skip
    if path is None:
        print(f"certified transformer match: {message}", file=sys.stderr)
        return 1
    return 0
