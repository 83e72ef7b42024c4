"""Certificates of flows of expression fields (kind ``flow`` v1, rule ``taylor-lohner``).

The claimed enclosures are those of the checker's own replay
(:func:`certified.checker.lohner.replay_flow`, public) at the certificate's precision, rounded
outward to doubles: the checker accepts them by construction, and they are often tighter than
the float64 producer's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from flint import arb

from certified.arith.ball import precision as working_precision
from certified.arith.exact import fmpq_to_float, to_fmpq
from certified.certificates.flow import FORMAT_VERSION, exact_number
from certified.checker.lohner import (
    MAX_TAYLOR_OPS,
    replay_cost,
    replay_flow,
    supported,
)
from certified.checker.taylor import ReplayError
from certified.fields.field import PiecewiseField
from certified.flow.options import InitialSets
from certified.flow.result import FlowEnclosure, FlowStatus

__all__ = [
    "AUTO_REPLAY_COST",
    "FieldCertificateError",
    "claim_widening",
    "field_flow_certificate",
    "replay_charge",
]

AUTO_REPLAY_COST = 10**7  # replay_cost units (~0.1 us): below, a replay for tight claims pays


class FieldCertificateError(Exception):
    """The replay of the producer's steps failed (the message says where)."""


def _box_hint(B: Any) -> list:
    """(N, d) boxes as N x d x [lo, hi] exact strings (float Interval or exact object arrays)."""
    lo = B.lo if hasattr(B, "lo") else B[..., 0]
    hi = B.hi if hasattr(B, "hi") else B[..., 1]
    return [
        [[exact_number(a), exact_number(b)] for a, b in zip(r1, r2, strict=True)]
        for r1, r2 in zip(lo.tolist(), hi.tolist(), strict=True)
    ]


def _exact_boxes(B: Any) -> list:
    """(N, d) boxes as N x d exact pairs."""
    lo = B.lo if hasattr(B, "lo") else B[..., 0]
    hi = B.hi if hasattr(B, "hi") else B[..., 1]
    return [
        [(to_fmpq(a), to_fmpq(b)) for a, b in zip(r1, r2, strict=True)]
        for r1, r2 in zip(lo.tolist(), hi.tolist(), strict=True)
    ]


def _outward(ball: arb) -> list[str]:
    from certified.flow.taylor._lohner_arb import arb_to_fmpq

    lo, hi = arb_to_fmpq(arb(ball.lower())), arb_to_fmpq(arb(ball.upper()))
    return [
        exact_number(to_fmpq(fmpq_to_float(lo, "down"))),
        exact_number(to_fmpq(fmpq_to_float(hi, "up"))),
    ]


def replay_charge(field: Any, n: int, hints: dict, precision: int | None = None) -> int:
    """What the checker's rule taylor-lohner charges (:func:`certified.checker.lohner.replay_cost`)
    for the certificate of a taylor-lohner result with ``hints`` from ``n`` sets at the
    certificate's precision (``precision``, default the result's, at least 53): the number
    :func:`field_flow_certificate` compares with the checker's limit. Guarantee: exact (the
    checker's own formula on the same numbers)."""
    prec = max(53, precision or hints.get("precision", 53))
    total = sum(len(s) for s in hints["steps"])
    orders = hints.get("jacobian_orders")
    mean = sum(map(sum, orders)) / max(1, total) if orders else hints["jacobian_order"]
    arithmetic = "float64" if prec == 53 and supported(field) else "arb"
    return replay_cost(field, n, total, hints["order"], mean, prec, arithmetic)


def field_flow_certificate(
    problem: PiecewiseField,
    sets: InitialSets,
    result: FlowEnclosure,
    *,
    precision: int | None = None,
    replay: bool | None = True,
    widening: float | None = None,
) -> dict[str, Any]:
    """A flow certificate of a successful :func:`~certified.flow.enclose_flow` result.

    ``precision`` is the checker's working precision (default: the result's, at least 53).
    With ``replay`` False and the float64 replay (53 bits, a supported field), nothing is
    replayed here: the claims are the engine's enclosures made 2.5 to 4 times as wide
    (:func:`claim_widening`; the checker's float64 replay is usually within that) and the
    checker picks the a priori factors itself (``hints.apriori`` "search"); half the cost of a
    written certificate, but check before relying on it (``certified flow`` falls back to 4x
    claims, then to ``replay=True``). ``widening``: that factor instead. ``replay`` None:
    replay only when the replay is cheap (estimated cost at most :data:`AUTO_REPLAY_COST`,
    about a second), so small certificates keep the tight claims.

    Raises FieldCertificateError when the replay rejects a step (the a priori boxes of the
    producer were too tight for ball arithmetic: rerun with a smaller ``max_step``).

    Guarantee: none (the checker decides); the claims are the checker's replay, rounded out.
    """
    if result.status is not FlowStatus.SUCCESS or result.hints.get("method") != "taylor-lohner":
        raise FieldCertificateError("only a successful taylor-lohner result has a certificate")
    h = result.hints
    prec = max(53, precision or h.get("precision", 53))
    field = problem.field.expression
    starts = [list(zip(lo, hi, strict=True)) for lo, hi in zip(sets.lo, sets.hi, strict=True)]
    times = [to_fmpq(t) for t in result.times]
    orders = h.get("jacobian_orders")
    arithmetic = "float64" if prec == 53 and supported(field) else "arb"
    boxes, apriori = None, None
    if arithmetic == "float64":  # a priori boxes rebuilt by the checker from one factor a step
        apriori = [[None] * len(s) for s in h["steps"]]
    else:
        boxes = [[_exact_boxes(B) for B in bs] for bs in h["boxes"]]
    cost = replay_charge(field, len(starts), h, prec)
    if replay is None:
        replay = cost <= AUTO_REPLAY_COST
    search = arithmetic == "float64" and not replay  # the checker picks the factors
    if cost > MAX_TAYLOR_OPS:  # refuse now rather than replay for minutes and be refused
        raise FieldCertificateError(
            f"the certificate's replay would cost about {cost:.2g} operations, over the "
            f"checker's limit {MAX_TAYLOR_OPS:.2g}: certify fewer sets per certificate "
            f"(at most about {max(1, int(len(starts) * MAX_TAYLOR_OPS / cost))}), or a shorter time"
        )
    if search:
        enclosures = _widened(result, widening or claim_widening(field))
    else:
        enclosures = _replayed(problem, field, starts, h, boxes, times, orders, arithmetic, apriori,
                               prec)  # fmt: skip
    start = "points" if sets.points else "boxes"
    if sets.points:
        data = [[exact_number(x) for x in row] for row in sets.lo]
    else:
        data = _box_hint(np.stack([sets.lo, sets.hi], axis=-1))
    instance = {**problem.to_json(), start: data, "time": exact_number(problem.total_time)}
    instance.pop("sphere", None)  # the statement is about the flow in R^d (semantics.md)
    instance["pieces"] = [
        {"duration": exact_number(p.duration), "parameters": [exact_number(v) for v in p.values]}
        for p in problem.pieces
    ]
    return {
        "kind": "flow",
        "version": FORMAT_VERSION,
        "instance": instance,
        "claim": {"times": [exact_number(t) for t in times], "enclosures": enclosures},
        "hints": {
            "method": "taylor-lohner",
            "order": h["order"],
            "jacobian_order": h["jacobian_order"],
            "precision": prec,
            "steps": [[exact_number(s) for s in steps] for steps in h["steps"]],
            **({"jacobian_orders": orders} if orders else {}),
            **({"arithmetic": arithmetic} if arithmetic != "arb" else {}),
            **_prior_hint(apriori, search, h),
        },
    }


def _prior_hint(apriori, search: bool, h: dict) -> dict:
    """How the checker gets its a priori boxes: it picks the factors ("search"), the factors
    the producer's replay picked, or the boxes themselves (arb)."""
    if search:
        return {"apriori": "search"}
    if apriori is not None:
        return {"apriori": [[exact_number(a) for a in row] for row in apriori]}
    return {"boxes": [[_box_hint(B) for B in bs] for bs in h["boxes"]]}


_LINEAR = ("x", "p", "c", "add", "sub", "neg", "sum")


def claim_widening(field) -> float:
    """How many times as wide as the engine's enclosures the claims without a producer replay
    are (heuristic; a miss costs the fallback to the replayed claims): what the checker's
    float64 replay needed, coordinate by coordinate, on issue 18's instances (measured: the
    half-width about the engine's midpoint over the engine's half-width). Fields whose only
    nonlinear operation is tanh (neural fields x' = W tanh(A x + b)): at most 2.23 on seeds
    0-2 (100 points), so 2.5; anything else (sigmoid: 3.75; Lorenz, Van der Pol: up to ~3.8):
    4."""
    const, ops = field.const, set()
    for op, *a in field.nodes:
        if op == "mul" and (const[a[0]] or const[a[1]]):
            continue  # a product by a constant is linear
        if op not in _LINEAR:
            ops.add(op)
    return 2.5 if ops == {"tanh"} else 4.0


def _widened(result: FlowEnclosure, factor: float) -> list:
    """The engine's enclosures at every time widened by (factor - 1) / 2 of their width on
    each side (``factor`` times as wide, :func:`claim_widening`), rounded outward to doubles:
    claims for the checker's own float64 replay to fall within."""
    lo = result.enclosures.lo.astype(float)
    hi = result.enclosures.hi.astype(float)
    q = (hi - lo) * ((factor - 1) / 2)
    lo, hi = np.nextafter(lo - q, -np.inf), np.nextafter(hi + q, np.inf)
    return [
        [[[exact_number(a), exact_number(b)] for a, b in zip(r1, r2, strict=True)]
         for r1, r2 in zip(L, H, strict=True)]
        for L, H in zip(lo.tolist(), hi.tolist(), strict=True)
    ]  # fmt: skip


def _replayed(problem, field, starts, h, boxes, times, orders, arithmetic, apriori, prec) -> list:
    """The checker's replay of the engine's steps at ``prec`` (the a priori factors it picks are
    stored in ``apriori``), rounded outward to doubles."""
    with working_precision(prec):
        pieces = [(p.duration, [arb(v) for v in p.values]) for p in problem.pieces]
        try:
            out = replay_flow(
                field,
                pieces,
                starts,
                h["steps"],
                boxes,
                h["order"],
                h["jacobian_order"],
                times,
                orders,
                arithmetic,
                apriori,
            )
        except ReplayError as exc:
            raise FieldCertificateError(
                f"the checker's replay rejects the producer's steps ({exc}); lower max_step"
            ) from None
        return [[[_outward(b) for b in hull] for hull in per_time] for per_time in out]
