"""Constructive lemmas of the measure-to-measure theorem (theorems.md §7, arXiv 2411.04551) as
producers of schedules, certified by the flow: so far Lemma 3.2 only (the move of every
measure into the open positive orthant by one constant pull). The rest of Theorem 1.1 (disjoint
supports, clustering, corridor steering, time reversal) is not implemented.

Lemma 3.2 (constant pull): with z = (1, ..., 1)/sqrt(d) and omega = -z outside every support,
the sphere neural ODE x' = P_x^perp W tanh(U x + b) with U = 0, b = 1, W = c 1 is the pull
x' = k P_x^perp z, k = c tanh(1) sqrt(d) (theorems.md §2: s = <x, z> = tanh(artanh s0 + k t)).
A point with s > sqrt(d/(d+1)) is in the open positive orthant (each coordinate of
x = s z + sqrt(1 - s^2) u is >= s/sqrt(d) - sqrt(1 - s^2) > 0), so a duration
t >= (artanh(s*) - artanh(min s0)) / k suffices; the producer picks t (untrusted) and the
certified enclosures decide.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import flint
import numpy as np

from certified.errors import InputError
from certified.transformers.flow import token_enclosures, transformer_flow
from certified.transformers.instance import TransformerInstance, parse_instance
from certified.verdict import Outcome

__all__ = ["OrthantMove", "orthant_move"]


@dataclass(frozen=True)
class OrthantMove:
    """The verdict, the one-piece schedule (instance JSON pieces), its instance and flow.

    Guarantee: VERIFIED means every token's certified enclosure at the end of the piece lies
    in the open positive orthant (every lower end > 0)."""

    outcome: Outcome
    reason: str
    pieces: list
    instance: TransformerInstance
    result: Any


def orthant_move(measures: list, *, c: Any = 2) -> OrthantMove:
    """Lemma 3.2 for measures (lists of tokens on S^{d-1}, d >= 3): one constant pull towards
    z = 1/sqrt(d); refuses (InputError) when omega = -z is an atom of some measure.

    Guarantee: as :class:`OrthantMove`.
    """
    obj = {"measures": [{"tokens": m} for m in measures], "pieces": [{"duration": 1}]}
    inst = parse_instance(obj)
    d = inst.d
    if d < 3:
        raise InputError(f"tokens: Theorem 1.1 needs d >= 3, got d = {d}")
    for g, X in enumerate(inst.measures):
        for i, row in enumerate(X):
            total = sum(row, flint.fmpq(0))
            if total < 0 and total * total >= d:  # <x, 1> <= -sqrt(d): x = omega
                raise InputError(
                    f"measures[{g}].tokens[{i}]: is omega = -(1, ..., 1)/sqrt(d), the pole the "
                    "pull cannot move; the lemma needs omega outside every support"
                )
    s0 = min(float(sum(row, flint.fmpq(0))) / math.sqrt(d) for X in inst.measures for row in X)
    s0 = max(s0, -1 + 1e-15)
    k = float(c) * math.tanh(1.0) * math.sqrt(d)
    target = math.sqrt(d / (d + 1)) + 0.5 * (1 - math.sqrt(d / (d + 1)))
    t = (math.atanh(target) - math.atanh(s0)) / k
    duration = flint.fmpq(math.ceil(t * 64), 64)  # a short dyadic, at least t
    ones = [[c] for _ in range(d)]
    pieces = [{"duration": str(duration), "W": ones, "U": [[0] * d], "b": [1]}]
    move = parse_instance({**obj, "pieces": pieces})
    res = transformer_flow(move)
    if res.status.name != "SUCCESS":
        return OrthantMove(Outcome.UNDECIDED, f"flow not certified: {res.message}", pieces,
                           move, res)  # fmt: skip
    lows = [float(np.min(b.lo)) for b in token_enclosures(move, res)]
    if min(lows) > 0:
        return OrthantMove(Outcome.VERIFIED, "every token in the open positive orthant", pieces,
                           move, res)  # fmt: skip
    return OrthantMove(Outcome.UNDECIDED, "some enclosure meets a coordinate hyperplane; a "
                       "longer pull is needed", pieces, move, res)  # fmt: skip
