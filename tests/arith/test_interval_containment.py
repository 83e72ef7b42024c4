"""Soundness of the vectorised float64 intervals (:mod:`certified.arith.interval`).

For every operation: at several points of each input interval (both endpoints, the rounded
and the exact midpoint, a random mix of endpoints and random doubles inside) the exact value
-- an ``fmpq`` for rational operations, a 256-bit arb ball (see ``reference.py``) for
transcendental ones -- must lie in the computed enclosure.  Zero misses are allowed.

The checks are plain functions (``misses_mul(X, Y, points) -> list[Miss]``, ...) used both by
the property tests and by the mutation tests, which replace a kernel of
:mod:`certified.arith._kernels` with a version that skips outward rounding and require the
very same checks to find a miss.

Also here: results are valid intervals of the broadcast shape; out-of-domain inputs raise
``DomainError``; ``RangeOverflowError`` is raised exactly when some exact value leaves the
float64 range (up to ``reference.OVERFLOW_SLACK``); and, as a sanity bound on tightness,
point enclosures of the elementary functions are a few ulps wide.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from flint import fmpq, fmpq_mat
from hypothesis import Phase, example, given, settings
from hypothesis import strategies as st
from interval_strategies import (
    DBL_MAX,
    LOG_DBL_MAX,
    TINY,
    doubles,
    interval_arrays,
    intervals,
    nonzero_intervals,
    sample_points,
    seeds,
)
from reference import (
    OVERFLOW_SLACK,
    UNARY,
    arb_exact,
    ball_overflows_double,
    exact,
    logsumexp_ball,
    logsumexp_encloses,
    overflows_double,
    softmax_encloses,
    unary_encloses,
)

from certified.arith import Interval, _kernels
from certified.arith import interval as iv
from certified.errors import DomainError, RangeOverflowError, ShapeError

SHAPES = st.sampled_from([(), (1,), (3,), (2, 2)])
TRANSCENDENTAL = ("sqrt", "exp", "expm1", "log", "log1p", "tanh", "sigmoid", "softplus")
# Reductions may overflow in a partial sum even when the total fits (a recursive sum cannot be
# asked to avoid that), so they are excused when the sum of magnitudes is this large.  matmul
# forms midpoint and radius products each up to |A||B|, hence the factor 4; it is also excused
# when an operand entry is that large, since the radius of [-DBL_MAX, DBL_MAX] rounded up is
# not a double (so [0, 0] @ [-DBL_MAX, DBL_MAX] may overflow although the product is 0).
REDUCTION_OVERFLOW = OVERFLOW_SLACK * exact(DBL_MAX)
MATMUL_OVERFLOW = exact(DBL_MAX) / 4


# --- the containment checks (plain functions, shared with the mutation tests) ------------------


@dataclass(frozen=True)
class Miss:
    """One failure of soundness: an exact value outside its enclosure, or a bad result."""

    op: str
    reason: str
    index: tuple[int, ...] = ()
    point: str = ""
    lo: float = float("nan")
    hi: float = float("nan")

    def __str__(self) -> str:
        where = f" at index {self.index}, point {self.point}" if self.point else ""
        enclosure = f", enclosure [{self.lo!r}, {self.hi!r}]" if self.point else ""
        return f"{self.op}: {self.reason}{where}{enclosure}"


def _shape(x: Any) -> tuple[int, ...]:
    return x.shape if isinstance(x, Interval) else np.shape(x)


def _objects(values: Any, shape: tuple[int, ...]) -> np.ndarray:
    out = np.empty(shape, dtype=object)
    out[...] = values
    return out


def invalid_result(op: str, Z: Any, shape: tuple[int, ...]) -> list[Miss]:
    """Misses for a result that is not a valid interval array of the expected shape."""
    if not isinstance(Z, Interval):
        return [Miss(op, f"returned {type(Z).__name__}, not an Interval")]
    if Z.shape != shape or Z.lo.shape != shape or Z.hi.shape != shape:
        return [Miss(op, f"result shape {Z.shape} (lo {Z.lo.shape}), expected {shape}")]
    if Z.lo.dtype != np.float64 or Z.hi.dtype != np.float64:
        return [Miss(op, f"endpoint dtypes {Z.lo.dtype}/{Z.hi.dtype}, expected float64")]
    misses = []
    for idx in np.ndindex(shape):
        lo, hi = float(Z.lo[idx]), float(Z.hi[idx])
        if not (np.isfinite(lo) and np.isfinite(hi) and lo <= hi):
            misses.append(Miss(op, "invalid interval (non-finite or lo > hi)", idx, "-", lo, hi))
    return misses


def _rational_misses(op: str, Z: Interval, values: Sequence[np.ndarray]) -> list[Miss]:
    to_exact = np.frompyfunc(exact, 1, 1)
    lo_q = _objects(to_exact(Z.lo), Z.shape)  # exact endpoints, converted once
    hi_q = _objects(to_exact(Z.hi), Z.shape)
    misses = []
    for value in values:
        for idx in np.ndindex(Z.shape):
            if not lo_q[idx] <= value[idx] <= hi_q[idx]:
                lo, hi = float(Z.lo[idx]), float(Z.hi[idx])
                misses.append(Miss(op, "exact value outside", idx, str(value[idx]), lo, hi))
    return misses


def _unjustified_overflow(op: str) -> list[Miss]:
    return [Miss(op, "RangeOverflowError although every exact value fits in float64")]


def misses_binary(
    op: str,
    compute: Callable[[Any, Any], Interval],
    exact_op: Callable[[fmpq, fmpq], fmpq],
    X: Any,
    Y: Any,
    points: Sequence[tuple[np.ndarray, np.ndarray]],
) -> list[Miss]:
    """Misses of ``compute(X, Y)`` against ``exact_op`` at point pairs (broadcasting).

    ``points`` are pairs of fmpq object arrays shaped like ``X`` and ``Y``.  They must include
    the corner pairs: overflow is justified by the largest exact value among them, which is
    the true supremum for the (bi)monotone operations tested here.
    """
    shape = np.broadcast_shapes(_shape(X), _shape(Y))
    apply = np.frompyfunc(exact_op, 2, 1)
    values = [_objects(apply(px, py), shape) for px, py in points]
    try:
        Z = compute(X, Y)
    except RangeOverflowError:
        if any(overflows_double(v) for value in values for v in value.flat):
            return []
        return _unjustified_overflow(op)
    return invalid_result(op, Z, shape) or _rational_misses(op, Z, values)


def misses_mul(X: Any, Y: Any, points: Sequence[tuple[np.ndarray, np.ndarray]]) -> list[Miss]:
    return misses_binary("mul", operator.mul, operator.mul, X, Y, points)


BINARY: dict[str, tuple[Callable, Callable]] = {
    "add": (operator.add, operator.add),
    "sub": (operator.sub, operator.sub),
    "mul": (operator.mul, operator.mul),
    "div": (operator.truediv, operator.truediv),
    "minimum": (iv.minimum, min),
    "maximum": (iv.maximum, max),
}


def misses_exact_unary(
    op: str,
    compute: Callable[[Interval], Interval],
    exact_op: Callable[[fmpq], fmpq],
    X: Interval,
    points: Sequence[np.ndarray],
) -> list[Miss]:
    """Misses of a rational unary operation; ``points`` must include both endpoints."""
    apply = np.frompyfunc(exact_op, 1, 1)
    values = [_objects(apply(p), X.shape) for p in points]
    try:
        Z = compute(X)
    except RangeOverflowError:
        if any(overflows_double(v) for value in values for v in value.flat):
            return []
        return _unjustified_overflow(op)
    return invalid_result(op, Z, X.shape) or _rational_misses(op, Z, values)


def misses_pown(X: Interval, k: int, points: Sequence[np.ndarray]) -> list[Miss]:
    return misses_exact_unary(f"pown(., {k})", lambda A: iv.pown(A, k), lambda q: q**k, X, points)


def misses_function(name: str, X: Interval, points: Sequence[np.ndarray]) -> list[Miss]:
    """Misses of ``iv.<name>`` against 256-bit arb at the points (must include endpoints:
    all these functions are monotone, so the endpoints decide whether overflow is due)."""
    reference = UNARY[name][0]
    try:
        Z = getattr(iv, name)(X)
    except RangeOverflowError:
        for p in points:
            for q in p.flat:
                if ball_overflows_double(lambda q=q: reference(arb_exact(q))):
                    return []
        return _unjustified_overflow(name)
    misses = invalid_result(name, Z, X.shape)
    if misses:
        return misses
    for p in points:
        for idx in np.ndindex(X.shape):
            lo, hi = float(Z.lo[idx]), float(Z.hi[idx])
            if not unary_encloses(name, p[idx], lo, hi):
                misses.append(Miss(name, "reference ball not inside", idx, str(p[idx]), lo, hi))
    return misses


def misses_exp(X: Interval, points: Sequence[np.ndarray]) -> list[Miss]:
    return misses_function("exp", X, points)


def _magnitudes(X: Interval) -> np.ndarray:
    return _objects(np.frompyfunc(exact, 1, 1)(np.maximum(np.abs(X.lo), np.abs(X.hi))), X.shape)


def misses_isum(X: Interval, axis: int | None, points: Sequence[np.ndarray]) -> list[Miss]:
    op = f"isum(axis={axis})"
    try:
        Z = iv.isum(X, axis=axis)
    except RangeOverflowError:
        bound = _magnitudes(X).sum(axis=axis)
        if any(b > REDUCTION_OVERFLOW for b in np.ravel(np.asarray(bound, dtype=object))):
            return []
        return _unjustified_overflow(op)
    shape = np.sum(np.empty(X.shape), axis=axis).shape
    values = [_objects(p.sum(axis=axis), shape) for p in points]
    return invalid_result(op, Z, shape) or _rational_misses(op, Z, values)


def misses_dot(
    x: Interval, y: Interval, points: Sequence[tuple[np.ndarray, np.ndarray]]
) -> list[Miss]:
    try:
        Z = iv.dot(x, y)
    except RangeOverflowError:
        if (_magnitudes(x) * _magnitudes(y)).sum() > REDUCTION_OVERFLOW:
            return []
        return _unjustified_overflow("dot")
    values = [_objects((px * py).sum(), ()) for px, py in points]
    return invalid_result("dot", Z, ()) or _rational_misses("dot", Z, values)


def _as_matrix(p: np.ndarray, left: bool) -> fmpq_mat:
    if p.ndim == 1:
        p = p.reshape(1, -1) if left else p.reshape(-1, 1)
    return fmpq_mat(p.shape[0], p.shape[1], list(p.flat))


def _exact_matmul(pa: np.ndarray, pb: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    product = _as_matrix(pa, True) * _as_matrix(pb, False)
    flat = [product[i, j] for i in range(product.nrows()) for j in range(product.ncols())]
    return _objects(np.array(flat, dtype=object).reshape(shape), shape)


def misses_matmul(
    A: Interval, B: Interval, points: Sequence[tuple[np.ndarray, np.ndarray]]
) -> list[Miss]:
    """Misses of ``A @ B`` against exact fmpq_mat products of sampled point matrices."""
    shape = np.matmul(np.zeros(A.shape), np.zeros(B.shape)).shape
    try:
        Z = A @ B
    except RangeOverflowError:
        entries = [*_magnitudes(A).flat, *_magnitudes(B).flat]
        bound = _exact_matmul(_magnitudes(A), _magnitudes(B), shape)
        if any(b > MATMUL_OVERFLOW for b in [*bound.flat, *entries]):
            return []
        return _unjustified_overflow("matmul")
    values = [_exact_matmul(pa, pb, shape) for pa, pb in points]
    return invalid_result("matmul", Z, shape) or _rational_misses("matmul", Z, values)


def _slices(p: np.ndarray, axis: int) -> tuple[np.ndarray, tuple[int, ...]]:
    moved = np.moveaxis(p, axis, -1)
    return moved, moved.shape[:-1]


def misses_logsumexp(X: Interval, axis: int, points: Sequence[np.ndarray]) -> list[Miss]:
    """Misses of ``logsumexp`` (increasing in every argument: the all-``hi`` point, which
    ``points`` must include, decides whether overflow is due)."""
    op = f"logsumexp(axis={axis})"
    try:
        Z = iv.logsumexp(X, axis=axis)
    except RangeOverflowError:
        for p in points:
            moved, rest = _slices(p, axis)
            for idx in np.ndindex(rest):
                if ball_overflows_double(lambda xs=list(moved[idx]): logsumexp_ball(xs)):
                    return []
        return _unjustified_overflow(op)
    _, rest = _slices(np.empty(X.shape), axis)
    misses = invalid_result(op, Z, rest)
    if misses:
        return misses
    for p in points:
        moved, _ = _slices(p, axis)
        for idx in np.ndindex(rest):
            xs = list(moved[idx])
            lo, hi = float(Z.lo[idx]), float(Z.hi[idx])
            if not logsumexp_encloses(xs, lo, hi):
                misses.append(Miss(op, "reference ball not inside", idx, str(xs), lo, hi))
    return misses


def misses_softmax(X: Interval, axis: int, points: Sequence[np.ndarray]) -> list[Miss]:
    op = f"softmax(axis={axis})"
    Z = iv.softmax(X, axis=axis)
    misses = invalid_result(op, Z, X.shape)
    if misses:
        return misses
    zlo, _ = _slices(Z.lo, axis)
    zhi, _ = _slices(Z.hi, axis)
    for p in points:
        moved, rest = _slices(p, axis)
        for idx in np.ndindex(rest):
            xs = list(moved[idx])
            for i in range(len(xs)):
                lo, hi = float(zlo[idx][i]), float(zhi[idx][i])
                if not softmax_encloses(xs, i, lo, hi):
                    misses.append(Miss(op, "reference ball not inside", (*idx, i), str(xs), lo, hi))
    return misses


def _exact_repr(value: Any) -> str:
    if isinstance(value, Interval):
        return f"Interval({value.lo.tolist()!r}, {value.hi.tolist()!r})"
    return repr(np.asarray(value).tolist())


def assert_no_misses(misses: list[Miss], **inputs: Any) -> None:
    """Fail with the first misses and the inputs printed exactly (shortest round-trip reprs)."""
    if misses:
        shown = "\n".join(f"  {name} = {_exact_repr(v)}" for name, v in inputs.items())
        lines = "\n".join(map(str, misses[:10]))
        raise AssertionError(f"{len(misses)} miss(es):\n{lines}\ninputs:\n{shown}")


# --- points ----------------------------------------------------------------------------------


def points_of(X: Interval, seed: int) -> list[np.ndarray]:
    return sample_points(X.lo, X.hi, np.random.default_rng(seed))


def pair_points(X: Any, Y: Any, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """All pairs of points of ``X`` and ``Y`` (a float array is its own single point)."""
    rng = np.random.default_rng(seed)

    def points(V: Any) -> list[np.ndarray]:
        if isinstance(V, Interval):
            return sample_points(V.lo, V.hi, rng)
        return [_objects(np.frompyfunc(exact, 1, 1)(np.asarray(V, dtype=float)), np.shape(V))]

    return list(itertools.product(points(X), points(Y)))


def matched_points(A: Interval, B: Interval, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Point pairs for reductions: the i-th sample of A with the i-th and a shifted sample of B
    (all pairs would cost quadratically many exact matrix products)."""
    rng = np.random.default_rng(seed)
    pa = sample_points(A.lo, A.hi, rng)
    pb = sample_points(B.lo, B.hi, rng)
    return list(zip(pa, pb, strict=True)) + list(zip(pa, pb[1:] + pb[:1], strict=True))


# --- strategies ------------------------------------------------------------------------------


def interval_arrays_of(
    shape: tuple[int, ...], elements: st.SearchStrategy | None = None
) -> st.SearchStrategy[Interval]:
    return interval_arrays(shape, elements).map(lambda p: Interval(*p))


@st.composite
def same_shape_pairs(
    draw: st.DrawFn,
    x_elements: st.SearchStrategy | None = None,
    y_elements: st.SearchStrategy | None = None,
) -> tuple[Interval, Interval]:
    shape = draw(SHAPES)
    return draw(interval_arrays_of(shape, x_elements)), draw(interval_arrays_of(shape, y_elements))


@st.composite
def intervals_of_shape(
    draw: st.DrawFn, elements: st.SearchStrategy | None = None, shapes: st.SearchStrategy = SHAPES
) -> Interval:
    return draw(interval_arrays_of(draw(shapes), elements))


DOMAINS: dict[str, st.SearchStrategy] = {
    "sqrt": intervals(0.0, DBL_MAX),
    "exp": st.one_of(intervals(-DBL_MAX, LOG_DBL_MAX), intervals()),
    "expm1": st.one_of(intervals(-DBL_MAX, LOG_DBL_MAX), intervals()),
    "log": intervals(TINY, DBL_MAX),
    "log1p": intervals(math.nextafter(-1.0, 0.0), DBL_MAX),
    "tanh": intervals(),
    "sigmoid": intervals(),
    "softplus": intervals(),
}
# Moderate intervals (magnitudes up to 1e3) for reductions where every element matters.
MODERATE = st.one_of(intervals(-1e3, 1e3), intervals(-1.0, 1.0))


@pytest.fixture(scope="module", autouse=True)
def _compiled_kernels() -> None:
    """Compile (or load) every kernel once, so hypothesis deadlines time the arithmetic."""
    X = Interval(np.array([0.5, 1.0]), np.array([1.0, 2.0]))
    for op in (operator.add, operator.sub, operator.mul, operator.truediv):
        op(X, X)
    for name in TRANSCENDENTAL:
        getattr(iv, name)(X)
    for reduction in (iv.sqr, iv.isum, iv.logsumexp, iv.softmax):
        reduction(X)
    iv.pown(X, 3)
    iv.pown(X, -3)
    iv.dot(X, X)
    iv.matmul(X.reshape(1, 2), X.reshape(2, 1))


# --- property tests: rational operations -----------------------------------------------------


def check_binary(op: str, pair: tuple[Interval, Interval], seed: int) -> None:
    X, Y = pair
    compute, exact_op = BINARY[op]
    assert_no_misses(misses_binary(op, compute, exact_op, X, Y, pair_points(X, Y, seed)), X=X, Y=Y)


def _pin(lo: float, hi: float | None = None) -> Interval:
    return Interval(np.array([lo]), np.array([lo if hi is None else hi]))


@pytest.mark.parametrize("op", ["add", "sub", "mul", "minimum", "maximum"])
@given(pair=same_shape_pairs(), seed=seeds())
@example(pair=(_pin(0.1), _pin(3.0)), seed=0)
@example(pair=(_pin(0.1), _pin(0.2)), seed=0)
@example(pair=(_pin(1e-300), _pin(-1e-300)), seed=0)
@example(pair=(_pin(TINY), _pin(0.5)), seed=0)
@example(pair=(_pin(-DBL_MAX, DBL_MAX), _pin(-1.0, 1.0)), seed=0)
def test_binary_contains_exact(op: str, pair: tuple[Interval, Interval], seed: int) -> None:
    check_binary(op, pair, seed)


@given(pair=same_shape_pairs(y_elements=nonzero_intervals()), seed=seeds())
@example(pair=(_pin(1.0), _pin(3.0)), seed=0)
@example(pair=(_pin(1.0), _pin(-TINY, -TINY)), seed=0)
@example(pair=(_pin(-1.0, 1.0), _pin(DBL_MAX)), seed=0)
def test_div_contains_exact(pair: tuple[Interval, Interval], seed: int) -> None:
    check_binary("div", pair, seed)


def _swapped(f: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    return lambda a, b: f(b, a)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
@pytest.mark.parametrize("reflected", [False, True], ids=["interval_first", "float_first"])
@given(data=st.data(), seed=seeds())
def test_float_operands_are_exact_points(
    op: str, reflected: bool, data: st.DataObject, seed: int
) -> None:
    shape = data.draw(SHAPES, label="shape")
    divisor_is_X = op == "div" and reflected
    X = data.draw(interval_arrays_of(shape, nonzero_intervals() if divisor_is_X else None), "X")
    y_doubles = doubles(TINY, DBL_MAX) if op == "div" and not reflected else doubles()
    n = math.prod(shape)
    y = np.array(data.draw(st.lists(y_doubles, min_size=n, max_size=n), "y")).reshape(shape)
    if op == "div" and not reflected and data.draw(st.booleans(), label="negative divisor"):
        y = -y
    operand = float(y) if shape == () and data.draw(st.booleans(), "python float") else y
    compute, exact_op = BINARY[op]
    if reflected:  # y op X: through __radd__, __rsub__, ... of Interval
        compute, exact_op = _swapped(compute), _swapped(exact_op)
    misses = misses_binary(op, compute, exact_op, X, operand, pair_points(X, y, seed))
    assert_no_misses(misses, X=X, y=y)


@pytest.mark.parametrize(
    ("x_shape", "y_shape"),
    [((3, 1), (1, 4)), ((), (5,)), ((4,), ()), ((2, 1, 3), (4, 1)), ((1,), (3, 2))],
)
@given(data=st.data(), op=st.sampled_from(sorted(BINARY)), seed=seeds())
def test_broadcasting_like_numpy(
    x_shape: tuple, y_shape: tuple, data: st.DataObject, op: str, seed: int
) -> None:
    X = data.draw(interval_arrays_of(x_shape), label="X")
    Y = data.draw(interval_arrays_of(y_shape, nonzero_intervals() if op == "div" else None), "Y")
    compute, exact_op = BINARY[op]
    misses = misses_binary(op, compute, exact_op, X, Y, pair_points(X, Y, seed))
    assert_no_misses(misses, X=X, Y=Y)


@pytest.mark.parametrize("op", ["add", "mul", "div", "minimum"])
def test_shapes_that_do_not_broadcast_raise(op: str) -> None:
    X = Interval(np.zeros(3), np.ones(3))
    Y = Interval(np.ones(4), np.full(4, 2.0))
    with pytest.raises(ShapeError):
        BINARY[op][0](X, Y)


EXACT_UNARY: dict[str, tuple[Callable, Callable]] = {
    "neg": (operator.neg, operator.neg),
    "abs": (abs, abs),
    "sqr": (iv.sqr, lambda q: q * q),
}


@pytest.mark.parametrize("op", sorted(EXACT_UNARY))
@given(X=intervals_of_shape(), seed=seeds())
@example(X=_pin(-1.0, 1.0), seed=0)
@example(X=_pin(1e-300), seed=0)
@example(X=_pin(-1e154, 1e154), seed=0)
def test_exact_unary_contains_exact(op: str, X: Interval, seed: int) -> None:
    compute, exact_op = EXACT_UNARY[op]
    assert_no_misses(misses_exact_unary(op, compute, exact_op, X, points_of(X, seed)), X=X)


@given(X=intervals_of_shape(), k=st.integers(0, 9), seed=seeds())
@example(X=_pin(-2.0, 3.0), k=3, seed=0)
@example(X=_pin(-3.0, 2.0), k=4, seed=0)
@example(X=_pin(0.1), k=7, seed=0)
def test_pown_contains_exact(X: Interval, k: int, seed: int) -> None:
    assert_no_misses(misses_pown(X, k, points_of(X, seed)), X=X, k=k)


@given(X=intervals_of_shape(nonzero_intervals()), k=st.integers(-9, -1), seed=seeds())
@example(X=_pin(3.0), k=-1, seed=0)
@example(X=_pin(-0.1), k=-3, seed=0)
def test_pown_negative_contains_exact(X: Interval, k: int, seed: int) -> None:
    assert_no_misses(misses_pown(X, k, points_of(X, seed)), X=X, k=k)


@given(X=intervals_of_shape(nonzero_intervals()), k=st.integers(-5, 5), seed=seeds())
def test_power_operator_is_pown(X: Interval, k: int, seed: int) -> None:
    misses = misses_exact_unary(f"** {k}", lambda A: A**k, lambda q: q**k, X, points_of(X, seed))
    assert_no_misses(misses, X=X, k=k)


# --- property tests: transcendental functions -----------------------------------------------


def check_function(name: str, X: Interval, seed: int) -> None:
    assert_no_misses(misses_function(name, X, points_of(X, seed)), X=X)


@pytest.mark.parametrize("name", TRANSCENDENTAL)
@given(data=st.data(), seed=seeds())
def test_function_contains_arb(name: str, data: st.DataObject, seed: int) -> None:
    X = data.draw(intervals_of_shape(DOMAINS[name]), label="X")
    check_function(name, X, seed)


# Corner points of every function, pinned (each a point interval and a one-ulp interval).
CORNER_POINTS = {
    "sqrt": [0.0, TINY, 2.0, 0.25, 1e-300, DBL_MAX],
    "exp": [0.0, TINY, -TINY, 1.0, -1.0, 1e-300, -745.0, -745.2, -746.0, 709.0, -DBL_MAX],
    "expm1": [0.0, TINY, -TINY, 0.3466, -0.3466, 0.35, 1e-300, -40.0, -DBL_MAX, 700.0],
    "log": [TINY, 1.0, math.nextafter(1.0, 2.0), math.nextafter(1.0, 0.0), 2.0, DBL_MAX],
    "log1p": [math.nextafter(-1.0, 0.0), -0.29, -0.3, 0.0, TINY, 0.41, 0.42, DBL_MAX],
    "tanh": [0.0, TINY, -TINY, 1e-300, 0.5, 19.99, 20.0, -20.0, 710.0, DBL_MAX, -DBL_MAX],
    "sigmoid": [0.0, TINY, -TINY, 1.0, -36.0, 36.0, -745.0, -746.0, 800.0, DBL_MAX, -DBL_MAX],
    "softplus": [0.0, TINY, -TINY, 1.0, -1.0, -745.0, -800.0, 37.0, 1e300, -DBL_MAX],
}


@pytest.mark.parametrize(
    ("name", "x"), [(name, x) for name, xs in CORNER_POINTS.items() for x in xs]
)
def test_function_corner_points(name: str, x: float) -> None:
    X = Interval(np.array([x, x]), np.array([x, min(math.nextafter(x, math.inf), DBL_MAX)]))
    check_function(name, X, seed=0)


# Intervals on which hypothesis found misses, pinned (function, lo, hi).
PINNED_INTERVALS = [
    ("expm1", 0.0, 709.5),  # enclosure [-1.5e-323, -4.4e307]: the POW2 table is read at 2^1024
    ("expm1", 709.6, 709.7),
    ("log1p", -0.9999999999999999, DBL_MAX),  # upper endpoint NaN
    ("log1p", 1e308, DBL_MAX),
]


@pytest.mark.parametrize(("name", "lo", "hi"), PINNED_INTERVALS)
def test_function_pinned_intervals(name: str, lo: float, hi: float) -> None:
    check_function(name, _pin(lo, hi), seed=0)


# --- reductions: isum, dot, matmul, logsumexp, softmax --------------------------------------


@given(
    data=st.data(),
    shape=st.sampled_from([(4,), (2, 3), (2, 3, 2), (1, 5)]),
    wide=st.booleans(),
    seed=seeds(),
)
def test_isum_contains_exact(
    data: st.DataObject, shape: tuple[int, ...], wide: bool, seed: int
) -> None:
    X = data.draw(interval_arrays_of(shape, None if wide else MODERATE), label="X")
    axis = data.draw(st.sampled_from([None, *range(-len(shape), len(shape))]), label="axis")
    assert_no_misses(misses_isum(X, axis, points_of(X, seed)), X=X, axis=axis)


@given(data=st.data(), n=st.integers(1, 6), wide=st.booleans(), seed=seeds())
def test_dot_contains_exact(data: st.DataObject, n: int, wide: bool, seed: int) -> None:
    elements = None if wide else MODERATE
    x = data.draw(interval_arrays_of((n,), elements), label="x")
    y = data.draw(interval_arrays_of((n,), elements), label="y")
    assert_no_misses(misses_dot(x, y, matched_points(x, y, seed)), x=x, y=y)


MATMUL_SHAPES = st.one_of(
    st.tuples(st.integers(1, 4), st.integers(1, 4), st.integers(1, 4)),
    st.sampled_from([(1, 5, 1), (5, 1, 5), (1, 4, 3), (3, 4, 1), (1, 1, 1)]),
)


@given(data=st.data(), mkn=MATMUL_SHAPES, wide=st.booleans(), seed=seeds())
def test_matmul_contains_exact(
    data: st.DataObject, mkn: tuple[int, int, int], wide: bool, seed: int
) -> None:
    m, k, n = mkn
    elements = None if wide else MODERATE
    A = data.draw(interval_arrays_of((m, k), elements), label="A")
    B = data.draw(interval_arrays_of((k, n), elements), label="B")
    assert_no_misses(misses_matmul(A, B, matched_points(A, B, seed)), A=A, B=B)


@given(data=st.data(), k=st.integers(1, 5), left=st.booleans(), seed=seeds())
def test_matmul_vector_operands_like_numpy(
    data: st.DataObject, k: int, left: bool, seed: int
) -> None:
    vector = data.draw(interval_arrays_of((k,), MODERATE), label="vector")
    matrix = data.draw(interval_arrays_of((k, 3) if left else (3, k), MODERATE), label="matrix")
    A, B = (vector, matrix) if left else (matrix, vector)
    assert_no_misses(misses_matmul(A, B, matched_points(A, B, seed)), A=A, B=B)


def random_interval_matrix(rng: np.random.Generator, shape: tuple[int, int]) -> Interval:
    """Entries of mixed kinds: points, one-ulp, relative 1e-6 and wide intervals, with
    magnitudes from 1e-8 to 1e3 (too many entries for hypothesis to draw one by one)."""
    mid = rng.uniform(-1e3, 1e3, shape) * rng.choice([1.0, 1e-3, 1e-8], shape)
    kind = rng.integers(0, 4, shape)
    half = np.choose(
        kind, [0.0 * mid, np.abs(np.spacing(mid)), 1e-6 * np.abs(mid), rng.uniform(0, 1e3, shape)]
    )
    return Interval(mid - half, mid + half)


@settings(deadline=None, max_examples=max(20, settings.default.max_examples // 5))
@given(seed=seeds())
def test_matmul_benchmark_size_contains_exact(seed: int) -> None:
    """64 x 64 products against exact references: 20 examples in the ci and dev profiles (each
    costs 4 exact 64-term dot products per entry), 400 in the thorough one."""
    rng = np.random.default_rng(seed)
    A = random_interval_matrix(rng, (64, 64))
    B = random_interval_matrix(rng, (64, 64))
    assert_no_misses(misses_matmul(A, B, matched_points(A, B, seed)[:4]), A=A, B=B)


@given(
    data=st.data(),
    shape=st.sampled_from([(1,), (4,), (2, 3), (3, 2), (2, 2, 2)]),
    seed=seeds(),
)
def test_logsumexp_contains_arb(data: st.DataObject, shape: tuple[int, ...], seed: int) -> None:
    X = data.draw(interval_arrays_of(shape), label="X")
    axis = data.draw(st.sampled_from(range(-len(shape), len(shape))), label="axis")
    assert_no_misses(misses_logsumexp(X, axis, points_of(X, seed)), X=X, axis=axis)


@given(
    data=st.data(),
    shape=st.sampled_from([(1,), (4,), (2, 3), (3, 2), (2, 2, 2)]),
    seed=seeds(),
)
def test_softmax_contains_arb(data: st.DataObject, shape: tuple[int, ...], seed: int) -> None:
    X = data.draw(interval_arrays_of(shape), label="X")
    axis = data.draw(st.sampled_from(range(-len(shape), len(shape))), label="axis")
    assert_no_misses(misses_softmax(X, axis, points_of(X, seed)), X=X, axis=axis)


@pytest.mark.parametrize(
    ("lo", "hi"),
    [
        ([-1e308, 1e308], None),  # logsumexp: spurious overflow (up(-inf) = NaN in x_j - max)
        ([-1e308, 1e308, 1e308], None),  # softmax: [0.9999999999999998, 0.5000000000000014]
        ([-DBL_MAX, 1.0, 1.0], None),
        ([-DBL_MAX, DBL_MAX], None),
        ([1e308, 1e308], None),
        ([0.0, -800.0, 800.0], None),
        ([-745.0, 0.0], None),
        ([DBL_MAX, DBL_MAX], None),
        ([-DBL_MAX], [DBL_MAX]),  # softmax_rows raised IndexError
        ([-DBL_MAX, -DBL_MAX, -DBL_MAX, -DBL_MAX], [-DBL_MAX, DBL_MAX, 0.0, -DBL_MAX]),
        ([-1e300, 0.0], [1e300, 1.0]),
    ],
)
def test_logsumexp_softmax_extreme_rows(lo: list[float], hi: list[float] | None) -> None:
    X = Interval(np.array([lo]), None if hi is None else np.array([hi]))
    points = points_of(X, 0)
    assert_no_misses(misses_logsumexp(X, -1, points) + misses_softmax(X, -1, points), X=X)


# --- domain -----------------------------------------------------------------------------------


def _with_bad_element(data: st.DataObject, good: st.SearchStrategy, bad: tuple) -> Interval:
    n = data.draw(st.integers(1, 4), label="n")
    lo, hi = data.draw(interval_arrays((n,), good), label="good")
    i = data.draw(st.integers(0, n - 1), label="bad index")
    lo[i], hi[i] = bad
    return Interval(lo, hi)


def _lo_below(limit: float, strict: bool) -> st.SearchStrategy[tuple[float, float]]:
    """Intervals with lo < limit (strict) or lo <= limit, hi anywhere above lo."""
    top = math.nextafter(limit, -math.inf) if strict else limit
    return st.tuples(doubles(-DBL_MAX, top), doubles()).map(lambda p: (p[0], max(p)))


OUT_OF_DOMAIN = {
    "sqrt": (_lo_below(0.0, strict=True), intervals(0.0, 1e10)),
    "log": (_lo_below(0.0, strict=False), intervals(1e-10, 1e10)),
    "log1p": (_lo_below(-1.0, strict=False), intervals(-0.5, 1e10)),
}


@pytest.mark.parametrize("name", sorted(OUT_OF_DOMAIN))
@given(data=st.data())
def test_out_of_domain_raises_domain_error(name: str, data: st.DataObject) -> None:
    bad_strategy, good = OUT_OF_DOMAIN[name]
    X = _with_bad_element(data, good, data.draw(bad_strategy, label="bad"))
    with pytest.raises(DomainError):
        getattr(iv, name)(X)


@pytest.mark.parametrize(
    ("name", "lo", "hi"),
    [
        ("sqrt", -TINY, 1.0),
        ("sqrt", -1.0, -1.0),
        ("log", 0.0, 1.0),
        ("log", -0.0, 0.0),
        ("log", -TINY, TINY),
        ("log1p", -1.0, 0.0),
        ("log1p", -DBL_MAX, DBL_MAX),
    ],
)
def test_domain_boundaries(name: str, lo: float, hi: float) -> None:
    with pytest.raises(DomainError):
        getattr(iv, name)(_pin(lo, hi))


CONTAINS_ZERO = st.tuples(doubles(-DBL_MAX, 0.0), doubles(0.0, DBL_MAX))


@given(data=st.data())
@example(data=None)
def test_division_by_interval_containing_zero_raises(data: st.DataObject | None) -> None:
    if data is None:  # the pinned cases
        for divisor in [(0.0, 0.0), (-0.0, 1.0), (-1.0, 0.0), (-TINY, TINY), (-DBL_MAX, DBL_MAX)]:
            with pytest.raises(DomainError):
                _pin(1.0) / _pin(*divisor)
        return
    Y = _with_bad_element(data, nonzero_intervals(1e-10), data.draw(CONTAINS_ZERO, label="bad"))
    X = data.draw(interval_arrays_of(Y.shape, intervals(-1e10, 1e10)), label="X")
    with pytest.raises(DomainError):
        X / Y


@given(data=st.data(), k=st.integers(-9, -1))
def test_negative_power_of_interval_containing_zero_raises(data: st.DataObject, k: int) -> None:
    X = _with_bad_element(data, nonzero_intervals(1e-10), data.draw(CONTAINS_ZERO, label="bad"))
    with pytest.raises(DomainError):
        iv.pown(X, k)
    with pytest.raises(DomainError):
        X**k


# --- overflow: raised exactly when an exact value leaves the float64 range -------------------

EXP_THRESHOLD = [
    709.0,
    709.7,
    709.78,
    709.7805,
    709.781,
    709.782,
    709.7827,
    math.nextafter(LOG_DBL_MAX, 0.0),
    LOG_DBL_MAX,
    math.nextafter(LOG_DBL_MAX, math.inf),
    709.79,
    710.0,
    1e300,
]


@pytest.mark.parametrize("name", ["exp", "expm1"])
@pytest.mark.parametrize("x", EXP_THRESHOLD)
def test_exp_overflow_threshold(name: str, x: float) -> None:
    check_function(name, _pin(x), seed=0)


@pytest.mark.parametrize(
    ("op", "x", "y"),
    [
        ("mul", 1e300, 1e300),
        ("mul", 1e154, 1e154),
        ("mul", 1.3e154, 1.4e154),
        ("mul", DBL_MAX, 1.0),
        ("mul", DBL_MAX, 0.5),
        ("mul", -DBL_MAX, 2.0),
        ("add", DBL_MAX, DBL_MAX),
        ("add", DBL_MAX, -1.0),
        ("add", 1e308, 7e307),
        ("sub", -1e308, 1e308),
        ("div", 1e300, 1e-300),
        ("div", 1e300, 1e-8),
        ("div", 1.0, TINY),
        ("div", TINY, 1e300),
    ],
)
def test_rational_overflow_only_when_exact_value_overflows(op: str, x: float, y: float) -> None:
    compute, exact_op = BINARY[op]
    X, Y = _pin(x), _pin(y)
    assert_no_misses(misses_binary(op, compute, exact_op, X, Y, pair_points(X, Y, 0)), X=X, Y=Y)


@pytest.mark.parametrize(
    ("x", "k"),
    [
        (1e155, 2),
        (1e154, 2),
        (10.0, 308),
        (10.0, 309),
        (2.0, 1023),
        (2.0, 1024),
        (1e-300, -2),
        (1e-200, -1),
        (1e-155, -2),
        (TINY, -1),
        (0.5, -1023),
        (0.5, -1024),
    ],
)
def test_pown_overflow_only_when_exact_value_overflows(x: float, k: int) -> None:
    X = _pin(x)
    assert_no_misses(misses_pown(X, k, points_of(X, 0)), X=X, k=k)


@pytest.mark.parametrize("x", [DBL_MAX, 1.7e308, 1e308, math.nextafter(DBL_MAX, 0.0)])
def test_softplus_overflow_only_when_exact_value_overflows(x: float) -> None:
    check_function("softplus", _pin(x), seed=0)


# --- tightness sanity (not soundness: catches gross over-widening) --------------------------

# Measured maxima of (hi - lo) / max(|lo|, |hi|, 2**-1022) over the grid below: 4.4e-16
# (sqrt), 2.4e-15 (exp), 3.4e-15 (sigmoid), 4.2e-15 (expm1, log), 4.8e-15 (log1p), 6.4e-15
# (softplus), 8.5e-15 (tanh, which combines two enclosures).  The kernels widen by
# E' <= 2**-49 ~ 1.8e-15 on each side (proofs/bounds.md#widening) plus a few outward roundings
# of intermediate enclosures, so 2**-44 ~ 5.7e-14 leaves a factor ~7 of headroom (below the
# 1e-13 of the brief) while failing for any kernel that widens by a few hundred ulps.
TIGHTNESS = 2.0**-44
_GRID = np.concatenate([np.linspace(-30.0, 30.0, 601), [0.0, TINY, -TINY, 1e-300, -1e-300]])
TIGHTNESS_INPUTS = {
    "exp": _GRID,
    "expm1": _GRID,
    "tanh": _GRID,
    "sigmoid": _GRID,
    "softplus": _GRID,
    "log": np.exp(_GRID),
    "log1p": np.concatenate([np.expm1(_GRID[_GRID > -30.0]), [-0.5, -0.9, -0.999]]),
    "sqrt": np.abs(_GRID),
}


def relative_widths(name: str) -> np.ndarray:
    Z = getattr(iv, name)(Interval(TIGHTNESS_INPUTS[name]))
    scale = np.maximum(np.maximum(np.abs(Z.lo), np.abs(Z.hi)), 2.0**-1022)
    return (Z.hi - Z.lo) / scale


@pytest.mark.parametrize("name", TRANSCENDENTAL)
def test_point_enclosures_are_tight(name: str) -> None:
    widths = relative_widths(name)
    worst = int(np.argmax(widths))
    assert widths[worst] <= TIGHTNESS, (
        f"{name}({TIGHTNESS_INPUTS[name][worst]!r}) has relative width {widths[worst]:.3g}"
    )


# --- mutation tests: the checks must catch un-widened kernels --------------------------------


def unwidened_mul(al, ah, bl, bh):
    """Round-to-nearest corner products, min/max, no outward rounding: unsound."""
    with np.errstate(over="ignore"):
        products = np.stack([al * bl, al * bh, ah * bl, ah * bh])
    return products.min(axis=0), products.max(axis=0), _kernels.OK


def unwidened_add(al, ah, bl, bh):
    with np.errstate(over="ignore"):
        return al + bl, ah + bh, _kernels.OK


def unwidened_div(al, ah, bl, bh):
    with np.errstate(over="ignore", under="ignore"):
        quotients = np.stack([al / bl, al / bh, ah / bl, ah / bh])
    return quotients.min(axis=0), quotients.max(axis=0), _kernels.OK


def numpy_exp(lo, hi):
    """np.exp at both endpoints, not widened: unsound (np.exp documents no error bound)."""
    with np.errstate(over="ignore", under="ignore"):
        return np.exp(lo), np.exp(hi), _kernels.OK


def test_unwidened_mul_is_caught_at_pinned_input(monkeypatch: pytest.MonkeyPatch) -> None:
    X, Y = _pin(0.1), _pin(3.0)
    assert not misses_mul(X, Y, pair_points(X, Y, 0))
    monkeypatch.setattr(_kernels, "mul", unwidened_mul)
    # fl(0.1 * 3) = 0.30000000000000004 lies above the exact product 0.3000000000000000166...
    assert misses_mul(X, Y, pair_points(X, Y, 0))


@given(x=doubles(-1e150, 1e150), y=doubles(-1e150, 1e150))
def test_unwidened_mul_is_caught_on_every_inexact_product(x: float, y: float) -> None:
    # A point product is missed by the un-widened kernel iff it is inexact: the enclosure is
    # then the single double fl(x*y), which cannot equal the exact product.
    inexact = exact(x * y) != exact(x) * exact(y)
    X, Y = _pin(x), _pin(y)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_kernels, "mul", unwidened_mul)
        caught = bool(misses_mul(X, Y, pair_points(X, Y, 0)))
    assert caught == inexact


def _property_fails(test: Callable, **strategies: st.SearchStrategy) -> bool:
    """Whether a fresh hypothesis run of ``test`` (no database, no shrinking) fails."""
    run = settings(database=None, phases=[Phase.generate], report_multiple_bugs=False)(
        given(**strategies)(test)
    )
    try:
        run()
    except AssertionError:
        return True
    return False


@pytest.mark.parametrize(
    ("kernel", "broken", "op"),
    [("mul", unwidened_mul, "mul"), ("add", unwidened_add, "add"), ("div", unwidened_div, "div")],
)
def test_property_fails_with_unwidened_kernel(
    monkeypatch: pytest.MonkeyPatch, kernel: str, broken: Callable, op: str
) -> None:
    def prop(pair: tuple[Interval, Interval], seed: int) -> None:
        check_binary(op, pair, seed)

    y_elements = nonzero_intervals() if op == "div" else None
    strategies = {"pair": same_shape_pairs(y_elements=y_elements), "seed": seeds()}
    assert not _property_fails(prop, **strategies)
    monkeypatch.setattr(_kernels, kernel, broken)
    assert _property_fails(prop, **strategies)


def test_numpy_exp_is_caught_at_pinned_input(monkeypatch: pytest.MonkeyPatch) -> None:
    X = _pin(1.0)
    assert not misses_exp(X, points_of(X, 0))
    monkeypatch.setattr(_kernels, "exp", numpy_exp)
    # np.exp(1.0) = 2.718281828459045 (0.0905... in the next digits) lies below e = 2.71828...
    assert misses_exp(X, points_of(X, 0))


@given(x=doubles(-700.0, 700.0).filter(lambda x: x != 0.0))
def test_numpy_exp_is_caught_at_every_nonzero_point(x: float) -> None:
    # exp(x) is irrational for rational x != 0 (Lindemann), so no single double encloses it.
    X = _pin(x)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_kernels, "exp", numpy_exp)
        assert misses_exp(X, points_of(X, 0))


def test_function_property_fails_with_numpy_exp(monkeypatch: pytest.MonkeyPatch) -> None:
    def prop(X: Interval, seed: int) -> None:
        check_function("exp", X, seed)

    strategies = {"X": intervals_of_shape(intervals(-700.0, 700.0)), "seed": seeds()}
    assert not _property_fails(prop, **strategies)
    monkeypatch.setattr(_kernels, "exp", numpy_exp)
    assert _property_fails(prop, **strategies)


def test_nonfinite_reference_fails_rather_than_passes() -> None:
    from flint import arb
    from reference import NonFiniteReferenceError, _ball_encloses

    with pytest.raises(NonFiniteReferenceError):
        _ball_encloses(lambda: (arb("nan"), (None, None)), -1.0, 1.0)
    with pytest.raises(NonFiniteReferenceError):
        _ball_encloses(lambda: (arb(1).exp() * arb("inf"), (None, None)), -1.0, 1.0)
