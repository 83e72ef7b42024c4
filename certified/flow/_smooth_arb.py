"""The validated Taylor method for tanh / sigmoid fields at any precision, in arb.

Same method as the compiled float64 kernels (proofs/bounds.md#picard, #taylor-step,
#lognorm), one point at a time in python-flint ball arithmetic at ``prec`` bits. The ball
arithmetic of the Taylor recursion, the field and the log-norm bound is the checker's
(``certified.checker._taylor``): the checker is the trusted kernel, so reusing it costs no
soundness, and a certificate produced here is still replayed step by step by the checker.
"""

from __future__ import annotations

import flint
from flint import arb, fmpq

from certified.arith.ball import mid_rad
from certified.checker._taylor import _field, _lognorm_upper, _taylor

__all__ = ["arb_smooth_piece"]


def _exact(x: arb) -> fmpq:
    """The exact value of a ball of radius 0 (an endpoint or midpoint)."""
    return mid_rad(x)[0]


def _picard_box(c, r, h_hi, W, A, b, activation, prec):
    """A box B with X + [0, h] f(B) inside B for X = c +- r, or None."""
    d = len(c)
    tiny = arb(2) ** (10 - prec)
    X_lo = [(cj - r).lower() for cj in c]
    X_hi = [(cj + r).upper() for cj in c]
    f = _field(
        [arb(lo).union(arb(hi)) for lo, hi in zip(X_lo, X_hi, strict=True)], W, A, b, activation
    )
    lo_b, hi_b = [], []
    for j in range(d):
        a = h_hi * min(arb(0), f[j].lower())
        bb = h_hi * max(arb(0), f[j].upper())
        w = (arb("0.1") * (bb - a) + tiny * (abs(X_lo[j]) + abs(X_hi[j]) + 1)).upper()
        lo_b.append((X_lo[j] + a - w).lower())
        hi_b.append((X_hi[j] + bb + w).upper())
    for _ in range(4):
        B = [arb(lo).union(arb(hi)) for lo, hi in zip(lo_b, hi_b, strict=True)]
        f = _field(B, W, A, b, activation)
        n_lo = [(X_lo[j] + h_hi * min(arb(0), f[j].lower())).lower() for j in range(d)]
        n_hi = [(X_hi[j] + h_hi * max(arb(0), f[j].upper())).upper() for j in range(d)]
        if all(lo_b[j] <= n_lo[j] and n_hi[j] <= hi_b[j] for j in range(d)):
            return n_lo, n_hi  # N is itself an a priori box (f(N) inside f(B))
        for j in range(d):
            w = (arb("0.1") * (n_hi[j] - n_lo[j])).upper()
            lo_b[j] = (min(lo_b[j], n_lo[j]) - w).lower()
            hi_b[j] = (max(hi_b[j], n_hi[j]) + w).upper()
    return None


def arb_smooth_piece(centres, radii, W, A, b, activation, tau: fmpq, m: int, K: int, prec: int):
    """m equal steps of the validated Taylor method for every point, at ``prec`` bits.

    centres: per point a list of d exact fmpq; radii: per point an exact fmpq. Returns
    (centres, radii, log_lipschitz, chain) with chain = per point (centres (m+1), radii (m+1),
    boxes (m)) of exact numbers, or None if a Picard inclusion fails (shorten the step).
    """
    old = flint.ctx.prec
    flint.ctx.prec = prec
    try:
        h = arb(tau / m)
        h_hi = h.upper()
        Wa = [[arb(v) for v in row] for row in W]
        Aa = [[arb(v) for v in row] for row in A]
        ba = [arb(v) for v in b]
        margin = 1 + arb(2) ** (20 - prec)
        out_c, out_r, out_l, chain = [], [], [], []
        for c_q, r_q in zip(centres, radii, strict=True):
            cs, rs, boxes = [list(c_q)], [r_q], []
            log_l = arb(0)
            for _ in range(m):
                c = [arb(v) for v in cs[-1]]
                r = arb(rs[-1])
                box = _picard_box(c, r, h_hi, Wa, Aa, ba, activation, prec)
                if box is None:
                    return None
                B = [arb(lo).union(arb(hi)) for lo, hi in zip(*box, strict=True)]
                rem = _taylor(B, Wa, Aa, ba, activation, K, wide=True)[K]
                coef = _taylor(c, Wa, Aa, ba, activation, K)
                E = []
                for j in range(len(c)):
                    s = rem[j]
                    for k in range(K - 1, -1, -1):
                        s = s * h + coef[k][j]
                    E.append(s)
                ell = _lognorm_upper(B, Wa, Aa, ba, activation)
                log_l += ell * h
                nxt = [_exact(e.mid()) for e in E]
                dist2 = arb(0)
                for e, cj in zip(E, nxt, strict=True):
                    dd = e - arb(cj)
                    dist2 += dd * dd
                new_r = ((ell * h).exp() * r + arb(dist2.upper()).sqrt()) * margin
                cs.append(nxt)
                rs.append(_exact(new_r.upper()))
                boxes.append([(_exact(lo), _exact(hi)) for lo, hi in zip(*box, strict=True)])
            out_c.append(cs[-1])
            out_r.append(rs[-1])
            out_l.append(log_l.upper())
            chain.append((cs, rs, boxes))
        return out_c, out_r, out_l, chain
    finally:
        flint.ctx.prec = old
