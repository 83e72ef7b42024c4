"""Kind ``transport-to-cube`` v1 (proofs/cube.md): a ReLU schedule of laminar phases pushes a
discrete measure mu to within W_q <= bound <= epsilon of U([0,1]^d). The atoms' images are
replayed exactly (_interpolation_rule.replay_phases); a guillotine tree of cells partitions
[0,1]^d, each cell's atoms weigh exactly its volume and lie in it, and every image is within
``bound`` of every point of its cell (compared squared, exactly)."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import flint

from ._interpolation_rule import replay_phases
from ._parse import Rejected, array, exact, fields, measure, positive, small_integer

_ONE, _ZERO = flint.fmpq(1), flint.fmpq(0)


def _cells(tree: Any, Y: list, weights: list) -> tuple[flint.fmpq, int]:
    """Walk the tree (explicit stack); return max over atoms of sup_{g in cell} |y - g|^2."""
    d, seen, worst, leaves = len(Y[0]), [False] * len(Y), _ZERO, 0
    stack = [(tree, [(_ZERO, _ONE)] * d, "hints.cells")]
    while stack:
        node, box, where = stack.pop()
        if isinstance(node, dict):  # {"axis": k, "cuts": [c_1 < ... < c_{m-1}], "parts": m}
            fields(node, where, ("axis", "cuts", "parts"))
            k = small_integer(node["axis"], f"{where}.axis", 0, d - 1)
            cuts = [exact(c, f"{where}.cuts") for c in array(node["cuts"], f"{where}.cuts")]
            ends = [box[k][0], *cuts, box[k][1]]
            parts = array(node["parts"], f"{where}.parts", len(cuts) + 1)
            if any(a >= b for a, b in pairwise(ends)):
                raise Rejected(f"{where}.cuts: not strictly increasing inside the cell")
            for j, part in enumerate(parts):
                sub = box[:k] + [(ends[j], ends[j + 1])] + box[k + 1 :]
                stack.append((part, sub, f"{where}.parts[{j}]"))
            continue
        leaves += 1  # a leaf: the indices of the atoms assigned to the cell
        volume, mass = _ONE, _ZERO
        for lo, hi in box:
            volume *= hi - lo
        for t in array(node, where):
            i = small_integer(t, where, 0, len(Y) - 1)
            if seen[i]:
                raise Rejected(f"{where}: atom {i} is assigned to two cells")
            seen[i], mass = True, mass + weights[i]
            if any(not lo <= y <= hi for y, (lo, hi) in zip(Y[i], box, strict=True)):
                raise Rejected(f"{where}: the image of atom {i} is not in the cell")
            r2 = sum(
                (max(y - lo, hi - y) ** 2 for y, (lo, hi) in zip(Y[i], box, strict=True)), _ZERO
            )
            worst = max(worst, r2)
        if mass != volume:
            raise Rejected(f"{where}: the atoms weigh {mass}, the cell's volume is {volume}")
    if not all(seen):
        raise Rejected(f"hints.cells: atom {seen.index(False)} is in no cell")
    return worst, leaves


def check_cube_v1(instance: Any, claim: Any, hints: Any) -> str:
    """Check a transport-to-cube certificate; return a summary or raise Rejected."""
    fields(instance, "instance", ("measure", "width", "epsilon", "q"))
    X, weights = measure(instance["measure"], "instance.measure")
    d = len(X[0])
    p = small_integer(instance["width"], "instance.width", d, 10**6)  # the formula needs p >= d
    eps, q = positive(instance["epsilon"], "instance.epsilon"), exact(instance["q"], "instance.q")
    if q < 1 or (d > 1 and q * (d - 1) >= d):
        raise Rejected(f"instance.q: {q} is outside [1, d/(d-1)) for d = {d}")
    fields(claim, "claim", ("schedule", "bound", "switches"))
    bound = exact(claim["bound"], "claim.bound")
    if not 0 <= bound <= eps:
        raise Rejected(f"claim.bound: {bound} is not in [0, epsilon = {eps}]")
    fields(hints, "hints", ("phases", "cells"))
    Y, parsed = replay_phases(X, claim["schedule"], hints["phases"], "claim.schedule")
    if max(len(piece[1]) for piece in parsed) > p:
        raise Rejected(f"claim.schedule: a piece has more than width = {p} neurons")
    switches = sum(1 for a, b in pairwise(parsed) if a != b)
    if small_integer(claim["switches"], "claim.switches", 0, 10**9) != switches:
        raise Rejected(f"claim.switches: the schedule has {switches} switches")
    worst, leaves = _cells(hints["cells"], Y, weights)
    if worst > bound * bound:
        raise Rejected(f"claim.bound: an atom is {worst} (squared) from a point of its cell")
    return f"N={len(X)} d={d} p={p}: W_q <= {bound} <= {eps}, {leaves} cells, L={switches}"
