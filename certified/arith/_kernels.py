"""Compiled kernels of the vectorised float64 interval layer.

Every kernel takes 1-D contiguous float64 arrays of equal length (endpoints of intervals)
and returns ``(lo, hi, status)``: enclosures of the exact result and a status code
(``OK``, ``OVERFLOW`` when an endpoint would leave the float64 range, ``DOMAIN`` when an
argument leaves the function's domain, ``BROKEN`` when a kernel's own precondition fails,
which would be a bug). The Python layer (:mod:`certified.arith.interval`) turns a status into
an exception; it calls the kernels through this module's attributes at call time, so tests
can replace a kernel by a deliberately broken one and watch the containment tests fail.

Soundness rests on IEEE 754 binary64 arithmetic in round-to-nearest with gradual underflow
(checked at import by :mod:`certified.arith.fpu`) and on the lemmas of ``proofs/bounds.md``,
cited at each use. Numba compiles without ``fastmath``: no reassociation, no contraction of
``a*b + c`` into a fused multiply-add (also checked at import).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

OK, OVERFLOW, DOMAIN, BROKEN = 0, 1, 2, 3

U = 2.0**-53  # unit roundoff
PHI = 2.0**-53 * (1.0 + 2.0**-52)  # u(1 + 2u), proof: proofs/bounds.md#pred-succ
ETA = 2.0**-1074  # smallest positive subnormal
INF = math.inf

# Cody-Waite split of ln 2: LN2_HI has 32 significant bits, so k*LN2_HI is exact for |k| < 2^21.
# proof: proofs/bounds.md#exp-reduction (|ln2 - LN2_HI - LN2_LO| <= 1.2e-26, checked by a test)
LN2_HI = float.fromhex("0x1.62e42fee00000p-1")
LN2_LO = float.fromhex("0x1.a39ef35793c76p-33")
INV_LN2 = 1.4426950408889634

# Relative error allowances E' (powers of two) of the transcendental kernels; each dominates
# the proved error of its kernel with margin. proof: proofs/bounds.md#widening
E_EXP = 2.0**-50
E_EXPM1 = 2.0**-50
E_LOG = 2.0**-49
E_ATANH = 2.0**-50

EXP_ARG_MAX = 709.78  # exp(x) <= 1.7968e308 < max double for x <= EXP_ARG_MAX
EXP_ARG_MIN = -745.2  # exp(x) < 2^-1074 for x <= EXP_ARG_MIN
REDUCED_MAX = 0.3466  # |r| bound after reduction; proof: proofs/bounds.md#exp-reduction

# Taylor coefficients 1/i! (i = 0..13) and 1/(i+1)! (i = 0..13), rounded to nearest.
EXP_COEF = np.array([1.0 / math.factorial(i) for i in range(14)])
EXPM1_COEF = np.array([1.0 / math.factorial(i + 1) for i in range(14)])
# atanh series 2 atanh(s) = 2 s sum_i s^(2i) / (2i+1), i = 0..10
ATANH_COEF = np.array([1.0 / (2 * i + 1) for i in range(11)])


# --- directed rounding by Rump-Zimmermann-Boldo-Melquiond (BIT 2009) -----------------------


@njit(cache=True)
def dn(c):
    """A double <= pred(c) for finite c (hence <= any real that rounds to c)."""
    # proof: proofs/bounds.md#pred-succ
    return c - (PHI * abs(c) + ETA)


@njit(cache=True)
def up(c):
    """A double >= succ(c) for finite c (hence >= any real that rounds to c)."""
    # proof: proofs/bounds.md#pred-succ
    return c + (PHI * abs(c) + ETA)


@njit(cache=True)
def widen(y, e):
    """(lo, hi) with lo <= f <= hi whenever |y - f| <= e (1-u)^2 |y| + eta."""
    # proof: proofs/bounds.md#widening
    t = e * abs(y) + 2.0 * ETA
    return dn(y - t), up(y + t)


@njit(cache=True)
def _finite(x):
    return abs(x) <= 1.7976931348623157e308


# --- rational operations -------------------------------------------------------------------


@njit(cache=True)
def add(al, ah, bl, bh):
    n = al.shape[0]
    lo = np.empty(n)
    hi = np.empty(n)
    status = OK
    for i in range(n):
        lo[i] = dn(al[i] + bl[i])
        hi[i] = up(ah[i] + bh[i])
        if not (_finite(lo[i]) and _finite(hi[i])):
            status = OVERFLOW
    return lo, hi, status


@njit(cache=True)
def sub(al, ah, bl, bh):
    n = al.shape[0]
    lo = np.empty(n)
    hi = np.empty(n)
    status = OK
    for i in range(n):
        lo[i] = dn(al[i] - bh[i])
        hi[i] = up(ah[i] - bl[i])
        if not (_finite(lo[i]) and _finite(hi[i])):
            status = OVERFLOW
    return lo, hi, status


@njit(cache=True)
def mul(al, ah, bl, bh):
    n = al.shape[0]
    lo = np.empty(n)
    hi = np.empty(n)
    status = OK
    for i in range(n):
        p1 = al[i] * bl[i]
        p2 = al[i] * bh[i]
        p3 = ah[i] * bl[i]
        p4 = ah[i] * bh[i]
        lo[i] = dn(min(min(p1, p2), min(p3, p4)))
        hi[i] = up(max(max(p1, p2), max(p3, p4)))
        if not (_finite(lo[i]) and _finite(hi[i])):
            status = OVERFLOW
    return lo, hi, status


@njit(cache=True)
def div(al, ah, bl, bh):
    n = al.shape[0]
    lo = np.empty(n)
    hi = np.empty(n)
    status = OK
    for i in range(n):
        if bl[i] <= 0.0 <= bh[i]:
            lo[i] = 0.0
            hi[i] = 0.0
            status = DOMAIN
            continue
        q1 = al[i] / bl[i]
        q2 = al[i] / bh[i]
        q3 = ah[i] / bl[i]
        q4 = ah[i] / bh[i]
        lo[i] = dn(min(min(q1, q2), min(q3, q4)))
        hi[i] = up(max(max(q1, q2), max(q3, q4)))
        if not (_finite(lo[i]) and _finite(hi[i])):
            status = max(status, OVERFLOW)
    return lo, hi, status


@njit(cache=True)
def sqr(lo_, hi_):
    n = lo_.shape[0]
    lo = np.empty(n)
    hi = np.empty(n)
    status = OK
    for i in range(n):
        a = lo_[i]
        b = hi_[i]
        if a >= 0.0:
            lo[i] = max(0.0, dn(a * a))
            hi[i] = up(b * b)
        elif b <= 0.0:
            lo[i] = max(0.0, dn(b * b))
            hi[i] = up(a * a)
        else:
            lo[i] = 0.0
            hi[i] = up(max(a * a, b * b))
        if not _finite(hi[i]):
            status = OVERFLOW
    return lo, hi, status


@njit(cache=True)
def _pow_nonneg_dn(x, k):
    # x >= 0, k >= 1: binary powering with every product rounded downward (monotone on x >= 0)
    r = 1.0
    b = x
    while True:
        if k & 1:
            r = max(0.0, dn(r * b))
        k >>= 1
        if k == 0:
            return r
        b = max(0.0, dn(b * b))


@njit(cache=True)
def _pow_nonneg_up(x, k):
    r = 1.0
    b = x
    while True:
        if k & 1:
            r = up(r * b)
        k >>= 1
        if k == 0:
            return r
        b = up(b * b)


@njit(cache=True)
def pown_pos(lo_, hi_, k):
    """x**k for an integer k >= 1."""
    n = lo_.shape[0]
    lo = np.empty(n)
    hi = np.empty(n)
    status = OK
    for i in range(n):
        a = lo_[i]
        b = hi_[i]
        if k % 2 == 1:  # increasing on R
            lo[i] = _pow_nonneg_dn(a, k) if a >= 0.0 else -_pow_nonneg_up(-a, k)
            hi[i] = _pow_nonneg_up(b, k) if b >= 0.0 else -_pow_nonneg_dn(-b, k)
        elif a >= 0.0:
            lo[i] = _pow_nonneg_dn(a, k)
            hi[i] = _pow_nonneg_up(b, k)
        elif b <= 0.0:
            lo[i] = _pow_nonneg_dn(-b, k)
            hi[i] = _pow_nonneg_up(-a, k)
        else:
            lo[i] = 0.0
            hi[i] = _pow_nonneg_up(max(-a, b), k)
        if not (_finite(lo[i]) and _finite(hi[i])):
            status = OVERFLOW
    return lo, hi, status


@njit(cache=True)
def sqrt(lo_, hi_):
    # IEEE 754 square root is correctly rounded, so pred/succ of it enclose the exact root.
    n = lo_.shape[0]
    lo = np.empty(n)
    hi = np.empty(n)
    status = OK
    for i in range(n):
        if lo_[i] < 0.0:
            lo[i] = 0.0
            hi[i] = 0.0
            status = DOMAIN
            continue
        lo[i] = max(0.0, dn(math.sqrt(lo_[i])))
        hi[i] = up(math.sqrt(hi_[i]))
    return lo, hi, status


# --- exp and expm1 -------------------------------------------------------------------------


@njit(cache=True)
def _exp_point(x):
    """(lo, hi, ok) enclosing exp(x) for a double x; ok is False on overflow."""
    if x <= EXP_ARG_MIN:
        return 0.0, ETA, True  # 0 < exp(x) < 2^-1074
    if x > EXP_ARG_MAX:
        return INF, INF, False
    # proof: proofs/bounds.md#exp-reduction
    k = np.rint(x * INV_LN2)
    r = (x - k * LN2_HI) - k * LN2_LO
    if not abs(r) <= REDUCED_MAX:
        return -INF, INF, False
    # proof: proofs/bounds.md#exp-taylor (Horner, degree 13)
    s = EXP_COEF[13]
    for j in range(12, -1, -1):
        s = s * r + EXP_COEF[j]
    ki = int(k)
    # 2^k exactly; split in two factors so that neither overflows nor is subnormal
    if ki > 1000:
        y = (s * 2.0**1000) * math.ldexp(1.0, ki - 1000)
    elif ki < -1000:
        y = (s * 2.0**-1000) * math.ldexp(1.0, ki + 1000)  # may round (subnormal): abs err <= eta
    else:
        y = s * math.ldexp(1.0, ki)
    lo, hi = widen(y, E_EXP)
    return max(lo, 0.0), hi, _finite(hi)


@njit(cache=True)
def _expm1_point(x):
    """(lo, hi, ok) enclosing exp(x) - 1 for a double x."""
    if abs(x) <= REDUCED_MAX:
        # proof: proofs/bounds.md#expm1-taylor : expm1(x) = x * sum_i x^i/(i+1)!
        s = EXPM1_COEF[13]
        for j in range(12, -1, -1):
            s = s * x + EXPM1_COEF[j]
        lo, hi = widen(x * s, E_EXPM1)
        return lo, hi, True
    el, eh, ok = _exp_point(x)
    # exp(x) - 1 with outward rounding; expm1 > -1 always
    return max(dn(el - 1.0), -1.0), up(eh - 1.0), ok


@njit(cache=True)
def exp(lo_, hi_):
    n = lo_.shape[0]
    lo = np.empty(n)
    hi = np.empty(n)
    status = OK
    for i in range(n):
        a, _, ok1 = _exp_point(lo_[i])
        _, b, ok2 = _exp_point(hi_[i])
        lo[i] = a
        hi[i] = b
        if not (ok1 and ok2):
            status = OVERFLOW
    return lo, hi, status


@njit(cache=True)
def expm1(lo_, hi_):
    n = lo_.shape[0]
    lo = np.empty(n)
    hi = np.empty(n)
    status = OK
    for i in range(n):
        a, _, ok1 = _expm1_point(lo_[i])
        _, b, ok2 = _expm1_point(hi_[i])
        lo[i] = a
        hi[i] = b
        if not (ok1 and ok2):
            status = OVERFLOW
    return lo, hi, status


# --- log and log1p -------------------------------------------------------------------------


@njit(cache=True)
def _two_atanh(s):
    """Approximation of 2 atanh(s) for |s| <= 0.1716; proof: proofs/bounds.md#atanh-series."""
    t = s * s
    q = ATANH_COEF[10]
    for j in range(9, -1, -1):
        q = q * t + ATANH_COEF[j]
    return 2.0 * (s * q)


@njit(cache=True)
def _log_point(x):
    """(lo, hi) enclosing log(x) for a double x > 0."""
    m, e = math.frexp(x)  # x = m 2^e, 1/2 <= m < 1, exact (also for subnormal x)
    if m < 0.7071067811865476:
        m = 2.0 * m
        e -= 1
    # m in [0.7071, 1.4143): m - 1 is exact (Sterbenz); proof: proofs/bounds.md#log
    f = m - 1.0
    s = f / (m + 1.0)
    lm = _two_atanh(s)
    if e == 0:
        return widen(lm, E_LOG)
    y = e * LN2_HI + (e * LN2_LO + lm)
    return widen(y, E_LOG)


@njit(cache=True)
def _log1p_point(x):
    """(lo, hi) enclosing log(1 + x) for a double x > -1."""
    if -0.29 <= x <= 0.41:
        # proof: proofs/bounds.md#log : log1p(x) = 2 atanh(x / (2 + x)), |s| <= 0.1701
        return widen(_two_atanh(x / (2.0 + x)), E_ATANH)
    # |log(1 + x)| >= 0.34 here; 1 + x enclosed by outward rounding, log is increasing
    a = dn(1.0 + x)
    b = up(1.0 + x)
    lo, _ = _log_point(a)
    _, hi = _log_point(b)
    return lo, hi


@njit(cache=True)
def log(lo_, hi_):
    n = lo_.shape[0]
    lo = np.empty(n)
    hi = np.empty(n)
    status = OK
    for i in range(n):
        if not lo_[i] > 0.0:
            lo[i] = 0.0
            hi[i] = 0.0
            status = DOMAIN
            continue
        lo[i] = _log_point(lo_[i])[0]
        hi[i] = _log_point(hi_[i])[1]
    return lo, hi, status


@njit(cache=True)
def log1p(lo_, hi_):
    n = lo_.shape[0]
    lo = np.empty(n)
    hi = np.empty(n)
    status = OK
    for i in range(n):
        if not lo_[i] > -1.0:
            lo[i] = 0.0
            hi[i] = 0.0
            status = DOMAIN
            continue
        lo[i] = _log1p_point(lo_[i])[0]
        hi[i] = _log1p_point(hi_[i])[1]
    return lo, hi, status


# --- tanh, sigmoid, softplus ---------------------------------------------------------------


@njit(cache=True)
def _tanh_nonneg(x):
    """(lo, hi) enclosing tanh(x) for a double x >= 0; proof: proofs/bounds.md#tanh."""
    if x >= 20.0:
        return 1.0 - 2.0**-53, 1.0  # 1 - tanh(x) <= 2 e^{-40} < 2^-53
    el, eh, _ = _expm1_point(2.0 * x)
    # g(e) = e / (e + 2) is increasing for e > -1
    lo = dn(el / (up(el + 2.0) if el >= 0.0 else dn(el + 2.0)))
    hi = up(eh / (dn(eh + 2.0) if eh >= 0.0 else up(eh + 2.0)))
    return max(lo, 0.0), min(hi, 1.0)


@njit(cache=True)
def tanh(lo_, hi_):
    n = lo_.shape[0]
    lo = np.empty(n)
    hi = np.empty(n)
    for i in range(n):
        a = lo_[i]
        b = hi_[i]
        lo[i] = _tanh_nonneg(a)[0] if a >= 0.0 else -_tanh_nonneg(-a)[1]
        hi[i] = _tanh_nonneg(b)[1] if b >= 0.0 else -_tanh_nonneg(-b)[0]
    return lo, hi, OK


@njit(cache=True)
def _sigmoid_point(x):
    """(lo, hi) enclosing 1 / (1 + exp(-x)); proof: proofs/bounds.md#sigmoid."""
    if x >= 0.0:
        el, eh, _ = _exp_point(-x)  # in (0, 1]
        return dn(1.0 / up(1.0 + eh)), min(1.0, up(1.0 / dn(1.0 + el)))
    el, eh, _ = _exp_point(x)  # sigmoid(x) = e / (1 + e), increasing in e
    return max(0.0, dn(el / up(1.0 + el))), up(eh / dn(1.0 + eh))


@njit(cache=True)
def sigmoid(lo_, hi_):
    n = lo_.shape[0]
    lo = np.empty(n)
    hi = np.empty(n)
    for i in range(n):
        lo[i] = _sigmoid_point(lo_[i])[0]
        hi[i] = _sigmoid_point(hi_[i])[1]
    return lo, hi, OK


@njit(cache=True)
def _softplus_point(x):
    """(lo, hi, ok) enclosing log(1 + exp(x)); proof: proofs/bounds.md#softplus."""
    if x > 0.0:
        # x + log1p(exp(-x)), both terms >= 0
        el, eh, _ = _exp_point(-x)
        a, _ = _log1p_point(el)
        _, b = _log1p_point(eh)
        lo = dn(x + max(a, 0.0))
        hi = up(x + b)
        return lo, hi, _finite(hi)
    el, eh, _ = _exp_point(x)
    a, _ = _log1p_point(el)
    _, b = _log1p_point(eh)
    return max(a, 0.0), b, True


@njit(cache=True)
def softplus(lo_, hi_):
    n = lo_.shape[0]
    lo = np.empty(n)
    hi = np.empty(n)
    status = OK
    for i in range(n):
        a, _, ok1 = _softplus_point(lo_[i])
        _, b, ok2 = _softplus_point(hi_[i])
        lo[i] = a
        hi[i] = b
        if not (ok1 and ok2):
            status = OVERFLOW
    return lo, hi, status


# --- reductions ----------------------------------------------------------------------------


@njit(cache=True)
def sum_rows(lo_, hi_):
    """Row sums of (m, n) endpoint arrays, every partial sum rounded outward."""
    m, n = lo_.shape
    lo = np.empty(m)
    hi = np.empty(m)
    status = OK
    for i in range(m):
        a = 0.0
        b = 0.0
        for j in range(n):
            a = dn(a + lo_[i, j])
            b = up(b + hi_[i, j])
        lo[i] = a
        hi[i] = b
        if not (_finite(a) and _finite(b)):
            status = OVERFLOW
    return lo, hi, status


@njit(cache=True)
def _lse_bounds(v, lower):
    """Bound on log(sum_j exp(v_j)) from below (lower=True) or above; proof: bounds.md#lse."""
    n = v.shape[0]
    c = v[0]
    for j in range(1, n):
        c = max(c, v[j])
    acc = 0.0
    for j in range(n):
        if lower:
            acc = dn(acc + _exp_point(dn(v[j] - c))[0])
        else:
            acc = up(acc + _exp_point(up(v[j] - c))[1])
    # acc >= 1 - tiny (the term j = argmax contributes exp(0) enclosed)
    if lower:
        return dn(c + _log_point(acc)[0])
    return up(c + _log_point(acc)[1])


@njit(cache=True)
def logsumexp_rows(lo_, hi_):
    """log-sum-exp along the rows; increasing in every argument."""
    m = lo_.shape[0]
    lo = np.empty(m)
    hi = np.empty(m)
    status = OK
    for i in range(m):
        lo[i] = _lse_bounds(lo_[i], True)
        hi[i] = _lse_bounds(hi_[i], False)
        if not (_finite(lo[i]) and _finite(hi[i])):
            status = OVERFLOW
    return lo, hi, status


@njit(cache=True)
def softmax_rows(lo_, hi_):
    """softmax along the rows: proof: proofs/bounds.md#softmax.

    softmax_i = a / (a + B) with a = exp(x_i - c), B = sum_{j != i} exp(x_j - c): increasing
    in x_i and decreasing in every x_j, j != i.
    """
    m, n = lo_.shape
    lo = np.empty((m, n))
    hi = np.empty((m, n))
    alo_lo = np.empty(n)  # lower bound of exp(lo_j - c)
    alo_hi = np.empty(n)  # upper bound of exp(lo_j - c)
    ahi_lo = np.empty(n)  # lower bound of exp(hi_j - c)
    ahi_hi = np.empty(n)  # upper bound of exp(hi_j - c)
    for i in range(m):
        c = hi_[i, 0]
        for j in range(1, n):
            c = max(c, hi_[i, j])
        tlo = 0.0  # lower bound of sum_j exp(lo_j - c)
        thi = 0.0  # upper bound of sum_j exp(hi_j - c)
        for j in range(n):
            alo_lo[j] = _exp_point(dn(lo_[i, j] - c))[0]
            alo_hi[j] = _exp_point(up(lo_[i, j] - c))[1]
            ahi_lo[j] = _exp_point(dn(hi_[i, j] - c))[0]
            ahi_hi[j] = _exp_point(up(hi_[i, j] - c))[1]
            tlo = dn(tlo + alo_lo[j])
            thi = up(thi + ahi_hi[j])
        for j in range(n):
            b_up = max(0.0, up(thi - ahi_lo[j]))  # >= sum_{k != j} exp(hi_k - c)
            b_dn = max(0.0, dn(tlo - alo_hi[j]))  # <= sum_{k != j} exp(lo_k - c)
            a = alo_lo[j]
            lo[i, j] = max(0.0, dn(a / up(a + b_up))) if a > 0.0 else 0.0
            a = ahi_hi[j]
            hi[i, j] = min(1.0, up(a / dn(a + b_dn)))
    return lo, hi, OK


# --- matrix product (midpoint-radius, proof: proofs/bounds.md#matmul) ----------------------


@njit(cache=True)
def mid_rad(lo_, hi_):
    """Midpoints m and radii r with [lo, hi] inside [m - r, m + r] (2-D arrays)."""
    p, q = lo_.shape
    m = np.empty((p, q))
    r = np.empty((p, q))
    status = OK
    for i in range(p):
        for j in range(q):
            c = 0.5 * lo_[i, j] + 0.5 * hi_[i, j]
            m[i, j] = c
            r[i, j] = up(max(hi_[i, j] - c, c - lo_[i, j]))
            if not _finite(r[i, j]):
                status = OVERFLOW
    return m, r, status


@njit(cache=True)
def matmul_right_factors(bm, br, g):
    """V = fl(fl(br + fl(g |bm|)) + eta) and D = fl(|bm| + br) for the radius products."""
    p, q = bm.shape
    v = np.empty((p, q))
    d = np.empty((p, q))
    for i in range(p):
        for j in range(q):
            a = abs(bm[i, j])
            v[i, j] = (br[i, j] + g * a) + ETA
            d[i, j] = a + br[i, j]
    return v, d


@njit(cache=True)
def matmul_finish(c, w, f, k):
    """Enclosure [c - R, c + R] with R = fl(fl(w * f) + k) >= the exact radius bound."""
    p, q = c.shape
    lo = np.empty((p, q))
    hi = np.empty((p, q))
    status = OK
    for i in range(p):
        for j in range(q):
            r = w[i, j] * f + k
            lo[i, j] = dn(c[i, j] - r)
            hi[i, j] = up(c[i, j] + r)
            if not (_finite(lo[i, j]) and _finite(hi[i, j])):
                status = OVERFLOW
    return lo, hi, status


# --- probes for the FPU check --------------------------------------------------------------


@njit(cache=True)
def fpu_probe(a, b, c):
    """a + b, a * b + c and a / 2 evaluated by compiled code (see certified.arith.fpu)."""
    return a[0] + b[0], a[1] * b[1] + c[0], a[2] / 2.0, a[3] * 2.0
