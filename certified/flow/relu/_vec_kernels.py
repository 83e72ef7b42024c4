"""Compiled elementwise kernels of the vectorised ReLU flow (``_vec.py``).

Midpoint-radius pairs ``(m, r)`` mean the set ``[m - r, m + r]`` (entrywise); every radius is
computed so that rounding can only increase it (``up`` is the successor bound of
proofs/bounds.md#pred-succ). The BLAS products between these kernels follow
proofs/bounds.md#relu-vec-matvec.
"""

from __future__ import annotations

import numpy as np

from certified.arith._kernels import ETA, PHI, U, kernel, up

__all__ = [
    "FLOOR",
    "gershgorin_mu",
    "horner_rows",
    "lmax_verified",
    "point_prep",
    "rad_finish",
    "region_test",
    "scale_prep",
    "y_finish",
]

FLOOR = 2.0**-900  # keeps subnormals out of BLAS (proofs/bounds.md#matmul)


# Radii are bounded as ``max(FLOOR, fl(x * (1 + 8u)))`` where ``x`` is a nonnegative expression
# evaluated in at most four roundings: this is >= the exact expression plus any number of
# underflow terms below 2^-1000 (proofs/bounds.md#relu-vec-matvec), and, unlike the successor
# bound, never creates subnormal numbers (100x slower arithmetic).
BUMP = 1.0 + 8.0 * U


@kernel
def point_prep(c, g, V):
    """``V >= g |c|`` for a point matrix ``c`` (radius 0)."""
    n, k = c.shape
    for i in range(n):
        for j in range(k):
            V[i, j] = max(FLOOR, g * abs(c[i, j]) * BUMP)


@kernel
def rad_finish(What, F, b, Zm, Zr):
    """Radius of a product from ``What = fl(V |P|)``: ``Zr >= What F``; with a bias ``b``
    (length = columns, or empty), ``Zm <- fl(Zm + b)`` and its rounding is added."""
    n, k = What.shape
    with_b = b.shape[0] > 0
    for i in range(n):
        for j in range(k):
            r = What[i, j] * F
            if with_b:
                s = Zm[i, j] + b[j]
                Zm[i, j] = s
                r = r + U * abs(s)
            Zr[i, j] = max(FLOOR, r * BUMP)


@kernel
def scale_prep(Zm, Zr, active, cm, a1, a2, g, Um, V):
    """``U = Z * c`` with a per-row, per-activity midpoint-radius scalar ``c`` (column 0: the
    row's active neurons, column 1: inactive ones), and ``V`` for the next product.

    ``a1 >= cr + u |cm|`` and ``a2 >= |cm| + cr`` bound the error:
    ``|Z c - fl(Zm cm)| <= |Zm| a1 + Zr a2 + eta/2`` (proofs/bounds.md#relu-vec-matvec).
    """
    n, k = Zm.shape
    for i in range(n):
        for j in range(k):
            s = 0 if active[i, j] else 1
            um = Zm[i, j] * cm[i, s]
            ur = max(FLOOR, (abs(Zm[i, j]) * a1[i, s] + Zr[i, j] * a2[i, s]) * BUMP)
            Um[i, j] = um
            V[i, j] = max(FLOOR, (ur + g * abs(um)) * BUMP)


@kernel
def y_finish(Ym, What, F, g, Yr, V, Sm, Sr):
    """Radius of ``Y = U W^T`` (as rad_finish), ``V`` for the product ``Y A^T``, and the running
    sum ``S <- S + Y`` (midpoint-radius, in place)."""
    n, k = Ym.shape
    for i in range(n):
        for j in range(k):
            r = max(FLOOR, What[i, j] * F * BUMP)
            Yr[i, j] = r
            V[i, j] = max(FLOOR, (r + g * abs(Ym[i, j])) * BUMP)
            s = Sm[i, j] + Ym[i, j]
            Sm[i, j] = s
            Sr[i, j] = max(FLOOR, ((Sr[i, j] + r) + U * abs(s)) * BUMP)


@kernel
def gershgorin_mu(Srows, Erow, d, out):
    """Upper bound of ``lambda_max`` of each symmetric matrix ``Srows[n]`` (flattened d x d,
    the float sum ``sum_i mask[n, i] S_i``) by Gershgorin discs; ``Erow[j]`` bounds row ``j``'s
    accumulated rounding (proofs/bounds.md#relu-vec-lognorm)."""
    n = Srows.shape[0]
    fac = 2.0 * (d + 2) * U
    for t in range(n):
        best = -np.inf
        for j in range(d):
            row = Srows[t, j * d + j]
            absrow = abs(row)
            for k in range(d):
                if k != j:
                    a = abs(Srows[t, j * d + k])
                    row += a
                    absrow += a
            bound = up(up(row + up(absrow * fac)) + Erow[j])
            best = max(best, bound)
        out[t] = best


@kernel
def region_test(zm, zr, want_pos, check, margin, th_hi, ok, ok0):
    """Certified sign of every checked neuron polynomial ``q(theta) = sum_k z_k theta^k``
    (``z_k`` in midpoint-radius form) on ``[0, th_hi[n]]`` with ``margin[n, i]``:
    ``ok[n, i]`` if ``q - margin >= 0`` (``want_pos``) or ``q + margin <= 0`` throughout;
    ``ok0`` for ``theta = 0`` alone. Cheap bound of ``|q(theta) - q(0)|`` first, then the
    monotone test (hull of the end values). proofs/bounds.md#relu-vec-region."""
    K, n, p = zm.shape
    for t in range(n):
        th = th_hi[t]
        for i in range(p):
            if not check[i]:
                ok[t, i] = True
                ok0[t, i] = True
                continue
            m = margin[t, i]
            lo0 = zm[0, t, i] - zr[0, t, i]
            lo0 = lo0 - (PHI * abs(lo0) + ETA)
            hi0 = up(zm[0, t, i] + zr[0, t, i])
            pos = want_pos[t, i]
            good0 = lo0 >= m if pos else hi0 <= -m
            ok0[t, i] = good0
            if not good0:
                ok[t, i] = False
                continue
            # rest >= sum_{k>=1} |z_k| theta^k (Horner on nonnegative upper bounds)
            rest = 0.0
            for k in range(K - 1, 0, -1):
                rest = up(up(rest + up(abs(zm[k, t, i]) + zr[k, t, i])) * th)
            need = up(rest + m)
            if (lo0 >= need) if pos else (hi0 <= -need):
                ok[t, i] = True
                continue
            # monotone on [0, th]: |q' - z_1| <= sum_{k>=2} k |z_k| th^(k-1)
            drest = 0.0
            for k in range(K - 1, 1, -1):
                drest = up(up(drest * th) + up(k * up(abs(zm[k, t, i]) + zr[k, t, i])))
            drest = up(drest * th)
            z1lo = zm[1, t, i] - zr[1, t, i]
            z1lo = z1lo - (PHI * abs(z1lo) + ETA)
            z1hi = up(zm[1, t, i] + zr[1, t, i])
            if not (z1lo > drest or z1hi < -drest):
                ok[t, i] = False
                continue
            # q(th) enclosed by interval Horner with theta in [0, th] replaced by the point th
            qlo = zm[K - 1, t, i] - zr[K - 1, t, i]
            qlo = qlo - (PHI * abs(qlo) + ETA)
            qhi = up(zm[K - 1, t, i] + zr[K - 1, t, i])
            for k in range(K - 2, -1, -1):
                a = qlo * th
                b = qhi * th
                a = a - (PHI * abs(a) + ETA)
                b = up(b)
                zl = zm[k, t, i] - zr[k, t, i]
                zl = zl - (PHI * abs(zl) + ETA)
                zh = up(zm[k, t, i] + zr[k, t, i])
                qlo = a + zl
                qlo = qlo - (PHI * abs(qlo) + ETA)
                qhi = up(b + zh)
            ok[t, i] = qlo >= m if pos else qhi <= -m


@kernel
def horner_rows(ym, yr, th_m, th_r, out_m, out_r):
    """``sum_k y_k theta^k`` for midpoint-radius rows ``y_k`` and ``theta`` in
    ``[th_m - th_r, th_m + th_r]`` (nonnegative), per row ``n``."""
    K, n, d = ym.shape
    for t in range(n):
        x = th_m[t]
        xr = th_r[t]
        xa = up(x + xr)
        for j in range(d):
            m = ym[K - 1, t, j]
            r = yr[K - 1, t, j]
            for k in range(K - 2, -1, -1):
                pm = m * x
                r = up(up(up(r * xa) + up(abs(m) * xr)) + up(PHI * abs(pm) + ETA))
                m = pm + ym[k, t, j]
                r = up(up(r + yr[k, t, j]) + up(PHI * abs(m) + ETA))
            out_m[t, j] = m
            out_r[t, j] = r


@kernel
def lmax_verified(Srows, Erow, d, out):
    """Tighter upper bound of ``lambda_max(sum_i mask[n, i] S_i)`` than Gershgorin's, per row
    ``n``: Lanczos estimate ``theta``, then ``t`` slightly above it with ``t I - S = R^T R + E``
    from a floating Cholesky factor ``R``; ``lambda_max(S) <= t + ||E||_F`` (Weyl, ``R^T R``
    positive semidefinite) plus the accumulated rounding of ``S`` (``max Erow``).
    ``out[n] = inf`` when the Cholesky fails. proofs/bounds.md#relu-vec-lognorm."""
    n = Srows.shape[0]
    S = np.empty((d, d))
    Q = np.empty((d + 1, d))
    alpha = np.empty(d)
    beta = np.empty(d + 1)
    w = np.empty(d)
    R = np.zeros((d, d))
    emax = 0.0
    for j in range(d):
        emax = max(emax, Erow[j])
    g2 = 2.0 * (d + 2) * U
    for t_ in range(n):
        for j in range(d):
            for k in range(d):
                S[j, k] = Srows[t_, j * d + k]
        g_hi = -np.inf
        g_lo = np.inf
        for j in range(d):
            off = 0.0
            for k in range(d):
                if k != j:
                    off += abs(S[j, k])
            g_hi = max(g_hi, S[j, j] + off)
            g_lo = min(g_lo, S[j, j] - off)
        scale = max(abs(g_hi), abs(g_lo), 1e-300)
        # Lanczos with full reorthogonalisation (an estimate only)
        nrm = 0.0
        for j in range(d):
            Q[0, j] = 1.0 + 0.37 * j
            nrm += Q[0, j] * Q[0, j]
        nrm = np.sqrt(nrm)
        for j in range(d):
            Q[0, j] /= nrm
        m = 0
        beta[0] = 0.0
        for it in range(d):
            for j in range(d):
                acc = 0.0
                for k in range(d):
                    acc += S[j, k] * Q[it, k]
                w[j] = acc
            a = 0.0
            for j in range(d):
                a += w[j] * Q[it, j]
            alpha[it] = a
            m = it + 1
            for _rep in range(1):
                for q_ in range(it + 1):
                    c = 0.0
                    for j in range(d):
                        c += w[j] * Q[q_, j]
                    for j in range(d):
                        w[j] -= c * Q[q_, j]
            b = 0.0
            for j in range(d):
                b += w[j] * w[j]
            b = np.sqrt(b)
            beta[it + 1] = b
            if b <= 1e-12 * scale or it + 1 == min(d, 8):
                break
            for j in range(d):
                Q[it + 1, j] = w[j] / b
        # largest eigenvalue of the tridiagonal (alpha, beta) by bisection (Sturm counts)
        lo_ = g_lo - 1.0
        hi_ = g_hi + 1.0
        for _ in range(60):
            x = 0.5 * (lo_ + hi_)
            cnt = 0
            q = 1.0
            for k in range(m):
                bb = beta[k] * beta[k] if k > 0 else 0.0
                q = alpha[k] - x - (bb / q if k > 0 else 0.0)
                if q == 0.0:
                    q = 1e-300
                if q < 0.0:
                    cnt += 1
            if cnt == m:  # every eigenvalue below x
                hi_ = x
            else:
                lo_ = x
        theta = hi_
        best = np.inf
        for frac in (0.01, 0.1, 0.5, 1.0):
            tt = theta + frac * (g_hi - theta) + 1e-10 * scale
            ok = True
            for j in range(d):
                for k in range(d):
                    R[j, k] = 0.0
            for j in range(d):
                acc = tt - S[j, j]
                for q_ in range(j):
                    acc -= R[q_, j] * R[q_, j]
                if not acc > 0.0:
                    ok = False
                    break
                rjj = np.sqrt(acc)
                R[j, j] = rjj
                for k in range(j + 1, d):
                    acc = -S[j, k]
                    for q_ in range(j):
                        acc -= R[q_, j] * R[q_, k]
                    R[j, k] = acc / rjj
            if not ok:
                continue
            # ||E||_F for E = (tt I - S) - R^T R, bounded entrywise (all terms nonnegative);
            # sum_l |R_lj||R_lk| <= c_j c_k (Cauchy-Schwarz), c_j >= the column norms of R
            for j in range(d):
                cs = 0.0
                for q_ in range(j + 1):
                    cs += R[q_, j] * R[q_, j]
                w[j] = up(np.sqrt(up(cs * (1.0 + 2.0 * (d + 2) * U))))
            f2 = 0.0
            for j in range(d):
                for k in range(j, d):
                    tjk = (tt - S[j, j]) if j == k else -S[j, k]
                    dot = 0.0
                    for q_ in range(j + 1):
                        dot += R[q_, j] * R[q_, k]
                    e = tjk - dot
                    bound = up(abs(e) * (1.0 + 4.0 * U)) + up(g2 * up(w[j] * w[k]))
                    bound = up(up(bound + up(2.0 * U * abs(tjk))) + 2.0**-900)
                    sq = up(bound * bound)
                    f2 = up(f2 + (sq if j == k else up(2.0 * sq)))
            f2 = up(f2 * (1.0 + 2.0 * (d * d + 2) * U))
            enorm = up(np.sqrt(f2))
            best = up(up(tt + enorm) + emax)
            break
        out[t_] = best
