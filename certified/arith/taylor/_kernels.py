"""Compiled interpreter of a Taylor tape: the coefficients of x' = f(x), as duals, in float64
midpoint-radius (ball) arithmetic, for many initial points at once.

Same recurrences as :func:`certified.checker.taylor.field_jets` (the reference, in arb);
proof: proofs/bounds.md#taylor-ad (the recurrences) and #taylor-ball (the arithmetic).

Layout: ``M[k, row, q, p]`` (midpoints) and ``R[...]`` (radii), coefficient k, dual
component q (0 the value, 1..g the derivatives along the seeds), point p. Rows: the nodes, the
auxiliary series, one scratch row, the constant 1 and the coordinates of the solution.

The interpreter loops over orders, then nodes, then points: the dispatch on the node's
operation is paid once per node and order for a block of points, and the innermost loops run
over contiguous points (the compiler vectorises them). Midpoints are rounded to nearest and
their rounding errors are computed exactly (TwoSum, TwoProduct by a fused multiply-add), so an
operation
whose result is representable adds no radius; radii are upper bounds (#taylor-ball).
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import njit, types, uint64
from numba.core import cgutils
from numba.extending import intrinsic

from certified.arith._kernels import (
    BROKEN,
    DOMAIN,
    ETA,
    MAX_DOUBLE,
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

# Helpers that only read and write the work arrays are compiled without the reference-counting
# runtime (each compiled call passing arrays would otherwise pay atomic reference counts).
_helper = njit(cache=True, error_model="numpy", _nrt=False)

TINY = 2.0**-480  # every stored |midpoint| and radius is 0 or >= TINY (#taylor-ball, "floor")
EXACT_MIN = 2.0**-900  # below it the exactness test of a quotient is not used
PAD = 8
BLOCK = 128  # points per block (measured: 64 pays more per-call overhead, 1024 leaves the cache)

# accumulator rows: midpoint sum, exact-error sum, their absolute values, radius sum
_S, _E, _A, _P = range(4)


# --- scalar ball helpers ----------------------------------------------------------------------


@kernel
def _two_sum(a, b):
    """s + e == a + b exactly (Knuth); proof: proofs/bounds.md#two-sum."""
    s = a + b
    z = s - a
    return s, (a - (s - z)) + (b - z)


@intrinsic
def _fma(typingctx, a, b, c):
    """a b + c with one rounding (LLVM's llvm.fma: the hardware instruction, or a correctly
    rounded library call; never split into two roundings). Checked at import (__init__.py)."""
    sig = types.float64(types.float64, types.float64, types.float64)

    def codegen(context, builder, signature, args):
        f64 = ir.DoubleType()
        fnty = ir.FunctionType(f64, [f64, f64, f64])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.fma.f64")
        return builder.call(fn, args)

    return sig, codegen


@kernel
def fma(a, b, c):
    """a b + c rounded once (for the import-time check of _fma)."""
    return _fma(a, b, c)


@kernel
def _prod_err(a, b, x):
    """TwoProduct by a fused multiply-add: a b - x for x = fl(a b), exact when |x| >= 2^-968
    or a b = 0 (and x finite). proof: proofs/bounds.md#taylor-ball"""
    return _fma(a, b, -x)


@kernel
def _add_up(a, b):
    """An upper bound of a + b, exact when the sum is representable (#two-sum)."""
    return _sum_dn_up(a, b)[1]


@kernel
def _mul_up(a, b):
    """An upper bound of a b >= 0 (0 exactly when a factor is 0); proof: #pred-succ."""
    x = a * b
    return up(x) if x != 0.0 or (a != 0.0 and b != 0.0) else 0.0


@kernel
def _div_err(y):
    """A bound of |y - z| when y = fl(z) is a correctly rounded quotient: u|y| + 2 eta
    (#taylor-ball, lemma "rounding of a quotient")."""
    return U * abs(y) + 2.0 * ETA


@kernel
def _floor(m, r):
    """The stored ball (m', r') containing (m, r): |m'| and r' each 0 or >= TINY.
    proof: proofs/bounds.md#taylor-ball (floor); NaN passes unchanged."""
    am = abs(m)
    small = (am < TINY) & (am != 0.0)
    r = up(r + am) if small else r
    m = 0.0 if small else m
    r = TINY if (r > 0.0) & (r < TINY) else r
    return m, r


@kernel
def _from_interval(lo, hi):
    """A ball containing [lo, hi] (radius 0 for lo == hi)."""
    m = 0.5 * lo + 0.5 * hi
    r = max(_add_up(hi, -m), _add_up(m, -lo))
    return _floor(m, max(r, 0.0))


@kernel
def _to_interval(m, r):
    """[m - r, m + r] rounded outward (exact when representable)."""
    return _sum_dn_up(m, -r)[0], _sum_dn_up(m, r)[1]


@kernel
def _stat(s, m, r):
    """The status after storing (m, r): the first failure of the point is kept."""
    # written without short-circuits (selects, no branches): the row loops vectorise
    keep = (s != OK) | ((abs(m) <= MAX_DOUBLE) & (abs(r) <= MAX_DOUBLE))
    return s if keep else OVERFLOW


# --- rows over a block of points ----------------------------------------------------------------


@_helper
def _put(M, R, st, k, i, q, p, m, r):
    m, r = _floor(m, r)
    M[k, i, q, p] = m
    R[k, i, q, p] = r
    st[p] = _stat(st[p], m, r)


@_helper
def _copy(M, R, ks, s, qs, k, i, q, p0, p1):
    for p in range(uint64(p0), uint64(p1)):
        M[k, i, q, p] = M[ks, s, qs, p]
        R[k, i, q, p] = R[ks, s, qs, p]


@_helper
def _addsub(M, R, st, ka, a, qa, kb, b, qb, sign, k, i, q, p0, p1):
    """Row (k, i, q) = a + sign b (sign = +-1): |x + y - m| <= ra + rb + |e| with m + e the
    exact sum of the midpoints. proof: proofs/bounds.md#taylor-ball (sums)"""
    F = 1.0 + 8.0 * U  # L = 2 roundings on every leaf
    for p in range(uint64(p0), uint64(p1)):
        m, e = _two_sum(M[ka, a, qa, p], sign * M[kb, b, qb, p])
        r = ((R[ka, a, qa, p] + R[kb, b, qb, p]) + abs(e)) * F
        m, r = _floor(m, r)
        M[k, i, q, p] = m
        R[k, i, q, p] = r
        st[p] = _stat(st[p], m, r)


@_helper
def _scale(M, R, st, c, v, kv, qv, k, i, q, p0, p1):
    """Row (k, i, q) = c * v for the constant ball c = (0, c, 0) (one product: its rounding
    error |f| exactly, plus |m_c| r_v + r_c (|m_v| + r_v)). proof: bounds.md#taylor-ball"""
    F = 1.0 + 12.0 * U  # L = 4
    for p in range(uint64(p0), uint64(p1)):
        a = M[0, c, 0, p]
        b = M[kv, v, qv, p]
        x = a * b
        f = _prod_err(a, b, x)
        ra = R[0, c, 0, p]
        rb = R[kv, v, qv, p]
        r = (abs(f) + (abs(a) * rb + ra * (abs(b) + rb))) * F
        m, r = _floor(x, r)
        M[k, i, q, p] = m
        R[k, i, q, p] = r
        st[p] = _stat(st[p], m, r)


@_helper
def _neg(M, R, ka, a, qa, k, i, q, p0, p1):
    for p in range(uint64(p0), uint64(p1)):
        M[k, i, q, p] = -M[ka, a, qa, p]
        R[k, i, q, p] = R[ka, a, qa, p]


# --- accumulated sums of products (the series convolutions) -----------------------------------
#
# ACC[_S] is the round-to-nearest sum of the midpoint products, ACC[_E] the sum of their
# rounding errors (TwoSum, TwoProduct: exact; a product's errors are added together first),
# ACC[_A] the sum of the absolute values of the terms added to ACC[_E], ACC[_P] the sum of the
# propagated radii; _close turns them into a ball. proof: bounds.md#taylor-ball


@kernel
def _term(s, E, A, P, x, y, rx, ry, w, simple):
    """The accumulators (S, E, A, P) after adding w x y for the balls (x, rx), (y, ry) and an
    integer w != 0; simple: |w| is 1 or 2 (then w t and w f are exact, and the product's
    errors e + w f make one rounded leaf c)."""
    t = x * y
    f = _prod_err(x, y, t)
    if simple:
        s, e = _two_sum(s, w * t)
        c = e + w * f  # |c - (e + w f)| <= u |c|
        E += c
        A += abs(c)
    else:
        wt = w * t
        g = _prod_err(w, t, wt)  # w t - wt exactly
        h = w * f
        s, e = _two_sum(s, wt)
        E += (e + g) + h
        A += (abs(e) + abs(g)) + abs(h)
    P += abs(w) * (abs(x) * ry + rx * (abs(y) + ry))
    return s, E, A, P


@kernel
def _simple(w):
    aw = abs(w)
    return aw == 1.0 or aw == 2.0


@_helper
def _acc(ACC, M, R, ka, a, qa, kb, b, qb, w, p0, p1):
    """ACC += w a b for the balls a = (ka, a, qa), b = (kb, b, qb) and an integer w != 0."""
    if _simple(w):
        for p in range(uint64(p0), uint64(p1)):
            S, E, A, P = _term(
                ACC[_S, p], ACC[_E, p], ACC[_A, p], ACC[_P, p],
                M[ka, a, qa, p], M[kb, b, qb, p], R[ka, a, qa, p], R[kb, b, qb, p], w, True,
            )  # fmt: skip
            ACC[_S, p] = S
            ACC[_E, p] = E
            ACC[_A, p] = A
            ACC[_P, p] = P
        return
    for p in range(uint64(p0), uint64(p1)):
        S, E, A, P = _term(
            ACC[_S, p], ACC[_E, p], ACC[_A, p], ACC[_P, p],
            M[ka, a, qa, p], M[kb, b, qb, p], R[ka, a, qa, p], R[kb, b, qb, p], w, False,
        )  # fmt: skip
        ACC[_S, p] = S
        ACC[_E, p] = E
        ACC[_A, p] = A
        ACC[_P, p] = P


@_helper
def _acc2(ACC, M, R, ka, a, qa, kb, b, qb, w, kc, c, qc, kd, d, qd, v, p0, p1):
    """ACC += w a b, then ACC += v c d: two calls of _acc (the same operations in the same
    order, so the same result) in one pass over the accumulators."""
    if _simple(w) and _simple(v):
        for p in range(uint64(p0), uint64(p1)):
            S, E, A, P = _term(
                ACC[_S, p], ACC[_E, p], ACC[_A, p], ACC[_P, p],
                M[ka, a, qa, p], M[kb, b, qb, p], R[ka, a, qa, p], R[kb, b, qb, p], w, True,
            )  # fmt: skip
            S, E, A, P = _term(
                S, E, A, P,
                M[kc, c, qc, p], M[kd, d, qd, p], R[kc, c, qc, p], R[kd, d, qd, p], v, True,
            )  # fmt: skip
            ACC[_S, p] = S
            ACC[_E, p] = E
            ACC[_A, p] = A
            ACC[_P, p] = P
        return
    for p in range(uint64(p0), uint64(p1)):
        S, E, A, P = _term(
            ACC[_S, p], ACC[_E, p], ACC[_A, p], ACC[_P, p],
            M[ka, a, qa, p], M[kb, b, qb, p], R[ka, a, qa, p], R[kb, b, qb, p], w, _simple(w),
        )  # fmt: skip
        S, E, A, P = _term(
            S, E, A, P,
            M[kc, c, qc, p], M[kd, d, qd, p], R[kc, c, qc, p], R[kd, d, qd, p], v, _simple(v),
        )  # fmt: skip
        ACC[_S, p] = S
        ACC[_E, p] = E
        ACC[_A, p] = A
        ACC[_P, p] = P


@_helper
def _acc_ball(ACC, M, R, k, a, q, sign, p0, p1):
    """ACC += sign a (sign = +-1)."""
    for p in range(uint64(p0), uint64(p1)):
        s, e = _two_sum(ACC[_S, p], sign * M[k, a, q, p])
        ACC[_S, p] = s
        ACC[_E, p] += e
        ACC[_A, p] += abs(e)
        ACC[_P, p] += R[k, a, q, p]


@_helper
def _close(ACC, n, M, R, st, k, i, q, p0, p1):
    """Row (k, i, q) = the ball of the sum accumulated from n terms; clears ACC.
    proof: proofs/bounds.md#taylor-ball (lemma "closing a sum")"""
    G = (6.0 * n + 4.0) * U  # 2 n_E u with n_E = 3 n + 2 error terms
    F = 1.0 + (2.0 * n + 24.0) * U  # 1 + 2 (L + 2) u with L = n + 10
    for p in range(uint64(p0), uint64(p1)):
        m, e = _two_sum(ACC[_S, p], ACC[_E, p])
        A = ACC[_A, p]
        t = up(A * G) if A > 0.0 else 0.0
        r = ((abs(e) + t) + ACC[_P, p]) * F
        m, r = _floor(m, r)
        M[k, i, q, p] = m
        R[k, i, q, p] = r
        st[p] = _stat(st[p], m, r)
        ACC[_S, p] = 0.0
        ACC[_E, p] = 0.0
        ACC[_A, p] = 0.0
        ACC[_P, p] = 0.0


@_helper
def _div_int(M, R, st, ks, s, qs, d, k, i, q, p0, p1):
    """Row (k, i, q) = row (ks, s, qs) / d for an integer-valued 1 <= d < 2^26: the quotient's
    rounding error is 0 when y d == m exactly (Dekker), else <= u|y| + 2 eta; radii are
    divided exactly by a power of two, else rounded up. proof: bounds.md#taylor-ball (quotients)"""
    pow2 = math.frexp(d)[0] == 0.5
    for p in range(uint64(p0), uint64(p1)):
        m = M[ks, s, qs, p]
        rm = R[ks, s, qs, p]
        y = m / d
        x = y * d
        f = _prod_err(y, d, x)
        err = 0.0 if (x == m and f == 0.0) else _div_err(y)
        rq = rm / d
        r = _add_up(rq if pow2 or rm == 0.0 else up(rq), err)
        _put(M, R, st, k, i, q, p, y, r)


@_helper
def _div_ball(M, R, st, ks, s, qs, b, kb, k, i, q, p0, p1):
    """Row (k, i, q) = row (ks, s, qs) / the ball (kb, b, 0), which must exclude 0 (else the
    point fails with DOMAIN). |x/z - y| <= err + (r_c + (|y| + err) r_b) / (|m_b| - r_b).
    proof: proofs/bounds.md#taylor-ball (quotients)"""
    for p in range(uint64(p0), uint64(p1)):
        bm = M[kb, b, 0, p]
        br = R[kb, b, 0, p]
        den = _sum_dn_up(abs(bm), -br)[0]
        if not den > 0.0:
            st[p] = DOMAIN if st[p] == OK else st[p]
            bm = 1.0
            den = 1.0
        c = M[ks, s, qs, p]
        rc = R[ks, s, qs, p]
        y = c / bm
        x = y * bm
        f = _prod_err(y, bm, x)
        exact = x == c and f == 0.0 and (abs(y) >= EXACT_MIN or c == 0.0)
        err = 0.0 if exact else _div_err(y)
        num = _add_up(rc, _mul_up(_add_up(abs(y), err), br))
        r = _add_up(up(num / den) if num > 0.0 else 0.0, err)
        _put(M, R, st, k, i, q, p, y, r)


@_helper
def _put_interval(M, R, st, k, i, q, p, lo, hi):
    m, r = _from_interval(lo, hi)
    _put(M, R, st, k, i, q, p, m, r)


@_helper
def _interval(M, R, st, k, a, q, p):
    """[lo, hi] of ball (k, a, q) at point p; (0, 0) for a point that has failed (so that
    the interval kernels never see garbage)."""
    if st[p] != OK:
        return 0.0, 0.0
    return _to_interval(M[k, a, q, p], R[k, a, q, p])


# --- recurrences built from the accumulators ---------------------------------------------------


@_helper
def _dconv(ACC, M, R, a, b, k, q, j0, j1, weighted, sign, p0, p1):
    """ACC += sign sum_{j=j0..j1} w_j (a_j * b_{k-j})[q] (dual product; w_j = j when weighted,
    else 1); returns the number of terms."""
    if q > 0:  # the two terms of each j in one pass (the order of _acc calls is unchanged)
        for j in range(j0, j1 + 1):
            w = sign * (float(j) if weighted else 1.0)
            _acc2(ACC, M, R, j, a, 0, k - j, b, q, w, j, a, q, k - j, b, 0, w, p0, p1)
        return 2 * max(j1 - j0 + 1, 0)
    j = j0
    while j < j1:  # j and j + 1 in one pass
        w = sign * (float(j) if weighted else 1.0)
        v = sign * (float(j + 1) if weighted else 1.0)
        _acc2(ACC, M, R, j, a, 0, k - j, b, 0, w, j + 1, a, 0, k - j - 1, b, 0, v, p0, p1)
        j += 2
    if j == j1:
        _acc(ACC, M, R, j, a, 0, k - j, b, 0, sign * (float(j) if weighted else 1.0), p0, p1)
    return max(j1 - j0 + 1, 0)


@_helper
def _sym(ACC, M, R, a, k, j0, sign, p0, p1):
    """ACC += sign sum_{j=j0..k-j0} a_j a_{k-j} (values) by symmetry: twice the products
    with j < k - j, plus the square of the middle coefficient; returns the number of terms."""
    n = 0
    j1 = (k - 1) // 2
    j = j0
    while j < j1:  # j and j + 1 in one pass
        _acc2(ACC, M, R, j, a, 0, k - j, a, 0, 2.0 * sign, j + 1, a, 0, k - j - 1, a, 0,
              2.0 * sign, p0, p1)  # fmt: skip
        j += 2
        n += 2
    if j == j1:
        _acc(ACC, M, R, j, a, 0, k - j, a, 0, 2.0 * sign, p0, p1)
        n += 1
    if k % 2 == 0 and k // 2 >= j0:
        _acc(ACC, M, R, k // 2, a, 0, k // 2, a, 0, sign, p0, p1)
        n += 1
    return n


@_helper
def _dsq(ACC, M, R, a, k, q, j0, sign, p0, p1):
    """ACC += sign 2 sum_{j=j0..k} a_j[0] a_{k-j}[q] (the dual part of a square)."""
    j = j0
    while j < k:  # j and j + 1 in one pass
        _acc2(ACC, M, R, j, a, 0, k - j, a, q, 2.0 * sign, j + 1, a, 0, k - j - 1, a, q,
              2.0 * sign, p0, p1)  # fmt: skip
        j += 2
    if j == k:
        _acc(ACC, M, R, j, a, 0, 0, a, q, 2.0 * sign, p0, p1)
    return max(k - j0 + 1, 0)


@_helper
def _weighted_series(ACC, M, R, st, a, b, k, G1, sign, o, p0, p1):
    """Row (k, o) = sign (1/k) sum_{j=1..k} j (a_j * b_{k-j}): the coefficient k >= 1 of a
    series whose derivative is sign a' b."""
    for q in range(G1):
        n = _dconv(ACC, M, R, a, b, k, q, 1, k, True, sign, p0, p1)
        _close(ACC, n, M, R, st, k, o, q, p0, p1)
        _div_int(M, R, st, k, o, q, float(k), k, o, q, p0, p1)


@_helper
def _order0_duals(ACC, M, R, st, a, c, sign, G1, i, p0, p1):
    """Row (0, i, q) = sign a_0[q] c_0 for q >= 1 (chain rule at order 0, c = phi'(a_0))."""
    for q in range(1, G1):
        _acc(ACC, M, R, 0, a, q, 0, c, 0, sign, p0, p1)
        _close(ACC, 1, M, R, st, 0, i, q, p0, p1)


@_helper
def _mul_node(ACC, M, R, st, i, a, b, k, G1, p0, p1):
    for q in range(G1):
        n = _dconv(ACC, M, R, a, b, k, q, 0, k, False, 1.0, p0, p1)
        _close(ACC, n, M, R, st, k, i, q, p0, p1)


@_helper
def _sqr_node(ACC, M, R, st, i, a, k, G1, p0, p1):
    n = _sym(ACC, M, R, a, k, 0, 1.0, p0, p1)
    _close(ACC, n, M, R, st, k, i, 0, p0, p1)
    for q in range(1, G1):  # (a a)_k[q] = 2 sum_{j=0..k} a_j[0] a_{k-j}[q]
        n = _dsq(ACC, M, R, a, k, q, 0, 1.0, p0, p1)
        _close(ACC, n, M, R, st, k, i, q, p0, p1)


@_helper
def _div_node(ACC, M, R, st, i, a, b, cb, k, G1, p0, p1):
    if cb:
        for q in range(G1):
            _div_ball(M, R, st, k, a, q, b, 0, k, i, q, p0, p1)
        return
    # sum_{j=0..k} (b_j y_{k-j})[q] = a_k[q], solved for y_k[q] (y_k[0] first)
    for q in range(G1):
        n = _dconv(ACC, M, R, b, i, k, q, 1, k, False, -1.0, p0, p1)
        if q > 0:  # the term b_0[q] y_k[0]
            _acc(ACC, M, R, 0, b, q, k, i, 0, -1.0, p0, p1)
            n += 1
        _acc_ball(ACC, M, R, k, a, q, 1.0, p0, p1)
        _close(ACC, n + 1, M, R, st, k, i, q, p0, p1)
        _div_ball(M, R, st, k, i, q, b, 0, k, i, q, p0, p1)


@_helper
def _sqrt_node(ACC, M, R, st, i, a, k, G1, tmp, p0, p1):
    if k == 0:
        for p in range(uint64(p0), uint64(p1)):
            lo, hi = _interval(M, R, st, 0, a, 0, p)
            if not lo > 0.0 and st[p] == OK:
                st[p] = DOMAIN
            m = M[0, a, 0, p]
            if R[0, a, 0, p] == 0.0 and m > 0.0:  # a point: IEEE sqrt is correctly rounded
                y = math.sqrt(m)
                x = y * y
                exact = x == m and _prod_err(y, y, x) == 0.0
                _put(M, R, st, 0, i, 0, p, y, 0.0 if exact else _div_err(y))
            else:  # proof: proofs/bounds.md#pred-succ
                lo = max(0.0, dn(math.sqrt(max(lo, 0.0))))
                _put_interval(M, R, st, 0, i, 0, p, lo, up(math.sqrt(max(hi, 0.0))))
    else:  # 2 y_0 y_k = a_k - sum_{j=1..k-1} y_j y_{k-j}
        n = _sym(ACC, M, R, i, k, 1, -1.0, p0, p1)
        _acc_ball(ACC, M, R, k, a, 0, 1.0, p0, p1)
        _close(ACC, n + 1, M, R, st, k, i, 0, p0, p1)
    # the scratch row holds 2 y_0 (exact doubling)
    for p in range(uint64(p0), uint64(p1)):
        M[0, tmp, 0, p] = 2.0 * M[0, i, 0, p]
        R[0, tmp, 0, p] = 2.0 * R[0, i, 0, p]
        st[p] = _stat(st[p], M[0, tmp, 0, p], R[0, tmp, 0, p])  # 2 y_0 may overflow
    if k > 0:
        _div_ball(M, R, st, k, i, 0, tmp, 0, k, i, 0, p0, p1)
    for q in range(1, G1):  # 2 y_0[0] y_k[q] = a_k[q] - 2 sum_{j=1..k} y_j[0] y_{k-j}[q]
        n = _dsq(ACC, M, R, i, k, q, 1, -1.0, p0, p1)
        _acc_ball(ACC, M, R, k, a, q, 1.0, p0, p1)
        _close(ACC, n + 1, M, R, st, k, i, q, p0, p1)
        _div_ball(M, R, st, k, i, q, tmp, 0, k, i, q, p0, p1)


@_helper
def _exp_node(ACC, M, R, st, i, a, k, G1, p0, p1):
    if k > 0:  # y' = a' y
        _weighted_series(ACC, M, R, st, a, i, k, G1, 1.0, i, p0, p1)
        return
    for p in range(uint64(p0), uint64(p1)):
        lo, hi = _interval(M, R, st, 0, a, 0, p)
        yl, _, _ = _exp_point(lo)
        _, yh, ok = _exp_point(hi)
        if not ok and st[p] == OK:
            st[p] = OVERFLOW
        _put_interval(M, R, st, 0, i, 0, p, yl, yh)
    _order0_duals(ACC, M, R, st, a, i, 1.0, G1, i, p0, p1)


@_helper
def _log_node(ACC, M, R, st, i, a, k, G1, one, p0, p1):
    if k == 0:
        for p in range(uint64(p0), uint64(p1)):
            lo, hi = _interval(M, R, st, 0, a, 0, p)
            if not lo > 0.0:
                st[p] = DOMAIN if st[p] == OK else st[p]
                lo = hi = 1.0
            _put_interval(M, R, st, 0, i, 0, p, _log_point(lo)[0], _log_point(hi)[1])
        for q in range(1, G1):
            _div_ball(M, R, st, 0, a, q, a, 0, 0, i, q, p0, p1)
        return
    # a y' = a': k a_0 y_k = k a_k - sum_{j=1..k-1} j y_j a_{k-j} (duals: y_k[0] first)
    kf = float(k)
    for q in range(G1):
        n = _dconv(ACC, M, R, i, a, k, q, 1, k - 1, True, -1.0, p0, p1)
        if q > 0:  # the term k y_k[0] a_0[q]
            _acc(ACC, M, R, k, i, 0, 0, a, q, -kf, p0, p1)
            n += 1
        _acc(ACC, M, R, k, a, q, 0, one, 0, kf, p0, p1)  # k a_k = k a_k * 1
        _close(ACC, n + 1, M, R, st, k, i, q, p0, p1)
        _div_ball(M, R, st, k, i, q, a, 0, k, i, q, p0, p1)
        _div_int(M, R, st, k, i, q, kf, k, i, q, p0, p1)


@_helper
def _activation_node(ACC, M, R, st, i, z, a, k, G1, logistic, p0, p1):
    """tanh (logistic False) or sigmoid: y' = a' z with z = 1 - y^2, resp. y - y^2 (the
    auxiliary series, row z)."""
    if k == 0:
        for p in range(uint64(p0), uint64(p1)):
            x, xh = _interval(M, R, st, 0, a, 0, p)
            if logistic:
                lo = _sigmoid_point(x)[0]
                hi = _sigmoid_point(xh)[1]
                # z_0 = 1/4 - (y_0 - 1/2)^2: no dependency loss
                tl, th = _isqr(_sum_dn_up(lo, -0.5)[0], _sum_dn_up(hi, -0.5)[1])
                zl, zh = _sum_dn_up(0.25, -th)[0], _sum_dn_up(0.25, -tl)[1]
            else:
                ml, bad_l = _tanh_m(x, True)
                mh, bad_h = _tanh_m(xh, False)
                if bad_l or bad_h:
                    st[p] = BROKEN if st[p] == OK else st[p]
                lo = _tanh_from_m(x, ml, True)
                hi = _tanh_from_m(xh, mh, False)
                tl, th = _isqr(lo, hi)
                zl, zh = _sum_dn_up(1.0, -th)[0], _sum_dn_up(1.0, -tl)[1]
            _put_interval(M, R, st, 0, i, 0, p, lo, hi)
            _put_interval(M, R, st, 0, z, 0, p, max(zl, 0.0), zh)  # s' > 0
        _order0_duals(ACC, M, R, st, a, z, 1.0, G1, i, p0, p1)
    else:
        _weighted_series(ACC, M, R, st, a, z, k, G1, 1.0, i, p0, p1)
    # z_k = [logistic] y_k - (y y)_k (z_0[0] is set above)
    for q in range(1 if k == 0 else 0, G1):
        if q == 0:
            n = _sym(ACC, M, R, i, k, 0, -1.0, p0, p1)
        else:
            n = _dsq(ACC, M, R, i, k, q, 0, -1.0, p0, p1)
        if logistic:
            _acc_ball(ACC, M, R, k, i, q, 1.0, p0, p1)
            n += 1
        _close(ACC, n, M, R, st, k, z, q, p0, p1)


@kernel
def _isqr(al, ah):
    """Outward enclosure of {x^2 : al <= x <= ah}."""
    a = al * al
    b = ah * ah
    lo = 0.0 if al <= 0.0 <= ah else min(a, b)
    return max(0.0, dn(lo)), up(max(a, b))


@_helper
def _sincos_node(ACC, M, R, st, i, z, a, k, G1, is_sin, p0, p1):
    """sin and cos together: (sin a)' = a' cos a, (cos a)' = -a' sin a; the node's own
    function in row i, its companion in row z."""
    s = i if is_sin else z
    c = z if is_sin else i
    if k > 0:
        _weighted_series(ACC, M, R, st, a, c, k, G1, 1.0, s, p0, p1)
        _weighted_series(ACC, M, R, st, a, s, k, G1, -1.0, c, p0, p1)
        return
    for p in range(uint64(p0), uint64(p1)):
        lo, hi = _interval(M, R, st, 0, a, 0, p)
        sl, sh = _sin_iv(lo, hi)
        cl, ch = _cos_iv(lo, hi)
        _put_interval(M, R, st, 0, s, 0, p, sl, sh)
        _put_interval(M, R, st, 0, c, 0, p, cl, ch)
    _order0_duals(ACC, M, R, st, a, c, 1.0, G1, s, p0, p1)
    _order0_duals(ACC, M, R, st, a, s, -1.0, G1, c, p0, p1)


@_helper
def _lse_value(M, R, st, args, s, e, p, side):
    """A lower (side 0) or upper (side 1) bound of log sum_j exp(a_j) from the lower (upper)
    endpoints of the argument balls args[s:e] (increasing in each); proof: bounds.md#lse."""
    c = _interval(M, R, st, 0, args[s], 0, p)[side]
    for t in range(s + 1, e):
        c = max(c, _interval(M, R, st, 0, args[t], 0, p)[side])
    acc = 0.0
    for t in range(s, e):
        dd = _shift(_interval(M, R, st, 0, args[t], 0, p)[side], c)
        if side == 0:
            acc = dn(acc + _exp_point(dn(dd))[0])
        else:
            acc = up(acc + _exp_point(up(dd))[1])
    if side == 0:
        return dn(c + _log_point(acc)[0])
    return up(c + _log_point(acc)[1])


@_helper
def _lse_node(ACC, M, R, st, i, z0, args, s, e, k, G1, tmp, p0, p1):
    """L = log sum_t exp(a_t) with the softmax weights w_t = exp(a_t - L) (rows z0 + t):
    L' = sum_t a_t' w_t, w_t' = (a_t' - L') w_t."""
    M_ = e - s
    if k == 0:
        for p in range(uint64(p0), uint64(p1)):
            Ll = _lse_value(M, R, st, args, s, e, p, 0)
            Lh = _lse_value(M, R, st, args, s, e, p, 1)
            if not (_finite(Ll) and _finite(Lh)):
                st[p] = OVERFLOW if st[p] == OK else st[p]
                Ll = Lh = 0.0
            _put_interval(M, R, st, 0, i, 0, p, Ll, Lh)
            for t in range(M_):
                lo, hi = _interval(M, R, st, 0, args[s + t], 0, p)
                wl = _exp_point(dn(lo - Lh))[0]
                wh = min(1.0, _exp_point(up(hi - Ll))[1])  # a_t <= L
                _put_interval(M, R, st, 0, z0 + t, 0, p, wl, wh)
        for q in range(1, G1):
            for t in range(M_):
                _acc(ACC, M, R, 0, z0 + t, 0, 0, args[s + t], q, 1.0, p0, p1)
            _close(ACC, M_, M, R, st, 0, i, q, p0, p1)
        for t in range(M_):
            b = args[s + t]
            for q in range(1, G1):
                _addsub(M, R, st, 0, b, q, 0, i, q, -1.0, 0, tmp, 0, p0, p1)
                _acc(ACC, M, R, 0, z0 + t, 0, 0, tmp, 0, 1.0, p0, p1)
                _close(ACC, 1, M, R, st, 0, z0 + t, q, p0, p1)
        return
    kf = float(k)
    for q in range(G1):
        n = 0
        for t in range(M_):
            n += _dconv(ACC, M, R, args[s + t], z0 + t, k, q, 1, k, True, 1.0, p0, p1)
        _close(ACC, n, M, R, st, k, i, q, p0, p1)
        _div_int(M, R, st, k, i, q, kf, k, i, q, p0, p1)
    for t in range(M_):
        b = args[s + t]
        w = z0 + t
        # the scratch row holds d_j = a_j - L_j, j = 1..k (all dual components)
        for j in range(1, k + 1):
            for q in range(G1):
                _addsub(M, R, st, j, b, q, j, i, q, -1.0, j, tmp, q, p0, p1)
        for q in range(G1):  # w_k = (1/k) sum_{j=1..k} j (d_j w_{k-j})[q]
            n = _dconv(ACC, M, R, tmp, w, k, q, 1, k, True, 1.0, p0, p1)
            _close(ACC, n, M, R, st, k, w, q, p0, p1)
            _div_int(M, R, st, k, w, q, kf, k, w, q, p0, p1)


@_helper
def _node(op, ACC, M, R, st, args, s, e, z, i, k, G1, ca, cb, tmp, xs, p0, p1):
    """Coefficient k of node i, all dual components, over the points p0..p1 - 1.
    ca, cb: whether the first two arguments are constant nodes."""
    a = args[s]
    if op == X_:
        for q in range(G1):
            _copy(M, R, k, xs + a, q, k, i, q, p0, p1)
        return
    if op == ADD or op == SUB:
        for q in range(G1):
            sign = 1.0 if op == ADD else -1.0
            _addsub(M, R, st, k, a, q, k, args[s + 1], q, sign, k, i, q, p0, p1)
        return
    if op == NEG:
        for q in range(G1):
            _neg(M, R, k, a, q, k, i, q, p0, p1)
        return
    if op == MUL:
        b = args[s + 1]
        if ca or cb:  # a scaling: the constant's dual part is 0
            c, v = (a, b) if ca else (b, a)
            for q in range(G1):
                _scale(M, R, st, c, v, k, q, k, i, q, p0, p1)
        else:
            _mul_node(ACC, M, R, st, i, a, b, k, G1, p0, p1)
        return
    if op == SUM:
        for q in range(G1):
            for t in range(s, e):
                _acc_ball(ACC, M, R, k, args[t], q, 1.0, p0, p1)
            _close(ACC, e - s, M, R, st, k, i, q, p0, p1)
        return
    if op == DIV:
        _div_node(ACC, M, R, st, i, a, args[s + 1], cb, k, G1, p0, p1)
    elif op == SQR:
        _sqr_node(ACC, M, R, st, i, a, k, G1, p0, p1)
    elif op == SQRT:
        _sqrt_node(ACC, M, R, st, i, a, k, G1, tmp, p0, p1)
    elif op == EXP:
        _exp_node(ACC, M, R, st, i, a, k, G1, p0, p1)
    elif op == LOG:
        _log_node(ACC, M, R, st, i, a, k, G1, tmp + 1, p0, p1)
    elif op == TANH or op == SIGMOID:
        _activation_node(ACC, M, R, st, i, z, a, k, G1, op == SIGMOID, p0, p1)
    elif op == SIN or op == COS:
        _sincos_node(ACC, M, R, st, i, z, a, k, G1, op == SIN, p0, p1)
    elif op == LSE:
        _lse_node(ACC, M, R, st, i, z, args, s, e, k, G1, tmp, p0, p1)
    else:
        for p in range(uint64(p0), uint64(p1)):
            st[p] = BROKEN


@kernel
def tape_jets(
    opcodes, arg_start, args, const, aux_start, outputs, const_lo, const_hi,
    p_lo, p_hi, x_lo, x_hi, s_lo, s_hi, order,
):  # fmt: skip
    """Taylor coefficients x_0..x_order of x' = f(x) through N initial intervals, as duals.

    x_lo, x_hi: (N, d); s_lo, s_hi: (N, d, g) (rows of dx_0/dy; g may be 0). Returns lo, hi of
    shape (order + 1, N, d, 1 + g) and a status (N,) per point: OK, or DOMAIN (log/sqrt of an
    interval not > 0, division by an interval containing 0), OVERFLOW, BROKEN; a point that
    fails gets [-inf, inf] everywhere. proof: proofs/bounds.md#taylor-ad, #taylor-ball
    """
    N, d = x_lo.shape
    g = s_lo.shape[2]
    G1 = g + 1
    n = opcodes.shape[0]
    tmp = n + aux_start[n]  # scratch row
    one = tmp + 1  # the constant 1 (weighted terms w a = w a 1)
    xs = one + 1  # coordinates of the solution: rows xs..xs+d-1
    B = min(N, BLOCK)
    # work arrays for one block of points, reused: coefficients k >= 1 of constant nodes are
    # never written and stay 0; everything else is written before it is read
    # rows padded by PAD points: a power-of-two row length (e.g. 4 components x 128 points x 8
    # bytes = 4 KiB) maps every row to the same cache sets (measured: 1.5x slower)
    M = np.zeros((order + 1, xs + d, G1, B + PAD))
    R = np.zeros((order + 1, xs + d, G1, B + PAD))
    ACC = np.zeros((4, B + PAD))
    st = np.zeros(B, np.int64)
    status = np.zeros(N, np.int64)
    out_lo = np.empty((order + 1, N, d, G1))
    out_hi = np.empty((order + 1, N, d, G1))
    for p in range(B):
        M[0, one, 0, p] = 1.0
        for i in range(n):  # parameters and constants (dual parts 0, coefficients k >= 1 0)
            op = opcodes[i]
            if op == P_:
                c = args[arg_start[i]]
                _put_interval(M, R, st, 0, i, 0, p, p_lo[c], p_hi[c])
            elif op == C_:
                c = args[arg_start[i]]
                _put_interval(M, R, st, 0, i, 0, p, const_lo[c], const_hi[c])
    st0 = st.copy()  # failures of the parameters and constants concern every point
    for p0 in range(0, N, B):
        nb = min(N - p0, B)
        for p in range(nb):
            st[p] = st0[p]
            for c in range(d):
                _put_interval(M, R, st, 0, xs + c, 0, p, x_lo[p0 + p, c], x_hi[p0 + p, c])
                for q in range(g):
                    lo = s_lo[p0 + p, c, q]
                    _put_interval(M, R, st, 0, xs + c, 1 + q, p, lo, s_hi[p0 + p, c, q])
        for k in range(order):
            for i in range(n):
                op = opcodes[i]
                if op == P_ or op == C_ or (const[i] and k > 0):
                    continue
                s = arg_start[i]
                e = arg_start[i + 1]
                a = args[s]
                b = args[s + 1] if e - s > 1 else a
                ca = op != X_ and const[a] != 0
                cb = op != X_ and const[b] != 0
                z = n + aux_start[i]
                _node(op, ACC, M, R, st, args, s, e, z, i, k, G1, ca, cb, tmp, xs, 0, nb)
            for c in range(d):
                for q in range(G1):
                    _div_int(M, R, st, k, outputs[c], q, k + 1.0, k + 1, xs + c, q, 0, nb)
        for p in range(nb):
            status[p0 + p] = st[p]
            failed = st[p] != OK
            for k in range(order + 1):
                for c in range(d):
                    for q in range(G1):
                        lo, hi = _to_interval(M[k, xs + c, q, p], R[k, xs + c, q, p])
                        out_lo[k, p0 + p, c, q] = -np.inf if failed else lo
                        out_hi[k, p0 + p, c, q] = np.inf if failed else hi
    return out_lo, out_hi, status
