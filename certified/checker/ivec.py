"""Arrays of float64 intervals with outward rounding, for the checker's batched replays.

An :class:`Iv` holds two float64 arrays ``lo <= hi`` of one shape; it stands for the set of
arrays between them. Each operation computes its result with numpy's correctly rounded
``+ - * /`` (round to nearest, IEEE 754) and moves every lower bound at least one float down and
every upper bound at least one float up by Rump, Zimmermann, Boldo and Melquiond's bound
``c -/+ (phi |c| + eta)`` (BIT 2009; ``phi = 2^-53 (1 + 2^-52)``, ``eta = 2^-1074``): the exact
result lies within half an ulp of the rounded one, so within the widened pair
(proofs/checker_soundness.md#float-intervals). That is
sound only under round-to-nearest with gradual underflow, which :func:`check_fpu` probes on
values read from arrays (no constant folding) before every replay. Nothing else is trusted of
numpy: no library function (``exp``, ``tanh``, ``sum``, ``matmul``) enters a bound;
``exp`` (hence ``tanh`` and the sigmoid) is a Taylor polynomial after an argument reduction,
evaluated in these intervals with a proved remainder (:func:`exp_points`); other
transcendental functions are evaluated in arb, element by element, and rounded outward.
Non-finite values (overflow, ``inf * 0``) are rejected by :func:`finite` checks, never used."""

from __future__ import annotations

import math
from math import factorial

import flint
import numpy as np
from flint import arb, fmpq

__all__ = ["Iv", "Series", "check_fpu", "dn", "exp_points", "fpu_ok", "from_arb", "from_fmpq",
           "matmul", "matrix_mr", "series_conv", "to_arb", "up"]  # fmt: skip

_INF = np.inf
_PHI = 2.0**-53 * (1.0 + 2.0**-52)
_ETA = 2.0**-1074


def fpu_ok() -> bool:
    """Round to nearest with gradual underflow, probed on array values (no constant folding)."""
    x = np.array([1.0, -1.0, 2.0**-1022, 2.0**-1074, 1.0])
    y = np.array([3 * 2.0**-54, -3 * 2.0**-54, 2.0, 2.0, 2.0**-54])
    probes = (
        (x[0] + y[0], 1.0 + 2.0**-52),
        (x[1] + y[1], -(1.0 + 2.0**-52)),
        (x[4] + y[4], 1.0),
        (x[2] / y[2], 2.0**-1023),
        (x[3] * y[3], 2.0**-1073),
    )
    return all(float(got) == want for got, want in probes)


def check_fpu() -> None:
    """Raise RuntimeError unless numpy rounds to nearest with gradual underflow."""
    if not fpu_ok():
        raise RuntimeError("the floating-point environment does not round to nearest")


def up(x):
    """>= succ(x) elementwise, for x computed in round to nearest (bounds.md#pred-succ)."""
    return x + (_PHI * np.abs(x) + _ETA)


def dn(x):
    """<= pred(x) elementwise (bounds.md#pred-succ)."""
    return x - (_PHI * np.abs(x) + _ETA)


def _down(x: np.ndarray, e: np.ndarray | None = None) -> np.ndarray:
    """At most pred(x) elementwise (x computed in round to nearest; x and e are consumed)."""
    e = np.abs(x) if e is None else np.abs(x, out=e)
    e *= _PHI
    e += _ETA
    x -= e
    return x


def _up(x: np.ndarray, e: np.ndarray | None = None) -> np.ndarray:
    """At least succ(x) elementwise (x and e are consumed)."""
    e = np.abs(x) if e is None else np.abs(x, out=e)
    e *= _PHI
    e += _ETA
    x += e
    return x


class Iv:
    """Intervals ``[lo, hi]`` elementwise (two float64 arrays of one shape)."""

    __slots__ = ("hi", "lo")

    def __init__(self, lo: np.ndarray, hi: np.ndarray) -> None:
        self.lo, self.hi = lo, hi

    @classmethod
    def zeros(cls, shape) -> Iv:
        return cls(np.zeros(shape), np.zeros(shape))

    @property
    def shape(self) -> tuple[int, ...]:
        return self.lo.shape

    def __len__(self) -> int:
        return len(self.lo)

    def __getitem__(self, key) -> Iv:
        return Iv(self.lo[key], self.hi[key])

    def __setitem__(self, key, value: Iv) -> None:
        self.lo[key], self.hi[key] = value.lo, value.hi

    def copy(self) -> Iv:
        return Iv(self.lo.copy(), self.hi.copy())

    def __add__(self, o: Iv) -> Iv:
        return Iv(_down(self.lo + o.lo), _up(self.hi + o.hi))

    def add_into(self, o: Iv) -> None:
        """``self = self + o`` in place (views allowed): the values of ``+``."""
        self.lo += o.lo
        self.hi += o.hi
        _down(self.lo), _up(self.hi)

    def __sub__(self, o: Iv) -> Iv:
        return Iv(_down(self.lo - o.hi), _up(self.hi - o.lo))

    def __neg__(self) -> Iv:
        return Iv(-self.hi, -self.lo)

    def __mul__(self, o: Iv) -> Iv:
        a, b, c, d = self.lo * o.lo, self.lo * o.hi, self.hi * o.lo, self.hi * o.hi
        if a.ndim == 0:  # scalars; else the same values in the products' own arrays
            return Iv(_down(np.minimum(np.minimum(a, b), np.minimum(c, d))),
                      _up(np.maximum(np.maximum(a, b), np.maximum(c, d))))  # fmt: skip
        lo, t = np.minimum(a, b), np.minimum(c, d)
        np.minimum(lo, t, out=lo), np.maximum(a, b, out=t), np.maximum(c, d, out=a)
        return Iv(_down(lo, b), _up(np.maximum(t, a, out=t), c))

    def scale(self, c: np.ndarray) -> Iv:
        """Times the exact float array ``c`` (broadcast)."""
        a, b = self.lo * c, self.hi * c
        return Iv(_down(np.minimum(a, b)), _up(np.maximum(a, b)))

    def scale_pos(self, c) -> Iv:
        """Times the exact positive doubles ``c`` (broadcast): the same values as
        :meth:`scale` (rounding is monotone, so lo c <= hi c), two passes fewer."""
        return Iv(_down(self.lo * c), _up(self.hi * c))

    def divide_int(self, k: int) -> Iv:
        """Divided by the positive integer k (exact as a double: k < 2^53)."""
        return Iv(_down(self.lo / k), _up(self.hi / k))

    def __truediv__(self, o: Iv) -> Iv:
        """Quotient; the caller has checked that ``o`` excludes 0."""
        a, b, c, d = self.lo / o.lo, self.lo / o.hi, self.hi / o.lo, self.hi / o.hi
        lo = np.minimum(np.minimum(a, b), np.minimum(c, d))
        hi = np.maximum(np.maximum(a, b), np.maximum(c, d))
        return Iv(_down(lo), _up(hi))

    def sum(self, axis: int = 0) -> Iv:
        """Sums along ``axis`` (k terms): numpy's sum in any order errs by at most
        gamma_k sum |x_i| + k eta (bounds.md#matmul, a dot product with ones), bounded here by
        fl(sum |x_i|) c + (k + 2) eta with c = 1.05 (k + 1) u for k u <= 1/100
        (proofs/checker_soundness.md#float-intervals)."""
        k = self.lo.shape[axis]
        if k == 1:
            return Iv(self.lo.sum(axis=axis), self.hi.sum(axis=axis))
        if k * 2.0**-53 > 0.01:
            raise ValueError("ivec: too many terms for one sum")
        c, tail = 1.05 * (k + 1) * 2.0**-53, (k + 2) * _ETA
        elo = np.abs(self.lo).sum(axis=axis) * c + tail
        ehi = np.abs(self.hi).sum(axis=axis) * c + tail
        return Iv(_down(self.lo.sum(axis=axis) - elo), _up(self.hi.sum(axis=axis) + ehi))

    def union_zero(self) -> Iv:
        return Iv(np.minimum(self.lo, 0.0), np.maximum(self.hi, 0.0))

    def finite(self) -> bool:
        return bool(np.isfinite(self.lo).all() and np.isfinite(self.hi).all())

    def mag(self) -> np.ndarray:
        """Upper bounds of the absolute values (exact)."""
        return np.maximum(np.abs(self.lo), np.abs(self.hi))


def from_fmpq(values: list[fmpq]) -> Iv:
    """The tightest float intervals around exact rationals."""
    lo, hi = np.empty(len(values)), np.empty(len(values))
    for i, q in enumerate(values):
        p, den = int(q.p), int(q.q)
        if den & (den - 1) == 0 and -(2**53) < p < 2**53 and den.bit_length() < 1000:
            lo[i] = hi[i] = math.ldexp(p, 1 - den.bit_length())  # a double: exact
            continue
        f = float(q) if abs(p) < 2**1000 and den < 2**1000 else math.nan
        if math.isfinite(f) and fmpq(*f.as_integer_ratio()) == q:  # a double: exact
            lo[i] = hi[i] = f
        else:
            lo[i], hi[i] = _float_down(q), -_float_down(-q)
    return Iv(lo, hi)


def matrix_mr(Mlo: np.ndarray, Mhi: np.ndarray) -> tuple:
    """(Mm, Mr, |Mm|) of :func:`matmul` for the interval matrix [Mlo, Mhi], to reuse."""
    Mm = Mlo + (Mhi - Mlo) * 0.5
    return Mm, _up(np.maximum(Mhi - Mm, Mm - Mlo)), np.abs(Mm)


def matmul(Mlo: np.ndarray, Mhi: np.ndarray, V: Iv, pre: tuple | None = None) -> Iv:
    """Enclosures of M V for the interval matrix [Mlo, Mhi] (r, c) and intervals V (c, ...), by
    midpoint and radius with an a priori bound on the rounding of numpy's matmul in any order
    (proofs/bounds.md#matmul): [M][V] lies in Mm Vm +/- R with
    R = |Mm| (Vr + g |Vm|) + Mr (|Vm| + Vr) + c eta, g = (c + 1) u >= gamma_c; the factors are
    floored at 2^-900, and the float value of R times 1 + 4 (c + 4) u, plus 4 c eta, bounds R.
    ``pre``: :func:`matrix_mr` of the matrix (the same values, computed once)."""
    c = Mlo.shape[1]
    if c * 2.0**-53 > 0.001:
        raise ValueError("ivec: matrix too large")
    shape = V.shape
    lo, hi = V.lo.reshape(c, -1), V.hi.reshape(c, -1)
    Vm = lo + (hi - lo) * 0.5
    Vr = _up(np.maximum(hi - Vm, Vm - lo))
    Mm, Mr, aMm = matrix_mr(Mlo, Mhi) if pre is None else pre
    aVm = np.abs(Vm)
    g = (c + 1) * 2.0**-53
    R = aMm @ np.maximum(Vr + g * aVm, 2.0**-900) + Mr @ np.maximum(aVm + Vr, 2.0**-900)
    R = R * (1.0 + 4 * (c + 4) * 2.0**-53) + 4 * c * _ETA
    Ym = Mm @ Vm
    return Iv(_down(Ym - R).reshape(Mlo.shape[0], *shape[1:]),
              _up(Ym + R).reshape(Mlo.shape[0], *shape[1:]))  # fmt: skip


def _mr(x: Iv) -> tuple[np.ndarray, np.ndarray]:
    """Midpoints and radii (bounds.md#matmul: the radius covers both exact differences)."""
    m = x.lo + (x.hi - x.lo) * 0.5
    return m, up(np.maximum(x.hi - m, m - x.lo))


class Series:
    """Coefficients 0, 1, ... of G nodes for n sets: values as intervals (size, G, n), dual
    parts (g of them) as midpoints with the two factors of bounds.md#matmul,
    ``max(r + c_g|m|, 2^-900)`` and ``max(|m| + r, 2^-900)`` (G, n, size, g), c_g >= gamma_c
    for the dot products of up to ``c`` terms."""

    def __init__(self, size: int, G: int, n: int, g: int, c: int) -> None:
        self.lo, self.hi = np.zeros((size, G, n)), np.zeros((size, G, n))
        self.m, self.f1, self.f2 = (np.empty((G, n, size, g)) for _ in range(3))
        self.g, self.k = (c + 1) * 2.0**-53, 0

    def push(self, x: Iv) -> None:
        k = self.k
        self.lo[k], self.hi[k] = x.lo[..., 0], x.hi[..., 0]
        self.k = k + 1
        if not self.m.shape[-1]:  # values only
            return
        m, r = _mr(x[..., 1:])
        am = np.abs(m)
        self.m[:, :, k] = m
        self.f1[:, :, k] = np.maximum(r + self.g * am, 2.0**-900)
        self.f2[:, :, k] = np.maximum(am + r, 2.0**-900)

    def values(self, at: slice) -> Iv:
        return Iv(self.lo[at], self.hi[at])


def _dot(c: np.ndarray, M: np.ndarray) -> np.ndarray:
    """sum_t c[t] M[..., t, :] for c (J, G, n) and M (G, n, J, g): numpy's matmul."""
    return np.matmul(np.moveaxis(c, 0, 2)[..., None, :], M)[..., 0, :]


def series_conv(A: Series, B: Series, k: int, first: int = 0, weighted: bool = False) -> Iv:
    """sum_{j=first..k} A_j B_{k-j} (times j if weighted) as duals: the values in intervals;
    the dual parts ``sum_j (a_j0 b'_{k-j} + a'_j b_{k-j,0})`` one dot product of c = 2J terms
    per entry, by midpoint and radius with the bound of :func:`matmul` (bounds.md#matmul,
    proofs/checker_soundness.md#float-intervals)."""
    ja, jb = slice(first, k + 1), slice(0, k - first + 1)  # A_j, j up; B_i, i = k - j up
    a, b = A.values(ja), B.values(jb)[::-1]  # both in the order of j
    if weighted:
        w = np.arange(first, k + 1, dtype=float).reshape(-1, 1, 1)
        a, bw = a.scale(w), b.scale(w)
    else:
        bw = b
    val = (a * b).sum(axis=0)
    if not A.m.shape[-1]:  # values only
        return Iv(val.lo[..., None], val.hi[..., None])
    (am1, ar1), (am2, ar2) = _mr(a[::-1]), _mr(bw)  # a in the order of i, with B's duals
    Ym = _dot(am1, B.m[:, :, jb]) + _dot(am2, A.m[:, :, ja])
    R = (_dot(np.abs(am1), B.f1[:, :, jb]) + _dot(np.abs(am2), A.f1[:, :, ja])) + (
        _dot(ar1, B.f2[:, :, jb]) + _dot(ar2, A.f2[:, :, ja]))  # fmt: skip
    c = 2 * (k + 1 - first)
    R = R * (1.0 + 4 * (c + 4) * 2.0**-53) + 4 * c * 2.0**-1074
    out = Iv(np.empty((*val.shape, 1 + Ym.shape[-1])), np.empty((*val.shape, 1 + Ym.shape[-1])))
    out[..., 0] = val
    out.lo[..., 1:], out.hi[..., 1:] = dn(Ym - R), up(Ym + R)
    return out


def _float_down(q: fmpq) -> float:
    """The largest double <= q (-inf below the doubles, the largest double above them)."""
    try:
        f = float(q)
    except OverflowError:
        return float(np.finfo(float).max) if q > 0 else -_INF
    while fmpq(*f.as_integer_ratio()) > q:
        f = math.nextafter(f, -_INF)
        if not math.isfinite(f):
            return f
    up = math.nextafter(f, _INF)
    while math.isfinite(up) and fmpq(*up.as_integer_ratio()) <= q:
        f, up = up, math.nextafter(up, _INF)
    return f


def from_arb(balls: list[arb]) -> Iv:
    """Float intervals containing arb balls (each bound rounded outward)."""
    lo = np.array([_arb_down(b.lower()) for b in balls], dtype=float)
    hi = np.array([-_arb_down(-b.upper()) for b in balls], dtype=float)
    return Iv(lo, hi)


def _arb_down(x: arb) -> float:
    """The largest double <= the exact value of the midpoint-only ball x."""
    if not x.is_finite():
        return -_INF
    m, e = x.mid().man_exp()
    return _float_down(fmpq(int(m) * 2 ** int(e)) if e >= 0 else fmpq(int(m), 2 ** int(-e)))


def to_arb(x: Iv) -> list[arb]:
    """The intervals as arb balls (exact: doubles are exact in arb at >= 53 bits)."""
    return [
        arb(a).union(arb(b))
        for a, b in zip(x.lo.ravel().tolist(), x.hi.ravel().tolist(), strict=True)
    ]


# exp: x = k ln2 + r with |r| <= 0.35, exp(r) by its Taylor polynomial of degree 17, remainder
# |r|^18 / 18! e^|r| <= 1e-23 (proofs/checker_soundness.md#float-intervals), times 2^k
with flint.ctx.workprec(200):  # ln 2 between two neighbouring doubles (restored on exit)
    _LN2 = from_arb([arb(2).log()])
_INV_FACT = from_fmpq([fmpq(1, factorial(j)) for j in range(18)])
_REM = 1e-23


def exp_points(p: np.ndarray) -> Iv:
    """Enclosures of exp at the doubles p (any shape); ``hi`` is inf where exp overflows."""
    pc = np.clip(p, -745.5, 709.0)
    k = np.rint(pc * (1 / math.log(2)))
    r = Iv(pc, pc.copy()) - Iv(np.full(p.shape, _LN2.lo[0]), np.full(p.shape, _LN2.hi[0])).scale(k)
    if not bool((r.mag() <= 0.35).all()):
        raise RuntimeError("exp: argument reduction failed")
    out = _INV_FACT[17] * r + _INV_FACT[16]  # the coefficients broadcast: the same values
    for j in range(15, -1, -1):
        out = out * r + _INV_FACT[j]
    ki = k.astype(np.int64)
    # ldexp is exact unless the result is subnormal: one more widening covers that rounding
    lo = _down(np.ldexp(_down(out.lo - _REM), ki))
    hi = _up(np.ldexp(_up(out.hi + _REM), ki))
    lo = np.where(p < -745.5, 0.0, lo)
    hi = np.where(p > 709.0, _INF, hi)
    return Iv(np.maximum(lo, 0.0), hi)
