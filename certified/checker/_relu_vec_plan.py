"""Step plans of rule ``relu-vectorised`` (hints.steps): strict parsing of the step tokens and
the replay's cost estimate, charged before any replay (proofs/format.md section 4)."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ._parse import Rejected, array

# cost units of the replay (format.md section 4): at most 0.83 ns each as measured (loaded
# machine), so a replay at the limit takes about 420 s, under the 600 s backstop of certified check
MAX_RELU_VEC_COST = 5 * 10**11
ROUND_COST, STEP_COST, EIG_COST = 10**5, 6, 40  # a round per K + 4; a step per K(d+4)(p+4); d^3
UNITS = (ROUND_COST, STEP_COST, EIG_COST)
MV_COST = 10  # mean-value form: per set and step and unit of (K + 3) d^2 (d + p) (#relu-mv)
_PIECE = re.compile(r"(?:R|[rws][1-9][0-9]{0,15})*")
_TOKEN = re.compile(r"R|([rws])([0-9]+)")
_KIND = {"r": 1, "w": 2, "s": 3}  # region, window, straddle steps


def _tokens(text: Any, vp: Any, where: str, memo: dict) -> list[tuple[int, int]]:
    """The steps (1: region, 2: window; ticks) of one piece string; they tile the piece."""
    got = memo.get((text, id(vp)))
    if got is None:
        if not isinstance(text, str) or _PIECE.fullmatch(text) is None:
            raise Rejected(f"{where}: expected tokens R, r<ticks>, w<ticks>, s<ticks>")
        got, left = [], vp.ticks
        for m in _TOKEN.finditer(text):
            kind, n = (1, min(vp.step, left)) if m[0] == "R" else (_KIND[m[1]], int(m[2]))
            if not 1 <= n <= min(vp.step, left):
                raise Rejected(f"{where}: a step of {n} ticks: empty, over the step or the end")
            got.append((kind, n))
            left -= n
        if left:
            raise Rejected(f"{where}: the steps stop {left} ticks before the end of the piece")
        memo[(text, id(vp))] = got
    return got


def plans(steps: Any, vps: list, n: int) -> tuple[list, int]:
    """Per piece its rounds (sets, kinds, ticks), and the replay's cost estimate (refused over
    the limit before anything is allocated per round)."""
    rows, memo, steps = [[] for _ in vps], {}, array(steps, "hints.steps", n)
    count = [sum(map(t.count, "Rrw")) if isinstance(t, str) else 0 for t in steps]
    least = min(STEP_COST * vp.K * (vp.d + 4) * (vp.p + 4) for vp in vps)  # before parsing:
    _limit(ROUND_COST * 7 * max(count) + least * sum(count))  # rounds >= one set's tokens
    for q, text in enumerate(steps):
        parts = text.split("/") if isinstance(text, str) else None
        if parts is None or len(parts) != len(vps):
            raise Rejected(f"hints.steps[{q}]: expected {len(vps)} pieces separated by '/'")
        for j, part in enumerate(parts):
            rows[j].append(_tokens(part, vps[j], f"hints.steps[{q}] piece {j}", memo))
    cost = 0
    for vp, row in zip(vps, rows, strict=True):
        steps_j = sum(map(len, row)) + n * (vp.tail > 0)
        cost += max(map(len, row)) * ROUND_COST * (vp.K + 4) + EIG_COST * n * vp.d**3
        cost += STEP_COST * steps_j * vp.K * (vp.d + 4) * (vp.p + 4)
    _limit(cost)
    out = []
    for row in rows:
        lens, rounds = np.array([len(t) for t in row]), []
        for s in range(int(lens.max())):
            sel = np.nonzero(lens > s)[0]
            kt = np.array([row[q][s] for q in sel], dtype=np.int64)
            rounds.append((sel, kt[:, 0], kt[:, 1]))
        out.append(rounds)
    return out, cost


def _limit(cost: int) -> None:
    if cost > MAX_RELU_VEC_COST:
        raise Rejected(
            f"resource limit: the replay costs about {cost:.2g}, over {MAX_RELU_VEC_COST:.0g}"
        )
