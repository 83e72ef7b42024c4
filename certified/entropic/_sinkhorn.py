"""Untrusted float64 producers of entropic dual potentials (heuristics only).

:func:`solve_potentials` runs Sinkhorn in the stabilised (absorbing) form of Schmitzer (2019)
inside an ε-scaling loop (γ' = 4^j γ down to γ, warm-started), and polishes each stage with
Newton steps on the dual (Sinkhorn–Newton, Brauer, Clason, Lorenz and Wirth 2017) under a trust
radius, whose fast local convergence reaches marginal errors near the float64 floor where plain
Sinkhorn needs thousands of sweeps at small γ.
:func:`sinkhorn_iterates` returns the plain log-domain iterates for the rate experiments.
Nothing here is trusted: the certified bounds hold for whatever potentials come out.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

__all__ = ["c_transform_f", "c_transform_g", "sinkhorn_iterates", "solve_potentials"]

FLOOR = 1e-15  # L1 marginal error at which the sweeps stop (near the float64 floor)
NEWTON_FLOOR = 1e-14  # below it a Newton step (n^3 work) cannot improve the float plan
CAP = 10.0  # largest change of a potential in one Newton step, in units of γ
ABSORB = 1e30  # scalings beyond [1/ABSORB, ABSORB] are absorbed into the potentials


def c_transform_f(g, C, b, gamma):
    """``f_i = -γ log Σ_j b_j exp((g_j - C_ij)/γ)`` (a Sinkhorn half-step). Guarantee: none."""
    with np.errstate(divide="ignore"):
        lb = np.log(b)
    return -gamma * logsumexp(lb[None, :] + (g[None, :] - C) / gamma, axis=1)


def c_transform_g(f, C, a, gamma):
    """``g_j = -γ log Σ_i a_i exp((f_i - C_ij)/γ)``. Guarantee: none."""
    with np.errstate(divide="ignore"):
        la = np.log(a)
    return -gamma * logsumexp(la[:, None] + (f[:, None] - C) / gamma, axis=0)


def _plan(f, g, C, a, b, gamma):
    with np.errstate(under="ignore", over="ignore"):
        return np.exp((f[:, None] + g[None, :] - C) / gamma) * a[:, None] * b[None, :]


def _error(P, a, b) -> float:
    return float(np.abs(P.sum(1) - a).sum() + np.abs(P.sum(0) - b).sum())


def _dual(f, g, P, a, b, gamma) -> float:
    return float(f @ a + g @ b - gamma * (P.sum() - 1.0))


def _scaling(f, g, C, a, b, gamma, max_sweeps, min_sweeps=20, floor=FLOOR):
    """Stabilised Sinkhorn while it converges fast enough: it stops at the float floor, or
    when the observed linear rate predicts more sweeps to the floor than a few Newton steps
    cost (one Newton step ~ min(n, m) / 4 sweeps of work; three are budgeted). Returns f, g,
    sweeps."""
    newton_cost = 3 * max(20, min(len(a), len(b)) // 4)
    sweeps, history = 0, []
    while sweeps < max_sweeps:
        K = _plan(f, g, C, a, b, gamma)
        u, v = np.ones(len(a)), np.ones(len(b))
        stop = False
        for _ in range(200):
            sweeps += 1
            u = a / (K @ v)
            c = K.T @ u
            err = float(np.abs(c * v - b).sum())
            v = b / c
            history.append(err)
            if err <= floor or sweeps >= max_sweeps or not np.isfinite(err):
                stop = True
            elif len(history) >= min_sweeps:
                rho = (history[-1] / history[-11]) ** 0.1 if history[-11] > 0 else 0.0
                ahead = np.log(floor / err) / np.log(rho) if 0 < rho < 1 else np.inf
                stop = ahead > newton_cost
            if stop or not np.all(np.abs(np.log(u)) < np.log(ABSORB)):
                break
        with np.errstate(divide="ignore"):
            f, g = f + gamma * np.log(u), g + gamma * np.log(v)
        if not (np.all(np.isfinite(f)) and np.all(np.isfinite(g))):
            raise FloatingPointError("Sinkhorn scalings left the float64 range")
        if stop:
            break
    return f, g, sweeps


def _newton(f, g, C, a, b, gamma, max_steps=200, floor=FLOOR):
    """Newton steps on the concave dual (the Schur complement on g, regularised along its
    null direction 1), with backtracking on the dual value; stops at the float floor or when
    the marginal error stagnates there."""
    P = _plan(f, g, C, a, b, gamma)
    err, D, steps = _error(P, a, b), _dual(f, g, P, a, b, gamma), 0
    radius = CAP * gamma  # a trust radius: grows after full steps, shrinks after halvings
    while steps < max_steps and err > max(floor, NEWTON_FLOOR):
        r, c = P.sum(1), P.sum(0)
        Q = P / r[:, None]
        # + 1/m fixes the null direction 1; (1 + 1e-10) c on the diagonal keeps S invertible
        # when the plan splits into blocks (small γ), whose relative shifts are left to the
        # trust radius (Levenberg-Marquardt)
        S = np.diag(c * (1 + 1e-10)) - P.T @ Q + 1.0 / len(b)
        rhs = gamma * (b - c) - Q.T @ (gamma * (a - r))
        try:
            dg = np.linalg.solve(S, rhs)
        except np.linalg.LinAlgError:
            break
        df = (gamma * (a - r) - P @ dg) / r
        # near-block-diagonal plans (small γ) make S nearly singular: a full step along those
        # directions is meaningless, so a step never moves a potential by more than the radius
        big = max(np.abs(df).max(), np.abs(dg).max())
        step, accepted = min(1.0, radius / big) if big > 0 else 1.0, False
        for tries in range(30):  # noqa: B007 (read after the loop)
            f1, g1 = f + step * df, g + step * dg
            P1 = _plan(f1, g1, C, a, b, gamma)
            e1, D1 = _error(P1, a, b), _dual(f1, g1, P1, a, b, gamma)
            if np.isfinite(e1) and (e1 < err or D1 > D + 1e-15 * abs(D)):
                accepted = True
                break
            step /= 2
        steps += 1
        if not accepted:
            break
        radius = 4 * radius if tries == 0 else max(step * big, CAP * gamma / 1024)
        stagnant = err < 1e-11 and e1 > err / 2
        f, g, P, err, D = f1, g1, P1, e1, max(D, D1)
        if stagnant:
            break
    return f, g, steps, err


def solve_potentials(C, a, b, gamma: float, max_sweeps: int = 5000):
    """Dual potentials ``(f, g)`` of entropic OT with costs ``C`` (float64 n × m), weights
    ``a``, ``b`` (float64, >= 0) and regularisation ``gamma`` (a double > 0).

    Returns ``(f, g, info)``, ``info`` a dict with ``sweeps``, ``newton`` and ``error`` (the
    float L1 marginal error of the Gibbs plan). Atoms of weight 0 get c-transform potentials.

    Guarantee: none (heuristic); the certified bounds do not depend on its accuracy.
    """
    ia, ib = np.flatnonzero(a > 0), np.flatnonzero(b > 0)
    full = len(ia) == len(a) and len(ib) == len(b)
    Cs = C if full else C[np.ix_(ia, ib)]
    As, Bs = a[ia], b[ib]
    # ε-scaling (Kosowsky–Yuille; Schmitzer 2019): solve at γ' = 4^j γ first, warm-starting
    # each stage, so that the small-γ stage starts near its solution and Newton needs a few
    # steps (at n = 300, γ = 0.01: 16 Newton steps instead of 104)
    stages = [gamma]
    while stages[-1] < Cs.max() / 200 and len(stages) < 12:
        stages.append(4 * stages[-1])
    f, g = np.zeros(len(ia)), np.zeros(len(ib))
    sweeps = steps = 0
    for gam in reversed(stages):
        if Cs.max() / gam >= 500:  # one log-domain sweep: no kernel row or column underflows
            f = c_transform_f(g, Cs, Bs, gam)
            g = c_transform_g(f, Cs, As, gam)
        floor = FLOOR if gam == gamma else 1e-9
        for attempt in range(3):  # more sweeps, then Newton again, if Newton stalls
            f, g, sw = _scaling(f, g, Cs, As, Bs, gam, max_sweeps, 20 + 200 * attempt, floor)
            f, g, st, err = _newton(f, g, Cs, As, Bs, gam, floor=floor)
            sweeps, steps = sweeps + sw, steps + st
            if err <= max(floor, 1e-11):
                break
    info = {"sweeps": sweeps, "newton": steps, "error": err}
    if full:
        return f, g, info
    g_full = c_transform_g(f, C[ia, :], As, gamma)
    g_full[ib] = g
    f_full = c_transform_f(g, C[:, ib], Bs, gamma)
    f_full[ia] = f
    return f_full, g_full, info


def sinkhorn_iterates(C, a, b, gamma: float, steps: list[int]):
    """Plain log-domain Sinkhorn from ``g = 0``: one step is the f-update then the g-update.
    Returns ``{k: (f_k, g_k)}`` for the requested step counts. Guarantee: none (heuristic)."""
    want = sorted(set(int(k) for k in steps))
    out = {}
    g = np.zeros(len(b))
    for k in range(1, want[-1] + 1):
        f = c_transform_f(g, C, b, gamma)
        g = c_transform_g(f, C, a, gamma)
        if k in want:
            out[k] = (f.copy(), g.copy())
    return out
