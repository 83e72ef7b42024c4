"""Theorem 1.1 by clustering first (theorems.md §7, the paper's Φ₂; proofs/transformers.md §6b):
the producer of the schedule when some measure has several atoms. Untrusted: it proposes the
pieces, the certified flow of every measure decides.

1. Lemma 3.2 (only when some measure is not in an open hemisphere): one constant pull
   ``x' = k P_x^perp z`` (``W = 2k z``, ``U = 0``, ``b = 0``: sigmoid(0) = 1/2) towards a pole z
   whose antipode omega is no atom (``-omega`` of the targets file when given), which brings
   every atom to ``<z, x> >= 1/2``.
2. Self-attention clustering (theorems.md §8, V = I for a time c, B = 0): ``x_i' = P^perp_{x_i}
   m``, ``m = sum_j w_j x_j`` the measure's own mean (measures do not interact), contracts the
   atoms of each measure in an open hemisphere towards one point; c (float RK4) is the least
   time after which every measure's angular radius is at most min(1/20, gap/40), gap the least
   angle between clusters of measures with different targets (the caps' need, not eps: the
   final pull contracts every cluster further). With B = 0 the softmax weights are the masses,
   so the pieces use ``"normalisation": "mean"`` (the same field, no division).
3. Expansion: the constant pull away from the clusters' mean direction, a dilation of the
   stereographic chart (conformal): gaps of ~0.01-0.1 grow to ~1, so the caps of step 4 need
   gates of beta ~ 1e2-1e4 instead of ~1e5 (the flow's steps, the replay's cost).
   Prop 3.1 (Lemma 3.3): where two clusters of measures with different targets are still too
   close for the caps, a barycentre flow ``V = s a aᵀ`` (B = 0) first moves every measure along
   great circles to a at its own speed ``s <a, m_k>``, so that the clusters come apart; when no
   candidate a does, UNDECIDED names Prop 3.1 and the two measures.
4. Corridor steering of the N clusters (:mod:`certified.transformers.steering` with
   ``spread``: every cap holds or excludes a whole cluster with the margin), the final pull
   into each target contracting its cluster further.

proofs/transformers.md §6b.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["CLUSTER_STEPS", "ClusterPlan", "cluster_schedule", "cluster_steps", "measure_instances"]

# the largest steps of the coupled flows, first attempt first: the checker's replay refused
# steps of ~0.14 (time of V = I) on the clustering piece (2 x 4 and 8 x 4 atoms, d = 3), and
# 1/8 and 1/16 with 8 atoms a measure (4 x 8, d = 3: accepted at 1/32)
CLUSTER_STEPS = ("1/8", "1/16", "1/32", "1/64")


def cluster_steps(atoms: int) -> tuple[str, ...]:
    """The max_step attempts for measures of at most ``atoms`` atoms. Guarantee: none."""
    return CLUSTER_STEPS[:3] if atoms <= 4 else CLUSTER_STEPS[2:]


_DT = 1 / 64  # float RK4 step of the clustering simulation (time of V = I)
_T_MAX = 60.0  # longest clustering simulated
_R_MAX = 0.05  # the clustering's largest angular radius (less when the centres are close)
_R_FLOOR = 1e-5  # clusters this small and still too close: Prop 3.1 is needed
_GAP_RATIO = 40  # the least gap between clusters over their largest angular radius
_SPREAD_TO = 2.0  # the expansion's farthest atom from the centres' mean direction (radians)


@dataclass(frozen=True)
class ClusterPlan:
    """Pieces (instance JSON), the simulated cluster centres, their angular radius, the number
    of steering rounds, the failure (lemma and where) or None, and the phase of each piece
    (steps 1-4 of the module docstring; the replay forecast names them).

    Guarantee: none (heuristic)."""

    pieces: list
    centres: np.ndarray | None
    radius: float
    failure: str | None
    phases: tuple[str, ...] = ()


def _unit(X: np.ndarray) -> np.ndarray:
    return X / np.linalg.norm(X, axis=-1, keepdims=True)


def _float_rows(X: np.ndarray) -> np.ndarray:
    return _unit(np.array([[float(q.p) / float(q.q) for q in row] for row in X], dtype=float))


def _weights(masses, n: int) -> np.ndarray:
    if masses is None:
        return np.full(n, 1.0 / n)
    return np.array([float(q.p) / float(q.q) for q in masses])


def _hemisphere(X: np.ndarray, w: np.ndarray) -> bool:
    """Heuristic witness: every atom strictly on the side of the measure's mean."""
    m = w @ X
    n = np.linalg.norm(m)
    return bool(n > 1e-9 and np.min(X @ (m / n)) > 1e-6)


def _pull(X: np.ndarray, z: np.ndarray, k: float) -> np.ndarray:
    """The constant pull x' = k P^perp z for unit time: s = <z, x> -> tanh(artanh s + k)."""
    s = np.clip(X @ z, -1 + 1e-15, 1 - 1e-15)
    t = X - s[:, None] * z
    nt = np.linalg.norm(t, axis=1, keepdims=True)
    t = np.where(nt > 1e-15, t / np.maximum(nt, 1e-300), 0.0)
    s_new = np.tanh(np.arctanh(s) + k)
    return s_new[:, None] * z + np.sqrt(np.maximum(0.0, 1 - s_new**2))[:, None] * t


def _radius(X: np.ndarray, w: np.ndarray) -> tuple[float, np.ndarray]:
    c = _unit(w @ X)
    return float(np.max(np.arccos(np.clip(X @ c, -1, 1)))), c


def _gap(C: np.ndarray, Y: np.ndarray) -> float:
    """The least angle between the centres of two measures with different targets."""
    best = math.pi
    for g in range(len(C)):
        for h in range(g):
            if not np.array_equal(Y[g], Y[h]):
                best = min(best, math.acos(max(-1.0, min(1.0, float(C[g] @ C[h])))))
    return best


def _cluster_time(Xs: list, ws: list, Y: np.ndarray, r_max: float) -> float | None:
    """The least simulated time (multiple of 1/8) of x_i' = P^perp_{x_i} m after which every
    measure has angular radius <= min(r_max, gap / 16), gap the least angle between the centres
    of measures with different targets: only as small as the caps of the steering need (the
    final pull contracts every cluster further). None: not within _T_MAX."""

    def f(X, w):
        m = w @ X
        return m[None, :] - (X @ m)[:, None] * X

    Xs = [X.copy() for X in Xs]
    t = 0.0
    while t < _T_MAX:
        if t > 0 and round(t * 8) == t * 8:
            radii, centres = zip(*(_radius(X, w) for X, w in zip(Xs, ws, strict=True)),
                                 strict=True)  # fmt: skip
            r = max(radii)
            if r <= min(r_max, _gap(np.array(centres), Y) / _GAP_RATIO) or r <= _R_FLOOR:
                return t
        for g, (X, w) in enumerate(zip(Xs, ws, strict=True)):
            k1 = f(X, w)
            k2 = f(X + _DT / 2 * k1, w)
            k3 = f(X + _DT / 2 * k2, w)
            k4 = f(X + _DT * k3, w)
            Xs[g] = _unit(X + _DT / 6 * (k1 + 2 * k2 + 2 * k3 + k4))
        t += _DT
    return None


def _simulate(X: np.ndarray, w: np.ndarray, c: float, V: np.ndarray | None = None) -> np.ndarray:
    """Float RK4 (steps of about _DT) of x_i' = P^perp_{x_i} V m, m = sum_j w_j x_j (B = 0), for
    time c: self-attention clustering (V = I, the default) or a barycentre flow."""
    steps = max(1, math.ceil(c / _DT))
    h = c / steps
    for _ in range(steps):

        def f(Z):
            v = w @ Z if V is None else V @ (w @ Z)
            return v[None, :] - (Z @ v)[:, None] * Z

        k1 = f(X)
        k2 = f(X + h / 2 * k1)
        k3 = f(X + h / 2 * k2)
        k4 = f(X + h * k3)
        X = _unit(X + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4))
    return X


def _pole(Xall: np.ndarray, omega) -> np.ndarray:
    """The pole z of Lemma 3.2: -omega when given, else the best of a few directions (the
    largest least <z, x>)."""
    d = Xall.shape[1]
    if omega is not None:
        return -_unit(np.array([float(q.p) / float(q.q) for q in omega]))
    rng = np.random.default_rng(0)
    cands = [np.ones(d) / math.sqrt(d), _unit(np.sum(Xall, axis=0) + 1e-12)]
    cands += [_unit(v) for v in rng.standard_normal((64, d))]
    return max(cands, key=lambda z: float(np.min(Xall @ z)))


def _cluster_and_spread(Xs: list, ws: list, Y: np.ndarray, d: int):
    """Step 2 and the expansion: (pieces, centres, spread) after them, or (g, h): two measures
    with different targets whose clusters are too close for the caps, or the failure (str)."""
    pieces: list[dict] = []
    c = _cluster_time(Xs, ws, Y, _R_MAX)
    if c is None:
        return (f"clustering (theorems.md §8): a measure is not within angle {_R_MAX} after "
                f"time {_T_MAX}")  # fmt: skip
    # V = I for time c (not V = cI for time 1: the same flow at rate 1, so that one max_step
    # (cluster_steps) bounds the steps of the clustering and the pulls alike)
    eye = [[1 if i == j else 0 for j in range(d)] for i in range(d)]
    pieces.append({"duration": str(c), "V": eye})
    Xs = [_simulate(X, w, c) for X, w in zip(Xs, ws, strict=True)]
    C = np.array([_radius(X, w)[1] for X, w in zip(Xs, ws, strict=True)])
    # expansion: the constant pull away from the centres' mean direction z0 multiplies
    # tan(angle from z0 / 2) by e^k (a dilation of the stereographic chart from -z0, conformal):
    # the gaps between clusters grow from the clustering's ~0.01-0.1 to ~1, so the caps of the
    # steering need gates of beta ~ 100 instead of ~1e5 (cost of the flow), radii grow alike
    z0 = _unit(np.sum(C, axis=0))
    theta = float(max(np.max(np.arccos(np.clip(X @ z0, -1, 1))) for X in Xs))
    if 1e-9 < theta < _SPREAD_TO:
        k = math.floor(math.log(math.tan(_SPREAD_TO / 2) / math.tan(theta / 2)) * 64) / 64
        if k > 0:
            pieces.append({"duration": 1, "W": [[-2 * k * v] for v in z0.tolist()],
                           "U": [[0.0] * d], "b": [0.0], "activation": "sigmoid"})  # fmt: skip
            Xs = [_pull(X, z0, -k) for X in Xs]
    radii, centres = zip(*(_radius(X, w) for X, w in zip(Xs, ws, strict=True)), strict=True)
    C = np.array(centres)
    spread = 2 * max(max(radii), 1e-12)
    for g in range(len(Xs)):
        for h in range(g):
            if np.array_equal(Y[g], Y[h]):
                continue
            if math.acos(max(-1.0, min(1.0, float(C[g] @ C[h])))) < 4 * spread:
                return g, h
    return pieces, C, spread


def _barycentre_candidates(Xs: list, ws: list, g: int, h: int):
    """Lemma 3.3 (theorems.md §7; §2, barycentre flow): a piece V = s a aᵀ (B = 0), under
    which every particle of measure k runs along its great circle to a at the speed
    s <a, m_k>: the measures move differently, so clusters that coincided come apart. Yields
    (V as JSON, the atoms after it) for a few directions a (the means' difference first)."""
    d = Xs[0].shape[1]
    mg, mh = ws[g] @ Xs[g], ws[h] @ Xs[h]
    dirs = [mg - mh, mh - mg, *np.eye(d), *(-np.eye(d))]
    for s in (2, 4):
        for a in dirs:
            if np.linalg.norm(a) < 1e-9:
                continue
            a = _unit(a)
            V = s * np.outer(a, a)
            yield V.tolist(), [_simulate(X, w, 1.0, V) for X, w in zip(Xs, ws, strict=True)]


def cluster_schedule(instance: Any, Y: np.ndarray, eps: float, omega=None) -> ClusterPlan:
    """The pieces of steps 1-3 (module docstring) for the measures of ``instance`` and the
    float targets Y (unit rows). Guarantee: none (heuristic: the certified flow decides)."""
    from certified.transformers.match import _pieces
    from certified.transformers.steering import plan_steering

    d = instance.d
    Xs = [_float_rows(X) for X in instance.measures]
    ws = [_weights(m, X.shape[0]) for m, X in zip(instance.masses, Xs, strict=True)]
    pieces: list[dict] = []
    phases: list[str] = []
    if not all(_hemisphere(X, w) for X, w in zip(Xs, ws, strict=True)):
        z = _pole(np.concatenate(Xs), omega)
        s_min = float(min(np.min(X @ z) for X in Xs))
        if s_min <= -1 + 1e-9:
            return ClusterPlan([], None, 0.0, "Lemma 3.2: an atom is at the pole -z the pull "
                               "cannot move; give an omega outside every support")  # fmt: skip
        k = max(0.0, math.atanh(0.5) - math.atanh(s_min))
        k = math.ceil(k * 64) / 64
        pieces.append({"duration": 1, "W": [[2 * k * v] for v in z.tolist()],
                       "U": [[0.0] * d], "b": [0.0], "activation": "sigmoid"})  # fmt: skip
        phases.append("Lemma 3.2 pull")
        Xs = [_pull(X, z, k) for X in Xs]
    stage = _cluster_and_spread(Xs, ws, Y, d)
    if isinstance(stage, tuple) and len(stage) == 2:  # clusters too close for the caps
        g, h = stage
        for V, Xb in _barycentre_candidates(Xs, ws, g, h):
            better = _cluster_and_spread(Xb, ws, Y, d)
            if isinstance(better, tuple) and len(better) == 3:
                pieces.append({"duration": 1, "V": V})
                phases.append("barycentre flow (Lemma 3.3)")
                stage = better
                break
    if isinstance(stage, str):
        return ClusterPlan(pieces, None, 0.0, stage)
    if len(stage) == 2:
        g, h = stage
        return ClusterPlan(pieces, None, 0.0, (
            f"Prop 3.1: the clusters of measures[{g}] and measures[{h}] are too close for the "
            "caps, also after each barycentre flow V = s a a^T tried (Lemma 3.3)"))  # fmt: skip
    more, C, spread = stage
    pieces += more
    phases += ["self-attention clustering", "expansion"][: len(more)]
    N = len(Xs)
    plan = plan_steering(C, np.arange(N), Y, radius=min(0.1 * eps, 0.1), spread=spread)
    if plan.failure is not None:
        return ClusterPlan(pieces, C, spread, f"Prop 4.2 (corridor steering): {plan.failure}")
    phases += [f"steering round {r + 1}" for r in range(len(plan.rounds))]
    return ClusterPlan(pieces + _pieces(plan.rounds, d), C, spread, None, tuple(phases))


def measure_instances(instance: Any, pieces: list) -> list:
    """For every measure g: its one-measure instance with the schedule ``pieces`` (B = 0 and
    the masses as softmax weights: ``"normalisation": "mean"``), whose coupled state's flow
    :mod:`certified.transformers.match` certifies. Guarantee: exact (the measure's atoms)."""
    from certified.arith.exact import fmpq_to_str
    from certified.transformers.instance import parse_instance

    out = []
    for X, m in zip(instance.measures, instance.masses, strict=True):
        obj: dict[str, Any] = {
            "tokens": [[fmpq_to_str(q) for q in row] for row in X],
            "normalisation": "mean",
            "pieces": pieces,
        }
        if m is not None:
            obj["weights"] = [fmpq_to_str(q) for q in m]
        out.append(parse_instance(obj))
    return out
