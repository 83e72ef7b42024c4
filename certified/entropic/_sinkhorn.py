"""Untrusted float64 producers of entropic dual potentials (heuristics only).

:func:`solve_potentials` runs Sinkhorn in the stabilised (absorbing) form of Schmitzer (2019)
started from one log-domain sweep, then polishes with Newton steps on the dual
(Sinkhorn–Newton, Brauer, Clason, Lorenz and Wirth 2017), whose quadratic convergence reaches
marginal errors near the float64 floor where plain Sinkhorn needs thousands of sweeps at small γ.
:func:`sinkhorn_iterates` returns the plain log-domain iterates for the rate experiments.
Nothing here is trusted: the certified bounds hold for whatever potentials come out.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

__all__ = ["c_transform_f", "c_transform_g", "sinkhorn_iterates", "solve_potentials"]

SWITCH = 1e-6  # marginal error (L1) at which Newton takes over
FLOOR = 1e-15  # marginal error below which the polish stops
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


def _scaling(f, g, C, a, b, gamma, max_sweeps):
    """Stabilised Sinkhorn until the L1 marginal error is below SWITCH; returns f, g, sweeps."""
    sweeps, err = 0, np.inf
    while sweeps < max_sweeps and err > SWITCH:
        K = _plan(f, g, C, a, b, gamma)
        u, v = np.ones(len(a)), np.ones(len(b))
        for _ in range(200):
            sweeps += 1
            u = a / (K @ v)
            c = K.T @ u
            err = float(np.abs(c * v - b).sum())
            v = b / c
            if err <= SWITCH or sweeps >= max_sweeps:
                break
            if not (np.all(np.abs(np.log(u)) < np.log(ABSORB))):
                break
        with np.errstate(divide="ignore"):
            f, g = f + gamma * np.log(u), g + gamma * np.log(v)
        if not (np.all(np.isfinite(f)) and np.all(np.isfinite(g))):
            raise FloatingPointError("Sinkhorn scalings left the float64 range")
    return f, g, sweeps


def _newton(f, g, C, a, b, gamma, max_steps=25):
    """Newton steps on the dual (the Schur complement on g, regularised along its null
    direction 1) with halving; stops when the marginal error no longer halves."""
    P = _plan(f, g, C, a, b, gamma)
    err, steps = _error(P, a, b), 0
    while steps < max_steps and err > FLOOR:
        r, c = P.sum(1), P.sum(0)
        Q = P / r[:, None]
        S = np.diag(c) - P.T @ Q + 1.0 / len(b)
        rhs = gamma * (b - c) - Q.T @ (gamma * (a - r))
        try:
            dg = np.linalg.solve(S, rhs)
        except np.linalg.LinAlgError:
            break
        df = (gamma * (a - r) - P @ dg) / r
        step, improved = 1.0, False
        for _ in range(8):
            f1, g1 = f + step * df, g + step * dg
            P1 = _plan(f1, g1, C, a, b, gamma)
            e1 = _error(P1, a, b)
            if np.isfinite(e1) and e1 < err:
                improved = True
                break
            step /= 2
        steps += 1
        if not improved:
            break
        done = e1 > err / 2
        f, g, P, err = f1, g1, P1, e1
        if done:
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
    Cs, As, Bs = C[np.ix_(ia, ib)], a[ia], b[ib]
    f = c_transform_f(np.zeros(len(ib)), Cs, Bs, gamma)
    g = c_transform_g(f, Cs, As, gamma)
    f, g, sweeps = _scaling(f, g, Cs, As, Bs, gamma, max_sweeps)
    f, g, steps, err = _newton(f, g, Cs, As, Bs, gamma)
    g_full = c_transform_g(f, C[ia, :], As, gamma)
    g_full[ib] = g
    f_full = c_transform_f(g, C[:, ib], Bs, gamma)
    f_full[ia] = f
    return f_full, g_full, {"sweeps": sweeps, "newton": steps, "error": err}


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
