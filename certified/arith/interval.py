"""Vectorised float64 intervals: numpy arrays of lower and upper endpoints.

The fast path for ensembles of many points. Every operation returns an enclosure of the exact
image of its input intervals, rounded outward; the kernels and their lemmas live in
:mod:`certified.arith._kernels` and ``proofs/bounds.md``. Broadcasting and shapes follow
numpy. Endpoints are finite: a NaN or infinite input raises :class:`NonFiniteError`, a result
that would leave the float64 range raises :class:`RangeOverflowError` (use the ball layer,
:mod:`certified.arith.ball`, for such magnitudes), and an argument outside a function's domain
raises :class:`DomainError` (no silent restriction to the domain, unlike IEEE 1788's set
semantics: a caller who passes ``sqrt([-1, 4])`` has a bug worth hearing about).

Guarantee of every operation: encloses the exact result for all points of the arguments.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from certified.arith import _kernels
from certified.arith.fpu import check_fpu_state
from certified.arith.tri import TriArray
from certified.errors import (
    DomainError,
    EmptyIntervalError,
    InputError,
    NonFiniteError,
    RangeOverflowError,
    ShapeError,
)

__all__ = [
    "Interval",
    "sqr",
    "pown",
    "sqrt",
    "exp",
    "expm1",
    "log",
    "log1p",
    "tanh",
    "sin",
    "cos",
    "sigmoid",
    "softplus",
    "absolute",
    "minimum",
    "maximum",
    "isum",
    "dot",
    "matmul",
    "logsumexp",
    "softmax",
    "hull",
]

U = 2.0**-53


def _as_float_array(x: Any, field: str) -> np.ndarray:
    if isinstance(x, Interval):
        raise InputError(f"{field}: expected numbers, got an Interval")
    if isinstance(x, (bool, np.bool_)):
        raise InputError(f"{field}: expected a number, got a bool")
    try:
        a = np.asarray(x)
    except ValueError as exc:  # ragged nested lists
        raise ShapeError(f"{field}: not a rectangular array ({exc})") from None
    if a.dtype == object or a.dtype.kind not in "iuf":
        raise InputError(
            f"{field}: expected a float or integer array, got dtype {a.dtype}; convert exact "
            "numbers with Interval.from_exact"
        )
    if a.dtype.kind in "iu":
        # integers beyond 2^53 are not exact doubles: refuse rather than round silently
        if a.size and np.max(np.abs(a.astype(object))) > 2**53:
            raise InputError(f"{field}: integers above 2^53 are not exact doubles; use from_exact")
        a = a.astype(np.float64)
    elif a.dtype != np.float64:
        a = a.astype(np.float64)  # float16/float32 values are exact doubles
    if not np.all(np.isfinite(a)):
        bad = np.argwhere(~np.isfinite(a))[0]
        where = f"{field}[{', '.join(map(str, bad))}]" if a.ndim else field
        raise NonFiniteError(
            f"{where}: {a[tuple(bad)]!r} is not finite; intervals need finite endpoints"
        )
    return a


def _status(status: int, what: str) -> None:
    if status == _kernels.OK:
        return
    if status == _kernels.OVERFLOW:
        raise RangeOverflowError(
            f"{what}: an endpoint of the result exceeds the float64 range (|x| > 1.8e308); "
            "use the ball layer (certified.arith.ball) for such magnitudes"
        )
    if status == _kernels.DOMAIN:
        raise DomainError(f"{what}: an argument interval leaves the domain of {what}")
    raise RuntimeError(f"{what}: internal precondition violated (status {status}); please report")


class Interval:
    """An array of closed intervals ``[lo, hi]`` with float64 endpoints.

    Parameters
    ----------
    lo, hi : array_like
        Endpoints, broadcast together (``hi=None`` gives point intervals). Integers must be
        at most 2^53 in magnitude; NaN and infinities are rejected.

    Interval arrays support ``+ - * / @ **`` (integer powers), unary ``-``, ``abs``, indexing,
    ``reshape`` and ``.T``, with numpy broadcasting. A float array operand is taken as exact
    point intervals. Interval arrays have no ``__bool__`` and no ``__hash__``; comparisons are
    three-valued (:meth:`lt`, :meth:`le`, ...).

    Guarantee: every result encloses the exact result for all points of the operands.
    """

    __slots__ = ("_lo", "_hi")
    __hash__ = None  # type: ignore[assignment]
    __array_ufunc__ = None  # numpy defers to our operators: ndarray + Interval -> Interval

    def __init__(self, lo: Any, hi: Any = None) -> None:
        a = _as_float_array(lo, "lo")
        b = a if hi is None else _as_float_array(hi, "hi")
        try:
            a, b = np.broadcast_arrays(a, b)
        except ValueError:
            raise ShapeError(
                f"lo with shape {a.shape} and hi with shape {b.shape} do not broadcast"
            ) from None
        if np.any(a > b):
            bad = tuple(np.argwhere(a > b)[0])
            raise EmptyIntervalError(
                f"interval{list(bad)}: lower endpoint {a[bad]!r} exceeds upper endpoint "
                f"{b[bad]!r}; pass lo <= hi"
            )
        self._lo = _frozen(a)
        self._hi = _frozen(b)

    @classmethod
    def _trusted(cls, lo: np.ndarray, hi: np.ndarray) -> Interval:
        # results of kernels: no copy (views of one fresh (2, n) buffer are fine)
        out = cls.__new__(cls)
        out._lo = np.asarray(lo, dtype=np.float64)
        out._hi = np.asarray(hi, dtype=np.float64)
        out._lo.flags.writeable = False
        out._hi.flags.writeable = False
        return out

    # --- construction ----------------------------------------------------------------------

    @classmethod
    def from_exact(cls, values: Any, hi: Any = None) -> Interval:
        """The tightest float64 intervals containing exact numbers.

        ``values`` (and optionally ``hi``) are nested lists or arrays of anything
        :func:`certified.arith.exact.to_fmpq` reads exactly: ints, floats, ``"p/q"``,
        decimal strings such as ``"0.1"`` (exactly one tenth, not the double), dyadics.

        Guarantee: encloses the exact numbers (tightest).
        """
        from certified.arith.exact import fmpq_array_to_float, to_fmpq_array

        lo_q = to_fmpq_array(values, field="values")
        hi_q = lo_q if hi is None else to_fmpq_array(hi, field="hi")
        return cls(fmpq_array_to_float(lo_q, "down"), fmpq_array_to_float(hi_q, "up"))

    @classmethod
    def from_balls(cls, balls: Any) -> Interval:
        """Intervals enclosing python-flint ``arb`` balls (an arb, or a nested list of them).

        Guarantee: encloses each ball.
        """
        from certified.arith.ball import endpoints
        from certified.arith.exact import fmpq_array_to_float

        arr = np.empty(np.shape(np.empty(np.shape(balls), dtype=object)), dtype=object)
        flat = list(_flatten(balls))
        if len(flat) != arr.size:
            raise ShapeError("balls: not a rectangular nested list")
        lows = np.empty(arr.size, dtype=object)
        highs = np.empty(arr.size, dtype=object)
        for i, b in enumerate(flat):
            lows[i], highs[i] = endpoints(b)
        return cls(
            fmpq_array_to_float(lows.reshape(arr.shape), "down"),
            fmpq_array_to_float(highs.reshape(arr.shape), "up"),
        )

    def to_balls(self, prec: int) -> list:
        """Nested lists of python-flint ``arb`` balls containing each interval.

        Guarantee: each ball contains its interval.
        """
        from flint import arb

        from certified.arith.ball import check_precision, precision

        check_precision(prec)
        with precision(prec):
            flat = [
                arb(a).union(arb(b))
                for a, b in zip(self._lo.ravel(), self._hi.ravel(), strict=True)
            ]
        return np.array(flat, dtype=object).reshape(self.shape).tolist() if self.ndim else flat[0]

    # --- basic properties ------------------------------------------------------------------

    @property
    def lo(self) -> np.ndarray:
        """Lower endpoints (read-only float64 array)."""
        return self._lo

    @property
    def hi(self) -> np.ndarray:
        """Upper endpoints (read-only float64 array)."""
        return self._hi

    @property
    def shape(self) -> tuple[int, ...]:
        return self._lo.shape

    @property
    def ndim(self) -> int:
        return self._lo.ndim

    @property
    def size(self) -> int:
        return self._lo.size

    def __len__(self) -> int:
        return len(self._lo)

    def __getitem__(self, idx: Any) -> Interval:
        return Interval._trusted(np.array(self._lo[idx]), np.array(self._hi[idx]))

    def reshape(self, *shape: Any) -> Interval:
        return Interval._trusted(self._lo.reshape(*shape).copy(), self._hi.reshape(*shape).copy())

    @property
    def T(self) -> Interval:  # noqa: N802 - numpy's name
        return Interval._trusted(self._lo.T.copy(), self._hi.T.copy())

    def __repr__(self) -> str:
        if self.ndim == 0:
            return f"Interval({float(self._lo)!r}, {float(self._hi)!r})"
        return f"Interval(lo={self._lo!r}, hi={self._hi!r})"

    def __bool__(self) -> bool:
        raise TypeError("an Interval has no truth value; use the three-valued comparisons")

    def mid(self) -> np.ndarray:
        """A point of each interval near its midpoint. Guarantee: lo <= mid <= hi."""
        m = 0.5 * self._lo + 0.5 * self._hi
        return np.minimum(np.maximum(m, self._lo), self._hi)

    def width_upper(self) -> np.ndarray:
        """Upper bounds on ``hi - lo`` (``inf`` beyond the float64 range). Guarantee: upper
        bound (proofs/bounds.md#pred-succ)."""
        with np.errstate(over="ignore", invalid="ignore"):
            w = self._hi - self._lo
            return w + (_kernels.PHI * np.abs(w) + _kernels.ETA)

    def rad_upper(self) -> np.ndarray:
        """Upper bounds on the radius about :meth:`mid`. Guarantee: upper bound."""
        m = self.mid()
        with np.errstate(over="ignore", invalid="ignore"):
            r = np.maximum(self._hi - m, m - self._lo)
            return r + (_kernels.PHI * np.abs(r) + _kernels.ETA)

    def contains(self, x: Any) -> np.ndarray:
        """Where the double(s) ``x`` lie in the interval(s). Guarantee: exact."""
        a = _as_float_array(x, "x")
        return (self._lo <= a) & (a <= self._hi)

    def encloses(self, other: Interval) -> np.ndarray:
        """Where ``other`` is a subset of ``self``. Guarantee: exact."""
        o = _coerce(other)
        return (self._lo <= o._lo) & (o._hi <= self._hi)

    # --- three-valued comparisons ----------------------------------------------------------

    def lt(self, other: Any) -> TriArray:
        """``self < other`` pointwise: TRUE if for all points, FALSE if for none."""
        o = _coerce(other)
        return TriArray(self._hi < o._lo, self._lo >= o._hi)

    def le(self, other: Any) -> TriArray:
        o = _coerce(other)
        return TriArray(self._hi <= o._lo, self._lo > o._hi)

    def gt(self, other: Any) -> TriArray:
        return _coerce(other).lt(self)

    def ge(self, other: Any) -> TriArray:
        return _coerce(other).le(self)

    def __lt__(self, other: Any) -> TriArray:
        return self.lt(other)

    def __le__(self, other: Any) -> TriArray:
        return self.le(other)

    def __gt__(self, other: Any) -> TriArray:
        return self.gt(other)

    def __ge__(self, other: Any) -> TriArray:
        return self.ge(other)

    # --- arithmetic ------------------------------------------------------------------------

    def __neg__(self) -> Interval:
        return Interval._trusted(-self._hi, -self._lo)

    def __pos__(self) -> Interval:
        return self

    def __abs__(self) -> Interval:
        return absolute(self)

    def __add__(self, other: Any) -> Interval:
        return _binary(_kernels_attr("add"), self, other, "add")

    def __radd__(self, other: Any) -> Interval:
        return _binary(_kernels_attr("add"), other, self, "add")

    def __sub__(self, other: Any) -> Interval:
        return _binary(_kernels_attr("sub"), self, other, "sub")

    def __rsub__(self, other: Any) -> Interval:
        return _binary(_kernels_attr("sub"), other, self, "sub")

    def __mul__(self, other: Any) -> Interval:
        return _binary(_kernels_attr("mul"), self, other, "mul")

    def __rmul__(self, other: Any) -> Interval:
        return _binary(_kernels_attr("mul"), other, self, "mul")

    def __truediv__(self, other: Any) -> Interval:
        return _binary(_kernels_attr("div"), self, other, "div")

    def __rtruediv__(self, other: Any) -> Interval:
        return _binary(_kernels_attr("div"), other, self, "div")

    def __pow__(self, k: Any) -> Interval:
        return pown(self, k)

    def __matmul__(self, other: Any) -> Interval:
        return matmul(self, other)

    def __rmatmul__(self, other: Any) -> Interval:
        return matmul(other, self)


def _frozen(a: Any) -> np.ndarray:
    """A read-only float64 array copy with -0.0 replaced by +0.0 (0-d arrays stay arrays)."""
    out = np.array(a, dtype=np.float64)
    np.add(out, 0.0, out=out)
    out.flags.writeable = False
    return out


def _flatten(x: Any):
    if isinstance(x, (list, tuple)):
        for y in x:
            yield from _flatten(y)
    else:
        yield x


_SCRATCH = threading.local()
_SCRATCH_LIMIT = 1 << 24  # doubles (128 MiB) per buffer; larger ones are not kept


def _scratch(name: str, shape: tuple[int, ...]) -> np.ndarray:
    """A per-thread reusable work array: fresh large arrays cost page faults on every call
    (measured: 3 ms of 8 in the 64x64 @ 64x10000 product). Contents are undefined."""
    size = int(np.prod(shape))
    if size > _SCRATCH_LIMIT:
        return np.empty(shape)
    pool = _SCRATCH.__dict__.setdefault("pool", {})
    buf = pool.get(name)
    if buf is None or buf.size < size:
        buf = pool[name] = np.empty(size)
    return buf[:size].reshape(shape)


def _kernels_attr(name: str) -> Callable:
    # looked up at call time, so that tests can replace a kernel (mutation testing)
    return getattr(_kernels, name)


def _coerce(x: Any) -> Interval:
    if isinstance(x, Interval):
        return x
    return Interval(x)


def _flat(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float64).reshape(-1)


def _binary(kernel: Callable, x: Any, y: Any, name: str) -> Interval:
    a = _coerce(x)
    b = _coerce(y)
    try:
        shape = np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise ShapeError(f"{name}: shapes {a.shape} and {b.shape} do not broadcast") from None
    args = [_flat(np.broadcast_to(v, shape)) for v in (a._lo, a._hi, b._lo, b._hi)]
    lo, hi, status = kernel(*args)
    _status(status, name)
    return Interval._trusted(lo.reshape(shape), hi.reshape(shape))


def _unary(name: str, x: Any) -> Interval:
    a = _coerce(x)
    lo, hi, status = getattr(_kernels, name)(_flat(a._lo), _flat(a._hi))
    _status(status, name)
    return Interval._trusted(lo.reshape(a.shape), hi.reshape(a.shape))


def sqr(x: Any) -> Interval:
    """Square ``x**2`` (the exact range, not ``x*x``). Guarantee: encloses."""
    return _unary("sqr", x)


def pown(x: Any, k: Any) -> Interval:
    """Integer power ``x**k``; negative k needs 0 outside ``x``. Guarantee: encloses."""
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)):
        raise InputError(f"pown: exponent k must be an integer, got {k!r}")
    k = int(k)
    a = _coerce(x)
    if k == 0:
        return Interval._trusted(np.ones(a.shape), np.ones(a.shape))
    if k == 1:
        return a
    if k == 2:
        return sqr(a)
    if abs(k) > 2**31:
        raise InputError(f"pown: exponent {k} too large in magnitude (limit 2^31)")
    if k < 0:
        if np.any((a._lo <= 0.0) & (0.0 <= a._hi)):
            raise DomainError("pown: a negative exponent needs intervals that exclude 0")
        # x^-k = (1/x)^k: the reciprocal first, so that huge |x| gives tiny results, not overflow
        a = _binary(_kernels_attr("div"), np.ones(a.shape), a, "pown")
    lo, hi, status = _kernels.pown_pos(_flat(a._lo), _flat(a._hi), abs(k))
    _status(status, "pown")
    return Interval._trusted(lo.reshape(a.shape), hi.reshape(a.shape))


def sqrt(x: Any) -> Interval:
    """Square root; needs ``lo >= 0``. Guarantee: encloses."""
    return _unary("sqrt", x)


def exp(x: Any) -> Interval:
    """Exponential, by a Taylor kernel with a proved remainder (proofs/bounds.md#exp-taylor).

    Guarantee: encloses."""
    return _unary("exp", x)


def expm1(x: Any) -> Interval:
    """``exp(x) - 1`` without cancellation near 0. Guarantee: encloses."""
    return _unary("expm1", x)


def log(x: Any) -> Interval:
    """Natural logarithm; needs ``lo > 0``. Guarantee: encloses."""
    return _unary("log", x)


def log1p(x: Any) -> Interval:
    """``log(1 + x)``; needs ``lo > -1``. Guarantee: encloses."""
    return _unary("log1p", x)


def tanh(x: Any) -> Interval:
    """Hyperbolic tangent. Guarantee: encloses."""
    return _unary("tanh", x)


def sin(x: Any) -> Interval:
    """Sine: the range over each interval, by a Taylor kernel after a Cody-Waite reduction
    modulo pi/2 (proofs/bounds.md#sincos); ``[-1, 1]`` where an endpoint exceeds ``2**20`` in
    magnitude or the interval is wider than 2 pi.

    Guarantee: encloses."""
    return _unary("sin", x)


def cos(x: Any) -> Interval:
    """Cosine, as :func:`sin` (proofs/bounds.md#sincos). Guarantee: encloses."""
    return _unary("cos", x)


def sigmoid(x: Any) -> Interval:
    """Logistic function ``1 / (1 + exp(-x))``. Guarantee: encloses."""
    return _unary("sigmoid", x)


def softplus(x: Any) -> Interval:
    """``log(1 + exp(x))``. Guarantee: encloses."""
    return _unary("softplus", x)


def absolute(x: Any) -> Interval:
    """Absolute value (exact endpoints). Guarantee: exact range."""
    a = _coerce(x)
    lo = np.where(a._lo >= 0, a._lo, np.where(a._hi <= 0, -a._hi, 0.0)) + 0.0
    hi = np.maximum(np.abs(a._lo), np.abs(a._hi))
    return Interval._trusted(lo, hi)


def minimum(x: Any, y: Any) -> Interval:
    """Pointwise minimum (exact endpoints). Guarantee: exact range."""
    a, b = _coerce(x), _coerce(y)
    return _broadcast_checked(np.minimum, a, b, "minimum")


def maximum(x: Any, y: Any) -> Interval:
    """Pointwise maximum (exact endpoints). Guarantee: exact range."""
    a, b = _coerce(x), _coerce(y)
    return _broadcast_checked(np.maximum, a, b, "maximum")


def _broadcast_checked(f: Callable, a: Interval, b: Interval, name: str) -> Interval:
    try:
        return Interval._trusted(f(a._lo, b._lo), f(a._hi, b._hi))
    except ValueError:
        raise ShapeError(f"{name}: shapes {a.shape} and {b.shape} do not broadcast") from None


def hull(x: Any, y: Any) -> Interval:
    """Smallest intervals containing both arguments. Guarantee: exact."""
    a, b = _coerce(x), _coerce(y)
    try:
        return Interval._trusted(np.minimum(a._lo, b._lo), np.maximum(a._hi, b._hi))
    except ValueError:
        raise ShapeError(f"hull: shapes {a.shape} and {b.shape} do not broadcast") from None


def _rows(a: Interval, axis: int, name: str) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
    if a.ndim == 0:
        raise ShapeError(f"{name}: needs an array with at least one axis, got a scalar")
    if not -a.ndim <= axis < a.ndim:
        raise ShapeError(f"{name}: axis {axis} out of range for shape {a.shape}")
    if a.shape[axis] == 0:
        raise ShapeError(f"{name}: axis {axis} is empty")
    lo = np.moveaxis(a._lo, axis, -1)
    hi = np.moveaxis(a._hi, axis, -1)
    rest = lo.shape[:-1]
    n = lo.shape[-1]
    return (
        np.ascontiguousarray(lo).reshape(-1, n),
        np.ascontiguousarray(hi).reshape(-1, n),
        rest,
    )


def isum(x: Any, axis: int | None = None) -> Interval:
    """Sum along an axis (all entries if ``axis`` is None), every partial sum rounded outward.

    Guarantee: encloses."""
    a = _coerce(x)
    whole = axis is None
    if whole:
        a = a.reshape(1, -1)
        axis = 1
    lo, hi, rest = _rows(a, axis, "isum")
    if whole:
        rest = ()
    slo, shi, status = _kernels.sum_rows(lo, hi)
    _status(status, "isum")
    return Interval._trusted(slo.reshape(rest), shi.reshape(rest))


def dot(x: Any, y: Any) -> Interval:
    """Dot product of two 1-D interval vectors. Guarantee: encloses."""
    a, b = _coerce(x), _coerce(y)
    if a.ndim != 1 or b.ndim != 1 or a.shape != b.shape:
        raise ShapeError(f"dot: needs two 1-D arrays of equal length, got {a.shape} and {b.shape}")
    return isum(a * b)


def matmul(x: Any, y: Any) -> Interval:
    """Matrix product by midpoint-radius arithmetic with an a priori rounding bound.

    .. math::

        |AB - \\mathrm{fl}(A_m B_m)| \\le |A_m|(B_r + \\gamma_n |B_m|)
            + A_r(|B_m| + B_r) + n\\eta

    evaluated so that rounding can only increase it (proofs/bounds.md#matmul). 1-D operands
    are treated as in numpy. Three BLAS products.

    Guarantee: encloses.
    """
    a, b = _coerce(x), _coerce(y)
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError("matmul: scalar operands are not allowed; use *")
    if a.ndim > 2 or b.ndim > 2:
        raise ShapeError(f"matmul: operands must be 1-D or 2-D, got {a.shape} and {b.shape}")
    squeeze_left = a.ndim == 1
    squeeze_right = b.ndim == 1
    a2 = a.reshape(1, -1) if squeeze_left else a
    b2 = b.reshape(-1, 1) if squeeze_right else b
    n = a2.shape[1]
    if b2.shape[0] != n:
        raise ShapeError(f"matmul: inner dimensions differ: {a.shape} @ {b.shape}")
    out_shape = tuple(
        s for s, keep in ((a2.shape[0], not squeeze_left), (b2.shape[1], not squeeze_right)) if keep
    )
    if n == 0:
        z = np.zeros((a2.shape[0], b2.shape[1]))
        return Interval._trusted(z.reshape(out_shape), z.copy().reshape(out_shape))
    if n >= 2**40:
        raise ShapeError("matmul: inner dimension too large for the rounding bound")
    am, ar, status = _kernels.mid_rad(np.ascontiguousarray(a2._lo), np.ascontiguousarray(a2._hi))
    _status(status, "matmul")
    # g >= gamma_n = n u / (1 - n u): proofs/bounds.md#matmul
    g = (n + 1) * U if n <= 2**26 else 2 * n * U
    f = 1.0 + 2 * (2 * n + 8) * U
    k = 4 * n * _kernels.ETA
    point_left = not np.any(ar)
    # |Am| V + Ar D = [|Am|, Ar] @ [V; D]: one product of length 2n (n when A is a point matrix)
    left = np.abs(am) if point_left else np.hstack([np.abs(am), ar])
    m, p = a2.shape[0], b2.shape[1]
    bl = np.ascontiguousarray(b2._lo)
    bh = np.ascontiguousarray(b2._hi)
    out = np.empty((2, m, p))
    lo, hi = out[0], out[1]
    # work arrays are reused across calls (fresh ones cost page faults: 3 ms of 8 measured);
    # blocking over columns was measured slower (BLAS call overhead on small blocks).
    # C and W go into the two halves of the result, and [C - R, C + R] overwrites them in place
    bm = _scratch("matmul_bm", (n, p))
    vd = _scratch("matmul_vd", (2 * n, p))
    _status(_kernels.matmul_right(bl, bh, g, bm, vd), "matmul")
    with np.errstate(over="ignore", invalid="ignore"):
        np.matmul(am, bm, out=lo)
        np.matmul(left, vd[: n if point_left else 2 * n], out=hi)
    # a non-finite C or W (overflow in BLAS) makes an endpoint non-finite: reported as OVERFLOW
    _status(_kernels.matmul_finish(lo, hi, f, k, lo, hi), "matmul")
    return Interval._trusted(lo.reshape(out_shape), hi.reshape(out_shape))


def logsumexp(x: Any, axis: int = -1) -> Interval:
    """``log(sum(exp(x)))`` along an axis, stable for large arguments (shifted by the max).

    Guarantee: encloses."""
    a = _coerce(x)
    lo, hi, rest = _rows(a, axis, "logsumexp")
    rlo, rhi, status = _kernels.logsumexp_rows(lo, hi)
    _status(status, "logsumexp")
    return Interval._trusted(rlo.reshape(rest), rhi.reshape(rest))


def softmax(x: Any, axis: int = -1) -> Interval:
    """``exp(x_i) / sum_j exp(x_j)`` along an axis, using that it increases in x_i and
    decreases in every other x_j (proofs/bounds.md#softmax).

    Guarantee: encloses."""
    a = _coerce(x)
    lo, hi, rest = _rows(a, axis, "softmax")
    n = lo.shape[1]
    rlo, rhi, status = _kernels.softmax_rows(lo, hi)
    _status(status, "softmax")
    shape = rest + (n,)
    back = lambda v: np.moveaxis(v.reshape(shape), -1, axis)  # noqa: E731
    return Interval._trusted(np.ascontiguousarray(back(rlo)), np.ascontiguousarray(back(rhi)))


check_fpu_state()
