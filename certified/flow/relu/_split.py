"""Boxes of a ReLU flow split adaptively for rule relu-vectorised (issue 18 item 3, ReLU side).

Every box is certified in mean-value form (:mod:`certified.flow.relu._mv`): its enclosure is
the zonotope's, with one generator per neuron that the set straddles, whose size is second
order in the box's size. Boxes that straddled planes are bisected (longest side, at a double
strictly inside) while the budget ``max_splits`` lasts, the widest enclosures first; each input
box keeps whichever is narrower, its unsplit enclosure or the hull of its sub-boxes'. The
result is written as ``hints.partition`` (one flat preorder tree per input box,
certified/checker/_partition.py), the sub-boxes' steps in leaf order, and one claimed enclosure
per input box. Untrusted: the checker replays every leaf and checks that the claim of each
input box contains its leaves'.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["DEFAULT_MAX_SPLITS", "SplitBoxes", "split_certificate", "split_relu_boxes"]

DEFAULT_MAX_SPLITS = 64  # bisections per file (certified flow --max-splits)


@dataclass(eq=False)
class _Leaf:
    box: int  # input box
    lo: np.ndarray
    hi: np.ndarray
    path: tuple = ()  # ((axis, cut, side), ...) from the input box; side 0 left, 1 right
    enc: tuple = (None, None)  # enclosure (lo, hi): the checker's replay
    steps: str = ""
    undecided: int = 0


@dataclass
class SplitBoxes:
    """Leaves (in the tree's preorder), their steps, one flat tree per input box, and per input
    box the hull of its leaves' enclosures."""

    lo: np.ndarray  # (n_leaves, d) doubles
    hi: np.ndarray
    steps: list[str]
    hints: dict  # {"method", "form", "pieces"}
    trees: list[list] = field(default_factory=list)
    splits: int = 0
    enc_lo: np.ndarray | None = None  # (n_boxes, d)
    enc_hi: np.ndarray | None = None


def _run(schedule, leaves: list[_Leaf], options: dict) -> dict:
    from certified.flow.relu._mv import mean_value_boxes

    mv = mean_value_boxes(
        schedule, np.array([x.lo for x in leaves]), np.array([x.hi for x in leaves]), **options
    )
    for k, leaf in enumerate(leaves):
        leaf.enc, leaf.steps = (mv.lo[k], mv.hi[k]), mv.hints["steps"][k]
        leaf.undecided = int(mv.per_box[k])
    return {k: v for k, v in mv.hints.items() if k != "steps"}


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


def split_relu_boxes(schedule, lo: np.ndarray, hi: np.ndarray, max_splits: int = DEFAULT_MAX_SPLITS,
                     **options) -> SplitBoxes:  # fmt: skip
    """Certifiable sub-boxes of the double boxes ``[lo, hi]`` (see the module docstring);
    ``options`` go to :func:`certified.flow.relu._mv.mean_value_boxes`.

    Guarantee: the enclosures are the checker's replays (``enc_lo``, ``enc_hi``: hulls per
    input box); the leaves of each tree cover its box exactly (cuts at doubles strictly
    inside), as the checker verifies.
    """
    lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
    first = [_Leaf(i, lo[i].copy(), hi[i].copy()) for i in range(lo.shape[0])]
    hints = _run(schedule, first, options)
    leaves, splits = list(first), 0
    while splits < max_splits:
        crossing = [x for x in leaves if x.undecided]  # met a hyperplane
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
        _run(schedule, new, options)
        leaves += new
    out, trees, enc_lo, enc_hi = [], [], [], []
    for i, orig in enumerate(first):
        mine = _order([x for x in leaves if x.box == i])
        if len(mine) > 1 and _width(mine) >= _width([orig]):
            mine = [orig]  # splitting did not help this box
        out += mine
        trees.append(_tree(mine))
        enc_lo.append(np.min([x.enc[0] for x in mine], axis=0))
        enc_hi.append(np.max([x.enc[1] for x in mine], axis=0))
    return SplitBoxes(
        lo=np.array([x.lo for x in out]),
        hi=np.array([x.hi for x in out]),
        steps=[x.steps for x in out],
        hints=hints,
        trees=trees,
        splits=sum(t.count(None) - 1 for t in trees),
        enc_lo=np.array(enc_lo),
        enc_hi=np.array(enc_hi),
    )


def split_certificate(schedule, lo: np.ndarray, hi: np.ndarray, max_splits: int, **options):
    """A certificate of the boxes ``[lo, hi]`` split under ``max_splits`` (mean-value form,
    hints.partition): :func:`certified.flow.relu._mv.mean_value_result` and its certificate.
    Guarantee: none (the checker decides)."""
    from certified.arith import Interval
    from certified.flow.relu._mv import certificate_of_result, mean_value_result

    X0 = Interval(np.asarray(lo, dtype=float), np.asarray(hi, dtype=float))
    result = mean_value_result(schedule, X0, max_splits, **options)
    return certificate_of_result(schedule, X0, result)
