"""Kind ``transport-to-cube`` v1 (proofs/cube.md): a ReLU schedule of laminar phases pushes a
discrete measure mu to within W_q <= bound <= epsilon of U([0,1]^d). The atoms' images are
replayed exactly (_interpolation_rule.replay_phases); a guillotine tree of cells partitions
[0,1]^d, each cell's atoms weigh exactly its volume and lie in it, and every image is within
``bound`` of every point of its cell (compared squared, exactly). Densities (instance
"density", section 6): axis shears and coordinate scalings, cells C -> G, W_2 <= bound."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from itertools import pairwise
from typing import Any

import flint
from flint import arb

from ._interpolation_rule import replay_phases
from ._parse import (
    Rejected,
    array,
    charge,
    exact,
    exact_row,
    fields,
    measure,
    positive,
    small_integer,
    string,
    top,
    vector,
)
from .flow import Piece

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
    if isinstance(instance, dict) and "density" in instance:
        return check_cube_density(instance, claim, hints)
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


# --- densities (proofs/cube.md section 6) ------------------------------------------------------

_GRID = 128  # enclosure ends are rounded outward to multiples of 2^-_GRID
_PREC = 256  # bits of the exponentials
MAX_CUBE_COST = 10**8  # cells x pieces a density replay may take


def _density(value: Any, where: str) -> tuple[list, list, list]:
    """Grid (d axes, strictly increasing), flat masses (row-major), strides; masses >= 0, sum 1."""
    fields(value, where, ("grid", "masses"))
    axes = array(value["grid"], f"{where}.grid")
    if not 2 <= len(axes) <= 8:
        raise Rejected(f"{where}.grid: a density needs 2 <= d <= 8 axes")
    grid = [vector(g, f"{where}.grid[{k}]") for k, g in enumerate(axes)]
    if any(len(g) < 2 or any(a >= b for a, b in pairwise(g)) for g in grid):
        raise Rejected(f"{where}.grid: an axis is not >= 2 strictly increasing breakpoints")
    level = [value["masses"]]
    for g in grid:
        level = [x for row in level for x in array(row, f"{where}.masses", len(g) - 1)]
    flat = exact_row(level, f"{where}.masses")
    if any(m < 0 for m in flat) or sum(flat, _ZERO) != 1:
        raise Rejected(f"{where}.masses: a mass is negative or they do not sum to exactly 1")
    strides = [1] * len(grid)
    for k in range(len(grid) - 2, -1, -1):
        strides[k] = strides[k + 1] * (len(grid[k + 1]) - 1)
    return grid, flat, strides


def _mass(box: list, grid: list, flat: list, strides: list, budget: list) -> flint.fmpq:
    """mu_0(box) = sum over grid boxes of mass * |box cap grid box| / |grid box|, exact."""
    terms = [(0, _ONE)]
    for (lo, hi), g, s in zip(box, grid, strides, strict=True):
        first, last = max(bisect_right(g, lo) - 1, 0), min(bisect_left(g, hi), len(g) - 1)
        part = []
        for r in range(first, last):
            overlap = min(hi, g[r + 1]) - max(lo, g[r])
            if overlap > 0:
                part.append((r * s, overlap / (g[r + 1] - g[r])))
        terms = [(i + j, f * h) for i, f in terms for j, h in part]
        budget[0] -= len(terms)
    if budget[0] < 0:
        raise Rejected("hints.cells: the cells meet too many grid boxes")
    return sum((flat[i] * f for i, f in terms), _ZERO)


def _leaves(tree: Any, grid: list) -> list[tuple[list, list]]:
    """(source box, target box) of every leaf; the parts of a node tile its boxes."""
    d, out = len(grid), []
    stack = [(tree, [(g[0], g[-1]) for g in grid], [(_ZERO, _ONE)] * d, "hints.cells")]
    while stack:
        node, src, tgt, where = stack.pop()
        if node == "cell":
            out.append((src, tgt))
            continue
        fields(node, where, ("axis", "cuts", "targets", "parts"))
        k = small_integer(node["axis"], f"{where}.axis", 0, d - 1)
        cuts = exact_row(array(node["cuts"], f"{where}.cuts"), f"{where}.cuts")
        targets = exact_row(array(node["targets"], f"{where}.targets"), f"{where}.targets")
        parts = array(node["parts"], f"{where}.parts", len(cuts) + 1)
        s_ends, t_ends = [src[k][0], *cuts, src[k][1]], [tgt[k][0], *targets, tgt[k][1]]
        if len(targets) != len(cuts) or any(
            a >= b for ends in (s_ends, t_ends) for a, b in pairwise(ends)
        ):
            raise Rejected(f"{where}: cuts, targets not as many or not increasing in the cell")
        for j, part in enumerate(parts):
            s = src[:k] + [(s_ends[j], s_ends[j + 1])] + src[k + 1 :]
            t = tgt[:k] + [(t_ends[j], t_ends[j + 1])] + tgt[k + 1 :]
            stack.append((part, s, t, f"{where}.parts[{j}]"))
    return out


def _grid_ends(y: arb) -> tuple[flint.fmpq, flint.fmpq]:
    """Multiples of 2^-_GRID below and above the ball y (finite, |y| < 2^64): the floor and
    ceiling of its exact end points times 2^_GRID (a power of two: exact at any precision)."""
    if not (y.is_finite() and abs(y) < 2**64):
        raise Rejected("claim.schedule: an image leaves [-2^64, 2^64]")
    lo, hi = (y.lower() * 2**_GRID).floor(), (y.upper() * 2**_GRID).ceil()
    return flint.fmpq(lo.unique_fmpz(), 2**_GRID), flint.fmpq(hi.unique_fmpz(), 2**_GRID)


def _moved(iv: tuple, shift: tuple) -> tuple:
    """iv + shift, each end rounded outward to a multiple of 2^-_GRID when its denominator
    exceeds 2^_GRID (keeps heights bounded over many shears)."""
    out = []
    for x, up in ((iv[0] + shift[0], 0), (iv[1] + shift[1], 1)):
        out.append(x if x.q <= 2**_GRID else flint.fmpq((x * 2**_GRID).floor() + up, 2**_GRID))
    return tuple(out)


def _classify(piece: Piece, d: int) -> tuple:
    """("shear", j): every a_i = s_i e_j and w_i[j] = 0 (laminar: x_j is constant, x + tau
    g(x_j) exactly); ("scale", [(k, c, s, e^r)]): a_i = s_i e_k, w_i = l_i e_k, distinct k
    (x_k - c -> (x_k - c) e^r where s (x_k - c) > 0, r = l s tau; elsewhere x_k stays)."""
    p, axes = len(piece.b), []
    for i in range(p):
        nz = [k for k in range(d) if piece.A[i][k] != 0]
        if len(nz) != 1 or not any(piece.W[k][i] for k in range(d)):
            raise Rejected(f"{piece.where}: neuron {i} is not an axis neuron with w != 0")
        axes.append(nz[0])
    if len(set(axes)) == 1 and not any(piece.W[axes[0]]):
        return ("shear", axes[0])
    scales = []
    for i, k in enumerate(axes):
        if any(piece.W[m][i] for m in range(d) if m != k) or axes.count(k) > 1:
            raise Rejected(f"{piece.where}: neither an axis shear nor a coordinate scaling")
        s, r = piece.A[i][k], piece.W[k][i] * piece.A[i][k] * piece.duration
        if abs(r) > 1000:
            raise Rejected(f"{piece.where}: a scaling rate |l s tau| > 1000")
        scales.append((k, -piece.b[i] / s, s, arb(r).exp()))
    return ("scale", scales)


def _shear(piece: Piece, j: int, lo: flint.fmpq, hi: flint.fmpq) -> list[tuple]:
    """Per coordinate, exact min and max of tau g(x_j) over [lo, hi] (cube.md section 6.3)."""
    d, p = len(piece.W), len(piece.b)
    ts = {lo, hi} | {
        -b / a[j] for a, b in zip(piece.A, piece.b, strict=True) if lo < -b / a[j] < hi
    }
    acts = [[max(piece.A[i][j] * t + piece.b[i], _ZERO) for i in range(p)] for t in ts]
    g = [[piece.duration * sum((piece.W[m][i] * z[i] for i in range(p)), _ZERO) for m in range(d)]
         for z in acts]  # fmt: skip
    return tuple((min(v[m] for v in g), max(v[m] for v in g)) for m in range(d))


def _image(c: flint.fmpq, s: flint.fmpq, E: arb, x: flint.fmpq, up: int) -> flint.fmpq:
    """phi(x) rounded outward: x where s (x - c) <= 0, else c + (x - c) E (cube.md 6.3)."""
    if s * (x - c) <= 0:
        return x
    return _grid_ends(c + (x - c) * E)[up]


def check_cube_density(instance: Any, claim: Any, hints: Any) -> str:
    """Check a transport-to-cube certificate for a density (proofs/cube.md section 6)."""
    fields(instance, "instance", ("density", "width", "epsilon", "q"))
    grid, flat, strides = _density(instance["density"], "instance.density")
    d = len(grid)
    p = small_integer(instance["width"], "instance.width", d, 10**6)  # the formula needs p >= d
    eps, q = positive(instance["epsilon"], "instance.epsilon"), exact(instance["q"], "instance.q")
    if q < 1 or q * (d - 1) >= d:
        raise Rejected(f"instance.q: {q} is outside [1, d/(d-1)) for d = {d}")
    fields(claim, "claim", ("schedule", "bound", "switches"))
    bound = exact(claim["bound"], "claim.bound")
    if not 0 <= bound <= eps:
        raise Rejected(f"claim.bound: {bound} is not in [0, epsilon = {eps}]")
    schedule = fields(claim["schedule"], "claim.schedule", ("dimension", "activation", "pieces"))
    small_integer(schedule["dimension"], "claim.schedule.dimension", d, d)
    string(schedule["activation"], "claim.schedule.activation", ("relu",))
    raw = array(schedule["pieces"], "claim.schedule.pieces")
    pieces = [Piece(v, f"claim.schedule.pieces[{i}]", d) for i, v in enumerate(raw)]
    if max(len(piece.b) for piece in pieces) > p:
        raise Rejected(f"claim.schedule: a piece has more than width = {p} neurons")
    if max(piece.height for piece in pieces) > 4096:
        raise Rejected("claim.schedule: a number has more than 4096 bits")
    same = [(a.W, a.A, a.b) == (b.W, b.A, b.b) for a, b in pairwise(pieces)]
    switches = same.count(False)
    if small_integer(claim["switches"], "claim.switches", 0, 10**9) != switches:
        raise Rejected(f"claim.switches: the schedule has {switches} switches")
    fields(hints, "hints", ("cells",))
    leaves = _leaves(hints["cells"], grid)
    if len(leaves) * len(pieces) > MAX_CUBE_COST:
        raise Rejected(f"hints.cells: {len(leaves)} cells x {len(pieces)} pieces is too many")
    vals, idx = [], []  # per coordinate: the distinct intervals, and each cell's index into them
    for k in range(d):
        table: dict = {}
        idx.append([table.setdefault(src[k], len(table)) for src, _ in leaves])
        vals.append(list(table))
    with flint.ctx.workprec(_PREC):  # a scaling maps distinct intervals; a shear re-indexes cells
        for piece in pieces:
            kind, how = _classify(piece, d)
            if kind == "scale":
                for k, c, s, E in how:  # a comparison an interval, a product an active end
                    charge(len(vals[k]), 0, "the scalings")
                    on = [
                        j
                        for j, (lo, hi) in enumerate(vals[k])
                        if s * (hi - c) > 0 or s * (lo - c) > 0
                    ]
                    charge(2 * len(on), _PREC, "the scalings")
                    for j in on:
                        lo, hi = vals[k][j]
                        vals[k][j] = (_image(c, s, E, lo, 0), _image(c, s, E, hi, 1))
                continue
            bits = max(top(), 2 * _GRID)  # interval ends: file numbers plus dyadics of 2^-128
            charge(len(vals[how]) * 3 * len(piece.b) * d, bits, "the shears")  # then indices:
            charge(d * len(leaves), 0, "the shears")  # a word each
            table = {}  # distinct shifts
            sid = [table.setdefault(_shear(piece, how, *iv), len(table)) for iv in vals[how]]
            shifts = list(table)
            for m in range(d):
                if any(t[m][0] or t[m][1] for t in shifts):
                    pairs: dict = {}
                    idx[m] = [
                        pairs.setdefault((sid[a], b), len(pairs))
                        for a, b in zip(idx[how], idx[m], strict=True)
                    ]
                    vals[m] = [_moved(vals[m][b], shifts[a][m]) for a, b in pairs]
    boxes = [[vals[k][idx[k][i]] for k in range(d)] for i in range(len(leaves))]
    total, budget = _ZERO, [MAX_CUBE_COST]
    charge(4 * d * len(leaves), 0, "the cells' bounds")  # cells: at most one per 7 bytes
    for (src, tgt), box in zip(leaves, boxes, strict=True):
        volume, S = _ONE, _ZERO
        for (lo, hi), (a, b) in zip(box, tgt, strict=True):
            c, h = (a + b) / 2, b - a
            volume, S = volume * h, S + max((lo - c) ** 2, (hi - c) ** 2) + h * h / 12
        mass = _mass(src, grid, flat, strides, budget)
        if mass != volume:
            raise Rejected(f"hints.cells: a cell has mass {mass} and target volume {volume}")
        total += mass * S
    if total > bound * bound:
        raise Rejected(f"claim.bound: the cells give W_2^2 <= {total} > bound^2")
    return f"density d={d} p={p}: W_q <= W_2 <= {bound} <= {eps}, {len(leaves)} cells, L={switches}"
