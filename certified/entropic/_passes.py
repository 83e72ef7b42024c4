"""Compiled float64 passes of the untrusted entropic solver (heuristics only).

The solver keeps a kernel ``K_ij = exp((f_i + g_j - C_ij)/γ)`` (potentials absorbed) and
scalings ``u, v``; its plan is ``P = diag(a u) K diag(b v)``. Every pass reads ``K`` once,
row by row, and does both the row products and the column accumulations (one pass instead
of two BLAS matrix-vector products; single-threaded, so it does not compete with itself for
the two cores). Compiled with ``fastmath`` (reassociation, FMA contraction): nothing here is
trusted, and the rigorous kernels (:mod:`certified.entropic._gibbs`) are compiled without it.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = [
    "cholesky",
    "cholesky_solve",
    "exponents",
    "plan_sums",
    "plan_times",
    "plan_transpose_times",
    "schur_matrix",
    "schur_times",
    "sweep",
]

# reassociation (vectorised reductions), FMA contraction, no signed zeros, reciprocals;
# not "nnan"/"ninf": the solver detects non-finite values
_FAST = {"reassoc", "contract", "nsz", "arcp"}
_jit = njit(cache=True, fastmath=_FAST, error_model="numpy")
_inline = njit(cache=True, fastmath=_FAST, error_model="numpy", inline="always")


@_inline
def _relax(x, s, w):  # pragma: no cover - compiled
    """x^(1-w) (1/s)^w: the over-relaxed update of a scaling x whose product with the kernel
    sum s should be 1 (w = 1: plain Sinkhorn, 1/s)."""
    return 1.0 / s if w == 1.0 else (x * s) ** (1.0 - w) / s


@_jit
def sweep(K, a, b, u, v, w):  # pragma: no cover - compiled
    """One Sinkhorn sweep in place, over-relaxed by ``w`` in [1, 2) (Thibault, Chizat,
    Dossal and Papadakis 2021): ``u ← u^(1-w) (1/(K (b v)))^w``, then ``v`` likewise with
    ``Kᵀ (a u)``. Returns the L1 marginal error of the plan after the u-update."""
    n, m = K.shape
    bv = b * v
    col = np.zeros(m)
    err = 0.0
    for i in range(0, n - 1, 2):
        s0 = 0.0
        s1 = 0.0
        for j in range(m):
            s0 += K[i, j] * bv[j]
            s1 += K[i + 1, j] * bv[j]
        u0 = _relax(u[i], s0, w)
        u1 = _relax(u[i + 1], s1, w)
        u[i] = u0
        u[i + 1] = u1
        err += a[i] * abs(u0 * s0 - 1.0) + a[i + 1] * abs(u1 * s1 - 1.0)
        w0 = a[i] * u0
        w1 = a[i + 1] * u1
        for j in range(m):
            col[j] += w0 * K[i, j] + w1 * K[i + 1, j]
    if n % 2:
        i = n - 1
        s0 = 0.0
        for j in range(m):
            s0 += K[i, j] * bv[j]
        u0 = _relax(u[i], s0, w)
        u[i] = u0
        err += a[i] * abs(u0 * s0 - 1.0)
        w0 = a[i] * u0
        for j in range(m):
            col[j] += w0 * K[i, j]
    for j in range(m):
        err += abs(col[j] * bv[j] - b[j])
        v[j] = _relax(v[j], col[j], w)
    return err


@_jit
def exponents(f, g, C, inv, clip):  # pragma: no cover - compiled
    """``max((f_i + g_j - C_ij) inv, clip)`` in one pass (the kernel's exponent)."""
    n, m = C.shape
    Z = np.empty((n, m))
    for i in range(n):
        fi = f[i]
        for j in range(m):
            z = (fi + g[j] - C[i, j]) * inv
            Z[i, j] = z if z > clip else clip
    return Z


@_jit
def plan_sums(K, al, be):  # pragma: no cover - compiled
    """Row and column sums of ``diag(al) K diag(be)``."""
    n, m = K.shape
    r = np.empty(n)
    col = np.zeros(m)
    for i in range(n):
        s = 0.0
        for j in range(m):
            s += K[i, j] * be[j]
        r[i] = al[i] * s
        w = al[i]
        for j in range(m):
            col[j] += w * K[i, j]
    return r, col * be


@_jit
def plan_times(K, al, be, x):  # pragma: no cover - compiled
    """``P x`` for ``P = diag(al) K diag(be)``."""
    n, m = K.shape
    bx = be * x
    out = np.empty(n)
    for i in range(n):
        s = 0.0
        for j in range(m):
            s += K[i, j] * bx[j]
        out[i] = al[i] * s
    return out


@_jit
def plan_transpose_times(K, al, be, y):  # pragma: no cover - compiled
    """``Pᵀ y`` for ``P = diag(al) K diag(be)``."""
    n, m = K.shape
    z = np.zeros(m)
    for i in range(n):
        w = al[i] * y[i]
        for j in range(m):
            z[j] += w * K[i, j]
    return be * z


@_jit
def schur_times(K, al, be, r, cd, x):  # pragma: no cover - compiled
    """``cd x - Pᵀ diag(1/r) P x`` (the Newton system's Schur complement on g, diagonal
    ``cd``), in one pass over K."""
    n, m = K.shape
    bx = be * x
    z = np.zeros(m)
    for i in range(n):
        s = 0.0
        for j in range(m):
            s += K[i, j] * bx[j]
        w = al[i] * al[i] * s / r[i]
        for j in range(m):
            z[j] += w * K[i, j]
    return cd * x - be * z


@_jit
def schur_matrix(K, al, be, r, cd, tau):  # pragma: no cover - compiled
    """Dense ``diag(cd) - P̃ᵀ diag(1/r) P̃`` with ``P̃`` the plan without its entries below
    ``tau r_i`` (a preconditioner: cost Σ_i nnz_i² instead of n m²)."""
    n, m = K.shape
    S = np.zeros((m, m))
    idx = np.empty(m, np.int64)
    val = np.empty(m)
    for i in range(n):
        cut = tau * r[i]
        k = 0
        for j in range(m):
            p = al[i] * K[i, j] * be[j]
            if p > cut:
                idx[k] = j
                val[k] = p
                k += 1
        w = 1.0 / r[i]
        for s in range(k):
            js = idx[s]
            vs = val[s] * w
            for t in range(k):
                S[js, idx[t]] -= vs * val[t]
    for j in range(m):
        S[j, j] += cd[j]
    return S


@_jit
def cholesky(S):  # pragma: no cover - compiled
    """``(L, ok)`` with ``L Lᵀ = S`` (Cholesky–Crout by rows: every inner product is over two
    contiguous rows); ``ok`` False when a pivot is not positive. Single-threaded, unlike
    LAPACK's, whose threads stall on a loaded machine (measured: 0.1-2.7 s instead of 60 ms
    for n = 1000 with two threads on two busy cores)."""
    n = S.shape[0]
    L = np.zeros((n, n))
    for i in range(n):
        for j in range(i + 1):
            s = S[i, j]
            for k in range(j):
                s -= L[i, k] * L[j, k]
            if i == j:
                if not s > 0.0:
                    return L, False
                L[i, i] = np.sqrt(s)
            else:
                L[i, j] = s / L[j, j]
    return L, True


@_jit
def cholesky_solve(L, y):  # pragma: no cover - compiled
    """``x`` with ``L Lᵀ x = y`` (L lower triangular, row-major)."""
    n = L.shape[0]
    z = np.empty(n)
    for i in range(n):
        s = y[i]
        for k in range(i):
            s -= L[i, k] * z[k]
        z[i] = s / L[i, i]
    x = z.copy()
    for i in range(n - 1, -1, -1):
        x[i] = x[i] / L[i, i]
        xi = x[i]
        for k in range(i):
            x[k] -= L[i, k] * xi
    return x
