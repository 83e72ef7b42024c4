"""Compiled elementwise kernels of the vectorised ReLU flow (``_relu_vec.py``).

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
def gershgorin_mu(mask, Sflat, Erow, d, out):
    """Upper bound of ``lambda_max(sum_i mask[n, i] S_i)`` for each row ``n`` of ``mask``
    (Gershgorin discs of the symmetric matrix), ``S_i`` given flattened in ``Sflat[i]``;
    ``Erow[j]`` bounds row ``j``'s accumulated rounding (proofs/bounds.md#relu-vec-lognorm)."""
    n, p = mask.shape
    acc = np.empty(d * d)
    fac = 2.0 * (d + 2) * U
    for t in range(n):
        for e in range(d * d):
            acc[e] = 0.0
        for i in range(p):
            s = mask[t, i]
            if s != 0.0:
                for e in range(d * d):
                    acc[e] += s * Sflat[i, e]
        best = -np.inf
        for j in range(d):
            row = acc[j * d + j]
            absrow = abs(row)
            for k in range(d):
                if k != j:
                    a = abs(acc[j * d + k])
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
