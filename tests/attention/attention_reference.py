"""High-precision mpmath references for attention maps (tests only; never a guarantee).

The map is written directly from theorems.md section 1.4 in mpmath at 110 digits; the
Jacobian is obtained by the complex-step derivative ``Im F(X + i h e) / h`` (the map is
analytic), whose error is O(h²) with h = 1e-70, independent of the analytic formula used by
the package.
"""

from __future__ import annotations

import flint
import mpmath
from mpmath import mp

DPS = 110


def _mp(x):
    if isinstance(x, flint.fmpq):
        return mpmath.mpf(int(x.p)) / int(x.q)
    if isinstance(x, str) and "/" in x:
        p, q = x.split("/")
        return mpmath.mpf(int(p)) / int(q)
    return mpmath.mpf(x)


def _matrix(a):
    return [[_mp(v) for v in row] for row in a]


def reference_map(heads, X, *, weights=None, residual=False, causal=False, scaled=True):
    """heads: list of (Q, K, V, W-or-None); X: n x d (mpf or complex entries)."""
    with mp.workdps(DPS):
        X = [[x if isinstance(x, mpmath.mpc) else _mp(x) for x in row] for row in X]
        n, d = len(X), len(X[0])
        w = [mpmath.mpf(1)] * n if weights is None else [_mp(v) for v in weights]
        out = [list(X[i]) if residual else [mpmath.mpf(0)] * d for i in range(n)]
        for Q, K, V, W in heads:
            Q, K, V = _matrix(Q), _matrix(K), _matrix(V)
            k = len(Q)
            scale = 1 / mpmath.sqrt(k) if scaled else 1
            for i in range(n):
                js = range(i + 1) if causal else range(n)
                # theorems.md: score <K x_i, Q x_j> (K acts on the query token)
                kx = [sum(K[r][c] * X[i][c] for c in range(d)) for r in range(k)]
                scores = []
                for j in js:
                    qx = [sum(Q[r][c] * X[j][c] for c in range(d)) for r in range(k)]
                    scores.append(scale * sum(kx[r] * qx[r] for r in range(k)))
                e = [w[j] * mpmath.exp(s) for j, s in zip(js, scores, strict=True)]
                z = sum(e)
                mean = [sum(e[t] * X[j][c] for t, j in enumerate(js)) / z for c in range(d)]
                vm = [sum(V[r][c] * mean[c] for c in range(d)) for r in range(len(V))]
                if W is not None:
                    Wm = _matrix(W)
                    vm = [sum(Wm[r][c] * vm[c] for c in range(len(vm))) for r in range(d)]
                for c in range(d):
                    out[i][c] += vm[c]
        return out


def reference_jacobian(heads, X, **options):
    """Complex-step Jacobian, rows i*d+a, columns l*d+b."""
    with mp.workdps(DPS):
        n, d = len(X), len(X[0])
        h = mpmath.mpf(10) ** -70
        J = [[None] * (n * d) for _ in range(n * d)]
        base = [[_mp(x) for x in row] for row in X]
        for col in range(n * d):
            t, b = divmod(col, d)
            Xc = [[mpmath.mpc(x) for x in row] for row in base]
            Xc[t][b] += mpmath.mpc(0, h)
            F = reference_map(heads, Xc, **options)
            for i in range(n):
                for a in range(d):
                    J[i * d + a][col] = mpmath.im(F[i][a]) / h
        return J


def to_fmpq(x):
    """The exact rational value of an mpf."""
    with mp.workdps(DPS):
        x = mpmath.re(x)
    sign, man, exp, _ = x._mpf_
    man = -int(man) if sign else int(man)
    return flint.fmpq(man) * flint.fmpq(2) ** exp if exp >= 0 else flint.fmpq(man, 2**-exp)
