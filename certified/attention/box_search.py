"""Best-first branch and bound over boxes (bisection along the widest side), shared by the
token-sample-complexity families (proofs/bounds.md#token-mean-value, #token-hardmax)."""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np

__all__ = ["branch_and_bound"]


def _bisect(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, ...]:
    # any float between the endpoints splits the box into two boxes covering it exactly
    j = int(np.argmax(hi - lo))
    mid = min(max(lo[j] + (hi[j] - lo[j]) / 2, lo[j]), hi[j])
    hi1, lo2 = hi.copy(), lo.copy()
    hi1[j], lo2[j] = mid, mid
    return lo, hi1, lo2, hi


def branch_and_bound(
    evaluate: Any,
    root: tuple[np.ndarray, np.ndarray],
    *,
    batch: int,
    rel_tol: float,
    max_boxes: int,
    stop_below: float | None = None,
    stop_above: float | None = None,
) -> tuple[float, float, np.ndarray | None, int, bool]:
    """Best-first bisection of boxes. ``evaluate(lo, hi)`` returns, per box, an upper bound
    of the quantity on the box, a lower bound at a point ``c`` of it (``-inf``: none), ``c``,
    and whether the box may meet the domain (boxes that cannot are dropped).

    Stops when the largest box bound is ``<= (1 + rel_tol) best``, or — in claim mode
    (``stop_below`` given) — as soon as the largest bound is ``<= stop_below`` or
    ``best > stop_above`` (``rel_tol`` is then not used), or when ``max_boxes`` evaluations
    are spent. Returns ``(top, best, best_c, count, resolved)``: ``top`` is the largest bound
    over the kept boxes (``0.0`` if none is kept; ``inf`` possible), ``resolved`` whether the
    stopping rule (not the budget) ended the search.

    Guarantee: the kept boxes always cover the root box minus the dropped ones, so ``top``
    bounds the quantity on the domain whenever ``evaluate``'s bounds do."""
    heap: list[tuple[float, int, np.ndarray, np.ndarray]] = []
    state = {"best": 0.0, "best_c": None, "count": 0}

    def run(boxes: list[tuple[np.ndarray, np.ndarray]]) -> None:
        for s in range(0, len(boxes), batch):
            chunk = boxes[s : s + batch]
            lo = np.array([b[0] for b in chunk])
            hi = np.array([b[1] for b in chunk])
            up, at_c, c, meets = evaluate(lo, hi)
            state["count"] += len(chunk)
            for i in range(len(chunk)):
                if meets[i]:
                    key = state["count"] * 1024 + i
                    heapq.heappush(heap, (-float(up[i]), key, lo[i], hi[i]))
                if at_c[i] > state["best"]:
                    state["best"], state["best_c"] = float(at_c[i]), c[i].copy()

    def target() -> float:
        return stop_below if stop_below is not None else state["best"] * (1 + rel_tol)

    def done() -> bool:
        if not heap or -heap[0][0] <= target():
            return True
        return stop_above is not None and state["best"] > stop_above

    run([root])
    while not done() and state["count"] < max_boxes:
        children = []
        while heap and len(children) < 2 * batch and -heap[0][0] > target():
            _, _, lo, hi = heapq.heappop(heap)
            lo1, hi1, lo2, hi2 = _bisect(lo, hi)
            children += [(lo1, hi1), (lo2, hi2)]
        run(children)
    top = -heap[0][0] if heap else 0.0
    return top, state["best"], state["best_c"], state["count"], done()
