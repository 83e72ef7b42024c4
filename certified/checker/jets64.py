"""Taylor coefficients of expression fields for many sets at once, in float64 intervals.

The same recurrences as :func:`certified.checker.taylor.field_jets` (proofs/bounds.md#taylor-ad),
evaluated on :class:`~certified.checker.ivec.Iv` arrays of shape (nodes, sets, 1 + g): every
operation runs once per *group* of nodes (same depth in the graph, same operation and arity),
for every set and every dual part at once, so the cost per step is a few thousand numpy calls
whatever the number of sets. Order-0 values of transcendental operations are evaluated in arb,
element by element, and rounded outward; everything else is ``+ - * /`` of ``ivec``
(proofs/checker_soundness.md#float-intervals)."""

from __future__ import annotations

import numpy as np
from flint import arb

from .duals64 import chain, hyper, pairs, second_order
from .duals64 import dual_div as _dual_div
from .duals64 import dual_mul as _dual_mul
from .ivec import Iv, Series, exp_points, from_arb, matmul, matrix_mr, series_conv
from .program64 import Program
from .taylor import ReplayError, _sin_range

__all__ = ["Program", "jets64"]


def _conv(A: Iv, B: Iv, k: int, lo: int = 0, hi: int | None = None, w: bool = False) -> Iv:
    """sum_{j=lo..hi} A_j B_{k-j} (hi = k; A, B: series along axis 0), each term times j if w;
    all terms in one product and one sum."""
    hi = k if hi is None else hi
    terms = _dual_mul(A[lo : hi + 1], B[k - hi : k - lo + 1][::-1])
    if w:
        j = np.arange(lo, hi + 1, dtype=float).reshape((-1,) + (1,) * (terms.lo.ndim - 1))
        terms = terms.scale_pos(j)  # j >= lo >= 1
    return terms.sum(axis=0)


def _wconv(A: Iv, B: Iv, k: int) -> Iv:
    """(1/k) sum_{j=1..k} j A_j B_{k-j}: coefficient k of c with c' = a' b."""
    return _conv(A, B, k, 1, w=True).divide_int(k)


def _square(A: Iv, k: int) -> Iv:
    """sum_{j=0..k} A_j A_{k-j} = 2 sum_{j < k/2} A_j A_{k-j} + [k even] A_{k/2}^2."""
    twice = _conv(A, A, k, 0, (k - 1) // 2).scale_pos(np.float64(2)) if k else None
    mid = _dual_mul(A[k // 2], A[k // 2]) if k % 2 == 0 else None
    return mid if twice is None else twice if mid is None else twice + mid


def _interval_group(op, A: Iv, B: Iv | None, own: Iv, k: int, Z, gi, size: int) -> Iv:
    """Coefficient k of a group of mul, sqr, exp, tanh or sigmoid nodes by interval products
    (``_conv``; A, B: the arguments' coefficients 0..k, own: the group's 0..k-1): the
    semantics of the flow rule's float64 replay (certificates written with it stay valid;
    :func:`_series_group` is the midpoint-radius form the gradient replay's tape needs)."""
    if op == "mul":
        return _conv(A, B, k)
    if op == "sqr":
        return _square(A, k)
    if k == 0:
        y = _elementary(op, A[0])
        if op in ("tanh", "sigmoid"):  # y' = a' z with z = 1 - y^2, resp. y - y^2
            yy = _dual_mul(y, y)
            one = Iv.zeros(y.shape)
            one.lo[..., 0] = one.hi[..., 0] = 1.0
            Z[gi] = Iv.zeros((size, *y.shape))
            Z[gi][0] = one - yy if op == "tanh" else y - yy
        return y
    if op == "exp":
        return _wconv(A, own, k)
    y = _wconv(A, Z[gi], k)
    C = Iv(np.concatenate([own.lo, y.lo[None]]), np.concatenate([own.hi, y.hi[None]]))
    cc = _square(C, k)
    if k < Z[gi].shape[0]:
        Z[gi][k] = -cc if op == "tanh" else y - cc
    return y


def _monotone(op: str, v: Iv) -> Iv:
    """op (increasing) over the intervals v: exp, tanh and the sigmoid by
    :func:`~certified.checker.ivec.exp_points` at the end points, log and sqrt by arb, rounded
    outward."""
    if op in ("exp", "tanh", "sigmoid"):  # both end points in one call
        p = np.stack([v.lo, v.hi])
        one = Iv(np.ones(p.shape), np.ones(p.shape))
        if op == "exp":
            y = exp_points(p)
        elif op == "tanh":  # 1 - 2 / (1 + exp(2p)), within [-1, 1]
            y = one - Iv(2 * one.lo, 2 * one.hi) / (one + exp_points(2 * p))
        else:  # 1 / (1 + exp(-p))
            y = one / (one + exp_points(-p))
        lo, hi = y.lo[0], y.hi[1]
        if op != "exp":
            lo, hi = np.maximum(lo, -1.0 if op == "tanh" else 0.0), np.minimum(hi, 1.0)
        return Iv(lo, hi)
    f = {"log": arb.log, "sqrt": arb.sqrt}[op]
    lo = [f(arb(x)) for x in v.lo.ravel().tolist()]
    hi = [f(arb(x)) for x in v.hi.ravel().tolist()]
    return Iv(from_arb(lo).lo.reshape(v.shape), from_arb(hi).hi.reshape(v.shape))


def _elementary(op: str, a0: Iv) -> Iv:
    """The dual op(a0) at order 0 (a0: duals along the last axis; second derivatives for
    second-order duals: exp'' = exp, log'' = -log'^2, sqrt'' = -sqrt'^2 / sqrt,
    tanh'' = -2 tanh tanh', sigmoid'' = sigmoid' (1 - 2 sigmoid))."""
    y0 = _monotone(op, a0[..., :1])
    one = Iv(np.ones(y0.shape), np.ones(y0.shape))
    if op == "exp":
        return chain(a0, y0, y0, lambda: y0)
    if op == "log":
        dy = one / a0[..., :1]
        return chain(a0, y0, dy, lambda: -(dy * dy))
    if op == "sqrt":
        dy = one / y0.scale(np.float64(2))
        return chain(a0, y0, dy, lambda: -(dy * dy) / y0)
    if op == "tanh":
        dy = one - y0 * y0
        return chain(a0, y0, dy, lambda: -(y0 * dy).scale(np.float64(2)))
    dy = y0 - y0 * y0
    return chain(a0, y0, dy, lambda: dy * (one - y0.scale(np.float64(2))))


def _series_group(op, args, k, H, Z, gi, n) -> Iv:
    """Coefficient k of a group of mul (two variables), sqr, exp, tanh or sigmoid nodes: their
    series kept as ``ivec.Series`` (``Z[gi]``: argument(s), own, auxiliary u), convolutions by
    ``ivec.series_conv``: ``c_k = sum_j a_j b_{k-j}``; ``y_0 = op(a_0)``,
    ``y_k = (1/k) sum_{j=1..k} j a_j u_{k-j}`` with ``u = y, 1 - y^2, y - y^2`` (y' = a' u,
    bounds.md#taylor-ad), ``u_k`` from ``sum_j y_j y_{k-j}``."""
    size, g = H.shape[0], H.shape[3] - 1
    if k == 0:
        Z[gi] = [Series(size + 1, len(args), n, g, 2 * size + 2) for _ in range(4)]
    A, B, own, aux = Z[gi]
    A.push(H[k, args[:, 0]])
    if op == "sqr":
        return series_conv(A, A, k)
    if op == "mul":
        B.push(H[k, args[:, 1]])
        return series_conv(A, B, k)
    if k == 0:  # exp, tanh, sigmoid: y' = a' u with u = y, 1 - y^2, y - y^2
        y = _elementary(op, H[0, args[:, 0]])
        own.push(y)
        if op != "exp":
            u = _dual_mul(y, y)
            u = y - u if op == "sigmoid" else -u
            if op == "tanh":  # u_0 = 1 - y_0^2
                u[..., 0] = u[..., 0] + Iv(np.ones(u.shape[:-1]), np.ones(u.shape[:-1]))
            aux.push(u)
        return y
    y = series_conv(A, own if op == "exp" else aux, k, 1, True).divide_int(k)
    own.push(y)
    if op != "exp":
        cc = series_conv(own, own, k)
        aux.push(-cc if op == "tanh" else y - cc)
    return y


def jets64(prog: Program, params: Iv, x0: Iv, seeds: Iv | None, order: int,
           tape: dict | None = None, second: Iv | None = None) -> list[Iv]:  # fmt: skip
    """Coefficients ``X[k]`` (Iv of shape (sets, d, 1 + g)) for k = 0..order of the solutions
    through the boxes ``x0`` (sets, d) with dual parts ``D x_k seeds`` (seeds: (sets, d, g));
    ``tape``, if given, receives the nodes' coefficients ``H`` (order, nodes, sets, 1 + g) and
    the auxiliary series ``Z`` (for ``sensitivity64.theta_adjoint``); the series products are
    then midpoint-radius dot products (:func:`_series_group`), else interval products
    (:func:`_interval_group`, the flow rule's semantics). With ``second`` (sets, d, g, g), the
    seeds' second-order parts, the duals are hyper-duals of 1 + g + g (g + 1) / 2 parts, the last
    ``D^2 x_k (seeds_a, seeds_b) + D x_k second_ab``, a <= b (:mod:`.duals64`; no tape, no
    logsumexp).
    Raises ReplayError when an operation leaves its domain or overflows.
    Guarantee: as :func:`certified.checker.taylor.field_jets`, for every set."""
    n, d = x0.shape
    g = 0 if seeds is None else seeds.shape[2]
    if second is not None and (tape is not None or not g):
        raise ValueError("jets64: second-order parts need seeds and no tape")
    parts = 1 + g + (g * (g + 1) // 2 if second is not None else 0)
    X0 = Iv.zeros((n, d, parts))
    X0[..., 0] = x0
    if g:
        X0[..., 1 : 1 + g] = seeds
    if second is not None:
        i, j = pairs(g)
        X0[..., 1 + g :] = second[..., i, j]
    X, H, Z = [X0], Iv.zeros((max(order, 1), prog.size, n, parts)), {}
    cv = prog.cvals.copy()  # the constants' values by node (lincomb coefficients)
    cv.lo[prog.pnode], cv.hi[prog.pnode] = params.lo[prog.pparam], params.hi[prog.pparam]
    with second_order(g if second is not None else 0):
        for k in range(order):
            for gi, (op, const, kind, idx, args, value) in enumerate(prog.groups):
                if const and k:
                    continue
                out = _group(op, kind, idx, args, value, k, H, X, Z, gi, params, n, parts - 1,
                             cv, prog.node, tape is not None)  # fmt: skip
                if not out.finite():
                    ok = (np.isfinite(out.lo) & np.isfinite(out.hi)).reshape(len(idx), n, -1)
                    r, i = map(int, np.argwhere(~ok.all(axis=2))[0])
                    raise ReplayError(
                        f"set {i}: node {prog.node[idx[r]]} ({op}) leaves its domain or overflows"
                    )
                H[k, idx] = out
            Xk = H[k, prog.outputs]  # (d, n, parts)
            X.append(Iv(np.swapaxes(Xk.lo, 0, 1), np.swapaxes(Xk.hi, 0, 1)).divide_int(k + 1))
    if tape is not None:
        tape.update(H=H, Z=Z)
    return X


def _nodes(index: np.ndarray, Z: dict, key: tuple):
    """``index``, or the slice of the same nodes when they are consecutive (a view, no copy;
    its values are only read), cached in Z."""
    if key not in Z:
        lo = int(index[0])
        run = np.array_equal(index, np.arange(lo, lo + len(index)))
        Z[key] = slice(lo, lo + len(index)) if run else index
    return Z[key]


def _group(op, kind, idx, args, value, k, H, X, Z, gi, params, n, g, cv, node, mr) -> Iv:
    """Coefficient k of the nodes ``idx`` (one group) for every set; H: (order, nodes, sets,
    1 + g) coefficients so far; ``mr``: series products by midpoint-radius dot products."""
    G = len(idx)

    def c(col: int, j: int = k) -> Iv:
        return H[j, args[:, col]]

    def series(col: int) -> Iv:  # coefficients 0..k of argument col, along axis 0 (read only)
        return H[: k + 1, _nodes(args[:, col], Z, (gi, col))]

    if op == "x":
        Xk = X[k][:, args[:, 0]]  # (n, G, 1 + g)
        return Iv(np.swapaxes(Xk.lo, 0, 1), np.swapaxes(Xk.hi, 0, 1))
    if op in ("p", "c"):
        v = params[args[:, 0]] if op == "p" else value
        out = Iv.zeros((G, n, 1 + g))
        out[:, :, 0] = Iv(np.broadcast_to(v.lo[:, None], (G, n)),
                          np.broadcast_to(v.hi[:, None], (G, n)))  # fmt: skip
        return out
    if op in ("add", "sub", "neg"):
        out = -c(0) if op == "neg" else c(0)
        for col in range(1, args.shape[1]):
            out = out - c(col) if op == "sub" else out + c(col)
        return out
    if op == "sum":
        return H[k][args].sum(axis=1)  # (G, arity, n, 1 + g) summed over the arguments
    if op == "lincomb":  # rows of sum_t const_t var_t: one matrix product
        if k == 0:
            rows, cols, cn, cs = value
            Mlo, Mhi = np.zeros((G, len(args))), np.zeros((G, len(args)))
            vlo, vhi, inner = cv.lo[cn], cv.hi[cn], cs >= 0
            vlo[inner], vhi[inner] = H.lo[0, cs[inner], 0, 0], H.hi[0, cs[inner], 0, 0]
            Mlo[rows, cols], Mhi[rows, cols] = vlo, vhi
            Z[gi], Z[gi, "mr"] = (Mlo, Mhi), matrix_mr(Mlo, Mhi)
        V = H[k, args[:, 0]]  # column -1 (the constant 1, if any) is the last: 1, then 0
        if args[-1, 0] == -1:
            V.lo[-1] = V.hi[-1] = 0.0
            V.lo[-1, :, 0] = V.hi[-1, :, 0] = float(k == 0)
        return matmul(*Z[gi], V, Z[gi, "mr"])
    if op == "mul" and (kind[0] or kind[1]):
        cc, vv = (0, 1) if kind[0] else (1, 0)
        return c(vv) * c(cc, 0)[..., :1]
    if op in ("mul", "sqr", "exp", "tanh", "sigmoid") and mr:
        return _series_group(op, args, k, H, Z, gi, n)
    own = H[:k, _nodes(idx, Z, (gi, "own"))]  # this group's coefficients 0..k-1 (read only)
    if op in ("mul", "sqr", "exp", "tanh", "sigmoid"):
        B = series(1) if op == "mul" else None
        return _interval_group(op, series(0), B, own, k, Z, gi, H.shape[0])
    if op == "div":
        B = series(1)
        b0 = B[0][..., 0]
        zero = (b0.lo <= 0) & (b0.hi >= 0)
        if k == 0 and bool(zero.any()):
            r, i = map(int, np.argwhere(zero)[0])
            raise ReplayError(f"set {i}: node {node[idx[r]]} (div): the divisor's ball contains 0")
        num = c(0) if k == 0 else c(0) - _conv(B, own, k, 1)
        return _dual_div(num, B[0])
    if op == "logsumexp":
        return _logsumexp(H, args, idx, k, Z, gi)
    A = series(0)
    if op in ("sin", "cos"):  # (sin a)' = a' cos a, (cos a)' = -a' sin a
        if k == 0:
            sc = _sin_cos(A[0])
            Z[gi] = tuple(Iv.zeros((H.shape[0], *y.shape)) for y in sc)
            for z, y in zip(Z[gi], sc, strict=True):
                z[0] = y
        else:
            Z[gi][0][k] = _wconv(A, Z[gi][1], k)
            Z[gi][1][k] = -_wconv(A, Z[gi][0], k)
        return Z[gi][op == "cos"][k]
    if op not in ("log", "sqrt"):
        raise ReplayError(f"{op}: not in the float64 replay")
    if k == 0 and not bool((A[0].lo[..., 0] > 0).all()):
        r, i = map(int, np.argwhere(~(A[0].lo[..., 0] > 0))[0])
        raise ReplayError(f"set {i}: node {node[idx[r]]} ({op}): its argument's ball is not > 0")
    if k == 0:
        return _elementary(op, A[0])
    if op == "log":
        corr = _conv(own, A, k, 1, k - 1, True).divide_int(k) if k > 1 else None
        return _dual_div(A[k] if corr is None else A[k] - corr, A[0])
    corr = _conv(own, own, k, 1, k - 1) if k > 1 else None  # sqrt
    return _dual_div(A[k] if corr is None else A[k] - corr, own[0].scale(np.float64(2)))


def _sin_cos(a0: Iv) -> tuple[Iv, Iv]:
    """The duals (sin a0, cos a0) at order 0: values by arb over each interval (its end values
    and every extremum inside, taylor._sin_range), rounded outward."""
    balls = [
        arb(x).union(arb(y))
        for x, y in zip(a0.lo[..., 0].ravel().tolist(), a0.hi[..., 0].ravel().tolist(), strict=True)
    ]
    shape = a0.shape[:-1] + (1,)
    s = from_arb([_sin_range(b) for b in balls])
    c = from_arb([_sin_range(b + arb.pi() / 2) for b in balls])
    s, c = (
        Iv(s.lo.reshape(shape), s.hi.reshape(shape)),
        Iv(c.lo.reshape(shape), c.hi.reshape(shape)),
    )
    return chain(a0, s, c, lambda: -s), chain(a0, c, -s, lambda: -c)


def _exp_iv(x: Iv) -> Iv:
    """exp over intervals (increasing): the end points by exp_points."""
    return Iv(exp_points(x.lo).lo, exp_points(x.hi).hi)


def _logsumexp(H: Iv, args: np.ndarray, idx: np.ndarray, k: int, Z: dict, gi: int) -> Iv:
    """L = log sum_t exp(a_t), with the softmax weights w_t = exp(a_t - L) as auxiliary series:
    L' = sum_t w_t a_t', w_t' = (a_t' - L') w_t (taylor._logsumexp)."""
    if hyper():
        raise ReplayError("logsumexp: not in the second-order (hyper-dual) replay")
    if k == 0:
        V = H[0][args]  # (G, arity, n, 1 + g)
        v = V[..., 0]
        ends = []
        for p in (v.lo, v.hi):  # increasing in every argument: L at the end points
            top = p.max(axis=1, keepdims=True)  # any double shift
            D = Iv(p, p.copy()) - Iv(top + 0 * p, top + 0 * p)
            total = _exp_iv(D).sum(axis=1)
            ends.append(Iv(top[:, 0], top[:, 0].copy()) + _monotone("log", total))
        L0 = Iv(ends[0].lo, ends[1].hi)  # (G, n)
        w = _exp_iv(v - Iv(L0.lo[:, None], L0.hi[:, None]))  # (G, arity, n)
        g1 = V.shape[-1]
        out = Iv(np.empty((len(idx), *v.shape[2:], g1)), np.empty((len(idx), *v.shape[2:], g1)))
        out[..., 0] = L0
        W = Iv(np.empty(V.shape), np.empty(V.shape))
        W[..., 0] = w
        if g1 > 1:
            dL = (V[..., 1:] * w[..., None]).sum(axis=1)  # (G, n, g)
            out[..., 1:] = dL
            W[..., 1:] = (V[..., 1:] - dL[:, None]) * w[..., None]
        Z[gi] = Iv.zeros((H.shape[0], *W.shape))
        Z[gi][0] = W
        return out
    A = H[: k + 1][:, args]  # (k + 1, G, arity, n, 1 + g)
    W = Z[gi]
    L = _wconv(A, W, k).sum(axis=1)  # (G, n, 1 + g): the sum over the arguments t
    own = H[:k, idx]
    Ls = Iv(np.concatenate([own.lo, L.lo[None]]), np.concatenate([own.hi, L.hi[None]]))
    D = A - Iv(Ls.lo[:, :, None], Ls.hi[:, :, None])
    if k < W.shape[0]:
        W[k] = _wconv(D, W, k)
    return L
