"""Untrusted float64 producers of entropic dual potentials (heuristics only).

:func:`solve_potentials` runs an ε-scaling loop (γ' = 4^j γ down to γ, warm-started; Schmitzer
2019). Each stage builds the kernel ``K = exp((f ⊕ g − C)/γ')`` once (potentials absorbed), runs
Sinkhorn sweeps while they converge fast, then Newton steps on the dual (Sinkhorn–Newton,
Brauer, Clason, Lorenz and Wirth 2017) whose systems are solved by conjugate gradients
preconditioned with a Cholesky factor of a truncated Schur complement, refactored only when the
iteration count grows. Every pass over the n × m kernel is one compiled read
(:mod:`certified.entropic._passes`). At the end the potentials are lowered where the plan's
rows or columns exceed the marginals (the Altschuler–Weed–Rigollet rounding carried by the
potentials), so the certified scale t is about 1.
:func:`sinkhorn_iterates` returns the plain log-domain iterates for the rate experiments.
Nothing here is trusted: the certified bounds hold for whatever potentials come out.
"""

from __future__ import annotations

import math

import numpy as np

from certified.entropic import _passes as ps

__all__ = ["c_transform_f", "c_transform_g", "sinkhorn_iterates", "solve_potentials"]

FLOOR = 1e-14  # L1 marginal error at which the last stage stops (near the float64 floor)
STAGE_FLOOR = 1e-4  # the same for the warm-up stages
CAP = 10.0  # largest change of a potential in one Newton step, in units of γ
CLIP = -400.0  # exponents below it are raised to it (keeps subnormals out of the passes)
REBASE = 100.0  # |log u|, |log v| above it: absorb the scalings and rebuild the kernel
NEWTON_AFTER = 100  # predicted sweeps to the floor above which Newton takes over
RELAX_AFTER = 10  # sweeps between updates of the over-relaxation from the observed rate
TRUNCATE = 1e-6  # the preconditioner drops plan entries below TRUNCATE * row sum
REFACTOR = 30  # CG iterations above which the preconditioner is refactored
CG_TOL = 1e-2  # relative residual of the Newton systems (tighter near the floor)
START, STEP = 200, 4  # ε-scaling: from γ' >= max C / START down to γ in factors of STEP


def _logsumexp(x: np.ndarray, axis: int) -> np.ndarray:
    top = np.max(x, axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        return np.log(np.sum(np.exp(x - top), axis=axis)) + np.squeeze(top, axis=axis)


def c_transform_f(g, C, b, gamma):
    """``f_i = -γ log Σ_j b_j exp((g_j - C_ij)/γ)`` (a Sinkhorn half-step). Guarantee: none."""
    with np.errstate(divide="ignore"):
        lb = np.log(b)
    return -gamma * _logsumexp(lb[None, :] + (g[None, :] - C) / gamma, axis=1)


def c_transform_g(f, C, a, gamma):
    """``g_j = -γ log Σ_i a_i exp((f_i - C_ij)/γ)``. Guarantee: none."""
    with np.errstate(divide="ignore"):
        la = np.log(a)
    return -gamma * _logsumexp(la[:, None] + (f[:, None] - C) / gamma, axis=0)


def _kernel(f, g, C, gamma):
    Z = ps.exponents(f, g, C, 1.0 / gamma, CLIP)
    with np.errstate(over="ignore"):
        return np.exp(Z, out=Z)


def _relaxation(w, lam):
    """The over-relaxation for the observed rate ``lam`` per sweep at relaxation ``w``:
    Young's relation (λ + w − 1)² = λ w² μ² gives the plain rate μ² (locally Sinkhorn is
    block Gauss–Seidel on a two-block system), whose optimum is 2/(1 + √(1 − μ²))."""
    if not 0 < lam < 1:
        return w
    mu2 = min((lam + w - 1) ** 2 / (lam * w * w), 0.9999)
    return min(1.9, 2 / (1 + math.sqrt(1 - mu2)))


def _factor(S, cd):
    """The Cholesky factor of S (its diagonal raised by up to 1e-4 cd when a pivot is not
    positive), or the diagonal cd itself (Jacobi) if that fails too."""
    for shift in (0.0, 1e-8, 1e-6, 1e-4):
        L, ok = ps.cholesky(S + np.diag(shift * cd) if shift else S)
        if ok and np.all(np.isfinite(L)):
            return L
    return cd


def _precondition(chol, res):
    return res / chol if chol.ndim == 1 else ps.cholesky_solve(chol, res)


class _Stage:
    """One regularisation: kernel K for base potentials (f, g), scalings u, v (the plan is
    diag(a u) K diag(b v), the potentials f + γ log u, g + γ log v), and pass counters."""

    def __init__(self, f, g, C, a, b, gamma, counts):
        self.f, self.g, self.C, self.a, self.b, self.gamma = f, g, C, a, b, gamma
        self.counts = counts
        self.K = _kernel(f, g, C, gamma)
        self.u, self.v = np.ones(len(a)), np.ones(len(b))

    def potentials(self):
        with np.errstate(divide="ignore"):
            f = self.f + self.gamma * np.log(self.u)
            g = self.g + self.gamma * np.log(self.v)
        if not (np.all(np.isfinite(f)) and np.all(np.isfinite(g))):
            raise FloatingPointError("Sinkhorn scalings left the float64 range")
        return f, g

    def rebase(self):
        """Absorb the scalings into the potentials when they grow (kernel rebuilt)."""
        big = max(np.abs(np.log(self.u)).max(), np.abs(np.log(self.v)).max())
        if not big > REBASE:  # also when NaN: potentials() then raises
            return False
        self.f, self.g = self.potentials()
        self.K = _kernel(self.f, self.g, self.C, self.gamma)
        self.u[:], self.v[:] = 1.0, 1.0
        return True

    def sums(self):
        self.counts["passes"] += 1
        al, be = self.a * self.u, self.b * self.v
        r, c = ps.plan_sums(self.K, al, be)
        return al, be, r, c, float(np.abs(r - self.a).sum() + np.abs(c - self.b).sum())

    def dual(self, r):
        f, g = self.potentials()
        return float(f @ self.a + g @ self.b - self.gamma * (r.sum() - 1.0))

    def sinkhorn(self, floor, max_sweeps, min_sweeps=20):
        """Sweeps until the floor, or until the observed linear rate predicts more than
        NEWTON_AFTER sweeps to it (Newton is then cheaper). Every RELAX_AFTER sweeps the
        observed rate resets the over-relaxation (:func:`_relaxation`); back to w = 1 for
        good if the error grows. Returns the last error."""
        history, w, best, relax = [], 1.0, math.inf, True
        for sweeps in range(1, max_sweeps + 1):
            err = ps.sweep(self.K, self.a, self.b, self.u, self.v, w)
            self.counts["sweeps"] += 1
            self.counts["passes"] += 1
            history.append(err)
            if err <= floor or not math.isfinite(err):
                break
            best = min(best, err)
            if w > 1 and err > 10 * best:  # diverging: plain sweeps from here
                w, history, best, relax = 1.0, [], err, False
            elif relax and sweeps % RELAX_AFTER == 0 and len(history) > 5 and history[-6] > 0:
                w1 = _relaxation(w, (history[-1] / history[-6]) ** 0.2)
                if abs(w1 - w) > 0.01:
                    w, history = w1, [err]
            if len(history) >= min_sweeps:
                rho = (history[-1] / history[-11]) ** 0.1 if history[-11] > 0 else 0.0
                ahead = math.log(floor / err) / math.log(rho) if 0 < rho < 1 else math.inf
                if ahead > NEWTON_AFTER:
                    break
            if sweeps % 50 == 0 and self.rebase():
                history = []
        return err

    def _direction(self, al, be, r, c, err, chol):
        """Newton direction (df, dg) in units of γ: dg solves S dg = rhs by conjugate
        gradients preconditioned with the Cholesky factor ``chol`` (refactored when None)."""
        a, b, K = self.a, self.b, self.K
        cd = c * (1 + 1e-10)  # keeps S definite when the plan splits into blocks (small γ)
        if chol is None:
            S = ps.schur_matrix(K, al, be, r, cd, TRUNCATE)
            chol = _factor(S, cd)
            self.counts["factorisations"] += 1
        rhs = (b - c) - ps.plan_transpose_times(K, al, be, (a - r) / r)
        x = np.zeros_like(rhs)
        res = rhs.copy()
        z = _precondition(chol, res)
        p, rz = z.copy(), float(res @ z)
        target = min(CG_TOL, 0.1 * math.sqrt(err)) * math.sqrt(float(rhs @ rhs))
        k = 0
        while k < 200 and math.sqrt(float(res @ res)) > target and rz > 0:
            k += 1
            Sp = ps.schur_times(K, al, be, r, cd, p)
            pSp = float(p @ Sp)
            if not pSp > 0:
                break
            alpha = rz / pSp
            x += alpha * p
            res -= alpha * Sp
            z = _precondition(chol, res)
            rz, rz_old = float(res @ z), rz
            p = z + (rz / rz_old) * p
        self.counts["passes"] += k + 2
        self.counts["cg"] += k
        df = ((a - r) - ps.plan_times(K, al, be, x)) / r
        return df, x, (None if k > REFACTOR else chol)

    def newton(self, floor, max_steps=60):
        """Newton steps under a trust radius, accepted when the marginal error or the dual
        value improves; stops at the floor or when the error stagnates there."""
        al, be, r, c, err = self.sums()
        D = self.dual(r)
        radius, chol, slow = CAP, None, 0
        for _ in range(max_steps):
            if err <= floor:
                break
            df, dg, chol = self._direction(al, be, r, c, err, chol)
            big = max(np.abs(df).max(), np.abs(dg).max())
            step, u0, v0 = (min(1.0, radius / big) if big > 0 else 1.0), self.u, self.v
            for tries in range(30):  # noqa: B007 (read after the loop)
                with np.errstate(over="ignore"):
                    self.u, self.v = u0 * np.exp(step * df), v0 * np.exp(step * dg)
                al1, be1, r1, c1, e1 = self.sums()
                D1 = self.dual(r1) if math.isfinite(e1) else -math.inf
                if math.isfinite(e1) and (e1 < err or D1 > D + 1e-15 * abs(D)):
                    break
                step /= 2
            else:
                self.u, self.v = u0, v0
                break
            self.counts["newton"] += 1
            radius = 4 * radius if tries == 0 else max(step * big, CAP / 1024)
            # near the float floor a step that does not halve the error is retried once
            # with a fresh factor (a more exact direction), then the floor is accepted
            slow = slow + 1 if err < 1e-12 and e1 > err / 2 else 0
            chol = None if slow == 1 else chol
            al, be, r, c, err, D = al1, be1, r1, c1, e1, max(D, D1)
            if self.rebase():  # the plan is unchanged: the factor stays a good preconditioner
                al, be, r, c, err = self.sums()
            if slow >= 2:
                break
        return err

    def round_down(self):
        """Lower u where a row exceeds a_i, then v where a column of the new plan exceeds
        b_j: the plan's marginals end <= (a, b) up to float rounding."""
        _, _, r, c, err = self.sums()
        with np.errstate(divide="ignore", invalid="ignore"):
            self.u = self.u * np.where(r > self.a, self.a / r, 1.0)
            _, _, _, c, _ = self.sums()
            self.v = self.v * np.where(c > self.b, self.b / c, 1.0)
        return err


def solve_potentials(C, a, b, gamma: float, max_sweeps: int = 5000):
    """Dual potentials ``(f, g)`` of entropic OT with costs ``C`` (float64 n × m), weights
    ``a``, ``b`` (float64, >= 0) and regularisation ``gamma`` (a double > 0).

    Returns ``(f, g, info)``, ``info`` a dict with ``sweeps``, ``newton`` (steps), ``cg``
    (conjugate-gradient iterations), ``factorisations``, ``passes`` (reads of the n × m
    kernel) and ``error`` (the float L1 marginal error of the Gibbs plan before the final
    rounding down). Atoms of weight 0 get c-transform potentials.

    Guarantee: none (heuristic); the certified bounds do not depend on its accuracy.
    """
    ia, ib = np.flatnonzero(a > 0), np.flatnonzero(b > 0)
    full = len(ia) == len(a) and len(ib) == len(b)
    Cs = np.ascontiguousarray(C if full else C[np.ix_(ia, ib)], dtype=np.float64)
    As, Bs = a[ia], b[ib]
    # ε-scaling (Kosowsky–Yuille; Schmitzer 2019): solve at γ' = 4^j γ first, warm-starting
    # each stage, so that the small-γ stage starts near its solution
    stages, top = [gamma], float(Cs.max())
    while stages[-1] < top / START and len(stages) < 12:
        stages.append(STEP * stages[-1])
    f, g = np.zeros(len(ia)), np.zeros(len(ib))
    counts = dict.fromkeys(("sweeps", "newton", "cg", "factorisations", "passes"), 0)
    for gam in reversed(stages):
        stage = _Stage(f, g, Cs, As, Bs, gam, counts)
        floor = FLOOR if gam == gamma else STAGE_FLOOR
        for attempt in range(3):  # more sweeps, then Newton again, if Newton stalls
            err = stage.sinkhorn(floor, max_sweeps, 20 + 200 * attempt)
            if err > floor:
                err = stage.newton(floor)
            if err <= max(floor, 1e-11):
                break
        if gam == gamma:
            err = stage.round_down()
        f, g = stage.potentials()
    info = dict(counts, error=err)
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
