"""Certificates of kinds ``gradient`` v1 and ``training`` v1 (proofs/format.md section 10).

The claims are the replay of :func:`certified.checker.sensitivity.replay_sensitivities` (the
checker's own computation, public) at the certificate's precision, so the checker accepts them
by construction; the hints are the producer's steps and a priori boxes.
"""

from __future__ import annotations

from typing import Any

from certified.certificates.flow import exact_number

__all__ = ["gradient_certificate", "gradient_instance", "training_certificate"]


def _pair(lo_hi) -> list[str]:
    return [exact_number(lo_hi[0]), exact_number(lo_hi[1])]


def gradient_instance(result) -> tuple[dict[str, Any], dict[str, Any]]:
    """The (instance, hints) of a :class:`~certified.training.GradientEnclosure`.

    Guarantee: exact (the problem and the steps as computed)."""
    problem, h = result.problem, result.hints
    relu = h.get("relu_patterns")  # W relu(A x + b): the checker builds the masked fields
    d = problem.dimension
    instance = {
        **(
            {"relu": {"dimension": d, "width": len(problem.pieces[0].values) // (2 * d + 1)}}
            if relu
            else {"field": problem.field.to_json()}
        ),
        "pieces": [
            {
                "duration": exact_number(p.duration),
                "parameters": [exact_number(v) for v in p.values],
            }
            for p in problem.pieces
        ],
        "points": [[exact_number(v) for v in row] for row in result.points.tolist()],
        "targets": [[exact_number(v) for v in row] for row in result.targets.tolist()],
        "eps": exact_number(result.eps),
        "time": exact_number(problem.total_time),
    }
    if result.loss_field is not None:
        instance["loss"] = result.loss_field.to_json()
    if relu:  # per point: its pattern, steps and a priori boxes (proofs/training.md#relu)
        hints = {"method": "taylor-lohner-c1"} | {k: relu[k] for k in
                 ("order", "jacobian_order", "precision")}  # fmt: skip
        hints["relu_patterns"] = [[list(s) for s in row] for row in relu["patterns"]]
        hints["steps"] = [
            [[exact_number(s) for s in st] for st in steps] for steps in relu["steps"]
        ]
        hints["boxes"] = [_boxes(per_point) for per_point in relu["boxes"]]
        return instance, hints
    hints = {
        "method": "taylor-lohner-c1",
        "order": h["order"],
        "jacobian_order": h["jacobian_order"],
        "precision": h["precision"],
        "steps": [[exact_number(s) for s in steps] for steps in h["steps"]],
    }
    if h.get("arithmetic") == "float64":  # a priori factors, not boxes: the file stays small
        hints["arithmetic"] = "float64"
        hints["apriori"] = [[exact_number(a) for a in row] for row in h["apriori"]]
        return instance, hints
    hints["boxes"] = _boxes(h["boxes"])
    return instance, hints


def _boxes(boxes) -> list:
    return [[[[_pair(ab) for ab in row] for row in B] for B in per_piece] for per_piece in boxes]


def _check_cost(*results, what: str = "points per certificate, or fewer pieces") -> int:
    """The checker's charge for replaying ``results``; InputError above its limit (refuse now
    rather than write a file the checker refuses)."""
    from certified.checker.lohner import MAX_TAYLOR_OPS
    from certified.checker.sensitivity import sensitivity_cost
    from certified.checker.sensitivity64 import cost64
    from certified.errors import InputError

    cost = 0
    for result in results:
        h, n = result.hints.get("relu_patterns", result.hints), result.points.shape[0]
        total = sum(len(s) for s in h.get("steps", ()))
        if "patterns" in h:  # ReLU: per point; the checker charges the full field's cost
            n, total = 1, sum(len(s) for steps in h["steps"] for s in steps)
        K, m, prec = h["order"], h["jacobian_order"], h["precision"]
        field = result.problem.field.expression
        cost += (cost64(field, n, total, K, m) if h.get("arithmetic") == "float64" else
                 sensitivity_cost(field, n, total, K, m, prec))  # fmt: skip
    if cost > MAX_TAYLOR_OPS:
        most = max(1, int(n * MAX_TAYLOR_OPS / cost if len(results) == 1 else
                          len(results) * MAX_TAYLOR_OPS / cost))  # fmt: skip
        raise InputError(
            f"certificate: its replay would cost about {cost:.2g} operations, over the checker's "
            f"limit {MAX_TAYLOR_OPS:.2g}: certify at most about {most} {what}"
        )
    return cost


def gradient_certificate(result) -> dict[str, Any]:
    """A ``gradient`` v1 certificate of a :class:`~certified.training.GradientEnclosure`.

    Raises InputError when the checker's replay would exceed its resource limit.

    Guarantee: none (the checker decides)."""
    _check_cost(result)
    instance, hints = gradient_instance(result)
    claim = {
        "loss": _pair(result.loss),
        "gradient": [[_pair(g) for g in row] for row in result.gradient],
    }
    return {"kind": "gradient", "version": 1, "instance": instance, "claim": claim, "hints": hints}


def training_certificate(trace) -> dict[str, Any]:
    """A ``training`` v1 certificate of a :class:`~certified.training.DescentTrace`.

    Guarantee: none (the checker decides)."""
    _check_cost(*trace.results, what="iterates per trace (fewer --steps), or fewer points")
    pairs = [gradient_instance(r) for r in trace.results]
    return {
        "kind": "training",
        "version": 1,
        "instance": {"lr": exact_number(trace.lr), "iterates": [i for i, _ in pairs]},
        "claim": {
            "losses": [_pair(r.loss) for r in trace.results],
            "gradient_norms": [
                [exact_number(r.norm_lower()), exact_number(r.norm_upper())] for r in trace.results
            ],
        },
        "hints": [h for _, h in pairs],
    }
