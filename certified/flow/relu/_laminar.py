"""Laminar ReLU pieces: exact flow maps ``x + F(a . x)``.

A laminar piece (theorems.md section 2, "Laminar block with a shared normal") has every kink
normal parallel to one vector ``a`` and ``a . f = 0`` identically, so ``s = a . x`` is
invariant and ``Phi_tau(x) = x + tau f(x)``; consecutive laminar pieces with the same normal
compose to ``x + F(s)`` with ``F`` piecewise linear in the scalar ``s``
(proof: proofs/bounds.md#relu-laminar). ``F`` is evaluated for many points at once by sorting
the breakpoints and taking prefix sums of slopes and intercepts: O((P + N) log P) rational
operations for P neurons and N points instead of O(N P).
"""

from __future__ import annotations

from collections.abc import Sequence

import flint
import numpy as np

from certified.flow.relu._model import ReluPiece

__all__ = [
    "laminar_map_exact",
    "laminar_runs",
    "run_map_exact",
    "piece_map_ball",
    "piece_map_box",
]

_ZERO = flint.fmpq(0)


def _dot(u: np.ndarray, v: np.ndarray) -> flint.fmpq:
    total = flint.fmpq(0)
    for a, b in zip(u, v, strict=True):
        if a and b:
            total += a * b
    return total


def laminar_runs(pieces: Sequence[ReluPiece]) -> list[tuple[int, int]]:
    """Maximal runs ``[start, stop)`` of consecutive laminar pieces that compose to one map
    ``x + F(a . x)``: same normal ``a`` (planes are normalised, so parallel means equal), and
    constant pieces (no kinks) whose drift is orthogonal to ``a``. Non-laminar pieces are
    runs of length 1 marked by the caller."""
    runs: list[tuple[int, int]] = []
    j = 0
    n = len(pieces)
    while j < n:
        if not pieces[j].laminar:
            runs.append((j, j + 1))
            j += 1
            continue
        normal = pieces[j].normal
        consts = [pieces[j].c0] if normal is None else []
        k = j + 1
        while k < n and pieces[k].laminar:
            q = pieces[k]
            if q.normal is None:
                if normal is not None and _dot(normal, q.c0) != 0:
                    break
                consts.append(q.c0)
            elif normal is None:
                if any(_dot(q.normal, c) != 0 for c in consts):
                    break
                normal = q.normal
            elif any(u != v for u, v in zip(q.normal, normal, strict=True)):
                break
            k += 1
        runs.append((j, k))
        j = k
    return runs


def laminar_map_exact(
    X: np.ndarray,
    normal: np.ndarray,
    C: np.ndarray,
    mu: np.ndarray,
    beta: np.ndarray,
    alpha: flint.fmpq,
    cols: Sequence[int] | None = None,
) -> np.ndarray:
    """Exact ``x + sum_i c_i sigma(mu_i s + beta_i)``, ``s = normal . x``, for every row of X.

    The map of a laminar run (``c_i = tau w_i``, every ``c_i`` orthogonal to ``normal``, so
    ``s`` is invariant); ``sigma(z) = max(z, alpha z)``. The one implementation of the
    laminar map on the producer side (flow engines, interpolation, flow certificates).

    Parameters
    ----------
    X : object ndarray (N, d) of fmpq
    normal : object ndarray (d,) of fmpq
    C : object ndarray (P, d) of fmpq, rows ``c_i`` (``(P, len(cols))`` when ``cols`` is given)
    mu, beta : object ndarrays (P,) of fmpq, ``mu_i != 0``
    alpha : fmpq, ``0 <= alpha < 1``
    cols : the coordinates the ``c_i`` move (default: the nonzero columns of C); callers
        that know them save the products of the other columns

    Returns
    -------
    object ndarray (N, d) of fmpq (a new array)

    Guarantee: exact (proofs/bounds.md#relu-laminar): ``O((P + N) log P)`` rational
    operations per coordinate moved, by sorting the breakpoints ``-beta_i / mu_i`` and taking
    prefix sums of slopes and intercepts.
    """
    out = X.copy()
    if cols is None:  # only coordinates some c_i moves (phase 2 of construction A moves one)
        cols = [k for k in range(X.shape[1]) if any(q != 0 for q in C[:, k])]
        C = C[:, cols]
    if not len(cols) or not len(C):
        return out
    d = len(cols)
    s = X.dot(normal)
    unit = all(m == 1 for m in mu)
    if alpha:  # sigma(z) = alpha z + (1 - alpha) z_+: the alpha part is linear in s everywhere
        out[:, cols] += np.outer(s, (C * (alpha * mu)[:, None]).sum(axis=0))
        out[:, cols] += (C * (alpha * beta)[:, None]).sum(axis=0)[None, :]
        C = C * (1 - alpha)
    zero_row = np.full((1, d), _ZERO, dtype=object)
    for positive in (True, False):
        sel = np.array([(m > 0) == positive for m in mu], dtype=bool)
        if not sel.any():
            continue
        m_, b_, c_ = mu[sel], beta[sel], C[sel]
        brk = -b_ if unit else -b_ / m_
        order = sorted(range(len(brk)), key=brk.__getitem__)
        brk, m_, b_, c_ = brk[order], m_[order], b_[order], c_[order]
        sl, ic = (c_ if unit else c_ * m_[:, None]), c_ * b_[:, None]
        # (mu s + beta)_+ is active where s is beyond the breakpoint -beta/mu
        if positive:  # active where breakpoint < s: prefix sums
            idx = np.searchsorted(brk, s, side="left")
            cs = np.concatenate([zero_row, np.cumsum(sl, axis=0)])
            ci = np.concatenate([zero_row, np.cumsum(ic, axis=0)])
        else:  # active where breakpoint > s: suffix sums
            idx = np.searchsorted(brk, s, side="right")
            cs = np.concatenate([np.cumsum(sl[::-1], axis=0)[::-1], zero_row])
            ci = np.concatenate([np.cumsum(ic[::-1], axis=0)[::-1], zero_row])
        out[:, cols] += cs[idx] * s[:, None] + ci[idx]
    return out


def run_map_exact(pieces: Sequence[ReluPiece], X: np.ndarray) -> np.ndarray:
    """Exact image of rational points under a laminar run.

    Parameters
    ----------
    pieces : laminar pieces with a common normal (one run of :func:`laminar_runs`)
    X : object ndarray (N, d) of fmpq

    Returns
    -------
    object ndarray (N, d) of fmpq

    Guarantee: exact (proofs/bounds.md#relu-laminar).
    """
    drift = sum((q.c0 * q.tau for q in pieces[1:]), pieces[0].c0 * pieces[0].tau)
    out = X + drift[None, :]
    kinks = [(q, i, h, lam) for q in pieces for i, h, lam in q.kinks]
    if not kinks:
        return out
    # one term per kink neuron: c = tau w_i, sigma(lam s + lam bhat_h), alpha shared by the run
    C = np.array([q.W[:, i] * q.tau for q, i, _, _ in kinks], dtype=object).reshape(-1, X.shape[1])
    mu = np.array([lam for *_, lam in kinks], dtype=object)
    beta = np.array([q.planes_b[h] * lam for q, _, h, lam in kinks], dtype=object)
    normal = next(q.normal for q in pieces if q.normal is not None)
    return laminar_map_exact(out, normal, C, mu, beta, pieces[0].alpha)


def _sigma_ball(z: flint.arb, alpha: flint.fmpq, alpha_arb: flint.arb) -> flint.arb:
    """Enclosure of sigma over a ball (sigma is monotone and 1-Lipschitz)."""
    pos = z.nonnegative_part()
    if alpha == 0:
        return pos
    return alpha_arb * z + (1 - alpha_arb) * pos


def piece_map_ball(piece: ReluPiece, y: list[flint.arb]) -> list[flint.arb]:
    """Ball image of a ball point ``y`` under a laminar piece: ``y + tau f(y)`` with sigma
    evaluated on balls. Call inside a precision context.

    Guarantee: encloses Phi_tau(x) for every x in y (proofs/bounds.md#relu-laminar).
    """
    d = piece.d
    tau = flint.arb(piece.tau)
    alpha_arb = flint.arb(piece.alpha)
    field = [flint.arb(v) for v in piece.c0]
    if piece.kinks:
        a = [flint.arb(v) for v in piece.normal]
        s = sum((ai * yi for ai, yi in zip(a, y, strict=True)), flint.arb(0))
        for i, h, lam in piece.kinks:
            z = flint.arb(lam) * s + flint.arb(lam * piece.planes_b[h])
            sz = _sigma_ball(z, piece.alpha, alpha_arb)
            w = piece.W[:, i]
            for r in range(d):
                if w[r]:
                    field[r] = field[r] + flint.arb(w[r]) * sz
    return [yi + tau * fi for yi, fi in zip(y, field, strict=True)]


def piece_map_box(
    piece: ReluPiece, c: list[flint.arb], J: flint.arb_mat, rad: list[flint.arb]
) -> tuple[list[flint.arb], flint.arb_mat]:
    """Image of the set ``{c + J (rad * u) : |u|_inf <= 1}`` under a laminar piece, in the
    same form, by Clarke's mean value theorem: ``Phi(x) - Phi(c) = D (x - c)`` with ``D`` in
    ``I + tau sum_i w_i lam_i sigma'_i ahat^T``, ``sigma'_i`` in ``{1}``, ``{alpha}`` or
    ``[alpha, 1]`` over the hull of the set. Call inside a precision context.

    Guarantee: the returned set contains the image (proofs/bounds.md#relu-box-laminar).
    """
    d = piece.d
    new_c = piece_map_ball(piece, c)
    if not piece.kinks:
        return new_c, J
    tau = flint.arb(piece.tau)
    a = [flint.arb(v) for v in piece.normal]
    s_c = sum((ai * ci for ai, ci in zip(a, c, strict=True)), flint.arb(0))
    aJ = flint.arb_mat([a]) * J  # 1 x d
    spread = sum((aJ[0, k].abs_upper() * rad[k] for k in range(d)), flint.arb(0))
    s_hull = s_c + flint.arb(0, spread.abs_upper())
    # proof: proofs/bounds.md#relu-box-laminar (Clarke's mean value theorem)
    # u = sum_i tau w_i lam_i sigma'_i, then D = I + u a^T
    u = [flint.arb(0)] * d
    one = flint.arb(1)
    alpha = flint.arb(piece.alpha)
    for i, h, lam in piece.kinks:
        z = flint.arb(lam) * s_hull + flint.arb(lam * piece.planes_b[h])
        if z > 0:
            sl = one
        elif z < 0:
            sl = alpha
        else:
            sl = alpha.union(one)
        coef = tau * flint.arb(lam) * sl
        w = piece.W[:, i]
        for r in range(d):
            if w[r]:
                u[r] = u[r] + flint.arb(w[r]) * coef
    D = flint.arb_mat(
        [[(one if r == k else flint.arb(0)) + u[r] * a[k] for k in range(d)] for r in range(d)]
    )
    return new_c, D * J
