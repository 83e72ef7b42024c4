"""Dual numbers of float64 intervals along the last axis, for :mod:`.jets64`.

``[a0, a'_1 .. a'_g]``: first-order duals (the variational parts). Inside
``with second_order(g)``: ``[a0, a', a'']`` with the second-order parts ``a''_ab``, a <= b (the
upper triangle row by row, g (g + 1) / 2 parts: :func:`pairs`; hyper-duals: the derivatives
``d^2 a / de_a de_b`` of ``a(x0 + V e + W e e / 2)``, proofs/bounds.md#quadratic). Products,
quotients and the chain rule of a unary function with interval values and rounding of
:class:`~certified.checker.ivec.Iv`."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from contextvars import ContextVar

import numpy as np

from .ivec import Iv

_SECOND: ContextVar[int] = ContextVar("second_order_duals", default=0)


@contextmanager
def second_order(g: int):
    """Duals with g first-order and g (g + 1) / 2 second-order parts (per thread: a
    ContextVar, reset on exceptions)."""
    token = _SECOND.set(g)
    try:
        yield
    finally:
        _SECOND.reset(token)


def hyper() -> int:
    """g inside ``second_order(g)``, else 0."""
    return _SECOND.get()


def pairs(g: int) -> tuple[np.ndarray, np.ndarray]:
    """The index pairs (a, b), a <= b, of the second-order parts, in their order."""
    return np.triu_indices(g)


def unpack(x: Iv, g: int) -> Iv:
    """Second-order parts (..., g (g + 1) / 2) as symmetric (..., g, g)."""
    a, b = pairs(g)
    lo, hi = np.empty(x.shape[:-1] + (g, g)), np.empty(x.shape[:-1] + (g, g))
    lo[..., a, b] = lo[..., b, a] = x.lo
    hi[..., a, b] = hi[..., b, a] = x.hi
    return Iv(lo, hi)


def _sym(a: Iv, b: Iv) -> Iv:
    """``a'_i b'_j + a'_j b'_i`` for the pairs i <= j (a, b: first parts (..., g)), from the
    products ``a'_i b'_j`` of all pairs."""
    i, j = pairs(a.shape[-1])
    p = a[..., :, None] * b[..., None, :]
    return p[..., i, j] + p[..., j, i]


def dual_mul(a: Iv, b: Iv) -> Iv:
    """Products ``[a0 b0, a0 b' + a' b0, a0 b'' + a'' b0 + a' b'^T + b' a'^T]``."""
    out = a[..., :1] * b
    if out.shape[-1] > 1:
        out[..., 1:].add_into(a[..., 1:] * b[..., :1])
        g = _SECOND.get()
        if g:
            out[..., 1 + g :].add_into(_sym(a[..., 1 : 1 + g], b[..., 1 : 1 + g]))
    return out


def dual_div(a: Iv, b: Iv) -> Iv:
    """Quotients q = a / b (b0 excludes 0): ``q' = (a' - q0 b') / b0``,
    ``q'' = (a'' - q0 b'' - q' b'^T - b' q'^T) / b0`` (from a = q b)."""
    q = a[..., :1] / b[..., :1]
    out = Iv(np.empty(a.shape), np.empty(a.shape))
    out[..., :1] = q
    if a.shape[-1] > 1:
        out[..., 1:] = (a[..., 1:] - q * b[..., 1:]) / b[..., :1]
        g = _SECOND.get()
        if g:
            s = slice(1 + g, None)
            out[..., s] = out[..., s] - _sym(out[..., 1 : 1 + g], b[..., 1 : 1 + g]) / b[..., :1]
    return out


def chain(a0: Iv, y0: Iv, dy: Iv, d2y: Callable[[], Iv]) -> Iv:
    """The dual ``u(a)`` from ``y0 = u(a0)``, ``dy = u'(a0)`` and (second-order duals only)
    ``d2y() = u''(a0)``: ``[y0, a' dy, a'' dy + a' a'^T d2y]``."""
    out = Iv(np.empty(a0.shape), np.empty(a0.shape))
    out[..., :1] = y0
    if a0.shape[-1] > 1:
        out[..., 1:] = a0[..., 1:] * dy
        g = _SECOND.get()
        if g:
            f = a0[..., 1 : 1 + g]
            s = slice(1 + g, None)
            i, j = pairs(g)
            out[..., s] = out[..., s] + (f[..., i] * f[..., j]) * d2y()
    return out
