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

# error_model="numpy": IEEE semantics for division (no Python ZeroDivisionError check), which
# would otherwise stop the compiler from vectorising any loop containing a division.
kernel = njit(cache=True, error_model="numpy")

OK, OVERFLOW, DOMAIN, BROKEN = 0, 1, 2, 3

U = 2.0**-53  # unit roundoff
PHI = 2.0**-53 * (1.0 + 2.0**-52)  # u(1 + 2u), proof: proofs/bounds.md#pred-succ
ETA = 2.0**-1074  # smallest positive subnormal
MAX_DOUBLE = 1.7976931348623157e308
INF = math.inf

# Cody-Waite split of ln 2: LN2_HI has 32 significant bits, so k*LN2_HI is exact for |k| < 2^21.
# proof: proofs/bounds.md#exp-reduction (|ln2 - LN2_HI - LN2_LO| <= 1.2e-26, checked by a test)
LN2_HI = float.fromhex("0x1.62e42fee00000p-1")
LN2_LO = float.fromhex("0x1.a39ef35793c76p-33")
INV_LN2 = 1.4426950408889634

# Relative error allowances E' (powers of two) of the transcendental kernels; each dominates
# the proved error of its kernel with margin. proof: proofs/bounds.md#widening
E_EXP = 2.0**-50
E_EXPM1 = 2.0**-49
E_LOG = 2.0**-49
E_ATANH = 2.0**-50

EXP_ARG_MAX = 709.7827128933839  # <= log(max double); above it exp(x) overflows
EXP_ARG_MIN = -745.2  # exp(x) < 2^-1074 for x <= EXP_ARG_MIN
REDUCED_MAX = 0.3466  # |r| bound after reduction; proof: proofs/bounds.md#exp-reduction

# Taylor coefficients 1/i! (i = 0..13) and 1/(i+1)! (i = 0..13), rounded to nearest.
EXP_COEF = np.array([1.0 / math.factorial(i) for i in range(14)])
EXPM1_COEF = np.array([1.0 / math.factorial(i + 1) for i in range(14)])
# atanh series 2 atanh(s) = 2 s sum_i s^(2i) / (2i+1), i = 0..10
ATANH_COEF = np.array([1.0 / (2 * i + 1) for i in range(11)])


# --- directed rounding by Rump-Zimmermann-Boldo-Melquiond (BIT 2009) -----------------------


@kernel
def dn(c):
    """A double <= pred(c) for finite c (hence <= any real that rounds to c).

    Infinite c gives -inf or NaN: kernels report such results as overflow, and never feed
    them to a table lookup (see _exp_approx)."""
    # proof: proofs/bounds.md#pred-succ
    return c - (PHI * abs(c) + ETA)


@kernel
def up(c):
    """A double >= succ(c) for finite c (hence >= any real that rounds to c)."""
    # proof: proofs/bounds.md#pred-succ
    return c + (PHI * abs(c) + ETA)


@kernel
def widen(y, e):
    """(lo, hi) with lo <= f <= hi whenever |y - f| <= e (1-u)^2 |y| + eta."""
    # proof: proofs/bounds.md#widening
    t = e * abs(y) + 2.0 * ETA
    return dn(y - t), up(y + t)


@kernel
def _finite(x):
    return abs(x) <= MAX_DOUBLE


# --- output buffers -------------------------------------------------------------------------
#
# Each elementwise kernel is a compiled ``_*_into`` function writing into the two rows of one
# (2, n) buffer, wrapped by a Python function of the same name without the suffix. One buffer
# instead of two arrays halves the page faults of fresh allocations (measured: 2x faster).


def _binary(into):
    def kernel(al, ah, bl, bh):
        out = np.empty((2, al.shape[0]))
        status = into(al, ah, bl, bh, out[0], out[1])
        return out[0], out[1], status

    kernel.__name__ = into.__name__.removeprefix("_").removesuffix("_into")
    return kernel


def _unary(into):
    def kernel(lo, hi):
        out = np.empty((2, lo.shape[0]))
        status = into(lo, hi, out[0], out[1])
        return out[0], out[1], status

    kernel.__name__ = into.__name__.removeprefix("_").removesuffix("_into")
    return kernel


# --- rational operations -------------------------------------------------------------------


@kernel
def _sum_dn_up(a, b):
    """Lower and upper bounds of a + b: the rounded sum, moved one step only when inexact."""
    # proof: proofs/bounds.md#two-sum (Knuth's TwoSum: s + e == a + b exactly)
    s = a + b
    z = s - a
    e = (a - (s - z)) + (b - z)
    lo = s if e >= 0.0 else dn(s)
    hi = s if e <= 0.0 else up(s)
    return lo, hi


@kernel
def _add_into(al, ah, bl, bh, lo, hi):
    bad = 0
    for i in range(al.shape[0]):
        a = _sum_dn_up(al[i], bl[i])[0]
        b = _sum_dn_up(ah[i], bh[i])[1]
        lo[i] = a
        hi[i] = b
        bad += not (_finite(a) and _finite(b))
    return OVERFLOW if bad else OK


@kernel
def _sub_into(al, ah, bl, bh, lo, hi):
    bad = 0
    for i in range(al.shape[0]):
        a = _sum_dn_up(al[i], -bh[i])[0]
        b = _sum_dn_up(ah[i], -bl[i])[1]
        lo[i] = a
        hi[i] = b
        bad += not (_finite(a) and _finite(b))
    return OVERFLOW if bad else OK


@kernel
def _mul_into(al, ah, bl, bh, lo, hi):
    bad = 0
    for i in range(al.shape[0]):
        p1 = al[i] * bl[i]
        p2 = al[i] * bh[i]
        p3 = ah[i] * bl[i]
        p4 = ah[i] * bh[i]
        a = dn(min(min(p1, p2), min(p3, p4)))
        b = up(max(max(p1, p2), max(p3, p4)))
        lo[i] = a
        hi[i] = b
        bad += not (_finite(a) and _finite(b))
    return OVERFLOW if bad else OK


@kernel
def _div_into(al, ah, bl, bh, lo, hi):
    bad = 0
    dom = 0
    for i in range(al.shape[0]):
        if bl[i] <= 0.0 <= bh[i]:
            lo[i] = 0.0
            hi[i] = 0.0
            dom += 1
            continue
        q1 = al[i] / bl[i]
        q2 = al[i] / bh[i]
        q3 = ah[i] / bl[i]
        q4 = ah[i] / bh[i]
        a = dn(min(min(q1, q2), min(q3, q4)))
        b = up(max(max(q1, q2), max(q3, q4)))
        lo[i] = a
        hi[i] = b
        bad += not (_finite(a) and _finite(b))
    return DOMAIN if dom else (OVERFLOW if bad else OK)


@kernel
def _sqr_into(lo_, hi_, lo, hi):
    bad = 0
    for i in range(lo_.shape[0]):
        a = lo_[i]
        b = hi_[i]
        if a >= 0.0:
            lo[i] = max(0.0, dn(a * a))
            h = up(b * b)
        elif b <= 0.0:
            lo[i] = max(0.0, dn(b * b))
            h = up(a * a)
        else:
            lo[i] = 0.0
            h = up(max(a * a, b * b))
        hi[i] = h
        bad += not _finite(h)
    return OVERFLOW if bad else OK


@kernel
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


@kernel
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


@kernel
def _pown_pos_into(lo_, hi_, k, lo, hi):
    """x**k for an integer k >= 1."""
    bad = 0
    for i in range(lo_.shape[0]):
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
        bad += not (_finite(lo[i]) and _finite(hi[i]))
    return OVERFLOW if bad else OK


def pown_pos(lo, hi, k):
    out = np.empty((2, lo.shape[0]))
    status = _pown_pos_into(lo, hi, k, out[0], out[1])
    return out[0], out[1], status


@kernel
def _sqrt_into(lo_, hi_, lo, hi):
    # IEEE 754 square root is correctly rounded, so pred/succ of it enclose the exact root.
    dom = 0
    for i in range(lo_.shape[0]):
        dom += lo_[i] < 0.0
        lo[i] = max(0.0, dn(math.sqrt(max(lo_[i], 0.0))))
        hi[i] = up(math.sqrt(max(hi_[i], 0.0)))
    return DOMAIN if dom else OK


add = _binary(_add_into)
sub = _binary(_sub_into)
mul = _binary(_mul_into)
div = _binary(_div_into)
sqr = _unary(_sqr_into)
sqrt = _unary(_sqrt_into)


# --- exp and expm1 -------------------------------------------------------------------------
#
# Branch-free so that the compiler vectorises the loops: arguments are clamped into the range
# where the kernel is valid and special cases are selected afterwards; 2^k comes from an exact
# table; k = rint(x / ln 2) by the 1.5 * 2^52 trick (exact for |x / ln 2| < 2^51).

POW2 = np.array([2.0**k for k in range(-1074, 1024)])  # exact powers of two
POW2_OFFSET = 1074
RINT_MAGIC = 6755399441055744.0  # 1.5 * 2^52


@kernel
def _reduce(x):
    """k (an integer-valued double) and r ~ x - k ln 2; proof: proofs/bounds.md#exp-reduction."""
    k = (x * INV_LN2 + RINT_MAGIC) - RINT_MAGIC
    r = (x - k * LN2_HI) - k * LN2_LO
    return k, r


@kernel
def _exp_taylor(r):
    """sum_{i<=13} r^i / i! by Horner; proof: proofs/bounds.md#exp-taylor."""
    c = EXP_COEF
    s = c[13]
    s = s * r + c[12]
    s = s * r + c[11]
    s = s * r + c[10]
    s = s * r + c[9]
    s = s * r + c[8]
    s = s * r + c[7]
    s = s * r + c[6]
    s = s * r + c[5]
    s = s * r + c[4]
    s = s * r + c[3]
    s = s * r + c[2]
    s = s * r + c[1]
    return s * r + c[0]


@kernel
def _expm1_taylor(r):
    """r * sum_{i<=13} r^i / (i+1)! by Horner; proof: proofs/bounds.md#expm1."""
    c = EXPM1_COEF
    s = c[13]
    s = s * r + c[12]
    s = s * r + c[11]
    s = s * r + c[10]
    s = s * r + c[9]
    s = s * r + c[8]
    s = s * r + c[7]
    s = s * r + c[6]
    s = s * r + c[5]
    s = s * r + c[4]
    s = s * r + c[3]
    s = s * r + c[2]
    s = s * r + c[1]
    s = s * r + c[0]
    return r * s


@kernel
def _scale(p, k):
    """p * 2^k for integer-valued k in [-1075, 1024] and p in [0.7, 1.42] (or |p| <= 0.42):
    p * 2^ka is exact, the second product rounds only into the subnormal range."""
    ki = int(k)
    ka = ki >> 1
    kb = ki - ka
    return (p * POW2[ka + POW2_OFFSET]) * POW2[kb + POW2_OFFSET]


@kernel
def _exp_approx(x):
    """(y, bad) with |y - exp(x)| <= 4.41 u y + eta for EXP_ARG_MIN < x <= EXP_ARG_MAX."""
    # constant first: max(c, NaN) is c (Python semantics, which numba follows), so a NaN
    # argument keeps the table index in range; it is flagged as a broken precondition
    xc = min(EXP_ARG_MAX, max(EXP_ARG_MIN, x))
    k, r = _reduce(xc)
    return _scale(_exp_taylor(r), k), (not abs(r) <= REDUCED_MAX) | (x != x)


@kernel
def _exp_into(lo_, hi_, lo, hi):
    bad = 0
    over = 0
    for i in range(lo_.shape[0]):
        a = lo_[i]
        b = hi_[i]
        ya, ba = _exp_approx(a)
        yb, bb = _exp_approx(b)
        la = max(0.0, dn(ya - (E_EXP * ya + 2.0 * ETA)))  # proof: proofs/bounds.md#widening
        hb = up(yb + (E_EXP * yb + 2.0 * ETA))
        lo[i] = la if a > EXP_ARG_MIN else 0.0
        hi[i] = hb if b > EXP_ARG_MIN else ETA  # exp(b) < 2^-1074 there
        bad += ba + bb
        over += (b > EXP_ARG_MAX) + (not _finite(hb))
    return BROKEN if bad else (OVERFLOW if over else OK)


EXPM1_ARG_MAX = 700.0  # keeps k <= 1010, so that 2^k is in the table; above it, exp is used


@kernel
def _expm1_approx(x):
    """(y, bad) with |y - expm1(x)| <= 11.7 u |y| + eta for -40 <= x <= EXPM1_ARG_MAX.

    expm1(x) = 2^k expm1(r) + (2^k - 1); for k = 0 this is the Taylor value itself, so there
    is no cancellation near 0. proof: proofs/bounds.md#expm1
    """
    xc = min(EXPM1_ARG_MAX, max(-40.0, x))  # a NaN becomes -40 and is flagged (see above)
    k, r = _reduce(xc)
    q = _expm1_taylor(r)
    t = POW2[int(k) + POW2_OFFSET]  # 2^k with k in [-58, 1010]
    return _scale(q, k) + (t - 1.0), (not abs(r) <= REDUCED_MAX) | (x != x)


@kernel
def _expm1_core(x):
    """(lo, hi, bad) enclosing expm1(x) for -40 <= x <= EXPM1_ARG_MAX."""
    y, bad = _expm1_approx(x)
    t = E_EXPM1 * abs(y) + 2.0 * ETA  # proof: proofs/bounds.md#widening
    return max(dn(y - t), -1.0), up(y + t), bad


@kernel
def _expm1_bounds(x):
    """(lo, hi, flags) enclosing expm1(x) for any double x; flags counts a failed
    precondition (bit 0) and an overflow (bit 1). Branch-free, so loops vectorise."""
    lo, hi, bad = _expm1_core(x)
    # below -40: -1 < expm1(x) < -1 + 2^-53 since e^-40 < 2^-53
    low = x < -40.0
    lo = -1.0 if low else lo
    hi = -1.0 + 2.0**-53 if low else hi
    # above 700: expm1(x) = exp(x) - 1 with exp(x) > 1e304, enclosed by the exp kernel
    ye, bad_e = _exp_approx(x)
    te = E_EXP * ye + 2.0 * ETA
    high = x > EXPM1_ARG_MAX
    lo = dn(dn(ye - te) - 1.0) if high else lo
    hi = up(ye + te) if high else hi
    bad = bad | (bad_e & high)
    over = (x > EXP_ARG_MAX) | (abs(hi) > MAX_DOUBLE)
    return lo, hi, int(bad) + 2 * int(over)


@kernel
def _expm1_into(lo_, hi_, lo, hi):
    flags = 0
    for i in range(lo_.shape[0]):
        la, _, fa = _expm1_bounds(lo_[i])
        _, hb, fb = _expm1_bounds(hi_[i])
        lo[i] = la
        hi[i] = hb
        flags |= fa | fb
    return BROKEN if flags & 1 else (OVERFLOW if flags else OK)


exp = _unary(_exp_into)
expm1 = _unary(_expm1_into)


@kernel
def _exp_point(x):
    """Scalar (lo, hi, ok) enclosure of exp(x), for the other kernels."""
    y, _ = _exp_approx(x)
    lo = max(0.0, dn(y - (E_EXP * y + 2.0 * ETA)))
    hi = up(y + (E_EXP * y + 2.0 * ETA))
    if x <= EXP_ARG_MIN:
        return 0.0, ETA, True
    return lo, hi, x <= EXP_ARG_MAX and _finite(hi)


# --- log and log1p -------------------------------------------------------------------------


@kernel
def _two_atanh(s):
    """2 atanh(s) = 2 s sum_{i<=10} s^(2i) / (2i+1) for |s| <= 0.1716; proof: bounds.md#log."""
    c = ATANH_COEF
    t = s * s
    q = c[10]
    q = q * t + c[9]
    q = q * t + c[8]
    q = q * t + c[7]
    q = q * t + c[6]
    q = q * t + c[5]
    q = q * t + c[4]
    q = q * t + c[3]
    q = q * t + c[2]
    q = q * t + c[1]
    q = q * t + c[0]
    return 2.0 * (s * q)


@kernel
def _log_point(x):
    """(lo, hi) enclosing log(x) for a double x > 0."""
    m, e = math.frexp(x)  # x = m 2^e, 1/2 <= m < 1, exact (also for subnormal x)
    if m < 0.7071067811865476:
        m = 2.0 * m
        e -= 1
    # m in [0.7071, 1.4143): m - 1 is exact (Sterbenz); proof: proofs/bounds.md#log
    lm = _two_atanh((m - 1.0) / (m + 1.0))
    y = lm if e == 0 else e * LN2_HI + (e * LN2_LO + lm)
    return widen(y, E_LOG)


@kernel
def _log1p_point(x):
    """(lo, hi) enclosing log(1 + x) for a double x > -1."""
    if -0.29 <= x <= 0.41:
        # proof: proofs/bounds.md#log : log1p(x) = 2 atanh(x / (2 + x)), |s| <= 0.1702
        return widen(_two_atanh(x / (2.0 + x)), E_ATANH)
    if x > 2.0**60:
        # log(x) < log(1 + x) = log(x) + log1p(1/x) <= log(x) + 2^-60 (1 + x would overflow)
        lo, hi = _log_point(x)
        return lo, up(hi + 2.0**-60)
    # |log(1 + x)| >= 0.34 here; 1 + x enclosed by outward rounding, log is increasing
    return _log_point(dn(1.0 + x))[0], _log_point(up(1.0 + x))[1]


@kernel
def _log_into(lo_, hi_, lo, hi):
    dom = 0
    for i in range(lo_.shape[0]):
        dom += not lo_[i] > 0.0
        lo[i] = _log_point(max(lo_[i], ETA))[0]  # the max only changes out-of-domain entries
        hi[i] = _log_point(max(hi_[i], ETA))[1]
    return DOMAIN if dom else OK


@kernel
def _log1p_into(lo_, hi_, lo, hi):
    dom = 0
    for i in range(lo_.shape[0]):
        dom += not lo_[i] > -1.0
        # out-of-domain arguments are replaced by 0 only to keep the loop total; DOMAIN is raised
        lo[i] = _log1p_point(lo_[i] if lo_[i] > -1.0 else 0.0)[0]
        hi[i] = _log1p_point(hi_[i] if hi_[i] > -1.0 else 0.0)[1]
    return DOMAIN if dom else OK


log = _unary(_log_into)
log1p = _unary(_log1p_into)


# --- tanh, sigmoid, softplus ---------------------------------------------------------------


@kernel
def _tanh_m(x, lower):
    """The bound of m = expm1(-2|x|) in (-1, 0] needed for a lower (lower=True) or upper
    bound of tanh(x): tanh|x| = -m / (2 + m) decreases in m and tanh is odd."""
    z = -2.0 * abs(x)
    ml, mh, bad = _expm1_core(z)
    low = z < -40.0  # -1 < expm1(z) < -1 + 2^-53 there
    ml = -1.0 if low else ml
    mh = -1.0 + 2.0**-53 if low else mh
    return (ml if (x >= 0.0) != lower else mh), int(bad)


@kernel
def _tanh_from_m(x, m, lower):
    """The bound of tanh(x) from the bound m chosen by _tanh_m; proof: proofs/bounds.md#tanh."""
    nonneg = x >= 0.0
    upper_of_abs = nonneg != lower
    den = dn(2.0 + m) if upper_of_abs else up(2.0 + m)
    q = max(-m, 0.0) / den  # m may be slightly positive when x is 0: then 0 is a valid bound
    b = min(1.0, up(q)) if upper_of_abs else max(0.0, dn(q))
    return b if nonneg else -b


@kernel
def _tanh_into(lo_, hi_, lo, hi):
    # two loops, each of which the compiler vectorises (one fused loop it does not)
    bad = 0
    for i in range(lo_.shape[0]):
        ma, ba = _tanh_m(lo_[i], True)
        mb, bb = _tanh_m(hi_[i], False)
        lo[i] = ma
        hi[i] = mb
        bad |= ba | bb
    for i in range(lo_.shape[0]):
        lo[i] = _tanh_from_m(lo_[i], lo[i], True)
        hi[i] = _tanh_from_m(hi_[i], hi[i], False)
    return BROKEN if bad else OK


@kernel
def _sigmoid_point(x):
    """(lo, hi) enclosing 1 / (1 + exp(-x)); proof: proofs/bounds.md#sigmoid."""
    if x >= 0.0:
        el, eh, _ = _exp_point(-x)  # in (0, 1]
        return dn(1.0 / up(1.0 + eh)), min(1.0, up(1.0 / dn(1.0 + el)))
    el, eh, _ = _exp_point(x)  # sigmoid(x) = e / (1 + e), increasing in e
    return max(0.0, dn(el / up(1.0 + el))), up(eh / dn(1.0 + eh))


@kernel
def _sigmoid_into(lo_, hi_, lo, hi):
    for i in range(lo_.shape[0]):
        lo[i] = _sigmoid_point(lo_[i])[0]
        hi[i] = _sigmoid_point(hi_[i])[1]
    return OK


@kernel
def _softplus_point(x):
    """(lo, hi, ok) enclosing log(1 + exp(x)); proof: proofs/bounds.md#softplus."""
    if x > 0.0:
        # x + log1p(exp(-x)), both terms >= 0
        el, eh, _ = _exp_point(-x)
        lo = dn(x + max(_log1p_point(el)[0], 0.0))
        hi = up(x + _log1p_point(eh)[1])
        return lo, hi, _finite(hi)
    el, eh, _ = _exp_point(x)
    return max(_log1p_point(el)[0], 0.0), _log1p_point(eh)[1], True


@kernel
def _softplus_into(lo_, hi_, lo, hi):
    over = 0
    for i in range(lo_.shape[0]):
        a, _, ok1 = _softplus_point(lo_[i])
        _, b, ok2 = _softplus_point(hi_[i])
        lo[i] = a
        hi[i] = b
        over += not (ok1 and ok2)
    return OVERFLOW if over else OK


tanh = _unary(_tanh_into)
sigmoid = _unary(_sigmoid_into)
softplus = _unary(_softplus_into)


# --- sin and cos ---------------------------------------------------------------------------
#
# x = k pi/2 + r* with k = rint(x * 2/pi) and a three-part Cody-Waite split of pi/2 (fdlibm's
# pio2_1, pio2_2, pio2_3): PIO2_1 and PIO2_2 have at most 33 significant bits, so k * PIO2_1
# and k * PIO2_2 are exact for |k| < 2^20, which |x| <= SINCOS_ARG_MAX = 2^20 guarantees.
# Beyond it the kernels return [-1, 1], always valid. proof: proofs/bounds.md#sincos

SINCOS_ARG_MAX = 2.0**20
INV_PIO2 = 0.6366197723675814  # fl(2/pi)
PIO2_1 = float.fromhex("0x1.921fb54400000p+0")
PIO2_2 = float.fromhex("0x1.0b4611a600000p-34")
PIO2_3 = float.fromhex("0x1.3198a2e037073p-69")
SINCOS_REDUCED_MAX = 0.7854  # |r| bound after reduction (pi/4 + 1.3e-10)
E_SINCOS = 2.0**-50  # relative allowance (proved error 4.97u)
A_SINCOS = 2.0**-119  # absolute allowance per unit |k| (reduction error, 5.5e-37 |k|)
B_SINCOS = 2.0**-1070  # absolute allowance 16 eta (underflow in the polynomials)
SINCOS_DELTA = 2.0**-51  # >= |r_hat - r*| for every |x| <= SINCOS_ARG_MAX
# Taylor coefficients (-1)^i / (2i+1)! and (-1)^i / (2i)!, i = 0..8, rounded to nearest
SIN_COEF = np.array([(-1) ** i / math.factorial(2 * i + 1) for i in range(9)])
COS_COEF = np.array([(-1) ** i / math.factorial(2 * i) for i in range(9)])


@kernel
def _sincos_reduce(x):
    """(k, r, bad): k integer-valued, r ~ x - k pi/2 for |x| <= SINCOS_ARG_MAX (larger and NaN
    arguments are clamped; callers return [-1, 1] for them). bad flags |r| > 0.7854, which
    the proof excludes. proof: proofs/bounds.md#sincos"""
    xc = min(SINCOS_ARG_MAX, max(-SINCOS_ARG_MAX, x))  # constant first: a NaN gives -2^20
    k = (xc * INV_PIO2 + RINT_MAGIC) - RINT_MAGIC
    # xc - k * PIO2_1 is exact (Sterbenz); the other two terms carry the proved error
    r = ((xc - k * PIO2_1) - k * PIO2_2) - k * PIO2_3
    return k, r, not abs(r) <= SINCOS_REDUCED_MAX


@kernel
def _sin_taylor(r):
    """r * sum_{i<=8} (-1)^i r^(2i) / (2i+1)! by Horner in r^2; proof: bounds.md#sincos."""
    c = SIN_COEF
    t = r * r
    s = c[8]
    s = s * t + c[7]
    s = s * t + c[6]
    s = s * t + c[5]
    s = s * t + c[4]
    s = s * t + c[3]
    s = s * t + c[2]
    s = s * t + c[1]
    s = s * t + c[0]
    return r * s


@kernel
def _cos_taylor(r):
    """sum_{i<=8} (-1)^i r^(2i) / (2i)! by Horner in r^2; proof: bounds.md#sincos."""
    c = COS_COEF
    t = r * r
    s = c[8]
    s = s * t + c[7]
    s = s * t + c[6]
    s = s * t + c[5]
    s = s * t + c[4]
    s = s * t + c[3]
    s = s * t + c[2]
    s = s * t + c[1]
    return s * t + c[0]


@kernel
def _sincos_value(k, r, shift):
    """(lo, hi) enclosing sin(x) (shift 0) or cos(x) = sin(x + pi/2) (shift 1) from the
    reduction (k, r) of x: sin(k pi/2 + r) is sin r, cos r, -sin r, -cos r for k = 0..3 mod 4.
    Both polynomials are evaluated and one selected: branch-free, so that loops vectorise
    (measured 7x faster than branching on the quadrant). proof: proofs/bounds.md#sincos"""
    q = (int(k) + shift) & 3  # two's complement: the residue in 0..3 also for k < 0
    s = _sin_taylor(r)
    c = _cos_taylor(r)
    y = c if q & 1 else s
    y = -y if q & 2 else y
    # |y - f| <= eps |y| + |k| alpha + 8 eta: widening with an absolute term (see the proof)
    t = E_SINCOS * abs(y) + (abs(k) * A_SINCOS + B_SINCOS)
    return max(-1.0, dn(y - t)), min(1.0, up(y + t))


@kernel
def _sincos_point(x, shift):
    k, r, bad = _sincos_reduce(x)
    lo, hi = _sincos_value(k, r, shift)
    # bad is excluded by the proof; either way [-1, 1] is valid
    full = bad | (not abs(x) <= SINCOS_ARG_MAX)
    return (-1.0 if full else lo), (1.0 if full else hi)


@kernel
def _sin_point(x):
    """(lo, hi) enclosing sin(x) for a double x; [-1, 1] when |x| > 2^20 (or x is NaN)."""
    return _sincos_point(x, 0)


@kernel
def _cos_point(x):
    """(lo, hi) enclosing cos(x) for a double x; [-1, 1] when |x| > 2^20 (or x is NaN)."""
    return _sincos_point(x, 1)


@kernel
def _mod4(d):
    """d mod 4 in [0, 4) for an integer-valued double |d| < 2^50 (every operation exact)."""
    return d - 4.0 * math.floor(d * 0.25)


@kernel
def _sincos_extrema(a, b, shift):
    """(has_min, has_max, bad) for sin (shift 0) or cos (shift 1) over [a, b]: whether the
    range may reach -1, resp. 1, and whether a reduction broke its proved bound.

    Extrema of sin(x + shift pi/2) lie at x = j pi/2 with j + shift = 1 (maximum) or 3
    (minimum) mod 4. Every such j with a <= j pi/2 <= b satisfies j_lo <= j <= j_hi below: j_lo
    is k_a, or k_a + 1 only when r*_a > 0 is certain (likewise j_hi); a doubtful extremum is
    counted, which only widens. Integer arithmetic in doubles (exact), so loops vectorise.
    proof: proofs/bounds.md#sincos
    """
    ka, ra, bad_a = _sincos_reduce(a)
    kb, rb, bad_b = _sincos_reduce(b)
    j_lo = ka + (1.0 if ra > SINCOS_DELTA else 0.0)
    j_hi = kb - (1.0 if rb < -SINCOS_DELTA else 0.0)
    # the first j >= j_lo with j = residue mod 4 is j_lo + ((residue - j_lo) mod 4)
    has_max = j_lo + _mod4(1.0 - shift - j_lo) <= j_hi
    has_min = j_lo + _mod4(3.0 - shift - j_lo) <= j_hi
    # b - a >= 6.3 (also +inf, NaN): the true width exceeds 2 pi and the range is [-1, 1];
    # endpoints beyond 2^20 were clamped by the reduction, so they count as "any extremum"
    inside = (b - a < 6.3) & (abs(a) <= SINCOS_ARG_MAX) & (abs(b) <= SINCOS_ARG_MAX)
    bad = (bad_a | bad_b) & inside
    return has_min | (not inside) | bad, has_max | (not inside) | bad, bad


@kernel
def _sincos_range(a, b, shift):
    """(lo, hi) enclosing the range of sin (shift 0) or cos (shift 1) over [a, b]: -1 or 1
    where an extremum may lie inside, else the hull of the endpoint enclosures (sin is
    monotone between extrema). proof: proofs/bounds.md#sincos"""
    la, ha = _sincos_point(a, shift)
    lb, hb = _sincos_point(b, shift)
    has_min, has_max, _ = _sincos_extrema(a, b, shift)
    return (-1.0 if has_min else min(la, lb)), (1.0 if has_max else max(ha, hb))


@kernel
def _sin_iv(a, b):
    """(lo, hi) enclosing {sin x : a <= x <= b} for doubles a <= b (no allocation; for other
    compiled kernels)."""
    return _sincos_range(a, b, 0)


@kernel
def _cos_iv(a, b):
    """(lo, hi) enclosing {cos x : a <= x <= b} for doubles a <= b."""
    return _sincos_range(a, b, 1)


@kernel
def _sincos_into(lo_, hi_, lo, hi, shift):
    # _sincos_range in two loops, each of which the compiler vectorises (measured: 6 ns per
    # interval against 24 ns for the fused loop)
    for i in range(lo_.shape[0]):
        la, ha = _sincos_point(lo_[i], shift)
        lb, hb = _sincos_point(hi_[i], shift)
        lo[i] = min(la, lb)
        hi[i] = max(ha, hb)
    bad = False
    for i in range(lo_.shape[0]):
        has_min, has_max, f = _sincos_extrema(lo_[i], hi_[i], shift)
        lo[i] = -1.0 if has_min else lo[i]
        hi[i] = 1.0 if has_max else hi[i]
        bad |= f
    return BROKEN if bad else OK


@kernel
def _sin_into(lo_, hi_, lo, hi):
    return _sincos_into(lo_, hi_, lo, hi, 0)


@kernel
def _cos_into(lo_, hi_, lo, hi):
    return _sincos_into(lo_, hi_, lo, hi, 1)


sin = _unary(_sin_into)
cos = _unary(_cos_into)


# --- reductions ----------------------------------------------------------------------------


@kernel
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


@kernel
def _shift(v, c):
    """fl(v - c) for v <= c, raised to -1000 when below: exp of anything below -745.2 is
    enclosed by [0, eta] anyway, and this keeps -inf (overflow of v - c) out of dn/up."""
    d = v - c
    return d if d >= -1000.0 else -1000.0


@kernel
def _lse_bounds(v, lower):
    """Bound on log(sum_j exp(v_j)) from below (lower=True) or above; proof: bounds.md#lse."""
    n = v.shape[0]
    c = v[0]
    for j in range(1, n):
        c = max(c, v[j])
    acc = 0.0
    for j in range(n):
        d = _shift(v[j], c)
        if lower:
            acc = dn(acc + _exp_point(dn(d))[0])
        else:
            acc = up(acc + _exp_point(up(d))[1])
    # acc >= 1 - tiny (the term j = argmax contributes exp(0) enclosed)
    if lower:
        return dn(c + _log_point(acc)[0])
    return up(c + _log_point(acc)[1])


@kernel
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


@kernel
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
            dlo = _shift(lo_[i, j], c)
            dhi = _shift(hi_[i, j], c)
            alo_lo[j] = _exp_point(dn(dlo))[0]
            alo_hi[j] = _exp_point(up(dlo))[1]
            ahi_lo[j] = _exp_point(dn(dhi))[0]
            ahi_hi[j] = _exp_point(up(dhi))[1]
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


RADIUS_FLOOR = 2.0**-900


@kernel
def _radius(lo, hi, c):
    """An upper bound of max(hi - c, c - lo), exactly 0 for a point interval whose midpoint
    is exact (so point matrices keep zero radii); proof: proofs/bounds.md#two-sum."""
    return max(_sum_dn_up(hi, -c)[1], _sum_dn_up(c, -lo)[1])


@kernel
def _mid_rad_into(lo_, hi_, m, r):
    """Midpoints m and radii r with [lo, hi] inside [m - r, m + r] (flat arrays)."""
    bad = 0
    for i in range(lo_.shape[0]):
        c = 0.5 * lo_[i] + 0.5 * hi_[i]
        m[i] = c
        r[i] = _radius(lo_[i], hi_[i], c)
        bad += not _finite(r[i])
    return OVERFLOW if bad else OK


def mid_rad(lo, hi):
    """Midpoint and radius arrays of the same shape as lo, hi."""
    out = np.empty((2,) + lo.shape)
    status = _mid_rad_into(lo.reshape(-1), hi.reshape(-1), out[0].reshape(-1), out[1].reshape(-1))
    return out[0], out[1], status


@kernel
def matmul_right(bl, bh, g, bm, vd):
    """From the right factor's endpoints (n x p, C order): midpoints bm and the stack
    vd = [V; D] (2n x p) with V = max(fl(br + fl(g |bm|)), 2^-900) and
    D = max(fl(|bm| + br), 2^-900), br the rounded-up radius. proof: bounds.md#matmul"""
    n, q = bm.shape
    bad = 0
    for i in range(n):
        for j in range(q):
            lo = bl[i, j]
            hi = bh[i, j]
            c = 0.5 * lo + 0.5 * hi
            r = up(max(hi - c, c - lo))
            a = abs(c)
            bm[i, j] = c
            # the floor replaces "+ eta" of the lemma and keeps subnormal numbers (100x slower
            # in BLAS) out of the products; any larger V or D is still an upper bound
            vd[i, j] = max(r + g * a, RADIUS_FLOOR)
            vd[n + i, j] = max(a + r, RADIUS_FLOOR)
            bad += not _finite(r + a)
    return OVERFLOW if bad else OK


@kernel
def matmul_finish(c, w, f, k, lo, hi):
    """The enclosure [c - R, c + R], R = fl(fl(w * f) + k) >= the exact radius bound, written
    to lo and hi (which may be c and w themselves: each entry is read before it is written)."""
    m, q = c.shape
    bad = 0
    for i in range(m):
        for j in range(q):
            r = w[i, j] * f + k
            a = dn(c[i, j] - r)
            b = up(c[i, j] + r)
            lo[i, j] = a
            hi[i, j] = b
            bad += not (_finite(a) and _finite(b))
    return OVERFLOW if bad else OK


# --- probes for the FPU check --------------------------------------------------------------


@kernel
def fpu_probe(a, b, c):
    """a + b, a * b + c and a / 2 evaluated by compiled code (see certified.arith.fpu)."""
    return a[0] + b[0], a[1] * b[1] + c[0], a[2] / 2.0, a[3] * 2.0
