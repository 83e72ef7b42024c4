"""Compiled kernels of the validated Taylor method for smooth neural ODE fields.

Field ``f(x) = W s(A x + b)`` with ``s = tanh`` or the logistic sigmoid; every parameter is
an interval (float64 endpoints, outward-rounded from the exact values). All arithmetic is
scalar interval arithmetic with the outward rounding of :mod:`certified.arith._kernels`
(``dn``/``up``, proofs/bounds.md#pred-succ); the activation is enclosed by the proved tanh /
sigmoid kernels. Loops run over points; per-point work arrays are allocated once per call.

The method (proofs/bounds.md#taylor-step, #picard, #lognorm): for a point x^ and a step h,
* an a priori box B with X + [0, h] f(B) inside B (Picard; X = x^ +- r) contains every
  trajectory from X over [0, h];
* Phi_h(x^) lies in sum_{k<K} x_k(x^) h^k + x_K(B) h^K (Lagrange remainder of the solution's
  Taylor series, whose K-th coefficient at an intermediate time is the coefficient map at a
  point of B, the field being autonomous);
* every pair of solutions starting in X stays in the convex box B, so their distance grows at
  most like exp(l h) with l >= mu_2(Df) on B (logarithmic norm, via Gershgorin on the
  symmetric part of an interval Jacobian).
"""

from __future__ import annotations

import math

import numpy as np

from certified.arith._kernels import (
    _exp_point,
    _sigmoid_point,
    _tanh_from_m,
    _tanh_m,
    dn,
    kernel,
    up,
)

TANH, SIGMOID = 0, 1


@kernel
def _imul(al, ah, bl, bh):
    p1 = al * bl
    p2 = al * bh
    p3 = ah * bl
    p4 = ah * bh
    return dn(min(min(p1, p2), min(p3, p4))), up(max(max(p1, p2), max(p3, p4)))


@kernel
def _act(ul, uh, act):
    """Enclosure of s([ul, uh]) for the increasing activation s."""
    if act == TANH:
        lo = _tanh_from_m(ul, _tanh_m(ul, True)[0], True)
        hi = _tanh_from_m(uh, _tanh_m(uh, False)[0], False)
        return lo, hi
    return _sigmoid_point(ul)[0], _sigmoid_point(uh)[1]


@kernel
def _affine_row(i, xl, xh, Al, Ah, bl, bh):
    """Row i of A X + b over a box X, outward rounded: (lo, hi)."""
    lo = bl[i]
    hi = bh[i]
    for j in range(xl.shape[0]):
        a, b = _imul(Al[i, j], Ah[i, j], xl[j], xh[j])
        lo = dn(lo + a)
        hi = up(hi + b)
    return lo, hi


@kernel
def _field(xl, xh, Wl, Wh, Al, Ah, bl, bh, act, ul, uh, yl, yh, fl, fh):
    """f(X) = W s(A X + b) over a box X (interval evaluation), into fl, fh."""
    d = xl.shape[0]
    p = bl.shape[0]
    for i in range(p):
        lo, hi = _affine_row(i, xl, xh, Al, Ah, bl, bh)
        ul[i] = lo
        uh[i] = hi
        yl[i], yh[i] = _act(lo, hi, act)
    for j in range(d):
        lo = 0.0
        hi = 0.0
        for i in range(p):
            a, b = _imul(Wl[j, i], Wh[j, i], yl[i], yh[i])
            lo = dn(lo + a)
            hi = up(hi + b)
        fl[j] = lo
        fh[j] = hi


@kernel
def _taylor(xl, xh, Wl, Wh, Al, Ah, bl, bh, act, K, X, U, Y, Z):
    """Taylor coefficients x_0..x_K of the solution through the box [xl, xh] (interval
    evaluation of the coefficient maps), into X[k, j, 0/1]; U, Y, Z are work arrays.

    u = A x + b, y = s(u), z = s'(u) expressed through y (tanh: 1 - y^2; sigmoid: y - y^2),
    (k+1) y_{k+1} = sum_{j<=k} (j+1) u_{j+1} z_{k-j}, x_{k+1} = W y_k / (k+1).
    proof: proofs/bounds.md#taylor-step
    """
    d = xl.shape[0]
    p = bl.shape[0]
    for j in range(d):
        X[0, j, 0] = xl[j]
        X[0, j, 1] = xh[j]
    for i in range(p):
        lo, hi = _affine_row(i, xl, xh, Al, Ah, bl, bh)
        U[0, i, 0] = lo
        U[0, i, 1] = hi
        y0l, y0h = _act(lo, hi, act)
        Y[0, i, 0] = y0l
        Y[0, i, 1] = y0h
        s0l, s0h = _imul(y0l, y0h, y0l, y0h)
        s0l = max(s0l, 0.0)  # a square is >= 0
        if act == TANH:
            Z[0, i, 0] = dn(1.0 - s0h)
            Z[0, i, 1] = up(1.0 - s0l)
        else:
            Z[0, i, 0] = dn(y0l - s0h)
            Z[0, i, 1] = up(y0h - s0l)
    for k in range(K):
        inv = 1.0 / (k + 1)  # rounded: used through dn/up of products below
        inv_l = dn(inv)
        inv_h = up(inv)
        # x_{k+1} = W y_k / (k+1)
        for j in range(d):
            lo = 0.0
            hi = 0.0
            for i in range(p):
                a, b = _imul(Wl[j, i], Wh[j, i], Y[k, i, 0], Y[k, i, 1])
                lo = dn(lo + a)
                hi = up(hi + b)
            a, b = _imul(lo, hi, inv_l, inv_h)
            X[k + 1, j, 0] = a
            X[k + 1, j, 1] = b
        if k + 1 == K:
            break
        for i in range(p):
            # u_{k+1} = A x_{k+1}
            lo = 0.0
            hi = 0.0
            for j in range(d):
                a, b = _imul(Al[i, j], Ah[i, j], X[k + 1, j, 0], X[k + 1, j, 1])
                lo = dn(lo + a)
                hi = up(hi + b)
            U[k + 1, i, 0] = lo
            U[k + 1, i, 1] = hi
            # y_{k+1} = (1/(k+1)) sum_{j=0}^{k} (j+1) u_{j+1} z_{k-j}
            lo = 0.0
            hi = 0.0
            for jj in range(k + 1):
                c = jj + 1.0
                a, b = _imul(U[jj + 1, i, 0], U[jj + 1, i, 1], Z[k - jj, i, 0], Z[k - jj, i, 1])
                a, b = _imul(a, b, c, c)
                lo = dn(lo + a)
                hi = up(hi + b)
            a, b = _imul(lo, hi, inv_l, inv_h)
            Y[k + 1, i, 0] = a
            Y[k + 1, i, 1] = b
            # z_{k+1} = -sum_{j=0}^{k+1} y_j y_{k+1-j}  (+ y_{k+1} for the sigmoid)
            lo = 0.0
            hi = 0.0
            for jj in range(k + 2):
                a, b = _imul(Y[jj, i, 0], Y[jj, i, 1], Y[k + 1 - jj, i, 0], Y[k + 1 - jj, i, 1])
                lo = dn(lo + a)
                hi = up(hi + b)
            if act == TANH:
                Z[k + 1, i, 0] = -hi
                Z[k + 1, i, 1] = -lo
            else:
                Z[k + 1, i, 0] = dn(Y[k + 1, i, 0] - hi)
                Z[k + 1, i, 1] = up(Y[k + 1, i, 1] - lo)


@kernel
def _horner(X, K, hl, hh, rem_l, rem_h, out_l, out_h):
    """sum_{k<K} X_k h^k + rem h^K for h in [hl, hh] (0 <= hl), by Horner in intervals."""
    d = X.shape[1]
    for j in range(d):
        lo = rem_l[j]
        hi = rem_h[j]
        for k in range(K - 1, -1, -1):
            a, b = _imul(lo, hi, hl, hh)
            lo = dn(a + X[k, j, 0])
            hi = up(b + X[k, j, 1])
        out_l[j] = lo
        out_h[j] = hi


@kernel
def _lognorm_bound(Bl, Bh, Wl, Wh, Al, Ah, bl, bh, act, ul, uh, sl, sh, J):
    """Upper bound of mu_2(Df(z)) over the box B: Gershgorin on the symmetric part of an
    interval enclosure of Df = W diag(s'(u)) A. proof: proofs/bounds.md#lognorm"""
    d = Bl.shape[0]
    p = bl.shape[0]
    for i in range(p):
        lo, hi = _affine_row(i, Bl, Bh, Al, Ah, bl, bh)
        yl, yh = _act(lo, hi, act)
        s2l, s2h = _imul(yl, yh, yl, yh)
        s2l = max(s2l, 0.0)  # a square is >= 0
        if act == TANH:  # s' = 1 - tanh^2 in [0, 1]
            sl[i] = max(0.0, dn(1.0 - s2h))
            sh[i] = min(1.0, up(1.0 - s2l))
        else:  # s' = y (1 - y) in [0, 1/4]
            sl[i] = max(0.0, dn(yl - s2h))
            sh[i] = min(0.25, up(yh - s2l))
    for r in range(d):
        for c in range(d):
            lo = 0.0
            hi = 0.0
            for i in range(p):
                a, b = _imul(Wl[r, i], Wh[r, i], sl[i], sh[i])
                a, b = _imul(a, b, Al[i, c], Ah[i, c])
                lo = dn(lo + a)
                hi = up(hi + b)
            J[r, c, 0] = lo
            J[r, c, 1] = hi
    ell = -math.inf
    for r in range(d):
        row = J[r, r, 1]
        for c in range(d):
            if c != r:
                # |(J_rc + J_cr) / 2| bounded above
                sl_ = dn(0.5 * dn(J[r, c, 0] + J[c, r, 0]))
                sh_ = up(0.5 * up(J[r, c, 1] + J[c, r, 1]))
                row = up(row + max(abs(sl_), abs(sh_)))
        ell = max(ell, row)
    return ell


@kernel
def taylor_step(
    xhat, rad, hl, hh, Wl, Wh, Al, Ah, bl, bh, act, K, inflate, new_xhat, new_rad, ells, ok, boxes
):
    """One validated step for every point: from x(t) in the ball B(xhat_i, rad_i) to
    x(t + h) in B(new_xhat_i, new_rad_i) for every h in [hl, hh]; ells_i bounds the log norm.

    ok_i = 0 when the Picard inclusion could not be established (the caller shortens h).
    Radii are Euclidean; balls are handled through their bounding boxes.
    """
    n, d = xhat.shape
    p = bl.shape[0]
    X = np.empty((K + 1, d, 2))
    U = np.empty((K + 1, p, 2))
    Y = np.empty((K + 1, p, 2))
    Z = np.empty((K + 1, p, 2))
    ul = np.empty(p)
    uh = np.empty(p)
    yl = np.empty(p)
    yh = np.empty(p)
    fl = np.empty(d)
    fh = np.empty(d)
    Bl = np.empty(d)
    Bh = np.empty(d)
    Nl = np.empty(d)
    Nh = np.empty(d)
    xl = np.empty(d)
    xh = np.empty(d)
    El = np.empty(d)
    Eh = np.empty(d)
    J = np.empty((d, d, 2))
    for q in range(n):
        r = rad[q]
        for j in range(d):
            xl[j] = dn(xhat[q, j] - r)
            xh[j] = up(xhat[q, j] + r)
        # --- a priori box: X + [0, h] f(B) inside B (proofs/bounds.md#picard)
        _field(xl, xh, Wl, Wh, Al, Ah, bl, bh, act, ul, uh, yl, yh, fl, fh)
        for j in range(d):
            # first guess from f(X), inflated; the test below decides
            a = min(0.0, dn(fl[j] * hh))
            b = max(0.0, up(fh[j] * hh))
            w = up(inflate * (b - a) + 1e-15 * (abs(xl[j]) + abs(xh[j])) + 1e-300)
            Bl[j] = dn(xl[j] + a - w)
            Bh[j] = up(xh[j] + b + w)
        good = False
        for _ in range(4):
            _field(Bl, Bh, Wl, Wh, Al, Ah, bl, bh, act, ul, uh, yl, yh, fl, fh)
            inside = True
            for j in range(d):
                Nl[j] = dn(xl[j] + min(0.0, dn(fl[j] * hh)))
                Nh[j] = up(xh[j] + max(0.0, up(fh[j] * hh)))
                if not (Bl[j] <= Nl[j] and Nh[j] <= Bh[j]):
                    inside = False
            if inside:
                good = True
                break
            for j in range(d):  # enlarge around the new image and try again
                w = up(inflate * (Nh[j] - Nl[j]))
                Bl[j] = dn(min(Bl[j], Nl[j]) - w)
                Bh[j] = up(max(Bh[j], Nh[j]) + w)
        if not good:
            ok[q] = 0
            continue
        # N = X + [0, h] f(B), inside B, is itself an a priori box (f(N) inside f(B)) and
        # tighter: the step continues with N, which is exported as the certificate's hint (a
        # checker re-verifies X + [0, h] f(N) inside N, true with the margin between N and B)
        for j in range(d):
            Bl[j] = Nl[j]
            Bh[j] = Nh[j]
            boxes[q, j, 0] = Bl[j]
            boxes[q, j, 1] = Bh[j]
        # --- remainder: K-th coefficient over B
        _taylor(Bl, Bh, Wl, Wh, Al, Ah, bl, bh, act, K, X, U, Y, Z)
        remmax = 0.0
        for j in range(d):
            El[j] = X[K, j, 0]
            Eh[j] = X[K, j, 1]
            remmax = max(remmax, max(abs(El[j]), abs(Eh[j])))
        hk = 1.0
        for _ in range(K):
            hk = up(hk * hh)
        # slack for an independent checker whose remainder enclosure is a few percent looser
        # (ball instead of interval arithmetic): a quarter of the remainder's size
        slack = up(0.25 * up(up(remmax * hk) * math.sqrt(d + 1.0)))
        # --- Taylor polynomial at the point xhat
        for j in range(d):
            xl[j] = xhat[q, j]
            xh[j] = xhat[q, j]
        _taylor(xl, xh, Wl, Wh, Al, Ah, bl, bh, act, K, X, U, Y, Z)
        _horner(X, K, hl, hh, El, Eh, El, Eh)
        # --- log norm over B (contains every trajectory from the ball over the step)
        ell = _lognorm_bound(Bl, Bh, Wl, Wh, Al, Ah, bl, bh, act, ul, uh, yl, yh, J)
        ells[q] = ell
        # --- new centre and radius: |Phi(x) - c| <= e^{ell h} r + |E - c|
        g = up(ell * hh) if ell >= 0.0 else up(ell * hl)
        eg = _exp_point(g)[1]  # upper bound of e^{ell h}
        s = 0.0
        for j in range(d):
            c = 0.5 * El[j] + 0.5 * Eh[j]
            new_xhat[q, j] = c
            e = up(max(up(Eh[j] - c), up(c - El[j])))
            s = up(s + up(e * e))
        s = up(math.sqrt(s))
        # a relative margin of 2^-20 lets an independent checker, whose arithmetic differs,
        # re-verify the radius (tightness cost: a factor 1 + 1e-6 per step)
        new_rad[q] = up(up(up(up(eg * r) + s) * (1.0 + 2.0**-20)) + slack)
        ok[q] = 1
