"""Boxes of rule relu-vectorised in mean-value form (``hints.form`` "mean-value"): a box is
carried as a zonotope ``c + G xi + [-e, e]`` (|xi|_inf <= 1, G doubles, initially diag(r0)); the
centre ``c`` advances by the point steps of the plan (region steps ``R``, ``r<m>``, windows
``w<m>``), ``G`` by ``e^(h M_mid)`` with ``M_mid = W diag(s_mid) A``; each neuron's difference
quotient of sigma between a trajectory of the set and the centre's lies in ``[lo, hi]``
(exactly 1 or alpha where the sign is decided over the whole set), and the difference to
``s_mid`` is injected as one generator along ``w_i`` per undecided neuron
(proofs/bounds.md#relu-mv)."""

from __future__ import annotations

import math
from typing import Any

import flint
import numpy as np

from ._parse import Rejected, array, fields
from ._relu_vec_plan import MV_COST, _limit, plans
from ._relu_vec_rule import (
    CHUNK,
    ETA,
    U,
    VecPiece,
    _field,
    _matvec,
    _up_float,
    norm_up,
    rad,
    region_step,
    window_step,
)
from .ivec import dn, fpu_ok, up


def _nn(x, n: int):
    """>= the exact products of nonnegative float operands, inner dimension n (bounds.md#matmul:
    x^T y <= (fl(x^T y) + n eta) / (1 - gamma_n))."""
    return up(up(x * (1.0 + 2.0 * (n + 2) * U)) + 2 * n * ETA)


def _mm(Am, Ar, Bm, Br, n: int):
    """[A][B] in midpoint-radius form, inner dimension n (bounds.md#relu-mv, products)."""
    g = (n + 1) * U
    absB = np.abs(Bm)
    R = np.abs(Am) @ rad(g * absB if Br is None else Br + g * absB)
    if Ar is not None:
        R = R + Ar @ (absB if Br is None else rad(absB + Br))
    return Am @ Bm, rad(R * (1.0 + 4.0 * (n + 2) * U))


def _window_span(vp: VecPiece, c, w):
    """Neuron values of the centre's trajectory over a window of length <= w (bounds.md#relu-mv,
    the window lemma with r = 0): z(c) +- |a_i| |f(c)| w (1 + 2 L w)."""
    Zm, Zr = _matvec(c, rad(vp.g_d * np.abs(c)), vp.At, vp.Aabs, vp.F_d, vp.b)
    fm, fr = _field(vp, Zm, Zr)
    R = up(up(norm_up(up(np.abs(fm) + fr)) * w) * up(1.0 + up(2.0 * up(vp.L * w))))
    m = up(R[:, None] * vp.anorm[None, :])
    return dn(dn(Zm - Zr) - m), up(up(Zm + Zr) + m)


def _psi(vp: VecPiece, sm, sr, h, whole: bool = False):
    """[Psi] >= every transition matrix over a time in [0, h] of delta' = W D(t) A delta with
    D(t) in diag(<sm, sr>): Peano-Baker terms (h^k / k!) [M]^k and the tail (bounds.md#relu-mv)."""
    n, d = sm.shape[0], vp.d
    Xm = vp.W[None] * sm[:, None, :]  # W diag(s): (n, d, p)
    Mm, Mr = _mm(Xm, rad(np.abs(vp.W)[None] * sr[:, None, :] + U * np.abs(Xm)), vp.A, None, vp.p)
    Sm, Sr = np.broadcast_to(np.eye(d), (n, d, d)).copy(), np.zeros((n, d, d))
    Tm, Tr = Sm.copy(), Sr.copy()
    for k in range(1, vp.K):  # T_k = T_{k-1} [M] h / k
        Pm, Pr = _mm(Tm, Tr, Mm, Mr, d)
        fm = (h / (2 * k if whole else k))[:, None, None]  # whole: any time in [0, h]
        fr = rad(fm + U * fm) if whole else rad(U * fm)
        Tm, Tr = Pm * fm, rad(np.abs(Pm) * rad(fr + U * fm) + Pr * rad(fm + fr))
        Sm = Sm + Tm
        Sr = rad((Sr + Tr) + U * np.abs(Sm))
    coef = np.ones(n)
    for _ in range(vp.K):
        coef = up(coef * up(vp.L * h))
    coef = up(coef * math.nextafter(1.65 / math.factorial(vp.K), math.inf))  # e^(1/2) <= 1.65
    return Sm, up(Sr + coef[:, None, None])


def _slopes(vp: VecPiece, zlo, zhi, spread):
    """Midpoint-radius slopes containing every difference quotient between a trajectory whose
    neuron values are within ``spread`` of the centre's and the centre's, whose values are in
    [zlo, zhi] (bounds.md#relu-mv, slopes); and the neurons not decided over the set."""
    on, off = dn(zlo - spread) >= 0, up(zhi + spread) <= 0  # decided over the whole set
    a_lo, a_hi = dn(vp.a_m - vp.a_r), up(vp.a_m + vp.a_r)
    c_on, c_off = zlo > 0, zhi < 0  # the centre's side: the difference quotients are closer
    q = np.clip(dn(np.where(c_on, zlo, -zhi) / spread), 0.0, 1.0)  # <= dist / spread
    lo = np.where(on, 1.0, np.where(c_on, dn(dn(a_lo * dn(1.0 - q)) + q), a_lo))
    hi = np.where(
        on, 1.0, np.where(off, a_hi, np.where(c_off, up(up(1.0 - q) + up(a_hi * q)), 1.0))
    )
    sm = 0.5 * (lo + hi)
    return sm, np.where(lo == hi, 0.0, rad(np.maximum(hi - sm, sm - lo))), ~(on | off)


def zonotope_step(vp: VecPiece, S, span, h, ball, whole: bool = False):
    """One step of the sets c + G xi + [-e, e] (|xi|_inf <= 1; G doubles (n, d, m)) over a time
    in [0, h] (``whole``: any time in [0, h]), given ``span`` (the centre's neuron values over
    the step) and ``ball`` (the radius of the centre's image): (G', e') and per set the number
    of neurons whose sign is not decided over the set (bounds.md#relu-mv)."""
    (G, e), (zlo, zhi) = S, span
    d, p, m = vp.d, vp.p, G.shape[2]
    AGm, AGr = _mm(vp.A, None, G, None, d)  # A G: (n, p, m)
    g = up(_nn(up(np.abs(AGm) + AGr).sum(axis=2), m) + _nn(e @ vp.Aabs, d))
    D = norm_up(up(_nn(np.abs(G).sum(axis=2), m) + e))
    grow = up(up(vp.L * h) + up(up(vp.L * h) ** 2))  # e^x - 1 <= x + x^2 on [0, 1]
    spread = up(g + up(vp.anorm[None, :] * up(grow * D)[:, None]))
    sm, sr, und = _slopes(vp, zlo, zhi, spread)
    Qm, Qr = _psi(vp, sm, sr, h, True)  # every transition over a time in [0, h]
    AQm, AQr = _mm(vp.A, None, Qm, Qr, d)
    Tm, Tr = _mm(AQm, AQr, G, None, d)  # |a_i^T delta(s)| <= |A [Q] G| 1 + |A [Q]| e
    tight = up(
        _nn(up(np.abs(Tm) + Tr).sum(axis=2), m)
        + _nn((up(np.abs(AQm) + AQr) @ e[..., None])[..., 0], d)
    )
    tight = np.minimum(tight, spread)
    sm, sr, und = _slopes(vp, zlo, zhi, tight)  # narrower, still containing D(t)
    Em, Er = _psi(vp, sm, np.zeros_like(sr), h, whole)  # e^(h M_mid), M_mid = W diag(sm) A
    Gm, Gr = _mm(Em, Er, G, None, d)
    beta = up(up(h[:, None] * sr) * tight)  # >= int |theta_i|
    Vm, Vr = _mm(Qm, Qr, vp.W, None, p)  # [Q] w_i: (n, d, p)
    inj = Vm * np.where(und, beta, 0.0)[:, None, :]  # generators; the others and rounding: box
    box = up(_nn(Gr.sum(axis=2), m) + _nn((up(np.abs(Em) + Er) @ e[..., None])[..., 0], d))
    box = up(box + _nn(up(up(U * np.abs(inj)) + up(Vr * beta[:, None, :])).sum(axis=2), p))
    rest = np.where(und, 0.0, beta)[:, None, :]
    box = up(up(box + _nn(up(up(np.abs(Vm) + Vr) * rest).sum(axis=2), p)) + ball[:, None])
    return _reduce(np.concatenate([Gm, inj[:, :, und.any(axis=0)]], axis=2), box), und.sum(axis=1)


def _reduce(G, e, keep: int = 32):
    """At most ``keep`` generators: in a set with more nonzero ones, the smallest (1-norms)
    become a diagonal, which contains them (Girard's reduction: sum_j g_j xi_j lies in the box
    of radius sum_j |g_j|). Zero columns change nothing: a set's result is its own."""
    d, m = G.shape[1:]
    norms = np.abs(G).sum(axis=1)
    G = np.take_along_axis(G, np.argsort(-norms, axis=1, kind="stable")[:, None, :], axis=2)
    if m <= keep:
        return G, e
    big = (norms > 0).sum(axis=1) > keep
    rest = _nn(np.abs(G[big, :, keep - d :]).sum(axis=2), m)
    out = G[:, :, :keep].copy()
    out[big, :, keep - d :] = 0.0
    out[np.nonzero(big)[0][:, None], np.arange(d), keep - d + np.arange(d)] = rest
    return out, e


def _starts(sets: list):
    """Centres (doubles near the midpoints) and radii r0 per coordinate: box - c in [-r0, r0]."""
    n, d = len(sets), len(sets[0])
    c, r0 = np.empty((n, d)), np.empty((n, d))
    for q, row in enumerate(sets):
        for k, (lo, hi) in enumerate(row):
            mid = (lo + hi) / 2
            c[q, k] = x = int(mid.p) / int(mid.q)
            if not math.isfinite(x):
                raise Rejected(f"instance: initial set {q} lies beyond the double range")
            fx = flint.fmpq(*x.as_integer_ratio())
            e = max(hi - fx, fx - lo)
            r0[q, k] = _up_float(flint.arb(e)) if e else 0.0
    return c, r0


def replay_mean_value(pieces: list, sets: list, hints: Any, al: flint.fmpq, trace=None):
    """The replay of boxes in mean-value form: (lo, hi, failed) as replay_relu_vectorised.
    ``trace`` (a list): per piece, per round, the sets and their undecided neurons (untrusted
    diagnostics for the producer)."""
    fields(hints, "hints", ("method", "form", "pieces", "steps"))
    if hints["form"] != "mean-value":
        raise Rejected("hints.form: expected 'mean-value'")
    if not fpu_ok():
        raise Rejected("floating point: not round-to-nearest with gradual underflow here")
    raw = array(hints["pieces"], "hints.pieces", len(pieces))
    where = [f"hints.pieces[{j}]" for j in range(len(pieces))]
    vps = [VecPiece(p, al, h, w) for p, h, w in zip(pieces, raw, where, strict=True)]
    plan, cost = plans(hints["steps"], vps, len(sets))
    count = [
        sum(t.size for t, _, _ in rounds) + len(sets) * (vp.tail > 0)
        for vp, rounds in zip(vps, plan, strict=True)
    ]
    _limit(
        cost
        + sum(
            MV_COST * c * (vp.K + 3) * vp.d**2 * (vp.d + vp.p)
            for c, vp in zip(count, vps, strict=True)
        )
    )
    if any((k == 3).any() for rounds in plan for _, k, _ in rounds):
        raise Rejected("hints.steps: straddle steps (s) are not steps of the mean-value form")
    with np.errstate(all="ignore"):
        return _replay(vps, plan, *_starts(sets), trace)


def _replay(vps, plan, c, r0, trace):
    n, d = c.shape
    G, e = np.zeros((n, d, d)), np.zeros((n, d))
    G[:, np.arange(d), np.arange(d)] = r0
    dead, failed = np.zeros(n, dtype=bool), {}
    for j, (vp, rounds) in enumerate(zip(vps, plan, strict=True)):
        c_mask, c_mu = np.zeros((n, vp.p), dtype=bool), np.full(n, np.inf)
        tail = [] if not vp.tail else [(np.arange(n), np.zeros(n, dtype=np.int8), None)]
        log: list = []
        for s, (sets, kinds, ticks) in enumerate(rounds + tail):
            for kind in (1, 2, 0):
                pick = (kinds == kind) & ~dead[sets]
                for a in range(0, int(pick.sum()), CHUNK):
                    sel = sets[pick][a : a + CHUNK]
                    zero = np.zeros(sel.size)
                    h = (
                        np.full(sel.size, vp.tail)
                        if kind == 0
                        else ticks[pick][a : a + CHUNK] * vp.tick
                    )
                    if kind == 1:
                        cache = (c_mask[sel], c_mu[sel])
                        ok, cn, rn, span = region_step(vp, c[sel], zero, h, cache, span=True)
                        c_mask[sel], c_mu[sel] = cache
                        for q in sel[~ok]:
                            failed[int(q)], dead[q] = (j, s), True
                    else:
                        ok = np.ones(sel.size, dtype=bool)
                        cn, rn = window_step(vp, c[sel], zero, zero if kind == 0 else h, h)
                        span = _window_span(vp, c[sel], h)
                    sel, span = sel[ok], (span[0][ok], span[1][ok])
                    if sel.size:
                        (Gn, e[sel]), cost = zonotope_step(
                            vp, (G[sel], e[sel]), span, h[ok], rn[ok], kind == 0
                        )
                        if Gn.shape[2] > G.shape[2]:
                            G = np.concatenate([G, np.zeros((n, d, Gn.shape[2] - G.shape[2]))], 2)
                        G[sel] = 0.0
                        G[sel, :, : Gn.shape[2]] = Gn
                        c[sel] = cn[ok]
                        log.append((s, sel, cost))
        if trace is not None:
            trace.append(log)
    half = up(_nn(np.abs(G).sum(axis=2), G.shape[2]) + e)
    return dn(c - half), up(c + half), failed
