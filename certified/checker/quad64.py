"""The Taylor step of quadratic sets ``x^ + M u + Q(u, u) / 2 + G e`` in float64 intervals.

hints.sets "quadratic" (proofs/bounds.md#quadratic): a zonotope of :mod:`.lohner64` whose
curvature is carried as a point tensor Q (sets, d, d, d) in the initial box's coordinates u,
so that the part of a step's error that is second order in the box's width is not boxed: with
``A = D Phi_h(x^)`` (the variational series at the centre), ``D2M ⊇ M^T D^2 Phi_h(X) M`` and
``D2 ⊇ D^2 Phi_h(X)`` over the hull X (hyper-dual jets, :mod:`.duals64`, seeded with M, resp. I,
remainder over the a priori box B), ``M' = mid(A M)``, ``Q' = mid(A Q + mid D2M)``,
``G' = mid(A G)``; what the midpoints drop and the third-order terms of the Lagrange form become
the step's error box, appended to G as in #zonotope."""

from __future__ import annotations

import numpy as np

from .duals64 import unpack
from .ivec import Iv
from .jets64 import jets64
from .taylor import ReplayError

__all__ = ["quadratic_hull", "quadratic_step", "spread"]


def _p(x: np.ndarray) -> Iv:
    return Iv(x, x.copy())


def quadratic_hull(Q: Iv, U: Iv) -> Iv:
    """Enclosures of ``{sum_jk Q_ijk u_j u_k : Q in Q, u in U}`` (Q (n, d, g, g), U (n, g)):
    the squares ``u_j^2`` over ``[mig^2, mag^2]``, the products ``u_j u_k`` (j != k) by interval
    products, each term times Q_ijk, then one sum over j and k."""
    n, g = U.shape
    UU = U[:, :, None] * U[:, None, :]
    mag = U.mag()
    mig = np.where(U.lo > 0, U.lo, np.where(U.hi < 0, -U.hi, 0.0))
    sq = Iv((_p(mig) * _p(mig)).lo, (_p(mag) * _p(mag)).hi)
    j = np.arange(g)
    UU.lo[:, j, j], UU.hi[:, j, j] = sq.lo, sq.hi
    terms = Q * UU[:, None, :, :]
    flat = Iv(terms.lo.reshape(n, Q.shape[1], g * g), terms.hi.reshape(n, Q.shape[1], g * g))
    return flat.sum(axis=2)


def spread(P: Iv, mid: np.ndarray) -> Iv:
    """``(P - mid) [-1, 1]^m`` summed over the generators: ``+/- |P - mid| 1``."""
    s = (P - _p(mid)).mag()
    w = Iv(s, s).sum(axis=2).hi
    return Iv(-w, w)


def _lagrange(D2: Iv, eta: Iv, MU: Iv) -> Iv:
    """``eta^T D2_i (M u + eta / 2)`` over the boxes (the third-order rest of the Lagrange form)."""
    n, d = eta.shape
    E = D2 * eta[:, None, :, None] * (MU + eta.scale_pos(np.float64(0.5)))[:, None, None, :]
    return Iv(E.lo.reshape(n, d, d * d), E.hi.reshape(n, d, d * d)).sum(axis=2)


def _mid(x: Iv) -> np.ndarray:
    return (x.lo + x.hi) / 2  # any doubles


def quadratic_step(prog, params, S, hb: Iv, B: Iv, K: int, m: int, X: Iv, VB: Iv):
    """One step of the quadratic sets S (lohner64.Sets with Q) of length hb (a point interval)
    with the a priori boxes B (the Picard inclusion checked by the caller), the hulls X (with
    the centres) and ``V_B ⊇ D Phi_t(B)``, t in [0, h] (bounds.md#variational).
    Guarantee: the returned sets contain Phi_h(x) for every x in S (bounds.md#quadratic)."""
    from .lohner64 import _poly, _stack, generators

    n, d = B.shape
    eye = np.broadcast_to(np.eye(d), (n, d, d)).copy()
    centre = _p(S.centre)
    # Phi_h(x^): order-K series at the centres, remainder over B
    both = jets64(prog, params, _stack(centre, B), None, K)
    inc = hb * _poly([both[k][:n, :, 0] for k in range(1, K)] + [both[K][n:, :, 0]], hb)
    # A = D Phi_h(x^): the variational series at the centres, remainder over B with seeds V_B
    va = jets64(prog, params, _stack(B, centre), _stack(VB, _p(eye)), m)
    A = _poly([va[k][n:, :, 1:] for k in range(m)] + [va[m][:n, :, 1:]], hb)
    # W_B ⊇ D^2 Phi_t(x)(e_a, e_b) and W_M ⊇ D^2 Phi_t(x)(M e_a, M e_b) over t in [0, h], x in
    # X: [0, h] V_B D^2 f(B)(V_B ., V_B .), resp. (V_B M ., V_B M .) (order-1 hyper-duals over B)
    zero, h0 = Iv.zeros((n, d, d, d)), Iv(np.zeros(1), hb.hi)
    VBM = VB[:, :, :, None].scale(S.M[:, None, :, :]).sum(axis=2)
    W = []
    for seeds in (VB, VBM):
        d2f = unpack(jets64(prog, params, B, seeds, 1, second=zero)[1][..., 1 + d :], d)
        W.append((VB[:, :, :, None, None] * d2f[:, None]).sum(axis=2) * h0)
    WB, WM = W
    # D2M ⊇ M^T D^2 Phi_h(X) M: the hyper-dual series over X with seeds M, remainder over B with
    # seeds (V_B M, W_M): the curvature in the box's coordinates, each neuron's rank-one term
    # kept (M^T D2 M in interval products would sum |M| over the input axes)
    W2 = Iv(np.concatenate([WM.lo, zero.lo]), np.concatenate([WM.hi, zero.hi]))
    hv = jets64(prog, params, _stack(B, X), _stack(VBM, _p(S.M)), m, second=W2)
    D2M = unpack(_poly([hv[k][n:, :, 1 + d :] for k in range(m)] + [hv[m][:n, :, 1 + d :]], hb), d)
    HM = _mid(D2M)
    # D2 ⊇ D^2 Phi_h(X), J ⊇ D Phi_h(X) (state coordinates, for the third-order rest E2 and the
    # generators' spread): the same series with seeds (I, 0) over X, (V_B, W_B) over B
    W2 = Iv(np.concatenate([WB.lo, zero.lo]), np.concatenate([WB.hi, zero.hi]))
    hx = jets64(prog, params, _stack(B, X), _stack(VB, _p(eye)), m, second=W2)
    D2 = unpack(_poly([hx[k][n:, :, 1 + d :] for k in range(m)] + [hx[m][:n, :, 1 + d :]], hb), d)
    J = _poly([hx[k][n:, :, 1 : 1 + d] for k in range(m)] + [hx[m][:n, :, 1 : 1 + d]], hb)
    U = S.U
    AM = A[:, :, :, None].scale(S.M[:, None, :, :]).sum(axis=2)
    Qn = A[:, :, :, None, None].scale(S.Q[:, None]).sum(axis=2) + _p(HM)
    M2, Q2 = _mid(AM), _mid(Qn)
    # the error box: the midpoints' rest, E1 = (D2M - HM)(u, u) / 2 and
    # E2 = eta^T D2 (M u + eta / 2) with eta = Q(u, u) / 2 + G e (third order)
    half = np.float64(0.5)
    z = (centre - _p(S.centre + _mid(inc))) + inc
    z = z + ((AM - _p(M2)) * U[:, None, :]).sum(axis=2)
    z = z + quadratic_hull(Qn - _p(Q2), U).scale_pos(half)
    z = z + quadratic_hull(D2M - _p(HM), U).scale_pos(half)
    # the generators: two bounds of the same rest, intersected. (i) in the Lagrange form with
    # eta = Q(u, u)/2 + G e, G' = mid(A G); (ii) eta = Q(u, u)/2 only, G e by the mean value
    # over X, N G e with N in J ⊇ D Phi_h(X)
    eta = quadratic_hull(_p(S.Q), U).scale_pos(half)
    MU = (U[:, None, :].scale(S.M)).sum(axis=2)
    z1, z2, G = z, z, S.G
    if G.shape[2]:
        AG = A[:, :, :, None].scale(G[:, None, :, :]).sum(axis=2)
        JG = J[:, :, :, None].scale(G[:, None, :, :]).sum(axis=2)
        G = _mid(AG)
        z1, z2 = z + spread(AG, G), z + spread(JG, G)
        w = Iv(np.abs(S.G), np.abs(S.G)).sum(axis=2).hi
        z1 = z1 + _lagrange(D2, eta + Iv(-w, w), MU)
    else:
        z1 = z1 + _lagrange(D2, eta, MU)
    z2 = z2 + _lagrange(D2, eta, MU)
    z = Iv(np.maximum(z1.lo, z2.lo), np.minimum(z1.hi, z2.hi))
    if not (z.lo <= z.hi).all():  # both contain the rest: only an error elsewhere empties it
        raise ReplayError(f"set {int(np.argwhere(~(z.lo <= z.hi))[0, 0])}: empty error box")
    return generators(G, z, S.centre + _mid(inc), M2, U, Q2)
