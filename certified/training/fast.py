"""Certified gradients of tanh / sigmoid schedules in float64 interval arithmetic, vectorised over
the points (no certificate: the checker's replay is per point in arb, training.md §2).

The same mathematics as :mod:`certified.checker.sensitivity` (C^1 in the parameters appended as
constant state, discrete adjoint), specialised to ``x' = W s(A x + b)``: the Taylor recurrences
of ``z = A x + b``, ``y = s(z)``, ``u = s'(z)`` (``y' = z' u``; ``u = 1 - y^2`` for tanh,
``y - y^2`` for sigmoid) are differentiated in the state and in (W, A, b) directly, so the
parameters' constant series cost nothing (proofs/training.md#fast). Sets are boxes moved by the
mean value form ``Phi_h(c) + M_h (X - c)``; each step's a priori box is Picard-validated here.
Every operation is a sound interval operation of :mod:`certified.arith.interval`.
"""

from __future__ import annotations

import flint
import numpy as np

from certified.arith import Interval
from certified.arith import interval as iv
from certified.errors import InputError

__all__ = ["float64_certified_gradient"]


def _t(x: Interval, axes) -> Interval:
    return Interval(np.transpose(x.lo, axes), np.transpose(x.hi, axes))


def _const_bmm(A: Interval, X: Interval) -> Interval:
    """(p x d) @ (n, d, D) -> (n, p, D), one interval matmul."""
    n, d, D = X.shape
    flat = Interval(np.transpose(X.lo, (1, 0, 2)).reshape(d, n * D),
                    np.transpose(X.hi, (1, 0, 2)).reshape(d, n * D))  # fmt: skip
    out = iv.matmul(A, flat)
    return _t(out.reshape(A.shape[0], n, D), (1, 0, 2))


def _bmm(M: Interval, S: Interval) -> Interval:
    """Per point (n, a, b) @ (n, b, c) -> (n, a, c), by b elementwise products."""
    out = None
    for j in range(M.shape[2]):
        term = M[:, :, j : j + 1] * S[:, j : j + 1, :]
        out = term if out is None else out + term
    return out


class _Piece:
    """Exact parameters of one piece as float64 intervals, and the column layout of the
    parameter directions (the order of :func:`certified.fields.neural_field`)."""

    def __init__(self, piece, d: int, p: int) -> None:
        W = np.zeros((d, p), dtype=object)
        A = np.zeros((p, d), dtype=object)
        b = np.zeros(p, dtype=object)
        q = piece.width
        W[:, :q], A[:q], b[:q] = piece.W, piece.A, piece.b
        z = flint.fmpq(0)
        self.exact = [
            *(v or z for v in W.ravel()),
            *(v or z for v in A.ravel()),
            *(v or z for v in b),
        ]
        self.W, self.A = Interval.from_exact(W.tolist()), Interval.from_exact(A.tolist())
        self.b = Interval.from_exact(b.tolist())
        self.d, self.p, self.duration = d, p, piece.duration
        self.P = 2 * d * p + p


def _scatter(n: int, rows: int, D: int, where, values: Interval) -> Interval:
    """An (n, rows, D) interval array, zero but ``[:, r, c] = values[:, k]`` for (r, c, k)."""
    lo, hi = np.zeros((n, rows, D)), np.zeros((n, rows, D))
    for r, c, k in where:
        lo[:, r, c], hi[:, r, c] = values.lo[:, k], values.hi[:, k]
    return Interval(lo, hi)


def _coefficients(pc: _Piece, act: str, x0: Interval, dx0: Interval, m: int):
    """Taylor coefficients ``dx_k``, k = 0..m, of the derivative of the solution through the
    boxes x0 with seeds dx0 (columns: state, then W, A, b). Guarantee: encloses."""
    n, d, D = dx0.shape
    p = pc.p
    colW = [(i, d + i * p + j, j) for i in range(d) for j in range(p)]
    colA = [(j, d + d * p + j * d + i, i) for j in range(p) for i in range(d)]
    colb = [(j, d + 2 * d * p + j, j) for j in range(p)]
    one = Interval(np.ones((n, p)))
    xs, dxs, zs, dzs, ys, dys, us, dus = [x0], [dx0], [], [], [], [], [], []
    for k in range(m):
        z = iv.matmul(xs[k], pc.A.T)
        dz = _const_bmm(pc.A, dxs[k]) + _scatter(n, p, D, colA, xs[k])
        if k == 0:
            z = z + pc.b
            dz = dz + _scatter(n, p, D, colb, one)
        zs.append(z * k)  # j z_j and j dz_j: y_k = (1/k) sum_{j>=1} (j z_j) u_{k-j}
        dzs.append(dz * k)
        if k == 0:
            y = iv.tanh(z) if act == "tanh" else iv.sigmoid(z)
            dy = None
        else:
            y, dy = None, None
            for j in range(1, k + 1):
                t = zs[j] * us[k - j]
                dt = dzs[j] * us[k - j][:, :, None] + zs[j][:, :, None] * dus[k - j]
                y, dy = (t, dt) if y is None else (y + t, dy + dt)
            c = Interval.from_exact([flint.fmpq(1, k)])
            y, dy = y * c, dy * c
        if k == 0:
            u = 1 - iv.sqr(y) if act == "tanh" else y - iv.sqr(y)
            dy = u[:, :, None] * dz  # dz_0 (k = 0: the stored j dz_j is 0)
            du = (-2 * y)[:, :, None] * dy if act == "tanh" else (1 - 2 * y)[:, :, None] * dy
            ys.append(y)
            dys.append(dy)
        else:
            ys.append(y)
            dys.append(dy)
            u = du = None
            for j in range(k + 1):  # (y^2)_k and its derivative 2 sum_j y_{k-j} dy_j
                t = ys[j] * ys[k - j]
                dt = ys[k - j][:, :, None] * dys[j]
                u, du = (t, dt) if u is None else (u + t, du + dt)
            du = 2 * du
            u, du = (-u, -du) if act == "tanh" else (y - u, dy - du)
        us.append(u)
        dus.append(du)
        inv = Interval.from_exact([flint.fmpq(1, k + 1)])
        xs.append(iv.matmul(y, pc.W.T) * inv)
        dxs.append((_const_bmm(pc.W, dy) + _scatter(n, d, D, colW, y)) * inv)
    return dxs


def _field(pc: _Piece, act: str, B: Interval) -> Interval:
    z = iv.matmul(B, pc.A.T) + pc.b
    return iv.matmul(iv.tanh(z) if act == "tanh" else iv.sigmoid(z), pc.W.T)


def _horner(coefs: list[Interval], h: Interval) -> Interval:
    out = coefs[-1]
    for c in reversed(coefs[:-1]):
        out = out * h + c
    return out


def _step(pc, act, tape, params, X: Interval, B: Interval, h: flint.fmpq, K: int, m: int):
    """One step: (new box, M_h, S_h). Raises InputError when Picard fails after inflation."""
    from certified.arith.taylor import jets_float64

    n, d = X.shape
    D = d + pc.P
    hI = Interval.from_exact([h])
    zero_h = Interval(np.zeros(1), hI.hi)
    for _ in range(6):  # Picard: X + [0, h] f(B) inside B (the producer's box, inflated)
        T = X + zero_h * _field(pc, act, B)
        if np.all((T.lo > B.lo) & (T.hi < B.hi)):
            break
        w = np.maximum(T.hi - T.lo, 1e-300)
        B = Interval(np.minimum(B.lo, T.lo) - 0.1 * w, np.maximum(B.hi, T.hi) + 0.1 * w)
    else:
        raise InputError("float64 path: the a priori enclosure failed; use the replay path")
    c = 0.5 * X.lo + 0.5 * X.hi
    c = np.minimum(np.maximum(c, X.lo), X.hi)
    at_lo, at_hi, st1 = jets_float64(tape, *params, c, c, order=K - 1)
    b_lo, b_hi, st2 = jets_float64(tape, *params, B.lo, B.hi, order=K)
    if np.any(st1 != 0) or np.any(st2 != 0):
        raise InputError("float64 path: the Taylor coefficients overflow; use the replay path")
    coefs = [Interval(at_lo[k, :, :, 0], at_hi[k, :, :, 0]) for k in range(K)]
    coefs.append(Interval(b_lo[K, :, :, 0], b_hi[K, :, :, 0]))
    centre = _horner(coefs, hI)
    eye = np.broadcast_to(np.eye(d, D), (n, d, D))
    d1 = _coefficients(pc, act, B, Interval(eye), 1)[1]  # Df_aug(B), x-rows
    L = np.max(np.sum(np.maximum(np.abs(d1.lo), np.abs(d1.hi)), axis=2), axis=1)
    e = iv.expm1(Interval.from_exact([h]) * Interval(L)).hi  # L: exact doubles
    VB = Interval(eye - e[:, None, None], eye + e[:, None, None])
    rem = _coefficients(pc, act, B, VB, m)[m]
    at = _coefficients(pc, act, X, Interval(eye), m - 1)
    J = _horner([*at, rem], hI)
    Mh, Sh = J[:, :, :d], J[:, :, d:]
    new = centre + _bmm(Mh, (X - c)[:, :, None])[:, :, 0]
    return new, Mh, Sh


def float64_certified_gradient(schedule, X: np.ndarray, Y: np.ndarray, eps, *, order: int = 12):
    """(loss Interval, gradient Intervals per piece) for a tanh / sigmoid schedule, at 53 bits.

    Guarantee: encloses J and its gradient (proofs/training.md#fast)."""
    from certified.arith.taylor import compile_tape, parameter_intervals
    from certified.fields import neural_field
    from certified.flow.options import SaveAt, initial_set
    from certified.flow.result import FlowStatus
    from certified.flow.taylor.lohner import lohner_flow
    from certified.training.gradient import default_policy

    act = schedule.activation.value
    d, p = schedule.dimension, schedule.width
    problem = neural_field(schedule)
    policy = default_policy(53, order, None)
    res = lohner_flow(problem, initial_set(X, d), SaveAt(), policy, 53)
    if res.status is not FlowStatus.SUCCESS:
        raise InputError(f"the flow cannot be enclosed: {res.message}")
    tape = compile_tape(problem.field.expression)
    Xi = Interval.from_exact(X.tolist())
    box, mats = Xi, []
    for j, piece in enumerate(schedule.pieces):
        pc = _Piece(piece, d, p)
        params = tuple(np.ascontiguousarray(a, dtype=np.float64)
                       for a in parameter_intervals(problem.pieces[j].values))  # fmt: skip
        n = X.shape[0]
        M = Interval(np.broadcast_to(np.eye(d), (n, d, d)).copy())
        S = Interval(np.zeros((n, d, pc.P)))
        for h, B in zip(res.hints["steps"][j], res.hints["boxes"][j], strict=True):
            box, Mh, Sh = _step(pc, act, tape, params, box, B, h, policy.order, policy.order)
            M, S = _bmm(Mh, M), _bmm(Mh, S) + Sh
        mats.append((M, S, pc))
    N = X.shape[0]
    r = box - Interval.from_exact(Y.tolist())
    loss = iv.isum(iv.sqr(r)) * Interval.from_exact([flint.fmpq(1, 2 * N)])
    q = r * Interval.from_exact([flint.fmpq(1, N)])
    grads = [None] * len(mats)
    eps = flint.fmpq(eps)
    for j in reversed(range(len(mats))):
        M, S, pc = mats[j]
        g = iv.isum(_bmm(_t(S, (0, 2, 1)), q[:, :, None])[:, :, 0], axis=0)
        reg = Interval.from_exact([eps * pc.duration * v for v in pc.exact])
        grads[j] = g + reg
        q = _bmm(_t(M, (0, 2, 1)), q[:, :, None])[:, :, 0]
        loss = loss + Interval.from_exact([eps * pc.duration * sum(v * v for v in pc.exact) / 2])
    return loss, grads
