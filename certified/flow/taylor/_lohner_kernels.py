"""Compiled float64 interval kernels of the QR-Lohner set update, one loop over points.

A set is ``c + C r``: c (d doubles), C (d x d doubles, any invertible matrix), r an interval
vector. All roundings are outward with ``dn``/``up`` (proofs/bounds.md#pred-succ); the
algorithm is proofs/bounds.md#lohner (the same as certified.checker.taylor.lohner_step).
"""

from __future__ import annotations

import numpy as np

from certified.arith._kernels import dn, kernel, up


@kernel
def _imul(al, ah, bl, bh):
    p1 = al * bl
    p2 = al * bh
    p3 = ah * bl
    p4 = ah * bh
    return dn(min(min(p1, p2), min(p3, p4))), up(max(max(p1, p2), max(p3, p4)))


@kernel
def _imatmul2(Al, Ah, Bl, Bh, Cl, Ch):
    """[Cl, Ch] encloses A B for one pair of interval matrices (outward rounded sums)."""
    d, k = Al.shape
    m = Bl.shape[1]
    for i in range(d):
        for j in range(m):
            lo = 0.0
            hi = 0.0
            for t in range(k):
                a, b = _imul(Al[i, t], Ah[i, t], Bl[t, j], Bh[t, j])
                lo = dn(lo + a)
                hi = up(hi + b)
            Cl[i, j] = lo
            Ch[i, j] = hi


@kernel
def hull(c, C, rl, rh, xl, xh):
    """[xl, xh] encloses c + C r for every point (shapes (N, d), (N, d, d), (N, d))."""
    n, d = c.shape
    for q in range(n):
        for i in range(d):
            lo = c[q, i]
            hi = c[q, i]
            for j in range(d):
                a, b = _imul(C[q, i, j], C[q, i, j], rl[q, j], rh[q, j])
                lo = dn(lo + a)
                hi = up(hi + b)
            xl[q, i] = lo
            xh[q, i] = hi


@kernel
def _gram_schmidt(M, order, Q):
    """Q = orthonormalised columns of M in the given order (floats; any invertible result
    is valid, orthogonality only keeps the inverse well conditioned). False if degenerate."""
    d = M.shape[0]
    for t in range(d):
        c = order[t]
        for i in range(d):
            Q[i, c] = M[i, c]
        for s in range(t):
            e = order[s]
            dot = 0.0
            for i in range(d):
                dot += Q[i, e] * Q[i, c]
            for i in range(d):
                Q[i, c] -= dot * Q[i, e]
        nrm = 0.0
        for i in range(d):
            nrm += Q[i, c] * Q[i, c]
        nrm = np.sqrt(nrm)
        if not nrm > 1e-300:
            return False
        for i in range(d):
            Q[i, c] /= nrm
    return True


@kernel
def _inverse_enclosure(Q, Il, Ih):
    """[Il, Ih] encloses Q^-1 for a nearly orthogonal Q: R = Q^T, delta >= |I - R Q|_inf
    (each product enclosed with its rounding error), Q^-1 in R + [-e, e] with
    e = delta |R|_inf / (1 - delta) (proofs/bounds.md#lohner). False when delta >= 1/2."""
    d = Q.shape[0]
    delta = 0.0
    rnorm = 0.0
    for i in range(d):
        row = 0.0
        rrow = 0.0
        for j in range(d):
            lo = 1.0 if i == j else 0.0
            hi = lo
            for k in range(d):
                p = Q[k, i] * Q[k, j]
                lo = dn(dn(lo - p) - abs(p) * 2.0**-52)
                hi = up(up(hi - p) + abs(p) * 2.0**-52)
            row = up(row + max(abs(lo), abs(hi)))
            rrow = up(rrow + abs(Q[j, i]))
        delta = max(delta, row)
        rnorm = max(rnorm, rrow)
    if not delta < 0.5:
        return False
    e = up(up(delta / dn(1.0 - delta)) * rnorm)
    for i in range(d):
        for j in range(d):
            Il[i, j] = dn(Q[j, i] - e)
            Ih[i, j] = up(Q[j, i] + e)
    return True


@kernel
def lohner_update(c, C, rl, rh, incl, inch, Jl, Jh, c2, C2, rl2, rh2, ok):
    """The QR-Lohner update for every point: y = c + inc encloses Phi_h(c), J encloses
    DPhi_h over the set; writes c' (doubles), C' = orthonormalised mid(J C), and
    r' = (C'^-1 J C) r + C'^-1 ((c - c') + inc) with C'^-1 enclosed as R + [-e, e],
    R = C'^T, e = delta / (1 - delta) |R|_inf, delta >= |I - R C'|_inf (proofs/bounds.md#lohner).
    ok[q] = 0 where the new basis is degenerate (the caller then fails that point)."""
    n, d = c.shape
    Al = np.empty((d, d))
    Ah = np.empty((d, d))
    M = np.empty((d, d))
    Q = np.empty((d, d))
    Il = np.empty((d, d))
    Ih = np.empty((d, d))
    zl = np.empty(d)
    zh = np.empty(d)
    size = np.empty(d)
    for q in range(n):
        ok[q] = 1
        _imatmul2(Jl[q], Jh[q], C[q], C[q], Al, Ah)  # A = J C (C exact doubles)
        for i in range(d):
            for j in range(d):
                M[i, j] = 0.5 * Al[i, j] + 0.5 * Ah[i, j]
        # new centre and the interval z = (c - c') + inc
        for i in range(d):
            ci = c[q, i] + (0.5 * incl[q, i] + 0.5 * inch[q, i])
            c2[q, i] = ci
            dl = dn(c[q, i] - ci)
            dh = up(c[q, i] - ci)
            zl[i] = dn(dl + incl[q, i])
            zh[i] = up(dh + inch[q, i])
        # QR-Lohner: orthonormalise the columns of mid(A), longest edge |A_j| rad(r_j) first
        for j in range(d):
            s = 0.0
            for i in range(d):
                s += M[i, j] * M[i, j]
            size[j] = -np.sqrt(s) * (rh[q, j] - rl[q, j])
        order = np.argsort(size, kind="mergesort")
        if not _gram_schmidt(M, order, Q):
            ok[q] = 0
            continue
        if not _inverse_enclosure(Q, Il, Ih):
            ok[q] = 0
            continue
        for i in range(d):
            for j in range(d):
                C2[q, i, j] = Q[i, j]
        # r' = (Cinv A) r + Cinv z
        for i in range(d):
            lo = 0.0
            hi = 0.0
            for j in range(d):
                bl = 0.0
                bh = 0.0
                for k in range(d):
                    a, b = _imul(Il[i, k], Ih[i, k], Al[k, j], Ah[k, j])
                    bl = dn(bl + a)
                    bh = up(bh + b)
                a, b = _imul(bl, bh, rl[q, j], rh[q, j])
                lo = dn(lo + a)
                hi = up(hi + b)
                a, b = _imul(Il[i, j], Ih[i, j], zl[j], zh[j])
                lo = dn(lo + a)
                hi = up(hi + b)
            rl2[q, i] = lo
            rh2[q, i] = hi


@kernel
def imatmul(Al, Ah, Bl, Bh, Cl, Ch):
    """[Cl, Ch] encloses A B for interval matrices, batched over the first axis."""
    for q in range(Al.shape[0]):
        _imatmul2(Al[q], Ah[q], Bl[q], Bh[q], Cl[q], Ch[q])


@kernel
def horner(lo, hi, hl, hh, out_lo, out_hi):
    """[out] encloses sum_k a_k h^k for interval coefficients a_k = [lo[k], hi[k]] (first
    axis; the rest flattened) and h in [hl, hh], hl >= 0."""
    K = lo.shape[0]
    n = lo.shape[1]
    for q in range(n):
        a = lo[K - 1, q]
        b = hi[K - 1, q]
        for k in range(K - 2, -1, -1):
            a, b = _imul(a, b, hl, hh)
            a = dn(a + lo[k, q])
            b = up(b + hi[k, q])
        out_lo[q] = a
        out_hi[q] = b


@kernel
def picard_image(xl, xh, hh, Fl, Fh, Tl, Th):
    """[Tl, Th] encloses X + [0, h] F for every h in [0, hh] (hh >= 0; shapes (N, d)):
    [0, h] F lies in [min(0, hh Fl), max(0, hh Fh)], each product and sum rounded outward
    (proofs/bounds.md#picard, #pred-succ)."""
    n, d = xl.shape
    for q in range(n):
        for i in range(d):
            a = min(0.0, dn(hh * Fl[q, i]))
            b = max(0.0, up(hh * Fh[q, i]))
            Tl[q, i] = dn(xl[q, i] + a)
            Th[q, i] = up(xh[q, i] + b)
