"""Kind ``separation`` v1 (proofs/separation.md): G(q) = sum w y e^<q,y> / sum w e^<q,y> of
two discrete probability measures differ at q. G_mu(q)_k, G_nu(q)_k are recomputed in arb at the
hinted precision; each ball must lie in its claimed interval, the two intervals disjoint."""

from __future__ import annotations

from typing import Any

import flint

from ._parse import Rejected, fields, measure, small_integer, vector

MAX_SEPARATION_COST = 3 * 10**8  # (atoms of mu + nu) (d + 1) (precision + 512): seconds of arb


def gradient_coordinate(points: list, weights: list, q: list, k: int) -> flint.arb:
    """A ball containing G(q)_k at the current ``flint.ctx.prec`` (weights >= 0, sum 1)."""
    qb = [flint.arb(c) for c in q]
    num, den = flint.arb(0), flint.arb(0)
    for y, w in zip(points, weights, strict=True):
        dot = sum((a * flint.arb(c) for a, c in zip(qb, y, strict=True)), flint.arb(0))
        e = flint.arb(w) * dot.exp()
        num, den = num + e * flint.arb(y[k]), den + e
    return num / den


def check_separation_v1(instance: Any, claim: Any, hints: Any) -> str:
    """Check a separation certificate; return a summary or raise Rejected."""
    fields(instance, "instance", ("mu", "nu"))
    fields(claim, "claim", ("q", "coordinate", "mu", "nu"))
    fields(hints, "hints", ("precision",))
    data = {s: measure(instance[s], f"instance.{s}") for s in ("mu", "nu")}
    d = len(data["mu"][0][0])
    if len(data["nu"][0][0]) != d:
        raise Rejected(f"instance.nu.points: not of the dimension of instance.mu ({d})")
    q = vector(claim["q"], "claim.q", d)
    k = small_integer(claim["coordinate"], "claim.coordinate", 0, d - 1)
    box = {s: vector(claim[s], f"claim.{s}", 2) for s in ("mu", "nu")}
    if any(lo > hi for lo, hi in box.values()):
        raise Rejected("claim: an enclosure [lo, hi] has lo > hi")
    if not (box["mu"][1] < box["nu"][0] or box["nu"][1] < box["mu"][0]):
        raise Rejected("claim: the enclosures of mu and nu intersect")
    prec = small_integer(hints["precision"], "hints.precision", 53, 16384)
    n = len(data["mu"][0]), len(data["nu"][0])
    if (n[0] + n[1]) * (d + 1) * (prec + 512) > MAX_SEPARATION_COST:
        raise Rejected(f"resource limit: atoms (d + 1) (precision + 512) > {MAX_SEPARATION_COST}")
    with flint.ctx.workprec(prec):
        for s, (points, weights) in data.items():
            g, (lo, hi) = gradient_coordinate(points, weights, q, k), box[s]
            if not (g.is_finite() and flint.arb(lo) <= g and g <= flint.arb(hi)):
                raise Rejected(f"claim.{s}: does not contain the recomputed G_{s}(q)[{k}]")
    return f"rule separation: G_mu(q)[{k}] != G_nu(q)[{k}], d = {d}, {n[0]} + {n[1]} atoms"
