"""Partitions of input boxes into sub-boxes (``hints.partition`` of kind ``flow``).

A partition of one box is a bisection tree written flat, in preorder: ``null`` is a leaf (the
box itself), and ``axis, cut`` followed by the left subtree and then the right subtree cuts the
box at the exact rational ``cut``, strictly inside its range on ``axis``, into the left part
(``hi[axis] = cut``) and the right part (``lo[axis] = cut``). So ``[null]`` is the box unsplit and
``[0, "1/2", null, null]`` its two halves along axis 0. The leaves, in the order they appear,
cover the box exactly: each cut splits a closed box into two closed boxes whose union is it
(proofs/checker_soundness.md#partitions). Flat lists keep the JSON shallow at any depth; the
parse is iterative and counts leaves against a limit."""

from __future__ import annotations

from typing import Any

from ._parse import Rejected, charge, exact, show, top

__all__ = ["MAX_LEAVES", "partition_leaves"]

MAX_LEAVES = 100_000  # most sub-boxes of one certificate (every leaf is replayed)

Box = list[tuple[Any, Any]]


def partition_leaves(value: Any, where: str, boxes: list[Box]) -> tuple[list[Box], list[int]]:
    """The leaves of one tree per box of ``boxes`` (d exact pairs each) and, per leaf, the index
    of the box it belongs to. Rejected when a tree is malformed or a cut is not strictly inside.
    Guarantee: for every i, the leaves owned by i cover ``boxes[i]`` and lie inside it."""
    if not isinstance(value, list) or len(value) != len(boxes):
        raise Rejected(f"{where}: expected a list of {len(boxes)} trees, one per box")
    leaves: list[Box] = []
    owner: list[int] = []
    for i, tokens in enumerate(value):
        at = f"{where}[{i}]"
        if not isinstance(tokens, list):
            raise Rejected(f"{at}: expected a list (a flat bisection tree), got {show(tokens)}")
        todo, k = [list(boxes[i])], 0  # the boxes still to read, the next one last
        while todo:
            if k >= len(tokens):
                raise Rejected(f"{at}: the tree ends early ({len(todo)} subtrees missing)")
            box = todo.pop()
            if tokens[k] is None:
                leaves.append(box)
                owner.append(i)
                if len(leaves) > MAX_LEAVES:
                    raise Rejected(f"resource limit: {where} has more than {MAX_LEAVES} leaves")
                k += 1
                continue
            axis = tokens[k]
            if isinstance(axis, bool) or not isinstance(axis, int) or not 0 <= axis < len(box):
                raise Rejected(f"{at}[{k}]: {show(axis)} is neither null nor an axis < {len(box)}")
            if k + 1 >= len(tokens):
                raise Rejected(f"{at}: the tree ends after an axis")
            q = exact(tokens[k + 1], f"{at}[{k + 1}]")
            charge(2 + len(box) // 8, top(), f"{at}[{k + 1}]")  # two comparisons, two copies
            lo, hi = box[axis]
            if not lo < q < hi:
                raise Rejected(
                    f"{at}[{k + 1}]: the cut {show(tokens[k + 1])} is not strictly inside"
                )
            left, right = list(box), list(box)
            left[axis], right[axis] = (lo, q), (q, hi)
            todo += [right, left]  # left is read first
            k += 2
        if k != len(tokens):
            raise Rejected(f"{at}: {len(tokens) - k} values after the end of the tree")
    return leaves, owner
