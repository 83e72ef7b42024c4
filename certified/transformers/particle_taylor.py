"""Particles of the Gaussian PDE at n = 1,000: Taylor steps vectorised over the particles, the
error propagated by a norm bound of the empirical attention field's Jacobian
(``proofs/particles.md``).

The particle system is ``ẋ_i = Σ_h V_h Σ_j P^h_ij x_j`` with
``P^h_ij = w_j e^{s_ij} / Σ_k w_k e^{s_ik}``, ``s_ij = ⟨x_j, A_h x_i⟩`` (theorems.md §1.4, §9:
the score of key y at query x is ⟨Qy, Kx⟩, A = QᵀK). The generic engine encloses it with Lohner
sets in dimension n·d (cost ~n³ per step); here each step is

* a Taylor polynomial of the solution through the float64 *point* x̃_k, its coefficients computed
  by series recurrences over all n² scores at once in outward-rounded float64 intervals
  (:mod:`certified.arith.interval`: its proved ``exp``, products, midpoint-radius matrix products),
  plus the Lagrange remainder over an a priori box (bounds.md#picard, #taylor-step);
* the distance between the true state (anywhere in x̃_k ± e_k) and the solution through x̃_k
  bounded by ``e^{Lh} e_k`` with L ≥ ‖J‖_∞ over the a priori box (particles.md §2), J the
  Jacobian of the empirical field (bounds.md#attention-jacobian in this module's convention).

Cost per step O(K² n² + n² d) elementwise interval operations (K Taylor terms): n = 1,000 in d = 2
takes minutes, not hours. The result is a certified enclosure (no certificate kind: the particle
path of :mod:`~certified.transformers.gaussian_particles` keeps the generic engine's flow).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import flint
import numpy as np

from certified.arith import _kernels
from certified.arith.interval import Interval, exp, isum, matmul, sqr, sqrt
from certified.errors import DomainError, InputError, RangeOverflowError
from certified.transformers.sphere_taylor_kernels import cauchy

__all__ = [
    "ParticleEnclosure",
    "enclose_particles",
    "exact_masses",
    "particle_taylor_flow",
    "sphere_lognorm_bound",
    "taylor_coefficients",
]


def _stack(parts: list[Interval], axis: int) -> Interval:
    return Interval._trusted(
        np.concatenate([p.lo for p in parts], axis=axis),
        np.concatenate([p.hi for p in parts], axis=axis),
    )


def _series(parts: list[Interval]) -> Interval:
    """Equal-shaped intervals stacked along a new leading axis."""
    return Interval._trusted(np.stack([p.lo for p in parts]), np.stack([p.hi for p in parts]))


def _mag(x: Interval) -> np.ndarray:
    """Upper bound on |x| entrywise (exact: max of the endpoints' moduli)."""
    return np.maximum(np.abs(x.lo), np.abs(x.hi))


@dataclass
class _Head:
    A: Interval  # d x d, encloses the exact A_h = Q_hᵀ K_h
    V: Interval  # d x d


class _LeftSeriesProduct:
    """Σ_{m=0..k} E_m Y_{k−m} for a series of left blocks E_m (rows x n, added in order: the
    exponentials' E_m for [N_k | D_k], or a_m = X_m Aᵀ with n = d for the scores s_k) and right
    blocks given per call as [Y_k; …; Y_0] ((k+1) n x p): the midpoint-radius product of
    bounds.md#matmul of [E_0 … E_k] with that column, whose left factor's midpoints, moduli and
    radii are computed once per block and kept (Interval's ``matmul`` would redo them for every
    order), and W = |A_m| V̂ + A_r D̂ summed from two BLAS products: one more summation order of
    the same dot products of length 2(k+1)n, which the lemma allows.

    Guarantee: :meth:`product` encloses the sum for all points of the blocks."""

    def __init__(self, rows: int, n: int, K: int) -> None:
        self.n = n
        self.mid, self.mag, self.rad = (np.empty((rows, K * n)) for _ in range(3))

    def add(self, m: int, E: Interval) -> None:
        am, ar, status = _kernels.mid_rad(np.ascontiguousarray(E.lo), np.ascontiguousarray(E.hi))
        if status != _kernels.OK:
            raise RangeOverflowError("series: a radius exceeds the float64 range")
        cols = slice(m * self.n, (m + 1) * self.n)
        self.mid[:, cols], self.mag[:, cols], self.rad[:, cols] = am, np.abs(am), ar

    def product(self, k: int, right: Interval, sets: int = 1) -> Interval:
        """With ``sets`` > 1 the rows and the right factor's columns are split into that many
        equal groups and only the products of group β with group β are formed, stacked by rows
        (the diagonal blocks of the whole product, each entry the same dot product)."""
        N = (k + 1) * self.n  # the inner dimension
        g = (N + 1) * 2.0**-53  # >= gamma_N for N <= 2^26 (bounds.md#matmul)
        assert right.shape[0] == N and N <= 2**26
        f = 1.0 + 2 * (2 * N + 8) * 2.0**-53
        kk = 4 * N * _kernels.ETA
        p = right.shape[1]
        bm, vd = np.empty((N, p)), np.empty((2 * N, p))
        status = _kernels.matmul_right(np.ascontiguousarray(right.lo),
                                       np.ascontiguousarray(right.hi), g, bm, vd)  # fmt: skip
        rows, q = self.mid.shape[0] // sets, p // sets
        C, W = np.empty((2, sets * rows, q))
        with np.errstate(over="ignore", invalid="ignore"):
            for b in range(sets):
                r, c = slice(b * rows, (b + 1) * rows), slice(b * q, (b + 1) * q)
                C[r] = self.mid[r, :N] @ bm[:, c]
                W[r] = self.mag[r, :N] @ vd[:N, c] + self.rad[r, :N] @ vd[N:, c]
        lo, hi = np.empty_like(C), np.empty_like(C)
        if status != _kernels.OK or _kernels.matmul_finish(C, W, f, kk, lo, hi) != _kernels.OK:
            raise RangeOverflowError("series: an endpoint exceeds the float64 range")
        return Interval._trusted(lo, hi)


def taylor_coefficients(X0: Interval, heads: list[_Head], w: Interval, terms: int,
                        sphere: bool = False, batch: int = 1):  # fmt: skip
    """Taylor coefficients ``X[0..terms-1]`` (each n x d) of the particle solution through every
    point of the box ``X0`` (n x d) and, per head, the softmax weights ``P`` (n x n, row i for
    query i) and tilted means ``R0`` (n x d) over ``X0``.

    Series recurrences (particles.md §1), tokens as rows: a = X Aᵀ, s = a Xᵀ (products of
    series); E = exp(s − c) (E_k = Σ_{l=1..k} l s_l E_{k−l} / k); N = E (w X), D = E w;
    R = N / D (R_k = (N_k − Σ_{l≥1} D_l R_{k−l}) / D_0); F = Σ_h R_h V_hᵀ; X_{k+1} = F_k/(k+1).

    ``sphere``: the field is projected, f_i = v_i − x_i ⟨x_i, v_i⟩ with v = F above
    (particles.md §6): q = ⟨x, v⟩ rowwise, q_k = Σ_m ⟨X_m, v_{k−m}⟩, f_k = v_k − Σ_m X_m q_{k−m}.

    ``batch``: X0 holds that many token sets (b n x d, set β in rows β n .. (β + 1) n − 1),
    whose series are computed together (one pass of Python overhead; the two products that pair
    tokens of one set take the diagonal blocks of one product over all rows); results are
    stacked the same way.

    Guarantee: ``X[k]`` encloses the k-th Taylor coefficient at t = 0 of the solution through
    every x ∈ X0; ``P``, ``R0`` enclose the softmax weights and tilted means at every x ∈ X0.
    """
    rows, d = X0.shape
    n = rows // batch
    assert n * batch == rows
    K = max(terms, 1)
    X = [X0]
    wcol = w.reshape(n, 1)
    zero = wcol * 0.0
    # coefficient buffers (order, row, column), endpoints apart: every Cauchy sum below is one
    # compiled loop over them (sphere_taylor_kernels.cauchy: the same products and outward
    # sums as Interval's) or one matrix product
    Xb = np.empty((2, K, rows, d))
    Xb[0, 0], Xb[1, 0] = X0.lo, X0.hi
    bufs = [{"ls": np.empty((2, K, rows, n)), "E": np.empty((2, K, rows, n)),
             "D": np.empty((2, K, rows, 1)), "R": np.empty((2, K, rows, d))}
            for _ in heads]  # fmt: skip
    state: list[dict[str, Any]] = [{} for _ in heads]
    vb, qb = np.empty((2, K, rows, d)), np.empty((2, K, rows, 1))
    level0: list[tuple[Interval, Interval]] = []
    sets = [slice(i * n, (i + 1) * n) for i in range(batch)]
    # the right blocks Y_j = [w X_j | w δ_j0] of every set side by side (n x batch (d + 1))
    Ys = [_stack([_stack([X0[r] * wcol, wcol], 1) for r in sets], 1)]
    pairs = [_LeftSeriesProduct(rows, n, K) for _ in heads]
    scores = [_LeftSeriesProduct(rows, d, K) for _ in heads]  # [a_0 ... a_k] for s_k

    def put(buf: np.ndarray, k: int, v: Interval) -> Interval:
        buf[0, k], buf[1, k] = v.lo, v.hi
        return v

    def csum(a: np.ndarray, b: np.ndarray, m0: int, k: int) -> Interval:
        lo, hi = cauchy(a[0], a[1], b[0], b[1], m0, k)
        return Interval._trusted(lo, hi)

    for k in range(terms - 1):
        F = None
        if k > 0:
            Ys.append(_stack([_stack([X[k][r] * wcol, zero], 1) for r in sets], 1))
        right = _stack(Ys[::-1], 0)  # [Y_k; ...; Y_0]
        XT = _stack([X[k - m].T for m in range(k + 1)], 0)  # [X_k^T; ...; X_0^T]
        for h, st, bf, pair, sc in zip(heads, state, bufs, pairs, scores, strict=True):
            sc.add(k, matmul(X[k], h.A.T))  # a_k = X_k A^T
            # s_k = sum_m a_m X_{k-m}^T: one product of inner dimension (k + 1) d
            sk = sc.product(k, XT, batch)
            put(bf["ls"], k, sk * float(k))  # l s_l (exact scaling up to outward rounding)
            if k == 0:
                c = np.max(sk.mid(), axis=1, keepdims=True)  # any real shift cancels in R
                Ek = exp(sk - c)
            else:  # k E_k = sum_{l=1..k} l s_l E_{k-l}
                Ek = csum(bf["ls"], bf["E"], 1, k) / float(k)
            put(bf["E"], k, Ek)
            # [N_k | D_k] = sum_m E_m [w X_{k-m} | (w if m = k else 0)]: one product of
            # [E_0 ... E_k] (rows x (k+1) n) with the column of blocks [Y_k; ...; Y_0]
            pair.add(k, Ek)
            ND = pair.product(k, right, batch)
            Nk, Dk = ND[:, :d], ND[:, d:]
            if k == 0:  # D_0 > 0 from the nonnegative terms (a midpoint-radius product may not)
                Dk = isum(Ek * w.reshape(1, n), axis=1).reshape(rows, 1)
            put(bf["D"], k, Dk)
            if k == 0:
                Rk = Nk / Dk
                st["D0"] = Dk
            else:  # R_k = (N_k - sum_{l=1..k} D_l R_{k-l}) / D_0
                Rk = (Nk - csum(bf["D"], bf["R"], 1, k)) / st["D0"]
            put(bf["R"], k, Rk)
            if k == 0:
                level0.append(((Ek * w.reshape(1, n)) / Dk, Rk))
            Fh = matmul(Rk, h.V.T)
            F = Fh if F is None else F + Fh
        assert F is not None
        if sphere:  # the projection's series (Cauchy products, particles.md §6)
            put(vb, k, F)
            qk = csum(Xb, vb, 0, k)  # sum_m X_m * v_{k-m}
            put(qb, k, isum(qk, axis=1).reshape(rows, 1))
            F = F - csum(Xb, qb, 0, k)
        X.append(put(Xb, k + 1, F / float(k + 1)))
    return X, level0


def _field(B: Interval, heads: list[_Head], w: Interval, sphere: bool = False):
    """f over the box B (n x d) and level-0 data. Guarantee: encloses f(x) for all x ∈ B."""
    X, level0 = taylor_coefficients(B, heads, w, 2, sphere)
    return X[1], level0


def _apriori(B: Interval, heads, w, h_hi: float, sphere: bool = False,
             guess: tuple[np.ndarray, np.ndarray] | None = None) -> Interval:  # fmt: skip
    """A box E with B + [0, h]·f(E) ⊆ E (bounds.md#picard), found by inflation; the smaller
    box N = B + [0, h]·f(E) is returned (valid as well). ``guess``: offsets (lo, hi) of a first
    candidate E = [B.lo + lo, B.hi + hi] (the previous step's N about its B, rescaled): tried
    first, padded, at the cost of one field evaluation (a heuristic: only the test decides).

    Raises InputError when six inflations fail (the caller shortens the step).
    Guarantee: every solution from B stays in the returned box on [0, h]."""
    tau = Interval(0.0, h_hi)
    if guess is not None:
        edge = (B.hi + guess[1]) - (B.lo + guess[0])
        pad = 0.1 * edge + 0.02 * float(np.max(edge))
        E = Interval._trusted(np.nextafter(B.lo + guess[0] - pad, -np.inf),
                              np.nextafter(B.hi + guess[1] + pad, np.inf))  # fmt: skip
        if np.all(E.lo <= B.lo) and np.all(E.hi >= B.hi):
            F, _ = _field(E, heads, w, sphere)
            N = B + tau * F
            if np.all(N.lo >= E.lo) and np.all(N.hi <= E.hi):
                return N
    F, _ = _field(B, heads, w, sphere)
    E = B + tau * F
    for _ in range(6):
        edge = E.hi - E.lo  # per coordinate: a uniform pad widens slow tokens' boxes needlessly
        pad = 0.1 * edge + 0.01 * float(np.max(edge)) + 1e-12 * (1.0 + float(np.max(_mag(E))))
        E = Interval._trusted(
            np.nextafter(E.lo - pad, -np.inf), np.nextafter(E.hi + pad, np.inf)
        )  # any enlargement is a valid candidate: only the test below decides
        F, _ = _field(E, heads, w, sphere)
        N = B + tau * F
        if np.all(N.lo >= E.lo) and np.all(N.hi <= E.hi):
            return N
        E = N  # epsilon-inflation of the Picard iterate (Rump): the hull would grow geometrically
    raise InputError("a priori box: no inclusion after 6 inflations (shorten the step)")


def _row_bounds(box: Interval, level0, heads: list[_Head], chunk: int = 200) -> Interval:
    """Upper bound on ‖J(x)‖_∞ over every x ∈ box, J the Jacobian of the empirical field
    (particles.md §2): block (i, j) is Σ_h V_h (P_ij (I + u_ij a_iᵀ) + δ_ij C_i A_h) with
    u_ij = x_j − x̄_i, a_i = A_h x_i, C_i = Σ_j P_ij u_ij u_ijᵀ; its row (i, α) sum of moduli is
    at most Σ_h Σ_γ |V_h|_αγ (S0_i + ‖a_i‖_1 S1_iγ + T_iγ) with S0_i = Σ_j P_ij,
    S1_iγ = Σ_j P_ij |u_ijγ|, T_iγ = Σ_j P_ij |u_ijγ| (|u_ij|ᵀ r), r_δ = Σ_β |A_δβ|.

    Guarantee: upper bound (every product and sum of nonnegative terms rounded up through
    :class:`Interval`)."""
    n, d = box.shape
    rows = [Interval(np.zeros((min(n, i0 + chunk) - i0, d))) for i0 in range(0, n, chunk)]
    for h, (P, R0) in zip(heads, level0, strict=True):
        Pm = Interval(0.0, _mag(P))  # P_ij >= 0: its upper ends bound P_ij
        Vm = Interval(_mag(h.V))
        r = isum(Interval(_mag(h.A)), axis=1)  # r_delta >= sum_beta |A_delta beta|
        a1 = isum(Interval(_mag(matmul(box, h.A.T))), axis=1)  # ||a_i||_1 over the box
        S0 = isum(Pm, axis=1)  # (n,): sum_j P_ij per query i
        for c, i0 in enumerate(range(0, n, chunk)):
            i1 = min(n, i0 + chunk)
            xbar = R0[i0:i1]
            U = Interval._trusted(
                np.broadcast_to(box.lo[None, :, :], (i1 - i0, n, d)),
                np.broadcast_to(box.hi[None, :, :], (i1 - i0, n, d)),
            ) - Interval._trusted(xbar.lo[:, None, :], xbar.hi[:, None, :])
            Um = Interval(_mag(U))  # (i, j, gamma) >= |u_ij gamma| over the box
            g = isum(Um * r.reshape(1, 1, d), axis=2)  # (i, j) >= |u_ij|^T r
            Pc = Pm[i0:i1].reshape(i1 - i0, n, 1)
            PU = Pc * Um
            S1 = isum(PU, axis=1)  # (i, gamma)
            T = isum(PU * g.reshape(i1 - i0, n, 1), axis=1)
            inner = S0[i0:i1].reshape(-1, 1) + a1[i0:i1].reshape(-1, 1) * S1 + T
            rows[c] = rows[c] + matmul(inner, Vm.T)  # sum_gamma |V|_alpha,gamma inner_gamma
    return _stack(rows, 0)


def jacobian_norm_bound(box: Interval, level0, heads: list[_Head], chunk: int = 200) -> float:
    """Upper bound on ‖J(x)‖_∞ over every x ∈ box (the largest of :func:`_row_bounds`, whose
    (i, α) entry bounds the row (i, α) sum of moduli as in particles.md §2).

    Guarantee: upper bound."""
    return float(np.max(_row_bounds(box, level0, heads, chunk).hi))


def sphere_lognorm_bound(box: Interval, level0, heads: list[_Head]) -> float:
    """Upper bound on the logarithmic max-norm μ_∞(J(x)) = max_r (J_rr + Σ_{c≠r} |J_rc|) over
    every x ∈ box, J the Jacobian of the projected field f_i = Π_i v_i, Π_i = I − x_i x_iᵀ
    (particles.md §6): ∂f_i/∂x_j = Π_i ∂v_i/∂x_j − δ_ij (⟨x_i, v_i⟩ I + x_i v_iᵀ). Row (i, α)
    has Σ_c |J_rc| ≤ Σ_γ |Π_i|_αγ Rv_iγ + |⟨x_i, v_i⟩| + |x_iα| ‖v_i‖_1 (Rv from
    :func:`_row_bounds`), and μ_r ≤ that − 2 max(0, −up(J_rr)) with the diagonal
    J_rr = Σ_γ (Π_i)_αγ (∂v_i/∂x_i)_γα − ⟨x_i, v_i⟩ − x_iα v_iα enclosed over the box,
    ∂v_i/∂x_i = Σ_h V_h (P_ii (I + u_ii a_iᵀ) + C_i A_h).

    Guarantee: upper bound (interval arithmetic, upper ends)."""
    n, d = box.shape
    Rv = _row_bounds(box, level0, heads)
    v = None
    for h, (_, R0) in zip(heads, level0, strict=True):
        vh = matmul(R0, h.V.T)  # v_i = sum_h V_h xbar_i^h over the box
        v = vh if v is None else v + vh
    assert v is not None
    eye = Interval(np.eye(d))
    Pi = eye.reshape(1, d, d) - box.reshape(n, d, 1) * box.reshape(n, 1, d)  # (i, alpha, gamma)
    q = isum(box * v, axis=1)  # <x_i, v_i>
    v1 = isum(Interval(_mag(v)), axis=1)
    rows = isum(Interval(_mag(Pi)) * Rv.reshape(n, 1, d), axis=2)
    rows = rows + Interval(_mag(q)).reshape(n, 1) + Interval(_mag(box)) * v1.reshape(n, 1)
    # the diagonal blocks dv_i/dx_i, query chunks of at most ~2e6 entries (i, j, gamma, delta)
    parts: list[Interval] = []
    chunk = max(1, 2_000_000 // (n * d * d))
    for i0 in range(0, n, chunk):
        part, i1 = None, min(n, i0 + chunk)
        c = i1 - i0
        for h, (P, R0) in zip(heads, level0, strict=True):
            U = box.reshape(1, n, d) - R0[i0:i1].reshape(c, 1, d)  # u_ij = x_j - xbar_i
            C = isum(P[i0:i1].reshape(c, n, 1, 1) * U.reshape(c, n, d, 1)
                     * U.reshape(c, n, 1, d), axis=1)  # fmt: skip
            idx = np.arange(i0, i1)
            uii = U.lo[np.arange(c), idx], U.hi[np.arange(c), idx]
            uii = Interval._trusted(uii[0], uii[1])  # (c, d)
            ai = matmul(box[i0:i1], h.A.T)  # a_i = A x_i
            pii = Interval._trusted(P.lo[idx, idx], P.hi[idx, idx]).reshape(c, 1, 1)
            inner = pii * (eye.reshape(1, d, d) + uii.reshape(c, d, 1) * ai.reshape(c, 1, d))
            CA = isum(C.reshape(c, d, d, 1) * h.A.reshape(1, 1, d, d), axis=2)
            inner = inner + CA  # (c, gamma, beta)
            VD = isum(h.V.reshape(1, d, d, 1) * inner.reshape(c, 1, d, d), axis=2)
            part = VD if part is None else part + VD
        assert part is not None
        parts.append(part)
    Dv = _stack(parts, 0)
    DvT = Interval._trusted(Dv.lo.transpose(0, 2, 1), Dv.hi.transpose(0, 2, 1))
    # J_rr = sum_gamma Pi_alpha,gamma Dv_gamma,alpha - q_i - x_i,alpha v_i,alpha
    diag = isum(Pi * DvT, axis=2) - q.reshape(n, 1) - box * v
    neg = np.maximum(0.0, -diag.hi)  # exact: 0 <= neg <= |J_rr| when J_rr <= diag.hi < 0
    mu = rows - Interval(2.0 * neg)  # 2 * neg exact (a power-of-two scaling)
    return float(np.max(mu.hi))


def sphere_jacobian(box: Interval, level0, heads: list[_Head]) -> Interval:
    """The Jacobian of the projected field over the box as an (n d) x (n d) interval matrix
    (row i·d + α, column j·d + β; particles.md §6):
    J_ij = Π_i ∂v_i/∂x_j − δ_ij (⟨x_i, v_i⟩ I + x_i v_iᵀ) with
    ∂v_i/∂x_j = Σ_h P_ij (V_h + (V_h u_ij) a_iᵀ) + δ_ij V_h C_i A_h (particles.md §2), Π_i taken
    inside: Π_i ∂v_i/∂x_j = Σ_h P_ij (Π_i V_h + (Π_i V_h u_ij) a_iᵀ) + δ_ij Π_i V_h C_i A_h,
    Π_i V u = V u − x_i (x_iᵀ V u).
    Memory O(n² d²): for n d up to a few thousand.

    Guarantee: encloses J(x) for every x ∈ box."""
    n, d = box.shape
    eye = Interval(np.eye(d))
    Pi = eye.reshape(1, d, d) - box.reshape(n, d, 1) * box.reshape(n, 1, d)  # Π_i (n, d, d)
    J, v, diag = None, None, None
    for h, (P, R0) in zip(heads, level0, strict=True):
        U = box.reshape(1, n, d) - R0.reshape(n, 1, d)  # u_ij = x_j - xbar_i
        Vu = matmul(U.reshape(n * n, d), h.V.T).reshape(n, n, d)  # (i, j, alpha): V u_ij
        s = isum(box.reshape(n, 1, d) * Vu, axis=2)  # x_i^T V u_ij
        PiVu = Vu - box.reshape(n, 1, d) * s.reshape(n, n, 1)  # Π_i V u_ij
        PiV = isum(Pi.reshape(n, d, d, 1) * h.V.reshape(1, 1, d, d), axis=2)  # Π_i V
        a = matmul(box, h.A.T)  # a_i = A x_i
        # Π_i ∂v_i/∂x_j = P_ij (Π_i V + (Π_i V u_ij) a_iᵀ) + δ_ij Π_i V C_i A
        key = PiVu.reshape(n, n, d, 1) * a.reshape(n, 1, 1, d)
        blk = P.reshape(n, n, 1, 1) * (PiV.reshape(n, 1, d, d) + key)
        PU = P.reshape(n, n, 1) * U  # P_ij u_ij
        C = isum(PU.reshape(n, n, d, 1) * U.reshape(n, n, 1, d), axis=1)
        CA = matmul(C.reshape(n * d, d), h.A).reshape(n, d, d)  # C_i A
        PiVCA = isum(PiV.reshape(n, d, d, 1) * CA.reshape(n, 1, d, d), axis=2)  # Π_i V C_i A
        diag = PiVCA if diag is None else diag + PiVCA
        J = blk if J is None else J + blk
        vh = matmul(R0, h.V.T)  # v_i = sum_h V_h xbar_i^h
        v = vh if v is None else v + vh
    assert J is not None and v is not None and diag is not None
    q = isum(box * v, axis=1)  # <x_i, v_i>
    xv = box.reshape(n, d, 1) * v.reshape(n, 1, d)  # x_i v_i^T
    J = _add_diagonal_blocks(J, diag - (q.reshape(n, 1, 1) * eye.reshape(1, d, d) + xv))
    return Interval._trusted(J.lo.transpose(0, 2, 1, 3).reshape(n * d, n * d),
                             J.hi.transpose(0, 2, 1, 3).reshape(n * d, n * d))  # fmt: skip


def _add_diagonal_blocks(J: Interval, D: Interval) -> Interval:
    """J (n, n, d, d) with D (n, d, d) added to its blocks (i, i). Guarantee: encloses."""
    n = J.shape[0]
    ii = np.arange(n)
    lo, hi = J.lo.copy(), J.hi.copy()
    dd = Interval._trusted(lo[ii, ii], hi[ii, ii]) + D
    lo[ii, ii], hi[ii, ii] = dd.lo, dd.hi
    return Interval._trusted(lo, hi)


def _gamma_up(k: int) -> float:
    """An upper bound on γ_k = k u / (1 − k u), u = 2^-53 (Higham §3.1). Guarantee: upper."""
    return float((Interval(float(k)) * 2.0**-53 / (1.0 - Interval(float(k)) * 2.0**-53)).hi[()])


def _below(Sc: np.ndarray, sigma: float) -> bool:
    """True only if every eigenvalue of the symmetric double matrix Sc is < sigma
    (particles.md §6, the Cholesky test). With t = fl(σ − c) and c_e = σ − t (exact), the
    double matrix G (off-diagonal −Sc, diagonal within δ of t − Sc_ii) is factored in floating
    point; success gives R̃ᵀR̃ = G + ΔA, |ΔA| ≤ γ_{m+1}|R̃ᵀ||R̃| (Higham, Accuracy and Stability,
    Thm 10.3, any order of the inner products; γ_{2m+2} used for margin), so
    ‖ΔA‖_2 ≤ γ ‖R̃‖_F², and xᵀ(σI − Sc)x ≥ (c_e − ‖ΔA‖_2 − δ)|x|² > 0 when checked below.

    Guarantee: True implies λ_max(Sc) < sigma."""
    m = Sc.shape[0]
    t = sigma - 1e-9 * (1.0 + abs(sigma) + float(np.max(np.abs(np.diag(Sc)))))
    c_low = float((Interval(sigma) - Interval(t)).lo[()])  # c_e >= c_low
    Gd = Interval(t) - Interval(np.diag(Sc))  # encloses t - Sc_ii
    G = -Sc
    np.fill_diagonal(G, Gd.mid())
    delta = float(np.max(Gd.width_upper()))  # |G_ii - (t - Sc_ii)| <= delta
    try:
        R = np.linalg.cholesky(G)
    except np.linalg.LinAlgError:
        return False
    if not np.all(np.isfinite(R)):
        return False
    F = isum(sqr(Interval._trusted(R, R)))  # >= ||R||_F^2 (R finite: checked above)
    bound = Interval(_gamma_up(2 * m + 2)) * F + Interval(delta) + 2.0**-900  # underflow
    return bool(float(bound.hi[()]) < c_low)


def _perron_bound(Sr: np.ndarray) -> float:
    """Upper bound on ‖Sr‖_2 for a nonnegative symmetric double matrix (particles.md §6):
    ‖Sr‖_2 = ρ(Sr) ≤ max_i (Sr v)_i / v_i for every v > 0 (Collatz–Wielandt), v from a few
    power iterations (a heuristic: only the bound's tightness depends on it), Sr v and the
    quotients enclosed (Interval, upper ends).

    Guarantee: upper bound."""
    v = np.ones(Sr.shape[0])
    for _ in range(8):
        u = Sr @ v
        top = float(np.max(u))
        if not 0.0 < top < math.inf:
            break
        v = np.maximum(u / top, 1e-6)  # entries > 0, so the quotient bound applies
    num = matmul(Interval._trusted(Sr, Sr), Interval(v))  # encloses Sr v (Sr: finite doubles)
    return float(np.max((num / Interval(v)).hi))


def lognorm2_bound(J: Interval, memo: dict | None = None) -> float:
    """Upper bound on the logarithmic 2-norm μ_2(M) = λ_max((M + Mᵀ)/2) for every M ∈ J
    (particles.md §6): S = (J + Jᵀ)/2 enclosed, Sc its (symmetric) midpoint, Sr ≥ |S − Sc|;
    λ_max(Sym M) ≤ λ_max(Sc) + ‖Sr‖_2, ‖Sr‖_2 ≤ min(max(‖Sr‖_1, ‖Sr‖_∞), the Collatz–Wielandt
    bound of :func:`_perron_bound`), λ_max(Sc) < σ certified by :func:`_below`. σ is a float
    estimate plus a margin: ``memo`` (a dict kept between calls on slowly changing J) holds the
    previous top eigenvector, whose Rayleigh quotient after a few shifted power steps is tried
    first (margin 10^-3 (1 + |λ|)) before a full eigendecomposition (a heuristic: a failed
    test only costs time).

    Guarantee: upper bound (inf if no σ could be certified)."""
    S = (J + J.T) * 0.5
    Sc = S.mid()
    if np.array_equal(Sc, Sc.T):  # (the usual case: + commutes) Sr = the radius about Sc
        Sr = S.rad_upper()
    else:
        Sc = np.triu(Sc)
        Sc = Sc + np.triu(Sc, 1).T  # exactly symmetric
        Sr = _mag(S - Interval(Sc))
    # symmetric and still >= |Sym(M) - Sc| (symmetric): its 1- and inf-norms are equal
    Sr = np.maximum(Sr, Sr.T)
    r = float(np.max(isum(Interval._trusted(Sr, Sr), axis=1).hi))
    r = min(r, _perron_bound(Sr))
    if memo is not None and "v" in memo:  # the warm start: no eigendecomposition
        v = memo["v"]
        for _ in range(3):
            u = Sc @ v + memo["shift"] * v
            size = float(np.linalg.norm(u))
            if not 0.0 < size < math.inf:
                break
            v = u / size
        est = float(v @ (Sc @ v))
        sigma = est + 1e-3 * (1.0 + abs(est))
        if math.isfinite(sigma) and _below(Sc, sigma):
            memo["v"] = v
            return float((Interval(sigma) + Interval(r)).hi[()])
    if memo is not None:
        vals, vecs = np.linalg.eigh(Sc)
        memo["v"], memo["shift"] = vecs[:, -1], max(0.0, -float(vals[0]))
        lam = float(vals[-1])
    else:
        lam = float(np.linalg.eigvalsh(Sc)[-1])  # an estimate: certified below
    margin = 1e-7 * (1.0 + abs(lam))
    for _ in range(6):
        sigma = lam + margin
        if _below(Sc, sigma):
            return float((Interval(sigma) + Interval(r)).hi[()])
        margin *= 10.0
    return math.inf


@dataclass(frozen=True)
class ParticleEnclosure:
    """Tokens at the final time: ``centre`` (n x d doubles) ± ``radius`` in every coordinate.

    ``steps`` Taylor steps were taken, ``max_lipschitz`` is the largest ‖J‖_∞ bound met.
    Guarantee: every token's every coordinate lies in ``[centre − radius, centre + radius]``
    (see :meth:`box`, rounded outward)."""

    centre: np.ndarray
    radius: float
    steps: int
    max_lipschitz: float

    def box(self) -> Interval:
        """Guarantee: encloses the tokens at the final time."""
        return Interval(self.centre) + Interval(-self.radius, self.radius)


def _heads_of(piece) -> list[_Head]:
    return [_Head(Interval.from_exact(h.A.tolist()), Interval.from_exact(h.V.tolist()))
            for h in piece.heads]  # fmt: skip


@dataclass(frozen=True)
class _RateBox:
    """A box and an upper bound on the growth rate (‖J‖_∞, μ_∞ or μ_2 of the step's route) of
    the field's Jacobian at every point of it: valid for every later step whose a priori box
    lies inside (particles.md §3, #rate-reuse)."""

    box: Interval
    rate: float


def _taylor_step(x, e, heads, w, h: flint.fmpq, terms: int, sphere: bool = False,
                 norm2: bool = False, tol: float = math.inf, reuse: int = 1,
                 cache: dict | None = None):  # fmt: skip
    """One step of exact length h from x ± e (x doubles, e >= 0). Returns (x', e', L, rem):
    L the growth rate used (‖J‖_∞; on the sphere the log-norm bound μ_∞, or with ``norm2``
    μ_2, particles.md §6), rem = max |X_K(N) h^K|. ``x ± e`` is the max-norm ball, with
    ``norm2`` the Euclidean ball {|y − x|_2 ≤ e} over all n d coordinates. When rem > tol the
    step stops early and returns (None, None, None, rem) (cost only: the caller shortens it).
    ``cache`` (a dict kept between the steps of one piece, or None): under "rate" a
    :class:`_RateBox` whose box contains this step's a priori box gives L; otherwise L is
    computed over a box predicted to hold the a priori boxes of the next ``reuse`` steps, and
    stored there (particles.md #rate-reuse); under "eig" the eigenvector estimate that
    :func:`lognorm2_bound` starts from.
    Guarantee: the solution from every point of x ± e is in x' ± e' after time h."""
    from certified.arith.exact import fmpq_to_str

    H = Interval.from_exact(fmpq_to_str(h))
    B = Interval(x) + Interval(-e, e)
    hint = None if cache is None else cache.get("apriori")
    guess = None if hint is None else (hint[0] * (float(H.hi) / hint[2]),
                                       hint[1] * (float(H.hi) / hint[2]))  # fmt: skip
    E = _apriori(B, heads, w, float(H.hi), sphere, guess)
    if cache is not None:  # the offsets of N about B: the next step's first candidate
        cache["apriori"] = (E.lo - B.lo, E.hi - B.hi, float(H.hi))
    # the series over E (order K: the remainder; level 0: P, x̄ over E) and through the point x
    # (orders < K: the polynomial), in one batched pass
    n = x.shape[0]
    XS, level0 = taylor_coefficients(_stack([E, Interval(x)], 0), heads, w, terms + 1, sphere, 2)
    level0 = [(P[:n], R0[:n]) for P, R0 in level0]
    XK = XS[terms][:n]
    rem = float(np.max(_mag(XK * H**terms)))
    if not rem <= tol:
        return None, None, None, rem
    held = cache.get("rate") if cache is not None else None
    if held is not None and np.all(E.lo >= held.box.lo) and np.all(E.hi <= held.box.hi):
        L = held.rate  # a bound over a superset of E is a bound over E
    else:
        G, level0G = E, level0
        if reuse > 1:  # where the next steps' a priori boxes are expected (a guess: only the
            # containment test above decides whether a later step may use this rate)
            G = E + Interval(0.0, (reuse - 1) * float(H.hi)) * XS[1][:n]
            edge = G.hi - G.lo
            pad = 0.05 * edge + 1e-3 * float(np.max(edge))
            G = Interval._trusted(np.nextafter(G.lo - pad, -np.inf),
                                  np.nextafter(G.hi + pad, np.inf))  # fmt: skip
            level0G = _field(G, heads, w, sphere)[1]  # P, x̄ over G
        if norm2:
            L = lognorm2_bound(sphere_jacobian(G, level0G, heads),
                               None if cache is None else cache.setdefault("eig", {}))  # fmt: skip
        elif sphere:
            L = sphere_lognorm_bound(G, level0G, heads)
        else:
            L = jacobian_norm_bound(G, level0G, heads)
        if cache is not None:
            cache["rate"] = _RateBox(G, L)
    Xp = [c[n:] for c in XS]
    inc = XK  # Horner on the increment: ((X_K h + X_{K-1}) h + ... + X_1) h (bounds.md#taylor-step)
    for m in range(terms - 1, 0, -1):
        inc = inc * H + Xp[m]
    inc = inc * H
    enc = Interval(x) + inc
    centre = enc.mid()
    dev = Interval(_mag(enc - centre))
    rho = float(sqrt(isum(sqr(dev))).hi[()]) if norm2 else float(np.max(dev.hi))
    grow = exp(Interval(L) * H).hi  # e^{L h} (L < 0 allowed), rounded up (bounds.md#exp-taylor)
    e_new = (Interval(grow) * Interval(e) + Interval(rho)).hi
    return centre, float(e_new), L, rem


def exact_masses(weights: Any, n: int) -> Interval:
    """The masses as an Interval enclosing the exact rationals (uniform 1/n when None).

    Raises InputError unless they are n positive exact numbers summing to 1.
    Guarantee: encloses the exact masses."""
    from certified.arith.exact import fmpq_to_str, to_fmpq_array

    if weights is None:
        wq = [flint.fmpq(1, n)] * n
    else:
        wq = list(to_fmpq_array(weights, field="weights").ravel())
        if len(wq) != n or any(q <= 0 for q in wq) or sum(wq, flint.fmpq(0)) != 1:
            raise InputError("weights: need n positive exact masses summing to 1")
    return Interval.from_exact([fmpq_to_str(q) for q in wq])


# the Euclidean log-norm route (a dense (n d) x (n d) interval Jacobian per step) up to this n d
NORM2_LIMIT = 1024


def enclose_particles(X: np.ndarray, w: Interval, pieces: list[tuple[flint.fmpq, list[_Head]]],
                      *, sphere: bool = False, steps: int | None = None, terms: int = 10,
                      tol: float = 1e-9, e0: float = 0.0, reuse: int = 1,
                      adapt: bool = False) -> ParticleEnclosure:  # fmt: skip
    """The stepping loop shared by :func:`particle_taylor_flow` and
    :mod:`certified.transformers.sphere_taylor`: tokens X (n x d doubles, exact), masses w,
    pieces (exact duration, heads); ``sphere`` projects the field (particles.md §6); the
    initial tokens may be anywhere in X ± e0 (max norm). ``reuse``: one growth-rate bound is
    computed over a box meant to hold the a priori boxes of about this many steps and used by
    every step whose a priori box it contains (cost only; particles.md #rate-reuse).
    Step control as in :func:`particle_taylor_flow`; with ``adapt`` the next step is scaled
    by 0.9 (tol / 4 / rem)^{1/(K+3)} within [1/2, 2] (rem(h) was observed to grow like h^{K+3}),
    rounded down to a multiple of 2^-24 (cost only: every step is validated).

    Raises InputError when a step could not be validated after 12 halvings.
    Guarantee: the returned enclosure contains every token at the final time."""
    n, d = X.shape
    norm2 = sphere and n * d <= NORM2_LIMIT  # the Euclidean log-norm (particles.md §6)
    e = float(e0)
    if norm2:  # the max-norm ball of radius e0 lies in the Euclidean ball of radius sqrt(nd) e0
        e = float((Interval(e) * sqrt(Interval(float(n * d)))).hi[()])
    x, total, Lmax = X.astype(float).copy(), 0, -math.inf
    for duration, heads in pieces:
        cache: dict = {}  # the rate box of this piece's field (heads change between pieces)
        if steps is None:
            f0 = taylor_coefficients(Interval(x), heads, w, 2, sphere)[0][1]
            k = max(4, math.ceil(float(duration) * 8 * (1 + float(np.max(_mag(f0))))))
        else:
            k = max(1, math.ceil(float(duration) * steps))
        h, done, floor, calm = duration / k, flint.fmpq(0), duration / (k * 4096), 3
        while done < duration:
            hs = min(h, duration - done)
            try:
                xn, en, L, rem = _taylor_step(x, e, heads, w, hs, terms, sphere, norm2, tol,
                                              reuse, cache)  # fmt: skip
                ok = xn is not None
            except (InputError, DomainError, RangeOverflowError):
                ok, rem = False, math.inf
            if not ok:  # step control changes cost only: every accepted step is validated
                if hs < floor:
                    raise InputError(
                        "particle flow: a step could not be validated (the tokens spread too "
                        "fast; try fewer tokens or a shorter time)"
                    )
                h, calm = hs / 2, 0
                if adapt and 0.0 < rem < math.inf:  # aim below tol at once
                    h = min(h, _scaled(hs, _rate_factor(rem, tol, terms)))
                continue
            x, e, total, Lmax, done = xn, en, total + 1, max(Lmax, L), done + hs
            calm += 1  # accepted steps since the last rejection: no doubling right after one
            if adapt:  # the next step where the remainder is expected near tol / 4
                h = _scaled(h if hs < h else hs, _rate_factor(rem, tol, terms))
            else:
                h = (
                    2 * hs if calm >= 3 and rem * 2.0 ** (terms + 3) <= tol else hs
                )  # observed: rem(2h) ~ 2^(K+3) rem(h)
    return ParticleEnclosure(x, e, total, Lmax)


def _rate_factor(rem: float, tol: float, terms: int) -> float:
    """The step's scaling for a remainder near tol / 4 (a heuristic). Guarantee: none."""
    if not rem > 0.0:
        return 2.0
    return min(2.0, max(0.5, 0.9 * (tol / 4 / rem) ** (1.0 / (terms + 3))))


def _scaled(h: flint.fmpq, factor: float) -> flint.fmpq:
    """h * factor rounded down to a positive multiple of 2^-24 (an exact rational step length).
    Guarantee: none (step control)."""
    return flint.fmpq(max(1, int(float(h) * factor * 2**24)), 2**24)


def particle_taylor_flow(pde, tokens: Any, weights: Any = None, *, steps: int | None = None,
                         terms: int = 10, tol: float = 1e-9) -> ParticleEnclosure:  # fmt: skip
    """Certified enclosure of the tokens at the end of ``pde``'s schedule, moved by the
    empirical attention of its heads (theorems.md §9), by Taylor steps vectorised over the
    particles (``proofs/particles.md``). ``steps`` per unit time (default from the field's
    speed); a step whose a priori box fails or whose remainder exceeds ``tol`` is halved.

    Raises
    ------
    InputError
        Tokens of the wrong shape, weights not positive or not summing to 1, or a step that
        could not be validated after 12 halvings.

    Guarantee: the returned enclosure contains every token at the final time.
    """
    X = np.asarray(tokens, dtype=float)
    if X.ndim != 2 or X.shape[1] != pde.d or X.shape[0] < 1:
        raise InputError(f"tokens: expected an n x {pde.d} array, got shape {X.shape}")
    if not np.all(np.isfinite(X)):
        raise InputError("tokens: not finite")
    w = exact_masses(weights, X.shape[0])
    pieces = [(piece.duration, _heads_of(piece)) for piece in pde.pieces]
    return enclose_particles(X, w, pieces, steps=steps, terms=terms, tol=tol)
