"""Boxes of a ReLU flow split adaptively for rule relu-vectorised (issue 18 item 3, ReLU side).

The vectorised engine certifies every box, also one that meets a switching hyperplane: it then
takes window steps, whose error is first order in the box's width, so its enclosure is wide.
Such boxes are bisected (longest side, at a double strictly inside) while the budget
``max_splits`` lasts, widest enclosures first; each input box keeps whichever is narrower, its
unsplit enclosure or the hull of its sub-boxes' enclosures. The result is written as
``hints.partition`` (one flat preorder tree per input box, certified/checker/_partition.py),
the sub-boxes' steps in leaf order, and one claimed enclosure per input box. Untrusted: the
checker replays every leaf and checks that the claim of each input box contains its leaves'.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from certified.arith import Interval

__all__ = ["DEFAULT_MAX_SPLITS", "SplitBoxes", "split_relu_boxes"]

DEFAULT_MAX_SPLITS = 64  # bisections per file (certified flow --max-splits)


@dataclass(eq=False)
class _Leaf:
    box: int  # input box
    lo: np.ndarray
    hi: np.ndarray
    path: tuple = ()  # ((axis, cut, side), ...) from the input box; side 0 left, 1 right
    enc: tuple = (None, None)  # engine enclosure (lo, hi)
    steps: str = ""


@dataclass
class SplitBoxes:
    """Leaves (in the tree's preorder), their plans, one flat tree per input box."""

    lo: np.ndarray  # (n_leaves, d) doubles
    hi: np.ndarray
    steps: list[str]
    pieces: list
    trees: list[list] = field(default_factory=list)
    splits: int = 0


def _run(schedule, leaves: list[_Leaf]) -> list:
    from certified.flow.api import enclose_flow

    if not leaves:
        return []
    lo = np.array([x.lo for x in leaves])
    hi = np.array([x.hi for x in leaves])
    res = enclose_flow(schedule, Interval(lo, hi), method="vectorised")
    plan = res.hints["plan"]
    for k, leaf in enumerate(leaves):
        leaf.enc = (res.final.lo[k].astype(float), res.final.hi[k].astype(float))
        leaf.steps = plan["steps"][k]
    return plan["pieces"]


def _width(leaves: list[_Leaf]) -> float:
    lo = np.min([x.enc[0] for x in leaves], axis=0)
    hi = np.max([x.enc[1] for x in leaves], axis=0)
    return float(np.max(hi - lo))


def _tree(leaves: list[_Leaf], depth: int = 0) -> list:
    """The flat preorder tree of leaves sharing a path prefix of length ``depth``."""
    if len(leaves) == 1 and len(leaves[0].path) == depth:
        return [None]
    axis, cut, _ = leaves[0].path[depth]
    left = [x for x in leaves if x.path[depth][2] == 0]
    right = [x for x in leaves if x.path[depth][2] == 1]
    return [axis, cut, *_tree(left, depth + 1), *_tree(right, depth + 1)]


def _order(leaves: list[_Leaf]) -> list[_Leaf]:
    """Leaves in the tree's preorder (left before right at every level)."""
    return sorted(leaves, key=lambda x: [s for _, _, s in x.path])


def split_relu_boxes(schedule, lo: np.ndarray, hi: np.ndarray, max_splits: int) -> SplitBoxes:
    """Certifiable sub-boxes of the double boxes ``[lo, hi]`` (see the module docstring).

    Guarantee: none (untrusted); the leaves of each tree cover its box exactly (cuts at doubles
    strictly inside), as the checker verifies.
    """
    first = [_Leaf(i, lo[i].copy(), hi[i].copy()) for i in range(lo.shape[0])]
    pieces = _run(schedule, first)
    leaves, splits = list(first), 0
    while splits < max_splits:
        crossing = [x for x in leaves if "w" in x.steps]  # met a hyperplane: window steps
        crossing.sort(key=lambda x: -float(np.max(x.enc[1] - x.enc[0])))
        new = []
        for leaf in crossing[: max_splits - splits]:
            axis = int(np.argmax(leaf.hi - leaf.lo))
            cut = float(0.5 * leaf.lo[axis] + 0.5 * leaf.hi[axis])
            if not leaf.lo[axis] < cut < leaf.hi[axis]:
                continue
            a, b = leaf.hi.copy(), leaf.lo.copy()
            a[axis], b[axis] = cut, cut
            new += [
                _Leaf(leaf.box, leaf.lo, a, (*leaf.path, (axis, cut, 0))),
                _Leaf(leaf.box, b, leaf.hi, (*leaf.path, (axis, cut, 1))),
            ]
            leaves.remove(leaf)
            splits += 1
        if not new:
            break
        _run(schedule, new)
        leaves += new
    out_leaves, trees = [], []
    for i, orig in enumerate(first):
        mine = _order([x for x in leaves if x.box == i])
        if len(mine) > 1 and _width(mine) >= _width([orig]):
            mine = [orig]  # splitting did not help this box
        out_leaves += mine
        trees.append(_tree(mine))
    return SplitBoxes(
        lo=np.array([x.lo for x in out_leaves]),
        hi=np.array([x.hi for x in out_leaves]),
        steps=[x.steps for x in out_leaves],
        pieces=pieces,
        trees=trees,
        splits=sum(len(t) // 2 for t in trees),
    )
