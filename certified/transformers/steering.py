"""Corridor steering of atoms on the sphere by gated pulls (the producer of Theorem 1.1's
schedule; theorems.md §2 and §7, arXiv 2411.04551 Prop 4.1/4.2 and Lemma B.2 with the
corrected sign). Untrusted: it proposes a schedule, the certified flow decides.

One *gated pull* toward z (a unit vector) is the sphere perceptron

.. math::

    \\dot x = P_x^\\perp\\, k z\\, \\sigma(\\beta(\\langle z, x\\rangle - c)),

i.e. ``W = k z``, ``U = beta zᵀ``, ``b = -beta c`` (the ball gate of Lemma B.2 with the sign of
the errata: the gate is open on the cap ``<z, x> > c``, closed outside). On the open cap the
point runs along the great circle to z with ``s = <z, x>`` obeying ``s' = k sigma(..) (1 - s^2)``
(theorems.md §2, gated pull), so with the gate ~1 it is the constant pull
``s(t) = tanh(artanh s0 + k t)``, stopped at the chosen s by the choice of k; outside the cap
the sigmoid gate is <= e^-20 (a leak, not an exact freeze: the certified flow accounts for
it). A cap that holds exactly one atom moves that atom alone (gather + pull + stop of Prop 4.2);
caps with disjoint influence regions act in the same piece (one neuron each), so a round of
moves is one piece.

Each atom is routed from its position to its target y through waypoints q: a hop is allowed
when the atom is strictly the nearest point to q (a cap around q holds it and nothing else,
with a margin in <q, .> converted into beta = 40 / margin); the last hop has q = y, where the
atoms already parked at y may lie in the cap. Where no hop exists (an atom of another
measure sits at the target, atoms of two measures coincide) the planner stops and says which
atom and where.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["GatedPull", "SteeringPlan", "plan_steering"]

_LEAK = 20.0  # beta * (margin in <q, x>) on each side of the threshold: gate <= e^-20 outside
_MIN_GAP = 1e-9  # smaller margins in <q, x> are refused (beta would exceed 6e10)
_RATIO = 0.5  # least margin / (s_goal - s_p) of a hop: a few flow steps per hop


@dataclass(frozen=True)
class GatedPull:
    """One neuron: ``W = k q``, ``U = beta qᵀ``, ``b = -beta c`` (floats, exact as doubles)."""

    q: np.ndarray
    k: float
    beta: float
    c: float
    atom: int


@dataclass(frozen=True)
class SteeringPlan:
    """Rounds of gated pulls (each round one piece of duration 1); ``failure`` names the atom
    and the reason when the planner stopped early (then the schedule is partial).

    Guarantee: none (heuristic)."""

    rounds: list[list[GatedPull]]
    positions: np.ndarray
    failure: str | None


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def _angle(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.arccos(np.clip(np.dot(a, b), -1.0, 1.0)))


def _ball_max(q: np.ndarray, centre: np.ndarray, radius: float) -> float:
    """max of <q, x> over the spherical cap of angular radius ``radius`` around ``centre``."""
    return math.cos(max(0.0, _angle(q, centre) - radius))


def _hop(p, q, others, moves, s_goal, atom, spread=0.0):
    """The gated pull that takes the atom at p toward q, or None when the cap cannot hold it
    alone (others: positions that must stay outside; moves: this round's accepted pulls with
    the angular radius of their atom's path; spread: the angular radius of the cluster around
    every position, 0 for points)."""
    s_p = math.cos(min(math.pi, _angle(q, p) + spread))
    r_path = _angle(q, p) + spread
    s_out = -1.0
    if len(others):
        s_out = float(np.max(np.cos(np.maximum(0.0, np.arccos(np.clip(others @ q, -1, 1))
                                                - spread))))  # fmt: skip
    if moves:
        MQ = np.array([m.q for m, _ in moves])
        radii = np.array([r for _, r in moves])
        outer = np.array([_outer(m) for m, _ in moves])
        between = np.arccos(np.clip(MQ @ q, -1.0, 1.0))
        # this atom's path must stay where every other gate is closed, and theirs where ours is
        if np.any(np.cos(np.maximum(0.0, between - r_path)) > outer):
            return None
        s_out = max(s_out, float(np.max(np.cos(np.maximum(0.0, between - radii)))))
    gap = s_p - s_out
    # the Taylor steps of the flow grow like beta * (s_goal - s_p), i.e. (s_goal - s_p) / gap
    if gap < _MIN_GAP or s_goal <= s_p or gap < _RATIO * (s_goal - s_p):
        return None
    c = s_out + gap / 2
    beta = 2 * _LEAK / gap
    k = math.atanh(s_goal) - math.atanh(min(float(np.dot(q, p)), s_goal))
    return GatedPull(q, k, beta, c, atom), r_path


def _outer(m: GatedPull) -> float:
    """The level of <q, x> below which the gate is <= e^-20."""
    return m.c - _LEAK / m.beta


def _tangent(p: np.ndarray, y: np.ndarray) -> np.ndarray | None:
    t = y - np.dot(p, y) * p
    n = np.linalg.norm(t)
    return None if n < 1e-14 else t / n


def plan_steering(
    X: np.ndarray,
    dest: np.ndarray,
    Y: np.ndarray,
    *,
    radius: float,
    max_rounds: int = 400,
    seed: int = 0,
    spread: float = 0.0,
) -> SteeringPlan:
    """Route every atom (rows of X, unit vectors) to its target ``Y[dest[i]]`` to within
    angular ``radius``, by rounds of gated pulls (module docstring); with ``spread`` > 0 the
    rows are the centres of clusters of that angular radius, and every cap holds or excludes
    a whole cluster with the margin.

    Guarantee: none (heuristic: the certified flow of the schedule decides).
    """
    rng = np.random.default_rng(seed)
    pos = np.array(X, dtype=float)
    M = pos.shape[0]
    parked = np.zeros(M, dtype=bool)
    rounds: list[list[GatedPull]] = []
    s_final = math.cos(radius)
    stalls = np.zeros(M, dtype=int)
    for _ in range(max_rounds):
        todo = [i for i in range(M) if not parked[i]]
        if not todo:
            return SteeringPlan(rounds, pos, None)
        # nearest first: short hops do not block the long ones for long
        todo.sort(key=lambda i: _angle(pos[i], Y[dest[i]]))
        moves: list[tuple[GatedPull, float]] = []
        new_pos = pos.copy()
        busy = np.zeros(M, dtype=bool)  # moved this round, or carried by a final pull
        for i in todo:
            if busy[i]:
                continue
            p, y = pos[i], Y[dest[i]]
            mask = np.ones(M, dtype=bool)
            mask[i] = False
            final = _final_pull(i, pos, dest, Y, busy, moves, s_final, spread)
            if final is not None:
                pull, r_path, group = final
                moves.append((pull, r_path))
                for j in group:
                    s_j = min(float(np.dot(pos[j], y)), 1 - 1e-16)
                    s_new = math.tanh(math.atanh(s_j) + pull.k)
                    new_pos[j] = _rotate(pos[j], y, s_new)
                    parked[j] = busy[j] = True
                stalls[i] = 0
                continue
            hop = _best_hop(p, y, pos[mask], moves, i, rng, stalls[i], spread)
            if hop is None:
                stalls[i] += 1
                continue
            stalls[i] = 0
            busy[i] = True
            moves.append((hop[0], hop[1]))
            new_pos[i] = _rotate(p, hop[0].q, hop[2])
        if not moves:
            i = todo[0]
            return SteeringPlan(rounds, pos, _stuck(i, pos, dest, Y))
        rounds.append([m for m, _ in moves])
        pos = new_pos
    i = next(i for i in range(M) if not parked[i])
    return SteeringPlan(rounds, pos, f"atom {i} not parked after {max_rounds} rounds")


def _final_pull(i, pos, dest, Y, busy, moves, s_final, spread=0.0):
    """The last hop of atom i: a cap around its target y holding i and the other free atoms
    bound for y that are at least as near (they ride along), nothing else; the speed is set
    for the farthest of them. Returns (pull, path radius, group) or None."""
    y = Y[dest[i]]
    s = pos @ y
    free = np.flatnonzero(np.all(Y[dest] == y, axis=1) & ~busy)
    group = sorted(free, key=lambda j: -s[j])
    while group and i in group:
        mask = np.ones(len(pos), dtype=bool)
        mask[group] = False
        weakest = group[-1]
        hop = _hop(pos[weakest], y, pos[mask], moves, s_final, weakest, spread)
        if hop is not None:
            return hop[0], hop[1], group
        group = group[:-1]
    return None


def _stuck(i: int, pos: np.ndarray, dest: np.ndarray, Y: np.ndarray) -> str:
    y = Y[dest[i]]
    dist = np.linalg.norm(pos - y, axis=1)
    dist[i] = np.inf
    j = int(np.argmin(dist))
    if dist[j] < 1e-9 and not np.array_equal(Y[dest[j]], y):
        return (
            f"atom {i}: its target {dest[i]} is occupied by atom {j}, whose own target "
            "differs (Prop 4.2 needs the target free of other atoms)"
        )
    return f"atom {i}: no gated pull isolates it (nearest other atom at {dist[j]:.3g})"


def _rotate(p: np.ndarray, q: np.ndarray, s: float) -> np.ndarray:
    """The point of the great circle from p to q with <q, x> = s."""
    t = _tangent(q, p)
    if t is None:
        return q.copy()
    return s * q + math.sqrt(max(0.0, 1 - s * s)) * t


def _best_hop(p, y, others, moves, atom, rng, stalls, spread=0.0):
    """A waypoint q near p in a direction that brings p nearer to y (or sideways when stuck):
    the atom must be the only point in the cap around q; the hop stops at 1/10 of the way
    left."""
    t = _tangent(p, y)
    if t is None:  # antipodal: any direction
        t = _unit(rng.standard_normal(p.size) - np.dot(rng.standard_normal(p.size), p) * p)
    near = float(np.min(np.arccos(np.clip(others @ p, -1, 1)))) if len(others) else math.pi
    dist_y = _angle(p, y)
    best = None
    dirs = [t]
    for _ in range(6 + 4 * min(stalls, 5)):
        w = rng.standard_normal(p.size)
        w -= np.dot(w, p) * p
        w = _unit(w)
        dirs.append(_unit(t + rng.uniform(0.2, 2.0) * w))
    for u in dirs:
        for rho in sorted(
            {
                *(f * dist_y for f in (1.0, 0.7, 0.5)),
                *(f * near for f in (1.5, 1.0, 0.7, 0.45, 0.25, 0.1)),
            },
            reverse=True,
        ):
            if not 0 < rho <= min(dist_y, 1.2):
                continue
            q = _unit(math.cos(rho) * p + math.sin(rho) * u)
            s_goal = math.cos(0.05 * rho)
            hop = _hop(p, q, others, moves, s_goal, atom, spread)
            if hop is None:
                continue
            score = _angle(_rotate(p, q, s_goal), y)
            if best is None or score < best[0]:
                best = (score, hop, s_goal)
            break
    if best is None:
        return None
    return best[1][0], best[1][1], best[2]
