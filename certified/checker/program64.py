"""Expression fields compiled for the float64 replay (:func:`certified.checker.jets64.jets64`):
nodes grouped by depth, operation and arity, so that each group runs once for every set
(proofs/checker_soundness.md#float-intervals)."""

from __future__ import annotations

import numpy as np
from flint import fmpq

from .ivec import from_fmpq
from .taylor import ExpressionField

__all__ = ["Program"]


class Program:
    """An expression field compiled into groups: (op, const, kind, node indices, argument
    indices, constant values). A sum of products ``const * var`` whose products serve nothing
    else is one ``lincomb`` row: a group of rows is one matrix product (``ivec.matmul``)."""

    def __init__(self, field: ExpressionField) -> None:
        nodes, const = field.nodes, field.const
        uses = [0] * len(nodes)
        for op, *a in nodes:
            if op not in ("x", "p", "c"):
                for j in a:
                    uses[j] += 1
        for o in field.outputs:
            uses[o] += 1
        terms, absorbed = {}, set()
        for i, (op, *a) in enumerate(nodes):
            if op not in ("sum", "add") or const[i] or len(set(a)) != len(a):
                continue
            pairs = []  # (const node, var node); var -1: the constant 1 (an offset)
            for t in a:
                top, *ta = nodes[t]
                if const[t] and op == "sum":
                    pairs.append((t, -1))
                    continue
                if top != "mul" or uses[t] != 1 or const[ta[0]] == const[ta[1]]:
                    break
                pairs.append((ta[0], ta[1]) if const[ta[0]] else (ta[1], ta[0]))
            else:
                if len({v for _, v in pairs}) == len(pairs):
                    terms[i] = pairs
                    absorbed.update(t for t in a if not const[t])
        self.field, depth, keys = field, [], {}
        for i, (op, *a) in enumerate(nodes):
            leaf = op in ("x", "p", "c")
            depth.append(0 if leaf else 1 + max(depth[j] for j in a))
            if i in absorbed:
                continue
            if i in terms:
                keys.setdefault((depth[i], "lincomb", 0, False, ()), []).append(i)
                continue
            kind = (const[a[0]], const[a[1]]) if op == "mul" else ()
            key = (depth[i], op, 1 if leaf else len(a), const[i], kind)
            keys.setdefault(key, []).append(i)
        self.groups = []
        for (_, op, _, cst, kind), idx in sorted(keys.items(), key=lambda kv: kv[0][0]):
            value = None
            if op == "lincomb":  # args: the columns (var nodes); value: (rows, cols, consts)
                cols = sorted({v for i in idx for _, v in terms[i]}, key=lambda v: (v < 0, v))
                at = {v: c for c, v in enumerate(cols)}
                rc = [(r, at[v], cn) for r, i in enumerate(idx) for cn, v in terms[i]]
                args = [[v] for v in cols]
                value = tuple(np.array(col) for col in zip(*rc, strict=True))
            else:
                args = [nodes[i][1:] for i in idx]
                if op == "c":
                    args = [[0]] * len(idx)
                    value = from_fmpq([nodes[i][1] for i in idx])
            self.groups.append((op, cst, kind, np.array(idx), np.array(args, dtype=np.int64),
                                value))  # fmt: skip
        self._slots(field)

    def _slots(self, field: ExpressionField) -> None:
        """Renumbers the nodes kept in H (computed nodes, leaves that are arguments, outputs)
        as slots (``node[slot]`` is the node); the coefficients of ``lincomb`` rows (nodes)
        are read from ``cvals``, with the parameters' values at ``pnode``."""
        used, leaf = set(field.outputs), ("x", "p", "c")
        for op, cst, _, idx, args, value in self.groups:  # a constant inner node: a slot
            used.update([] if cst else idx.tolist(), [] if op in leaf else args[args >= 0].tolist())
            if op == "lincomb":
                used.update(i for i in value[2].tolist() if field.nodes[i][0] not in leaf)
        self.node = np.array(sorted(used), dtype=np.int64)
        self.slot = slot = np.full(len(field.nodes), -1, dtype=np.int64)
        slot[self.node] = np.arange(len(self.node))
        groups, self.groups = self.groups, []
        for op, cst, kind, idx, args, value in groups:
            keep = slot[idx] >= 0
            if op not in leaf:
                args = np.where(args >= 0, slot[args], -1)
            if op == "lincomb":  # and the slots of the constants (-1: leaves, from cvals)
                value = (*value[:3], slot[value[2]])
            if keep.any():
                value = value[keep] if op == "c" else value
                self.groups.append((op, cst, kind, slot[idx[keep]], args[keep] if cst else args,
                                    value))  # fmt: skip
        self.outputs, self.size = slot[np.array(field.outputs)], len(self.node)
        self.pnode = np.array([i for i, (op, *_) in enumerate(field.nodes) if op == "p"], int)
        self.pparam = np.array([field.nodes[i][1] for i in self.pnode], int)
        self.cvals = from_fmpq([a[0] if op == "c" else fmpq(0) for op, *a in field.nodes])
