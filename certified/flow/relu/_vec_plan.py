"""Step plans of the vectorised ReLU engine as hints of rule ``relu-vectorised`` (untrusted:
the checker replays every step; a wrong plan is rejected, never accepted)."""

from __future__ import annotations

import itertools
import math

import numpy as np

__all__ = ["plan_pieces", "plan_strings"]


def plan_strings(record: list, n: int) -> list[str]:
    """The step tokens of rule relu-vectorised per initial set (``R``, ``r<ticks>``,
    ``w<ticks>``; pieces separated by ``/``) from :func:`flow_vectorised`'s record."""
    per_piece = []
    for log in record:
        if not log:
            per_piece.append([""] * n)
            continue
        sets = np.concatenate([e[0] for e in log])
        kind = np.concatenate([np.full(e[0].size, e[1]) for e in log])
        ticks = np.concatenate([e[2] for e in log])
        full = np.concatenate([e[3] for e in log])
        order = np.argsort(sets, kind="stable")  # per set, in the order the steps were taken
        sets, kind, ticks, full = sets[order], kind[order], ticks[order], full[order]
        toks = [
            "R" if f else ("r" if k == 1 else "w") + str(t)
            for k, t, f in zip(kind.tolist(), ticks.tolist(), full.tolist(), strict=True)
        ]
        bounds = np.searchsorted(sets, np.arange(n + 1))
        per_piece.append(["".join(toks[a:b]) for a, b in itertools.pairwise(bounds)])
    return ["/".join(parts) for parts in zip(*per_piece, strict=True)]


def plan_pieces(pieces: list) -> list[dict]:
    """Per piece the tick exponent, the largest step (ticks) and the Taylor order."""
    return [
        {"tick": 1 - math.frexp(vp.tick)[1], "step": vp.h_ticks, "order": vp.K} for vp in pieces
    ]
