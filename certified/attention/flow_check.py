"""The neural-ODE flow hypothesis (``--hypothesis flow``, theorems.md section 5): certified
flow enclosures against the Grönwall bound Lip(Φ_T) ≤ G = exp(Σ_j τ_j Σ_i |w_ij|₂ |a_ij|₂).

Instance: ``{"schedule": <schedule object>, "X": n×d}`` (design.md formats). For every pair of
distinct points, the certified enclosures of Φ_T(x_i) give two-sided bounds on
|Φ_T(x_i) − Φ_T(x_j)| (proofs/bounds.md#flow-pairs), hence on the pair ratios:

* VERIFIED: every pair's ratio upper bound is ≤ a lower bound on G (the Grönwall inequality on
  all pairs of the given points; a theorem, so VERIFIED is the expected outcome);
* REFUTED: some pair's ratio lower bound exceeds an upper bound on G (the pair is a
  certified counterexample);
* the largest certified pair-ratio *lower* bound is a lower bound on the true Lip(Φ_T) and is
  reported next to G (tightness).
"""

from __future__ import annotations

from typing import Any

import flint
import numpy as np

from certified.arith.ball import check_precision, endpoints, precision
from certified.arith.exact import to_fmpq, to_fmpq_array
from certified.attention.lipschitz import LipschitzVerdict
from certified.errors import InputError
from certified.io import check_keys
from certified.verdict import Outcome

__all__ = ["check_flow_gronwall", "gronwall_bounds", "parse_flow_instance"]


def parse_flow_instance(obj: Any) -> tuple[Any, np.ndarray]:
    """``(Schedule, points)`` from ``{"schedule": ..., "X": n×d}``. Guarantee: exact."""
    from certified.io import exact_matrix
    from certified.models import Schedule

    check_keys(obj, "", ["schedule", "X"])
    schedule = Schedule.from_json(obj["schedule"])
    X = exact_matrix(
        obj["X"], "X", cols=schedule.dimension, row_what="points", col_what="coordinates"
    )
    return schedule, X


def gronwall_bounds(schedule: Any, prec: int = 128) -> tuple[flint.fmpq, flint.fmpq]:
    """Two-sided bounds on G = exp(Σ_j τ_j Σ_i |w_ij|₂ |a_ij|₂) (proofs/bounds.md#relu-gronwall),
    by :func:`certified.flow.relu.gronwall_bound` (the one Grönwall bound).

    Guarantee: encloses G.
    """
    from certified.flow.relu import gronwall_bound

    pieces = [
        (to_fmpq(p.duration), to_fmpq_array(p.W, "W"), to_fmpq_array(p.A, "A"))
        for p in schedule.pieces
    ]
    return endpoints(gronwall_bound(pieces, prec=prec)[1], "Gronwall bound")


def _pair_bounds(lo: np.ndarray, hi: np.ndarray, X: np.ndarray, prec: int):
    """Per pair (i, j), exact lower/upper bounds on |Φ(x_i) − Φ(x_j)|² and |x_i − x_j|²."""
    n = len(X)
    out = []
    for i in range(n):
        for j in range(i + 1, n):
            dx2 = sum(((a - b) ** 2 for a, b in zip(X[i], X[j], strict=True)), flint.fmpq(0))
            if dx2 == 0:
                continue
            low2 = up2 = flint.fmpq(0)
            for a in range(lo.shape[1]):
                li, hi_i, lj, hj = (to_fmpq(v) for v in (lo[i, a], hi[i, a], lo[j, a], hi[j, a]))
                gap = max(lj - hi_i, li - hj, flint.fmpq(0))
                span = max(hj - li, hi_i - lj)
                low2 += gap * gap
                up2 += span * span
            out.append((i, j, low2, up2, dx2))
    return out


def check_flow_gronwall(schedule: Any, X: Any, *, prec: int = 128) -> LipschitzVerdict:
    """Three-valued check of the Grönwall bound on all pairs of the points (module docstring).

    Returns
    -------
    LipschitzVerdict
        ``certificate``: the ``flow`` certificate of the enclosures used (re-checkable), or
        None when no checker rule covers the schedule.

    Guarantee: VERIFIED ⇒ |Φ_T(x_i) − Φ_T(x_j)| ≤ G |x_i − x_j| for all given pairs;
    REFUTED ⇒ a certified pair violates it; ``lhs_lower`` ≤ Lip(Φ_T) always.
    """
    from certified.flow.api import enclose_flow, flow_certificate_for

    prec = check_precision(prec)
    X = to_fmpq_array(X, "X")
    if X.shape[0] < 2:
        raise InputError("X: give at least two distinct points to compare")
    g_lo, g_hi = gronwall_bounds(schedule, prec)
    result = enclose_flow(schedule, X)
    if result.status.value != "success":
        return LipschitzVerdict(
            "flow",
            Outcome.UNDECIDED,
            None,
            None,
            g_lo,
            g_hi,
            "",
            message=f"flow enclosure failed: {result.message}",
        )
    pairs = _pair_bounds(result.final.lo, result.final.hi, X, prec)
    if not pairs:
        raise InputError("X: all points coincide; give at least two distinct points")
    with precision(prec):
        ratios = []
        for i, j, low2, up2, dx2 in pairs:
            lo_r = endpoints((flint.arb(low2) / flint.arb(dx2)).sqrt(), "ratio")[0]
            up_r = endpoints((flint.arb(up2) / flint.arb(dx2)).sqrt(), "ratio")[1]
            ratios.append((lo_r, up_r, i, j))
    best_lo = max(r[0] for r in ratios)
    worst_up = max(r[1] for r in ratios)
    cert = flow_certificate_for(schedule, X, result)
    extra = {"pairs": len(ratios), "max_width": result.max_width()}
    if best_lo > g_hi:
        i, j = next((r[2], r[3]) for r in ratios if r[0] == best_lo)
        return LipschitzVerdict(
            "flow",
            Outcome.REFUTED,
            best_lo,
            worst_up,
            g_lo,
            g_hi,
            f"the points {i} and {j} violate the Grönwall bound",
            counterexample={"pair": (i, j)},
            certificate=cert,
            message=f"pair ratio >= {float(best_lo):.6g} > G",
            extra=extra,
        )
    if worst_up <= g_lo:
        return LipschitzVerdict(
            "flow",
            Outcome.VERIFIED,
            best_lo,
            worst_up,
            g_lo,
            g_hi,
            "|Φ_T(x_i) − Φ_T(x_j)| <= lhs_upper |x_i − x_j| <= G |x_i − x_j| for all pairs of "
            "the given points; lhs_lower <= Lip(Φ_T)",
            certificate=cert,
            message=f"pair ratios <= {float(worst_up):.6g} <= G = {float(g_lo):.6g}; "
            f"certified Lip(Φ_T) >= {float(best_lo):.6g}",
            extra=extra,
        )
    return LipschitzVerdict(
        "flow",
        Outcome.UNDECIDED,
        best_lo,
        worst_up,
        g_lo,
        g_hi,
        "",
        certificate=None,
        message="enclosures too wide to compare a pair ratio with G; use points further apart",
        extra=extra,
    )
