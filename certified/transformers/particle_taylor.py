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

from certified.arith.interval import Interval, exp, hull, isum, matmul
from certified.errors import DomainError, InputError, RangeOverflowError

__all__ = ["ParticleEnclosure", "particle_taylor_flow", "taylor_coefficients"]


def _stack(parts: list[Interval], axis: int) -> Interval:
    return Interval._trusted(
        np.concatenate([p.lo for p in parts], axis=axis),
        np.concatenate([p.hi for p in parts], axis=axis),
    )


def _mag(x: Interval) -> np.ndarray:
    """Upper bound on |x| entrywise (exact: max of the endpoints' moduli)."""
    return np.maximum(np.abs(x.lo), np.abs(x.hi))


@dataclass
class _Head:
    A: Interval  # d x d, encloses the exact A_h = Q_hᵀ K_h
    V: Interval  # d x d


def taylor_coefficients(X0: Interval, heads: list[_Head], w: Interval, terms: int):
    """Taylor coefficients ``X[0..terms-1]`` (each n x d) of the particle solution through every
    point of the box ``X0`` (n x d) and, per head, the softmax weights ``P`` (n x n, row i for
    query i) and tilted means ``R0`` (n x d) over ``X0``.

    Series recurrences (particles.md §1), tokens as rows: a = X Aᵀ, s = a Xᵀ (products of
    series); E = exp(s − c) (E_k = Σ_{l=1..k} l s_l E_{k−l} / k); N = E (w X), D = E w;
    R = N / D (R_k = (N_k − Σ_{l≥1} D_l R_{k−l}) / D_0); F = Σ_h R_h V_hᵀ; X_{k+1} = F_k/(k+1).

    Guarantee: ``X[k]`` encloses the k-th Taylor coefficient at t = 0 of the solution through
    every x ∈ X0; ``P``, ``R0`` enclose the softmax weights and tilted means at every x ∈ X0.
    """
    n, d = X0.shape
    X = [X0]
    wcol = w.reshape(n, 1)
    zero = wcol * 0.0
    state = [{"a": [], "s": [], "E": [], "D": [], "R": []} for _ in heads]
    level0: list[tuple[Interval, Interval]] = []
    for k in range(terms - 1):
        F = None
        for h, st in zip(heads, state, strict=True):
            st["a"].append(matmul(X[k], h.A.T))
            # s_k = sum_m a_m X_{k-m}^T: one product of inner dimension (k + 1) d
            sk = matmul(_stack(st["a"], 1), _stack([X[k - m].T for m in range(k + 1)], 0))
            st["s"].append(sk)
            if k == 0:
                c = np.max(sk.mid(), axis=1, keepdims=True)  # any real shift cancels in R
                Ek = exp(sk - c)
            else:
                acc = st["s"][k] * float(k) * st["E"][0]
                for m in range(1, k):
                    acc = acc + st["s"][m] * float(m) * st["E"][k - m]
                Ek = acc / float(k)
            st["E"].append(Ek)
            # [N_k | D_k] = sum_m E_m [w X_{k-m} | (w if m = k else 0)]: the n x n factor on
            # the left (measured twice as fast as on the right in Interval matmul)
            ND = None
            for m in range(k + 1):
                term = matmul(st["E"][m], _stack([X[k - m] * wcol, wcol if m == k else zero], 1))
                ND = term if ND is None else ND + term
            Nk, Dk = ND[:, :d], ND[:, d:]
            if k == 0:  # D_0 > 0 from the nonnegative terms (a midpoint-radius product may not)
                Dk = isum(Ek * w.reshape(1, n), axis=1).reshape(n, 1)
            st["D"].append(Dk)
            acc = Nk
            for m in range(1, k + 1):
                acc = acc - st["D"][m] * st["R"][k - m]
            Rk = acc / st["D"][0]
            st["R"].append(Rk)
            if k == 0:
                level0.append(((Ek * w.reshape(1, n)) / Dk, Rk))
            Fh = matmul(Rk, h.V.T)
            F = Fh if F is None else F + Fh
        X.append(F / float(k + 1))
    return X, level0


def _field(B: Interval, heads: list[_Head], w: Interval):
    """f over the box B (n x d) and level-0 data. Guarantee: encloses f(x) for all x ∈ B."""
    X, level0 = taylor_coefficients(B, heads, w, 2)
    return X[1], level0


def _apriori(B: Interval, heads, w, h_hi: float) -> tuple[Interval, Any]:
    """A box E with B + [0, h]·f(E) ⊆ E (bounds.md#picard), found by inflation; the smaller
    box N = B + [0, h]·f(E) is returned (valid as well) with f's level-0 data over it.

    Raises InputError when three inflations fail (the caller shortens the step).
    Guarantee: every solution from B stays in the returned box on [0, h]."""
    tau = Interval(0.0, h_hi)
    F, _ = _field(B, heads, w)
    E = B + tau * F
    for _ in range(4):
        edge = float(np.max(E.hi - E.lo))
        pad = 0.25 * edge + 1e-12 * (1.0 + float(np.max(_mag(E))))
        E = Interval._trusted(
            np.nextafter(E.lo - pad, -np.inf), np.nextafter(E.hi + pad, np.inf)
        )  # any enlargement is a valid candidate: only the test below decides
        F, _ = _field(E, heads, w)
        N = B + tau * F
        if np.all(N.lo >= E.lo) and np.all(N.hi <= E.hi):
            _, level0 = _field(N, heads, w)
            return N, level0
        E = hull(E, N)
    raise InputError("a priori box: no inclusion after 4 inflations (shorten the step)")


def jacobian_norm_bound(box: Interval, level0, heads: list[_Head], chunk: int = 200) -> float:
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
    return float(max(np.max(rc.hi) for rc in rows))


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


def _taylor_step(x, e, heads, w, h: flint.fmpq, terms: int):
    """One step of exact length h from x ± e (x doubles, e >= 0). Returns (x', e', L).
    Guarantee: the solution from every point of x ± e is in x' ± e' after time h."""
    from certified.arith.exact import fmpq_to_str

    H = Interval.from_exact(fmpq_to_str(h))
    B = Interval(x) + Interval(-e, e)
    E, level0 = _apriori(B, heads, w, float(H.hi))
    L = jacobian_norm_bound(E, level0, heads)
    XK = taylor_coefficients(E, heads, w, terms + 1)[0][terms]
    Xp = taylor_coefficients(Interval(x), heads, w, terms)[0]
    inc = XK  # Horner on the increment: ((X_K h + X_{K-1}) h + ... + X_1) h (bounds.md#taylor-step)
    for m in range(terms - 1, 0, -1):
        inc = inc * H + Xp[m]
    inc = inc * H
    enc = Interval(x) + inc
    centre = enc.mid()
    rho = float(np.max(_mag(enc - centre)))
    grow = exp(Interval(L) * H).hi  # e^{L h}, rounded up (arith exp kernel, bounds.md#exp-taylor)
    e_new = (Interval(grow) * Interval(e) + Interval(rho)).hi
    return centre, float(e_new), L, float(np.max(_mag(XK * H**terms)))


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
    from certified.arith.exact import fmpq_to_str, to_fmpq_array

    X = np.asarray(tokens, dtype=float)
    if X.ndim != 2 or X.shape[1] != pde.d or X.shape[0] < 1:
        raise InputError(f"tokens: expected an n x {pde.d} array, got shape {X.shape}")
    if not np.all(np.isfinite(X)):
        raise InputError("tokens: not finite")
    n = X.shape[0]
    if weights is None:
        wq = [flint.fmpq(1, n)] * n
    else:
        wq = list(to_fmpq_array(weights, field="weights").ravel())
        if len(wq) != n or any(q <= 0 for q in wq) or sum(wq, flint.fmpq(0)) != 1:
            raise InputError("weights: need n positive exact masses summing to 1")
    w = Interval.from_exact([fmpq_to_str(q) for q in wq])
    x, e, total, Lmax = X.copy(), 0.0, 0, 0.0
    for piece in pde.pieces:
        heads = _heads_of(piece)
        if steps is None:
            f0 = taylor_coefficients(Interval(x), heads, w, 2)[0][1]
            k = max(4, math.ceil(float(piece.duration) * 8 * (1 + float(np.max(_mag(f0))))))
        else:
            k = max(1, math.ceil(float(piece.duration) * steps))
        h, done, floor = piece.duration / k, flint.fmpq(0), piece.duration / (k * 4096)
        while done < piece.duration:
            hs = min(h, piece.duration - done)
            try:
                xn, en, L, rem = _taylor_step(x, e, heads, w, hs, terms)
                ok = rem <= tol
            except (InputError, DomainError, RangeOverflowError):
                ok = False
            if not ok:  # step control changes cost only: every accepted step is validated
                if hs < floor:
                    raise InputError(
                        "particle flow: a step could not be validated (the tokens spread too "
                        "fast; try fewer tokens or a shorter time)"
                    )
                h = hs / 2
                continue
            x, e, total, Lmax, done = xn, en, total + 1, max(Lmax, L), done + hs
            h = (
                2 * hs if rem * 2.0 ** (terms + 4) <= tol else hs
            )  # observed: rem(2h) ~ 2^(K+3) rem(h)
    return ParticleEnclosure(x, e, total, Lmax)
