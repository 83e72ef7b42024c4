"""Independent 60-digit mpmath reference for entropic OT: log-domain Sinkhorn run to
convergence on the exact data (exact rational points and weights, exact γ), then the dual
value, which equals OT_γ at the fixed point. Nothing from certified.entropic is used."""

from __future__ import annotations

import mpmath

from certified.arith.exact import to_fmpq

DPS = 60


def _mpf(x):
    q = to_fmpq(x)
    return mpmath.mpf(int(q.p)) / int(q.q)


def cost_matrix(X, Y, q=2):
    """|x_i - y_j|^q at DPS digits from the exact coordinates."""
    qq = to_fmpq(q)
    with mpmath.workdps(DPS + 10):
        e = mpmath.mpf(int(qq.p)) / (2 * int(qq.q))
        rows = []
        for x in X:
            row = []
            for y in Y:
                s = sum((_mpf(u) - _mpf(v)) ** 2 for u, v in zip(x, y, strict=True))
                row.append(s**e if s else mpmath.mpf(0))
            rows.append(row)
        return rows


def _residual(C, A, B, gam, f, g):
    n, m = len(A), len(B)
    P = [[A[i] * B[j] * mpmath.exp((f[i] + g[j] - C[i][j]) / gam) for j in range(m)]
         for i in range(n)]  # fmt: skip
    r = [mpmath.fsum(P[i]) for i in range(n)]
    c = [mpmath.fsum(P[i][j] for i in range(n)) for j in range(m)]
    return P, r, c


def entropic_reference(X, a, Y, b, gamma, q=2, sweeps=200, max_newton=80):
    """OT_γ(Σ a_i δ_{x_i}, Σ b_j δ_{y_j}) to about 50 digits, and the final marginal error
    (raises if Newton does not converge). Atoms of weight 0 are dropped (they carry no mass).
    A few Sinkhorn sweeps, then Newton's method on the optimality conditions (rows and all
    but the last column), g_last pinned to its value."""
    X = [x for x, w in zip(X, a, strict=True) if to_fmpq(w) != 0]
    Y = [y for y, w in zip(Y, b, strict=True) if to_fmpq(w) != 0]
    a = [w for w in a if to_fmpq(w) != 0]
    b = [w for w in b if to_fmpq(w) != 0]
    with mpmath.workdps(DPS + 10):
        C = cost_matrix(X, Y, q)
        A, B, gam = [_mpf(w) for w in a], [_mpf(w) for w in b], _mpf(gamma)
        n, m = len(A), len(B)
        f, g = [mpmath.mpf(0)] * n, [mpmath.mpf(0)] * m
        for _ in range(sweeps):
            f = [-gam * mpmath.log(mpmath.fsum(B[j] * mpmath.exp((g[j] - C[i][j]) / gam)
                                               for j in range(m))) for i in range(n)]  # fmt: skip
            g = [-gam * mpmath.log(mpmath.fsum(A[i] * mpmath.exp((f[i] - C[i][j]) / gam)
                                               for i in range(n))) for j in range(m)]  # fmt: skip
        tol = mpmath.mpf(10) ** (-(DPS - 5))
        for _ in range(max_newton):
            P, r, c = _residual(C, A, B, gam, f, g)
            F = [r[i] - A[i] for i in range(n)] + [c[j] - B[j] for j in range(m - 1)]
            err = max(abs(v) for v in F) if F else mpmath.mpf(0)
            if err < tol:
                break
            J = mpmath.zeros(n + m - 1, n + m - 1)
            for i in range(n):
                J[i, i] = r[i] / gam
                for j in range(m - 1):
                    J[i, n + j] = J[n + j, i] = P[i][j] / gam
            for j in range(m - 1):
                J[n + j, n + j] = c[j] / gam
            step = mpmath.lu_solve(J, mpmath.matrix(F))
            for _ in range(60):  # damped: halve until the residual decreases
                f1 = [f[i] - step[i] for i in range(n)]
                g1 = [g[j] - step[n + j] for j in range(m - 1)] + [g[m - 1]]
                _, r1, c1 = _residual(C, A, B, gam, f1, g1)
                F1 = [r1[i] - A[i] for i in range(n)] + [c1[j] - B[j] for j in range(m - 1)]
                if max(abs(v) for v in F1) < err:
                    break
                step = step / 2
            f, g = f1, g1
        else:
            raise RuntimeError("reference Newton did not converge")
        P, r, c = _residual(C, A, B, gam, f, g)
        mass = mpmath.fsum(r)
        value = mpmath.fsum(w * v for w, v in zip(A + B, f + g, strict=True)) - gam * (mass - 1)
        return +value, err


def divergence_reference(X, a, Y, b, gamma, q=2):
    """S_γ = OT(μ, ν) − OT(μ, μ)/2 − OT(ν, ν)/2 at about 50 digits."""
    with mpmath.workdps(DPS + 10):
        xy = entropic_reference(X, a, Y, b, gamma, q)[0]
        xx = entropic_reference(X, a, X, a, gamma, q)[0]
        yy = entropic_reference(Y, b, Y, b, gamma, q)[0]
        return xy - (xx + yy) / 2
