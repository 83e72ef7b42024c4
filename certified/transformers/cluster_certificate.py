"""Certificates of clustering verdicts (kind ``transformer-cluster`` v1, proofs/transformers.md
§4): the flow certificate of the tokens (rule ``taylor-lohner``) wrapped with the verdict, eps,
the squared-diameter bound computed from the certificate's own final enclosures, and the
hemisphere witness."""

from __future__ import annotations

from typing import Any

import flint

from certified.arith.exact import fmpq_to_str, to_fmpq
from certified.transformers.cluster import ClusterVerdict
from certified.transformers.instance import TransformerInstance
from certified.verdict import Outcome

__all__ = ["cluster_certificate"]


def _final_diameter_sq(enclosures: list, n: int, d: int) -> tuple[flint.fmpq, flint.fmpq]:
    from certified.transformers.cluster import diameter_bounds

    rows = enclosures[-1][0]
    lo = [[to_fmpq(rows[i * d + c][0]) for c in range(d)] for i in range(n)]
    hi = [[to_fmpq(rows[i * d + c][1]) for c in range(d)] for i in range(n)]
    return diameter_bounds(_Boxes(lo, hi))


class _Boxes:
    """Exact endpoints in the shape diameter_bounds reads (rows of lo and hi)."""

    def __init__(self, lo: list, hi: list) -> None:
        self.lo, self.hi = lo, hi


def cluster_certificate(
    instance: TransformerInstance, eps: Any, verdict: ClusterVerdict
) -> dict[str, Any] | None:
    """The certificate of a VERIFIED or REFUTED verdict (None for UNDECIDED, or when the
    bound read from the certificate's enclosures no longer decides).

    Guarantee: none (the checker decides).
    """
    from certified.flow import flow_certificate_for

    if verdict.outcome is Outcome.UNDECIDED or verdict.result is None:
        return None
    eps = to_fmpq(eps, "--eps")
    flow = flow_certificate_for(instance.problem, instance.state(), verdict.result)
    if flow is None:
        return None
    n, d = instance.sizes[0], instance.d
    lower, upper = _final_diameter_sq(flow["claim"]["enclosures"], n, d)
    if verdict.outcome is Outcome.VERIFIED:
        if not upper <= eps * eps or verdict.witness is None:
            return None
        bound, witness = upper, [fmpq_to_str(q) for q in verdict.witness]
    else:
        if not lower > eps * eps:
            return None
        bound, witness = lower, None
    return {
        "kind": "transformer-cluster",
        "version": 1,
        "instance": {"flow": flow["instance"], "tokens": n, "dimension": d},
        "claim": {
            "flow": flow["claim"],
            "verdict": verdict.outcome.value,
            "eps": fmpq_to_str(eps),
            "diameter_squared": fmpq_to_str(bound),
            "witness": witness,
        },
        "hints": flow["hints"],
    }
