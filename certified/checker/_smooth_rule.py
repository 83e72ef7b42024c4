"""Rule ``taylor-lognorm`` of kind ``flow`` v1: tanh / sigmoid fields, enclosures checked by
replaying the producer's chain of balls (proofs/checker_soundness.md#taylor-lognorm).

Hints: ``{"method": "taylor-lognorm", "order": K, "precision": P, "chains": [per piece
{"centres": (m+1) x N x d, "radii": (m+1) x N, "boxes": m x N x d x [lo, hi]}]}``. Each step is
verified by ``_taylor.replay_smooth_piece`` in arb at P bits; pieces must connect exactly; the
initial balls must contain the instance points; the claimed enclosures must contain the final
balls.
"""

from __future__ import annotations

from typing import Any

import flint

from ._parse import Rejected, array, matrix, small_integer, vector
from ._taylor import TaylorReplayError, replay_smooth_piece

MAX_TAYLOR_OPS = 10**8  # arb operations a replay may take (a few minutes at most)


def _chain(value: Any, where: str, n: int, d: int) -> tuple[list, list, list]:
    if not isinstance(value, dict) or set(value) != {"centres", "radii", "boxes"}:
        raise Rejected(f"{where}: expected exactly the fields centres, radii, boxes")
    boxes_raw = array(value["boxes"], f"{where}.boxes")
    m = len(boxes_raw)
    centres = [
        matrix(c, f"{where}.centres[{k}]", n, d)
        for k, c in enumerate(array(value["centres"], f"{where}.centres", m + 1))
    ]
    radii = [
        vector(r, f"{where}.radii[{k}]", n)
        for k, r in enumerate(array(value["radii"], f"{where}.radii", m + 1))
    ]
    boxes = []
    for k, step in enumerate(boxes_raw):
        per_point = []
        for i, point in enumerate(array(step, f"{where}.boxes[{k}]", n)):
            per_point.append(
                [
                    tuple(vector(pair, f"{where}.boxes[{k}][{i}][{j}]", 2))
                    for j, pair in enumerate(array(point, f"{where}.boxes[{k}][{i}]", d))
                ]
            )
        boxes.append(per_point)
    return centres, radii, boxes


def check_taylor_lognorm(activation, pieces, points, boxes, hints) -> str:
    """Check enclosures of a tanh / sigmoid flow; return a summary or raise Rejected."""
    if activation not in ("tanh", "sigmoid"):
        raise Rejected("instance.schedule.activation: rule taylor-lognorm needs tanh or sigmoid")
    if boxes is None:
        raise Rejected("claim: rule taylor-lognorm certifies enclosures, not exact images")
    K = small_integer(hints["order"], "hints.order", 2, 60)
    prec = small_integer(hints["precision"], "hints.precision", 53, 4096)
    n, d = len(points), len(points[0])
    chains_raw = array(hints["chains"], "hints.chains", len(pieces))
    chains = [_chain(c, f"hints.chains[{j}]", n, d) for j, c in enumerate(chains_raw)]
    ops = sum(
        n * len(ch[2]) * (2 * K * K * len(p.b) + len(p.b) * d * d + 10 * K * d)
        for ch, p in zip(chains, pieces, strict=True)
    )
    if ops > MAX_TAYLOR_OPS:
        raise Rejected(f"resource limit: the replay needs more than {MAX_TAYLOR_OPS} operations")
    # the initial balls contain the instance points (exact rational test)
    c0, r0, _ = chains[0]
    for i, x in enumerate(points):
        if r0[0][i] < 0 or sum((x[k] - c0[0][i][k]) ** 2 for k in range(d)) > r0[0][i] ** 2:
            raise Rejected(f"hints.chains[0]: the initial ball of point {i} misses the point")
    # consecutive pieces connect exactly
    for j in range(1, len(chains)):
        prev, cur = chains[j - 1], chains[j]
        if prev[0][-1] != cur[0][0] or prev[1][-1] != cur[1][0]:
            raise Rejected(f"hints.chains[{j}]: does not start where piece {j - 1} ends")
    old = flint.ctx.prec
    flint.ctx.prec = prec
    try:
        for j, ((centres, radii, steps), piece) in enumerate(zip(chains, pieces, strict=True)):
            W = [[flint.arb(v) for v in row] for row in piece.W]
            A = [[flint.arb(v) for v in row] for row in piece.A]
            b = [flint.arb(v) for v in piece.b]
            per_point = [
                (
                    [centres[k][i] for k in range(len(centres))],
                    [radii[k][i] for k in range(len(radii))],
                    [steps[k][i] for k in range(len(steps))],
                )
                for i in range(n)
            ]
            try:
                replay_smooth_piece(W, A, b, activation, piece.duration, K, per_point)
            except TaylorReplayError as exc:
                raise Rejected(f"hints.chains[{j}]: {exc}") from None
    finally:
        flint.ctx.prec = old
    # the claimed enclosures contain the final balls (exact rational test, box around a ball)
    cN, rN = chains[-1][0][-1], chains[-1][1][-1]
    for i in range(n):
        for k in range(d):
            lo, hi = boxes[i][k]
            if not (lo <= cN[i][k] - rN[i] and cN[i][k] + rN[i] <= hi):
                raise Rejected(
                    f"claim.enclosures[{i}][{k}]: does not contain the certified ball of point {i}"
                )
    steps = [len(ch[2]) for ch in chains]
    return f"rule taylor-lognorm: {n} points, {len(pieces)} pieces, {sum(steps)} steps, order {K}"
