"""Compiled interpreter of a Taylor tape: the coefficients of x' = f(x), as duals, in float64
interval arithmetic, for many initial points.

Same recurrences as :func:`certified.checker.taylor.field_jets` (the reference, in arb);
proof: proofs/bounds.md#taylor-ad. Storage per call (reused for every point): ``S[node, k, q]``
(coefficient k, dual component q: 0 the value, 1..g the derivatives along the seeds) and
``Z[row, k, q]`` for the auxiliary series, as separate lower and upper endpoint arrays.

Sums of products (the series convolutions) are accumulated in round-to-nearest and closed by
one a posteriori error bound (:func:`_close`), not by rounding every partial sum outward: the
products' dependency chain is then one addition long, which is what makes order 20 cheap.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from certified.arith._kernels import (
    BROKEN,
    DOMAIN,
    ETA,
    OK,
    OVERFLOW,
    U,
    _cos_iv,
    _exp_point,
    _finite,
    _log_point,
    _shift,
    _sigmoid_point,
    _sin_iv,
    _sum_dn_up,
    _tanh_from_m,
    _tanh_m,
    dn,
    kernel,
    up,
)

# opcodes: the positions in certified.checker.taylor.OPERATIONS (tape.py checks the match)
X_, P_, C_, NEG, SQR, SQRT, EXP, LOG, TANH, SIGMOID, SIN, COS = range(12)
ADD, SUB, MUL, DIV, SUM, LSE = range(12, 18)

__all__ = ["tape_jets"]

# Helpers that only read and write the work array are compiled without the reference-counting
# runtime: with it, each compiled call passing an array costs atomic reference-count updates
# (measured ~25 ns a call, more than a whole low-order coefficient of a small node).
_helper = njit(cache=True, error_model="numpy", _nrt=False)


# --- scalar interval helpers ----------------------------------------------------------------


@kernel
def _lt(a, b):
    """min of two non-NaN doubles as one compare-and-select (the builtin also handles NaN,
    with branches that mispredict in the convolutions; NaN cannot occur: products of finite
    endpoints are finite or infinite, and an infinite coefficient stops the point)."""
    return a if a < b else b


@kernel
def _gt(a, b):
    return a if a > b else b


@kernel
def _pmul(al, ah, bl, bh):
    """Round-to-nearest min and max of the corner products (not outward: for _close)."""
    p1 = al * bl
    p2 = al * bh
    p3 = ah * bl
    p4 = ah * bh
    return _lt(_lt(p1, p2), _lt(p3, p4)), _gt(_gt(p1, p2), _gt(p3, p4))


@kernel
def _psqr(al, ah):
    """Round-to-nearest bounds of {x^2 : al <= x <= ah} (not outward: for _close)."""
    a = al * al
    b = ah * ah
    lo = 0.0 if al <= 0.0 <= ah else min(a, b)
    return lo, max(a, b)


@kernel
def _imul(al, ah, bl, bh):
    """Outward enclosure of [al, ah] * [bl, bh]; proof: proofs/bounds.md#pred-succ."""
    lo, hi = _pmul(al, ah, bl, bh)
    return dn(lo), up(hi)


@kernel
def _idiv(al, ah, bl, bh):
    """Outward enclosure of [al, ah] / [bl, bh] for 0 not in [bl, bh] (checked by callers)."""
    q1 = al / bl
    q2 = al / bh
    q3 = ah / bl
    q4 = ah / bh
    return dn(min(min(q1, q2), min(q3, q4))), up(max(max(q1, q2), max(q3, q4)))


@kernel
def _isqr(al, ah):
    lo, hi = _psqr(al, ah)
    return max(0.0, dn(lo)), up(hi)


@kernel
def _iadd(al, ah, bl, bh):
    return _sum_dn_up(al, bl)[0], _sum_dn_up(ah, bh)[1]


@kernel
def _isub(al, ah, bl, bh):
    return _sum_dn_up(al, -bh)[0], _sum_dn_up(ah, -bl)[1]


@kernel
def _idiv_int(lo, hi, m):
    """[lo, hi] / m for an integer-valued double m >= 1."""
    if m == 1.0:
        return lo, hi
    a = lo / m
    b = hi / m
    return (a if lo == 0.0 else dn(a)), (b if hi == 0.0 else up(b))


@kernel
def _close(slo, shi, sabs, n, m):
    """Bounds of a sum of n terms t_j from its round-to-nearest evaluation: slo (shi) is the
    recursive sum of the lower (upper) term bounds p_j, each p_j = fl(w fl(t)) or fl(t) or exact
    for an integer weight w <= m, and sabs the recursive sum of terms >= |p_j| (both sides).
    proof: proofs/bounds.md#taylor-ad (lemma "closing a sum")"""
    e = sabs * ((2.0 * n + 4.0) * U) + (n * (m + 3.0) + 2.0) * ETA
    return dn(slo - e), up(shi + e)


# --- sums of products of series -------------------------------------------------------------
#
# W[r, k, q, 0] and W[r, k, q, 1] are the endpoints of coefficient k, dual component q of row r
# (rows 0..n-1: the nodes; n + aux_start[i] onwards: node i's auxiliary series). One array,
# passed to every helper: each array argument of a compiled call costs reference counting.


@_helper
def _acc(W, a, qa, b, qb, k, j0, j1, weighted, scale, sl, sh, sa):
    """Adds sum_{j=j0..j1} w_j W[a, j, qa] W[b, k - j, qb] to the accumulators (sl, sh, sa),
    w_j = scale * j (weighted) or scale, in round-to-nearest (closed by _close)."""
    for j in range(j0, j1 + 1):
        lo, hi = _pmul(W[a, j, qa, 0], W[a, j, qa, 1], W[b, k - j, qb, 0], W[b, k - j, qb, 1])
        w = scale * j if weighted else scale
        lo = lo * w
        hi = hi * w
        sl += lo
        sh += hi
        sa += _gt(abs(lo), abs(hi))
    return sl, sh, sa


@_helper
def _dprod(W, a, b, k, q, j0, j1, weighted, sl, sh, sa):
    """Adds sum_{j=j0..j1} w_j (W_a,j * W_b,k-j)[q] (a product of duals: component 0 is the
    product of the values, component q the sum of the two cross products); returns the
    accumulators and the number of terms."""
    sl, sh, sa = _acc(W, a, 0, b, q, k, j0, j1, weighted, 1.0, sl, sh, sa)
    terms = max(j1 - j0 + 1, 0)
    if q > 0:
        sl, sh, sa = _acc(W, a, q, b, 0, k, j0, j1, weighted, 1.0, sl, sh, sa)
        terms *= 2
    return sl, sh, sa, terms


@_helper
def _sym(W, a, k, j0, sl, sh, sa):
    """Adds sum_{j=j0..k-j0} W_a,j W_a,k-j (values) by symmetry: twice the products with
    j < k - j, plus the square of the middle coefficient; returns the number of terms."""
    top = (k - 1) // 2
    sl, sh, sa = _acc(W, a, 0, a, 0, k, j0, top, False, 2.0, sl, sh, sa)
    terms = max(top - j0 + 1, 0)
    if k % 2 == 0 and k // 2 >= j0:
        lo, hi = _psqr(W[a, k // 2, 0, 0], W[a, k // 2, 0, 1])
        sl += lo
        sh += hi
        sa += hi
        terms += 1
    return sl, sh, sa, terms


@_helper
def _exact(lo, hi, sl, sh, sa, sign):
    """Adds the interval sign * [lo, hi] (sign = +-1) as one term."""
    if sign > 0:
        return sl + lo, sh + hi, sa + max(abs(lo), abs(hi))
    return sl - hi, sh - lo, sa + max(abs(lo), abs(hi))


@_helper
def _put(W, r, k, q, lo, hi):
    W[r, k, q, 0] = lo
    W[r, k, q, 1] = hi


# --- one coefficient of one node ------------------------------------------------------------


@_helper
def _finite_row(W, i, k, G1):
    for q in range(G1):
        if not (_finite(W[i, k, q, 0]) and _finite(W[i, k, q, 1])):
            return OVERFLOW
    return OK


@_helper
def _weighted_series(W, a, b, k, G1, m, sign, o):
    """W[o, k] = sign (1/k) sum_{j=1..k} j (W_a,j * W_b,k-j): the coefficient k >= 1 of a
    series whose derivative is sign * a' b."""
    for q in range(G1):
        sl, sh, sa, n = _dprod(W, a, b, k, q, 1, k, True, 0.0, 0.0, 0.0)
        lo, hi = _close(sl, sh, sa, n, m)
        lo, hi = _idiv_int(lo, hi, float(k))
        if sign > 0:
            _put(W, o, k, q, lo, hi)
        else:
            _put(W, o, k, q, -hi, -lo)


@_helper
def _mul_node(W, i, a, b, ca, cb, k, G1, m):
    if ca or cb:  # a scaling: the constant's dual part is 0
        c, v = (a, b) if ca else (b, a)
        cl = W[c, 0, 0, 0]
        ch = W[c, 0, 0, 1]
        for q in range(G1):
            lo, hi = _imul(cl, ch, W[v, k, q, 0], W[v, k, q, 1])
            _put(W, i, k, q, lo, hi)
        return
    for q in range(G1):
        sl, sh, sa, n = _dprod(W, a, b, k, q, 0, k, False, 0.0, 0.0, 0.0)
        lo, hi = _close(sl, sh, sa, n, m)
        _put(W, i, k, q, lo, hi)


@_helper
def _div_node(W, i, a, b, cb, k, G1, m):
    bl = W[b, 0, 0, 0]
    bh = W[b, 0, 0, 1]
    if bl <= 0.0 <= bh:
        return DOMAIN
    if cb:
        for q in range(G1):
            lo, hi = _idiv(W[a, k, q, 0], W[a, k, q, 1], bl, bh)
            _put(W, i, k, q, lo, hi)
        return OK
    # sum_{j=0..k} (b_j y_{k-j})[q] = a_k[q], solved for y_k[q] (y_k[0] first)
    for q in range(G1):
        sl, sh, sa, n = _dprod(W, b, i, k, q, 1, k, False, 0.0, 0.0, 0.0)
        sl, sh = -sh, -sl
        if q > 0:  # the term b_0[q] y_k[0]
            lo, hi = _pmul(W[b, 0, q, 0], W[b, 0, q, 1], W[i, k, 0, 0], W[i, k, 0, 1])
            sl, sh, sa = _exact(lo, hi, sl, sh, sa, -1)
            n += 1
        sl, sh, sa = _exact(W[a, k, q, 0], W[a, k, q, 1], sl, sh, sa, 1)
        lo, hi = _close(sl, sh, sa, n + 1, m)
        lo, hi = _idiv(lo, hi, bl, bh)
        _put(W, i, k, q, lo, hi)
    return OK


@_helper
def _sqr_node(W, i, a, k, G1, m):
    sl, sh, sa, n = _sym(W, a, k, 0, 0.0, 0.0, 0.0)
    lo, hi = _close(sl, sh, sa, n, m)
    _put(W, i, k, 0, max(lo, 0.0) if k == 0 else lo, hi)  # a square is >= 0
    for q in range(1, G1):  # (a a)_k[q] = 2 sum_{j=0..k} a_j[0] a_{k-j}[q]
        sl, sh, sa = _acc(W, a, 0, a, q, k, 0, k, False, 2.0, 0.0, 0.0, 0.0)
        lo, hi = _close(sl, sh, sa, k + 1, m)
        _put(W, i, k, q, lo, hi)


@_helper
def _sqrt_node(W, i, a, k, G1, m):
    if k == 0:
        al = W[a, 0, 0, 0]
        if not al > 0.0:
            return DOMAIN
        # IEEE sqrt is correctly rounded: proof: proofs/bounds.md#pred-succ
        _put(W, i, 0, 0, max(0.0, dn(math.sqrt(al))), up(math.sqrt(W[a, 0, 0, 1])))
    else:  # 2 y_0 y_k = a_k - sum_{j=1..k-1} y_j y_{k-j}
        sl, sh, sa, n = _sym(W, i, k, 1, 0.0, 0.0, 0.0)
        sl, sh, sa = _exact(W[a, k, 0, 0], W[a, k, 0, 1], -sh, -sl, sa, 1)
        lo, hi = _close(sl, sh, sa, n + 1, m)
        lo, hi = _idiv(lo, hi, 2.0 * W[i, 0, 0, 0], 2.0 * W[i, 0, 0, 1])
        _put(W, i, k, 0, lo, hi)
    dl = 2.0 * W[i, 0, 0, 0]
    dh = 2.0 * W[i, 0, 0, 1]
    if not dl > 0.0:
        return DOMAIN
    for q in range(1, G1):  # 2 y_0[0] y_k[q] = a_k[q] - 2 sum_{j=1..k} y_j[0] y_{k-j}[q]
        sl, sh, sa = _acc(W, i, 0, i, q, k, 1, k, False, 2.0, 0.0, 0.0, 0.0)
        sl, sh, sa = _exact(W[a, k, q, 0], W[a, k, q, 1], -sh, -sl, sa, 1)
        lo, hi = _close(sl, sh, sa, k + 1, m)
        lo, hi = _idiv(lo, hi, dl, dh)
        _put(W, i, k, q, lo, hi)
    return OK


@_helper
def _exp_node(W, i, a, k, G1, m):
    if k > 0:  # y' = a' y
        _weighted_series(W, a, i, k, G1, m, 1, i)
        return OK
    lo, _, _ = _exp_point(W[a, 0, 0, 0])
    _, hi, ok = _exp_point(W[a, 0, 0, 1])
    if not ok:
        return OVERFLOW
    _put(W, i, 0, 0, lo, hi)
    for q in range(1, G1):
        ql, qh = _imul(W[a, 0, q, 0], W[a, 0, q, 1], lo, hi)
        _put(W, i, 0, q, ql, qh)
    return OK


@_helper
def _log_node(W, i, a, k, G1, m):
    al = W[a, 0, 0, 0]
    ah = W[a, 0, 0, 1]
    if not al > 0.0:
        return DOMAIN
    if k == 0:
        _put(W, i, 0, 0, _log_point(al)[0], _log_point(ah)[1])
        for q in range(1, G1):
            lo, hi = _idiv(W[a, 0, q, 0], W[a, 0, q, 1], al, ah)
            _put(W, i, 0, q, lo, hi)
        return OK
    # a y' = a': sum_{j=1..k} j y_j a_{k-j} = k a_k, solved for y_k (duals: y_k[0] first)
    kf = float(k)
    dl = dn(kf * al)
    dh = up(kf * ah)
    for q in range(G1):
        sl, sh, sa, n = _dprod(W, i, a, k, q, 1, k - 1, True, 0.0, 0.0, 0.0)
        sl, sh = -sh, -sl
        if q > 0:  # the term k y_k[0] a_0[q]
            lo, hi = _pmul(W[i, k, 0, 0], W[i, k, 0, 1], W[a, 0, q, 0], W[a, 0, q, 1])
            sl, sh, sa = _exact(lo * kf, hi * kf, sl, sh, sa, -1)
            n += 1
        sl, sh, sa = _exact(W[a, k, q, 0] * kf, W[a, k, q, 1] * kf, sl, sh, sa, 1)
        lo, hi = _close(sl, sh, sa, n + 1, m)
        lo, hi = _idiv(lo, hi, dl, dh)
        _put(W, i, k, q, lo, hi)
    return OK


@_helper
def _activation_node(W, i, z, a, k, G1, m, logistic):
    """tanh (logistic False) or sigmoid: y' = a' z with z = 1 - y^2, resp. y - y^2 (the
    auxiliary series, row z)."""
    if k == 0:
        x = W[a, 0, 0, 0]
        if logistic:
            lo = _sigmoid_point(x)[0]
            hi = _sigmoid_point(W[a, 0, 0, 1])[1]
            # z_0 = 1/4 - (y_0 - 1/2)^2: no dependency loss
            tl, th = _isqr(_sum_dn_up(lo, -0.5)[0], _sum_dn_up(hi, -0.5)[1])
            zl, zh = _isub(0.25, 0.25, tl, th)
        else:
            ml, bad_l = _tanh_m(x, True)
            mh, bad_h = _tanh_m(W[a, 0, 0, 1], False)
            if bad_l or bad_h:
                return BROKEN
            lo = _tanh_from_m(x, ml, True)
            hi = _tanh_from_m(W[a, 0, 0, 1], mh, False)
            tl, th = _isqr(lo, hi)
            zl, zh = _isub(1.0, 1.0, tl, th)
        _put(W, i, 0, 0, lo, hi)
        zl = max(zl, 0.0)  # s' > 0
        _put(W, z, 0, 0, zl, zh)
        for q in range(1, G1):
            ql, qh = _imul(W[a, 0, q, 0], W[a, 0, q, 1], zl, zh)
            _put(W, i, 0, q, ql, qh)
    else:
        _weighted_series(W, a, z, k, G1, m, 1, i)
    # z_k = [logistic] y_k - (y y)_k (z_0[0] is set above)
    for q in range(1 if k == 0 else 0, G1):
        if q == 0:
            sl, sh, sa, n = _sym(W, i, k, 0, 0.0, 0.0, 0.0)
        else:
            sl, sh, sa = _acc(W, i, 0, i, q, k, 0, k, False, 2.0, 0.0, 0.0, 0.0)
            n = k + 1
        sl, sh = -sh, -sl
        if logistic:
            sl, sh, sa = _exact(W[i, k, q, 0], W[i, k, q, 1], sl, sh, sa, 1)
            n += 1
        lo, hi = _close(sl, sh, sa, n, m)
        _put(W, z, k, q, lo, hi)
    return OK


@_helper
def _sincos_node(W, i, z, a, k, G1, m, is_sin):
    """sin and cos together: (sin a)' = a' cos a, (cos a)' = -a' sin a; the node's own
    function in row i, its companion in row z."""
    s = i if is_sin else z
    c = z if is_sin else i
    if k > 0:
        _weighted_series(W, a, c, k, G1, m, 1, s)
        _weighted_series(W, a, s, k, G1, m, -1, c)
        return
    al = W[a, 0, 0, 0]
    ah = W[a, 0, 0, 1]
    sl, sh = _sin_iv(al, ah)
    cl, ch = _cos_iv(al, ah)
    _put(W, s, 0, 0, sl, sh)
    _put(W, c, 0, 0, cl, ch)
    for q in range(1, G1):
        lo, hi = _imul(W[a, 0, q, 0], W[a, 0, q, 1], cl, ch)
        _put(W, s, 0, q, lo, hi)
        lo, hi = _imul(W[a, 0, q, 0], W[a, 0, q, 1], sl, sh)
        _put(W, c, 0, q, -hi, -lo)


@_helper
def _lse_value(W, args, s, e, side):
    """A lower (side 0) or upper (side 1) bound of log sum_j exp(a_j) from the lower (upper)
    endpoints of the argument nodes args[s:e] (increasing in each); proof: bounds.md#lse."""
    c = W[args[s], 0, 0, side]
    for t in range(s + 1, e):
        c = max(c, W[args[t], 0, 0, side])
    acc = 0.0
    for t in range(s, e):
        dd = _shift(W[args[t], 0, 0, side], c)
        if side == 0:
            acc = dn(acc + _exp_point(dn(dd))[0])
        else:
            acc = up(acc + _exp_point(up(dd))[1])
    if side == 0:
        return dn(c + _log_point(acc)[0])
    return up(c + _log_point(acc)[1])


@_helper
def _lse_node(W, i, z0, args, s, e, k, G1, m):
    """L = log sum_t exp(a_t) with the softmax weights w_t = exp(a_t - L) (rows z0 + t):
    L' = sum_t a_t' w_t, w_t' = (a_t' - L') w_t."""
    M = e - s
    if k == 0:
        Ll = _lse_value(W, args, s, e, 0)
        Lh = _lse_value(W, args, s, e, 1)
        if not (_finite(Ll) and _finite(Lh)):
            return OVERFLOW
        _put(W, i, 0, 0, Ll, Lh)
        for t in range(M):
            b = args[s + t]
            wl = _exp_point(dn(W[b, 0, 0, 0] - Lh))[0]
            wh = min(1.0, _exp_point(up(W[b, 0, 0, 1] - Ll))[1])  # a_t <= L
            _put(W, z0 + t, 0, 0, wl, wh)
        for q in range(1, G1):
            sl = sh = sa = 0.0
            for t in range(M):
                b = args[s + t]
                lo, hi = _pmul(W[z0 + t, 0, 0, 0], W[z0 + t, 0, 0, 1], W[b, 0, q, 0], W[b, 0, q, 1])
                sl, sh, sa = _exact(lo, hi, sl, sh, sa, 1)
            lo, hi = _close(sl, sh, sa, M, m)
            _put(W, i, 0, q, lo, hi)
        for t in range(M):
            b = args[s + t]
            for q in range(1, G1):
                dl, dh = _isub(W[b, 0, q, 0], W[b, 0, q, 1], W[i, 0, q, 0], W[i, 0, q, 1])
                lo, hi = _imul(W[z0 + t, 0, 0, 0], W[z0 + t, 0, 0, 1], dl, dh)
                _put(W, z0 + t, 0, q, lo, hi)
        return OK
    kf = float(k)
    for q in range(G1):
        sl = sh = sa = 0.0
        n = 0
        for t in range(M):
            sl, sh, sa, c = _dprod(W, args[s + t], z0 + t, k, q, 1, k, True, sl, sh, sa)
            n += c
        lo, hi = _close(sl, sh, sa, n, m)
        lo, hi = _idiv_int(lo, hi, kf)
        _put(W, i, k, q, lo, hi)
    for t in range(M):
        b = args[s + t]
        w = z0 + t
        for q in range(G1):  # w_k = (1/k) sum_{j=1..k} j ((a_j - L_j) w_{k-j})[q]
            sl = sh = sa = 0.0
            for j in range(1, k + 1):
                d0l, d0h = _isub(W[b, j, 0, 0], W[b, j, 0, 1], W[i, j, 0, 0], W[i, j, 0, 1])
                lo, hi = _pmul(d0l, d0h, W[w, k - j, q, 0], W[w, k - j, q, 1])
                sl, sh, sa = _exact(lo * j, hi * j, sl, sh, sa, 1)
                if q > 0:
                    dql, dqh = _isub(W[b, j, q, 0], W[b, j, q, 1], W[i, j, q, 0], W[i, j, q, 1])
                    lo, hi = _pmul(dql, dqh, W[w, k - j, 0, 0], W[w, k - j, 0, 1])
                    sl, sh, sa = _exact(lo * j, hi * j, sl, sh, sa, 1)
            lo, hi = _close(sl, sh, sa, k * (2 if q > 0 else 1), m)
            lo, hi = _idiv_int(lo, hi, kf)
            _put(W, w, k, q, lo, hi)
    return OK


@_helper
def _node(op, W, args, s, e, z, i, k, G1, m, ca, cb):
    """Coefficient k of node i (an operation, not x/p/c), all dual components; a status.
    ca, cb: whether the first two arguments are constant nodes."""
    a = args[s]
    if op == ADD or op == SUB:
        b = args[s + 1]
        for q in range(G1):
            if op == ADD:
                lo, hi = _iadd(W[a, k, q, 0], W[a, k, q, 1], W[b, k, q, 0], W[b, k, q, 1])
            else:
                lo, hi = _isub(W[a, k, q, 0], W[a, k, q, 1], W[b, k, q, 0], W[b, k, q, 1])
            _put(W, i, k, q, lo, hi)
        return _finite_row(W, i, k, G1)
    if op == MUL:
        _mul_node(W, i, a, args[s + 1], ca, cb, k, G1, m)
        return _finite_row(W, i, k, G1)
    if op == NEG:
        for q in range(G1):
            _put(W, i, k, q, -W[a, k, q, 1], -W[a, k, q, 0])
        return OK
    if op == SUM:
        for q in range(G1):
            lo = W[a, k, q, 0]
            hi = W[a, k, q, 1]
            for t in range(s + 1, e):
                lo, hi = _iadd(lo, hi, W[args[t], k, q, 0], W[args[t], k, q, 1])
            _put(W, i, k, q, lo, hi)
        return _finite_row(W, i, k, G1)
    if op == DIV:
        st = _div_node(W, i, a, args[s + 1], cb, k, G1, m)
    elif op == SQR:
        _sqr_node(W, i, a, k, G1, m)
        st = OK
    elif op == SQRT:
        st = _sqrt_node(W, i, a, k, G1, m)
    elif op == EXP:
        st = _exp_node(W, i, a, k, G1, m)
    elif op == LOG:
        st = _log_node(W, i, a, k, G1, m)
    elif op == TANH or op == SIGMOID:
        st = _activation_node(W, i, z, a, k, G1, m, op == SIGMOID)
    elif op == SIN or op == COS:
        _sincos_node(W, i, z, a, k, G1, m, op == SIN)
        st = OK
    elif op == LSE:
        st = _lse_node(W, i, z, args, s, e, k, G1, m)
    else:
        return BROKEN
    if st != OK:
        return st
    return _finite_row(W, i, k, G1)


@kernel
def tape_jets(
    opcodes, arg_start, args, const, aux_start, outputs, const_lo, const_hi,
    p_lo, p_hi, x_lo, x_hi, s_lo, s_hi, order,
):  # fmt: skip
    """Taylor coefficients x_0..x_order of x' = f(x) through N initial intervals, as duals.

    x_lo, x_hi: (N, d); s_lo, s_hi: (N, d, g) (rows of dx_0/dy; g may be 0). Returns lo, hi of
    shape (order + 1, N, d, 1 + g) and a status (N,) per point: OK, or DOMAIN (log/sqrt of an
    interval not > 0, division by an interval containing 0), OVERFLOW, BROKEN; a point that
    fails gets [-inf, inf] everywhere. proof: proofs/bounds.md#taylor-ad
    """
    N, d = x_lo.shape
    g = s_lo.shape[2]
    G1 = g + 1
    n = opcodes.shape[0]
    K = max(order, 1)
    m = order + 2.0  # bound on the integer weights of _close's terms (j <= k < order, or 2)
    out_lo = np.empty((order + 1, N, d, G1))
    out_hi = np.empty((order + 1, N, d, G1))
    status = np.zeros(N, np.int64)
    # one work array (coefficients k >= 1 of constant nodes are never written and stay 0)
    W = np.zeros((n + aux_start[n], K, G1, 2))
    for pt in range(N):
        for c in range(d):
            out_lo[0, pt, c, 0] = x_lo[pt, c]
            out_hi[0, pt, c, 0] = x_hi[pt, c]
            for q in range(g):
                out_lo[0, pt, c, 1 + q] = s_lo[pt, c, q]
                out_hi[0, pt, c, 1 + q] = s_hi[pt, c, q]
        st = OK
        for k in range(order):
            for i in range(n):
                op = opcodes[i]
                if const[i] and k > 0:
                    continue
                s = arg_start[i]
                if op == X_:
                    for q in range(G1):
                        _put(W, i, k, q, out_lo[k, pt, args[s], q], out_hi[k, pt, args[s], q])
                    continue
                if op == P_ or op == C_:
                    c = args[s]
                    if op == P_:
                        _put(W, i, 0, 0, p_lo[c], p_hi[c])
                    else:
                        _put(W, i, 0, 0, const_lo[c], const_hi[c])
                    for q in range(1, G1):
                        _put(W, i, 0, q, 0.0, 0.0)
                    continue
                e = arg_start[i + 1]
                a = args[s]
                b = args[s + 1] if e - s > 1 else a
                ca = const[a] != 0
                cb = const[b] != 0
                if op == ADD or op == SUB or op == NEG or (op == MUL and (ca or cb)):
                    # the cheap operations here: a call per node and order would cost more
                    c, v = (a, b) if ca else (b, a)
                    for q in range(G1):
                        al = W[a, k, q, 0]
                        ah = W[a, k, q, 1]
                        if op == ADD:
                            lo, hi = _iadd(al, ah, W[b, k, q, 0], W[b, k, q, 1])
                        elif op == SUB:
                            lo, hi = _isub(al, ah, W[b, k, q, 0], W[b, k, q, 1])
                        elif op == NEG:
                            lo, hi = -ah, -al
                        else:  # a scaling: the constant's dual part is 0
                            lo, hi = _imul(
                                W[c, 0, 0, 0], W[c, 0, 0, 1], W[v, k, q, 0], W[v, k, q, 1]
                            )
                        _put(W, i, k, q, lo, hi)
                        if not (_finite(lo) and _finite(hi)):
                            st = OVERFLOW
                    if st != OK:
                        break
                    continue
                st = _node(op, W, args, s, e, n + aux_start[i], i, k, G1, m, ca, cb)
                if st != OK:
                    break
            if st != OK:
                break
            kf = k + 1.0
            for c in range(d):
                o = outputs[c]
                for q in range(G1):
                    lo, hi = _idiv_int(W[o, k, q, 0], W[o, k, q, 1], kf)
                    out_lo[k + 1, pt, c, q] = lo
                    out_hi[k + 1, pt, c, q] = hi
        if st != OK:
            status[pt] = st
            for k in range(order + 1):
                for c in range(d):
                    for q in range(G1):
                        out_lo[k, pt, c, q] = -np.inf
                        out_hi[k, pt, c, q] = np.inf
    return out_lo, out_hi, status
