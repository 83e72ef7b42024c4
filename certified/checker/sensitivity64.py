"""The C^1 enclosures in the parameters and the loss gradient of ``sensitivity.py``, for all
points at once in float64 intervals (public: producers compute with it the claims the checker
replays; proofs/training.md#sensitivity64).

The flow of every point is the batched Lohner step of ``lohner64`` (a priori boxes from the
hints' factors, ``apriori64``). The loss needs the step's sensitivities ``S_h = dx/dtheta`` and
``M_h = dx(t+h)/dx(t)`` only through ``q^T S_h`` and ``q^T M_h`` (q the discrete adjoint at the
step's end), so they are never formed: per step, both are enclosed for all points by one reverse
sweep (:func:`theta_adjoint`) through the Taylor recurrences of the field (``jets64.Program``,
values only) weighted by ``q h^k``, plus the integral remainder's terms with the a priori bounds
on ``|S(t)|`` and ``|M(t) - I|`` (training.md#sensitivity64). The adjoint runs backwards over
the steps, ``g += q^T S_h``, ``q <- M_h^T q``, in the same intervals
(proofs/training.md#gradient)."""

from __future__ import annotations

import flint
import numpy as np
from flint import arb, fmpq

from ._parse import charge, exact_sum, top
from .ivec import Iv, check_fpu, from_arb, from_fmpq, matmul
from .jets64 import Program, jets64
from .lohner64 import MAX_FAILED_TRIES, Sets, apriori64, lohner_step64
from .taylor import ReplayError

__all__ = ["OPS64", "ThetaProgram", "cost64", "loss_and_gradient64", "replay_gradient64",
           "supported64", "theta_adjoint"]  # fmt: skip

OPS64 = ("x", "p", "c", "add", "sub", "neg", "sum", "mul", "sqr", "exp", "tanh", "sigmoid")
FACTORS = [2.0**k for k in range(-8, 7)]  # the a priori factors a producer tries, in order
MAX_CELLS = 10**8  # the coefficients of one step held at once (1.6 GB)
FORWARD_M = 3  # the Lohner step's variational order (the sets of points stay thin: J C r is tiny)


def supported64(field) -> bool:
    """Operations of :data:`OPS64`, every node depending only on parameters a leaf."""
    return all(op in OPS64 and (op in ("p", "c") or not c)
               for (op, *_), c in zip(field.nodes, field.const, strict=True))  # fmt: skip


def _series_cost(prog: Program, sets: int, cols: int, order: int) -> int:
    """The cells of the Taylor series of ``jets64`` to ``order`` (m^2 / 2 convolution terms for
    the series products, m rows for the other nodes), per column and set, over 8."""
    conv = sum(len(idx) for op, _, kind, idx, *_ in prog.groups
               if op in OPS64[8:] or (op == "mul" and not any(kind)))  # fmt: skip
    rows = sum(len(g[3]) for g in prog.groups if not g[1]) - conv
    return cols * sets * (3 * conv * (order * order + 2 * order) + rows * order) // 8


def cost64(field, n: int, steps: int, K: int, m: int) -> int:
    """Estimated cost of :func:`replay_gradient64` and :func:`loss_and_gradient64` in the units
    of ``lohner.MAX_TAYLOR_OPS`` (~0.1 us): per step the Lohner step (order K values, the
    variational series of order min(m, 3) with d parts, 2n sets), the order-1 sweep bounding
    f_theta, and the backward step: the order-m values again and their reverse sweep (about
    three times the values), plus the numpy calls (~8 us each) of every group and order."""
    prog, d, P = Program(field), field.dimension, len(field.names)
    per = (_series_cost(prog, 2 * n, 1 + d, min(m, FORWARD_M)) + _series_cost(prog, 2 * n, 1, K)
           + 4 * _series_cost(prog, 2 * n, 1, m) + n * (P + 8 * d**3)
           + 800 * len(prog.groups) * (K + 4 * m))  # fmt: skip
    return int(steps * per)


class ThetaProgram:
    """A field compiled for :func:`theta_adjoint`: its ``jets64.Program``, the parameter index
    of every parameter leaf, and per ``lincomb`` group the (row, column, leaf) entries whose
    constant is a parameter."""

    def __init__(self, field) -> None:
        if not supported64(field):
            raise ReplayError(f"the float64 gradient replay takes the operations {OPS64}")
        self.field, self.prog = field, Program(field)
        self.d, self.P = field.dimension, len(field.names)
        self.pidx = {i: a[0] for i, (op, *a) in enumerate(field.nodes) if op == "p"}
        self.terms = {}
        for gi, (op, _, _, _, _, value) in enumerate(self.prog.groups):
            if op == "lincomb":
                at = [t for t, q in enumerate(value[2].tolist()) if q in self.pidx]
                self.terms[gi] = tuple(v[at] for v in value)


def _acc(T: Iv, pre: tuple, where: np.ndarray, v: Iv) -> None:
    """``T[(*pre, where)] += v`` rounded outward (``where`` indexes the axis after ``pre``; v
    has that axis second to last); repeated indices are added one at a time."""
    if len(set(where.tolist())) == len(where):
        key = (*pre, where)
        s = Iv(T.lo[key], T.hi[key]) + v
        T.lo[key], T.hi[key] = s.lo, s.hi
        return
    for r, w in enumerate(where.tolist()):
        key = (*pre, w)
        s = Iv(T.lo[key], T.hi[key]) + v[..., r, :]
        T.lo[key], T.hi[key] = s.lo, s.hi


def _rev(a: Iv) -> Iv:
    return Iv(a.lo[::-1], a.hi[::-1])


def theta_adjoint(tp: ThetaProgram, tape: dict, Xb: list[Iv], order: int) -> tuple[Iv, Iv]:
    """Reverse sweep of the Taylor recurrences recorded in ``tape`` (``jets64`` to ``order``
    over N sets, any seeds: only the values are read): with weights ``Xb[k]`` (N, d) of the
    coefficients ``X[k]``, k = 0..order, enclosures (N, P) and (N, d) of the gradients of
    ``sum_k Xb[k] . X[k]`` with respect to the parameters and to the start, for every start in
    the sets and every weight in ``Xb``.
    Guarantee: encloses (proofs/training.md#sensitivity64, reverse mode of bounds.md#taylor-ad)."""
    prog, H = tp.prog, tape["H"]
    Hv = Iv(H.lo[..., 0], H.hi[..., 0])  # (order, nodes, N)
    N = Hv.shape[2]
    Hb, Cb = Iv.zeros((order, prog.size, N)), Iv.zeros((len(prog.slot), N))  # slots, nodes
    XbT = [Iv(x.lo.T.copy(), x.hi.T.copy()) for x in Xb]  # copies: accumulated in place
    Zb = {}
    for k in reversed(range(order)):
        _acc(Hb, (k,), prog.outputs, XbT[k + 1].divide_int(k + 1))
        for gi in reversed(range(len(prog.groups))):
            if not prog.groups[gi][1]:  # constant leaves: read at the end
                _reverse(tp, gi, k, Hv, Hb, Cb, tape["Z"], Zb, XbT)
    thb = Iv.zeros((tp.P, N))
    for i, q in tp.pidx.items():  # a parameter: its uses as a coefficient and as a leaf
        thb[q] = thb[q] + (Cb[i] if prog.slot[i] < 0 else Cb[i] + Hb[0, prog.slot[i]])
    return Iv(thb.lo.T, thb.hi.T), Iv(XbT[0].lo.T, XbT[0].hi.T)


def _reverse(tp, gi, k, Hv, Hb, Cb, Z, Zb, XbT) -> None:
    """Adds the adjoints of group gi's arguments from those of its order-k coefficients."""
    op, _, kind, idx, args, _ = tp.prog.groups[gi]
    Y = Hb[k, idx]  # (G, N)
    if op == "x":
        _acc(XbT[k], (), args[:, 0], Y)
    elif op in ("add", "sub", "neg", "sum"):
        for col in range(args.shape[1]):
            _acc(Hb, (k,), args[:, col], -Y if op == "neg" or (op == "sub" and col) else Y)
    elif op == "lincomb":  # rows = M cols: cols += M^T rows; a parameter coefficient: rows v_t
        Mlo, Mhi = Z[gi]
        Vb = matmul(np.ascontiguousarray(Mlo.T), np.ascontiguousarray(Mhi.T), Y)
        var = args[:, 0] >= 0
        _acc(Hb, (k,), args[var, 0], Vb[var])
        rows, cols, cn, _ = tp.terms[gi]
        V = Iv.zeros((len(args), Y.shape[1]))
        V[var] = Hv[k, args[var, 0]]
        V.lo[~var] = V.hi[~var] = float(k == 0)  # the offset column: the constant 1
        if len(rows):
            _acc(Cb, (), cn, Y[rows] * V[cols])
    elif op == "mul" and (kind[0] or kind[1]):
        cc, vv = (0, 1) if kind[0] else (1, 0)
        _acc(Hb, (k,), args[:, vv], Y * Hv[0, args[:, cc]])
        nodes = tp.prog.node[args[:, cc]]
        par = np.array([int(a) in tp.pidx for a in nodes], dtype=bool)
        if par.any():
            _acc(Cb, (), nodes[par], Y[par] * Hv[k, args[par, vv]])
    elif op in ("mul", "sqr"):  # c_k = sum_j a_j b_{k-j}: a_j += c b_{k-j}, b_{k-j} += c a_j
        A = Hv[: k + 1, args[:, 0]]
        Y1 = Y[None]
        if op == "sqr":
            _acc(Hb, (slice(0, k + 1),), args[:, 0], (Y1 * _rev(A)).scale(np.float64(2)))
        else:
            B = Hv[: k + 1, args[:, 1]]
            _acc(Hb, (slice(0, k + 1),), args[:, 0], Y1 * _rev(B))
            _acc(Hb, (slice(0, k + 1),), args[:, 1], Y1 * _rev(A))
    else:  # exp, tanh, sigmoid: y_k = (1/k) sum_{j=1..k} j a_j u_{k-j}
        y = Hv[: k + 1, idx]
        if op == "exp":
            U, Ub = Hv, Hb  # u = y itself: its adjoints are the node's
        else:
            U = Z[gi][3].values(slice(None))  # jets64._Series of u: (order + 1, G, N)
            if gi not in Zb:
                Zb[gi] = Iv.zeros(U.shape)
            Ub = Zb[gi]  # u_k = [k = 0] - sum_j y_j y_{k-j} (tanh), y_k - sum_j y_j y_{k-j}
            u = Ub[k][None]
            dy = -(u * _rev(y)).scale(np.float64(2))
            if op == "sigmoid":
                dy[k] = dy[k] + Ub[k]
            _acc(Hb, (slice(0, k + 1),), idx, dy)
            Y = Hb[k, idx]
        if k == 0:  # y_0 = op(a_0), op'(a_0) = u_0
            _acc(Hb, (0,), args[:, 0], Y * (Hv[0, idx] if op == "exp" else U[0]))
            return
        w = np.arange(1, k + 1, dtype=float)[:, None, None]
        Yk = Y.divide_int(k)[None]
        us = Hv[:k, idx] if op == "exp" else U[:k]
        _acc(Hb, (slice(1, k + 1),), args[:, 0], (Yk * _rev(us)).scale(w))
        du = (Yk * _rev(Hv[1 : k + 1, args[:, 0]])).scale(w[::-1])  # u_i, i = k - j
        if op == "exp":
            _acc(Ub, (slice(0, k),), idx, du)
        else:
            Ub[:k] = Ub[:k] + du


def replay_gradient64(field, pieces, points, steps, apriori, K: int, m: int):
    """The final boxes (n, d) and, per piece and step, what the backward pass reads: the boxes
    B and X, the step matrix ``M_h`` (n, d, d) and the bound s on ``|S(t)|_inf``; pieces are
    (duration, exact parameters), ``apriori[j][s]`` the factor of step s of piece j (None:
    chosen from :data:`FACTORS`, from half the last one, and stored). Raises ReplayError naming
    the piece and step. Guarantee: encloses (proofs/training.md#sensitivity64)."""
    check_fpu()
    if m < 1:
        raise ReplayError("the variational order must be >= 1")
    with np.errstate(all="ignore"):  # non-finite values are rejected by checks, not warned
        tp = ThetaProgram(field)
        n, d = len(points), tp.d
        series = sum(len(g[3]) for g in tp.prog.groups if g[0] in OPS64[7:])
        cells = (m + 1) * (tp.prog.size + series) * 2 * n * (1 + d)
        if cells > MAX_CELLS:  # the stored coefficients of one step, 16 bytes a cell
            raise ReplayError(f"resource limit: a step stores {cells:.2g} interval cells "
                              f"(limit {MAX_CELLS:.2g}): fewer points per certificate")  # fmt: skip
        S = Sets.boxes([[(x, x) for x in row] for row in points])
        out, last = [tp], FACTORS[0]
        fails = MAX_FAILED_TRIES + sum(len(s) for s in steps) // 4  # failed tries left (search)
        for j, (duration, values) in enumerate(pieces):
            if sum(steps[j], fmpq(0)) != duration or not all(h > 0 for h in steps[j]):
                raise ReplayError(f"piece {j}: the steps are not positive or do not sum to "
                                  f"{duration}")  # fmt: skip
            theta, recs = from_fmpq(values), []
            for s, h in enumerate(steps[j]):
                try:
                    X, hb, info = S.hull(with_centre=True), from_fmpq([h]), {}
                    tries = [apriori[j][s]] if apriori[j][s] is not None else [
                        fmpq(int(r * 256), 256) for r in FACTORS if r >= last / 2]  # fmt: skip
                    for t, rho in enumerate(tries):
                        B = apriori64(tp.prog, theta, S, hb, float(rho))
                        try:
                            new = lohner_step64(tp.prog, theta, S, h, B, K, min(m, FORWARD_M), info)
                            break
                        except ReplayError as exc:
                            if "Picard" not in str(exc) or t == len(tries) - 1:
                                raise
                            fails -= 1
                            if fails < 0:
                                raise ReplayError("resource limit: the a priori factor search "
                                                  "failed more than MAX_FAILED_TRIES + steps / 4 "
                                                  "times") from None  # fmt: skip
                    apriori[j][s], last, S = rho, float(rho), new
                    recs.append((theta, B, X, h, *_bounds(tp, theta, B, info["L"], h)))
                except ReplayError as exc:
                    raise ReplayError(f"piece {j}, step {s}: {exc}") from None
            out.append((recs, m))
        return S.hull(), out


def _bounds(tp, theta: Iv, B: Iv, Lx: np.ndarray, h: fmpq) -> tuple[np.ndarray, np.ndarray]:
    """Per point ``e >= e^{L_x h} - 1`` and ``s >= L_theta h e^{L_x h}``, ``L_theta >= sup
    |f_theta|_inf`` over the hull of all the boxes B (containing each): the row sums of the
    parameter gradients of every f_i = X[1]_i by :func:`theta_adjoint` (one set per row)
    (training.md#sensitivity64, item 3)."""
    d = B.shape[1]
    tape, e, lo, hi = {}, np.eye(d), B.lo.min(axis=0), B.hi.max(axis=0)
    jets64(tp.prog, theta, Iv(np.tile(lo, (d, 1)), np.tile(hi, (d, 1))), None, 1, tape)
    mag = theta_adjoint(tp, tape, [Iv.zeros((d, d)), Iv(e, e.copy())], 1)[0].mag()
    Lt = float(Iv(mag, mag.copy()).sum(axis=1).hi.max())
    with flint.ctx.workprec(53):
        grow = [(arb(float(x)) * arb(h)).exp() for x in Lx.tolist()]
        e, s = from_arb([g - 1 for g in grow]).hi, from_arb([arb(Lt) * arb(h) * g for g in grow]).hi
    if not (np.isfinite(e).all() and np.isfinite(s).all()):
        raise ReplayError("the variational bound overflows")
    return e, s


def _step_adjoint(tp, rec, m: int, q: Iv) -> tuple[Iv, Iv]:
    """For one step (rec from the forward pass): enclosures (P,) of ``sum_i q_i^T S_{h,i}`` and
    (n, d) of ``M_h^T q``: ``sum_{k<m} h^k q^T D x_k(X)`` (parameters, resp. start) and the
    remainder ``h^m q^T (D_theta x_m(B) + D_x x_m(B) S_B)``, resp. ``h^m q^T D_x x_m(B) V_B``
    (``S_B = [-s, s]``, ``V_B = I + [-e, e]``), in one reverse sweep over B and X stacked."""
    theta, B, X, h, e, s = rec
    n, d = X.shape
    tape, hb = {}, from_fmpq([h])
    jets64(tp.prog, theta, Iv(np.concatenate([B.lo, X.lo]), np.concatenate([B.hi, X.hi])),
           None, m, tape)  # fmt: skip
    Xb, hk = [], Iv(np.ones((1, 1)), np.ones((1, 1)))
    for k in range(m + 1):  # weights q h^k: of X for k < m, of B for k = m
        Xb.append(Iv.zeros((2 * n, d)))
        Xb[k][slice(n, None) if k < m else slice(0, n)] = q * hk
        hk = hk * Iv(hb.lo[:, None], hb.hi[:, None])
    thb, x0b = theta_adjoint(tp, tape, Xb, m)
    gx = x0b[:n].mag()
    gsum = Iv(gx, gx.copy()).sum(axis=1)  # >= sum_i |h^m q^T D_x x_m(B)|_i
    rs, re = (gsum * Iv(s, s.copy())).hi[:, None], (gsum * Iv(e, e.copy())).hi[:, None]
    per = thb[:n] + thb[n:] + Iv(-rs, rs)
    return per.sum(axis=0), x0b[n:] + x0b[:n] + Iv(-re, re)


def loss_and_gradient64(finals: Iv, mats, targets, pieces, eps: fmpq) -> tuple:
    """Intervals of J (shape (1,)) and of ``grad_{theta_l} J`` (shape (P,) per piece), for
    ``J = (1/N) sum_i |x_i(T) - y_i|^2 / 2 + (eps/2) sum_l h_l |theta_l|^2``: the adjoint
    ``q = (x(T) - y) / N`` carried back over the steps, ``g_l += sum_i q^T S_h`` and
    ``q <- M_h^T q`` (a reverse sweep per step, :func:`_step_adjoint`).
    Guarantee: encloses (proofs/training.md#gradient, #sensitivity64)."""
    n, d = finals.shape
    tp, per_piece = mats[0], mats[1:]
    check_fpu()
    with np.errstate(all="ignore"):
        Y = from_fmpq([v for row in targets for v in row])
        r = finals - Iv(Y.lo.reshape(n, d), Y.hi.reshape(n, d))
        sq = r * r
        sq = Iv(np.maximum(sq.lo, 0.0), sq.hi)
        loss = sq.sum(axis=1).sum(axis=0).divide_int(2 * n)
        q, grads = r.divide_int(n), [None] * len(pieces)
        for j in reversed(range(len(pieces))):
            recs, m = per_piece[j]
            g = Iv.zeros((tp.P,))
            for rec in reversed(recs):
                t, q = _step_adjoint(tp, rec, m, q)
                if not (t.finite() and q.finite()):
                    raise ReplayError(f"piece {j}: the gradient overflows")
                g = g + t
            h, theta = pieces[j]
            reg = from_fmpq([eps * h * v for v in theta])
            grads[j] = g + Iv(reg.lo, reg.hi)
        count = sum(len(th) for _, th in pieces)  # charged before: 4 products a parameter
        charge(4 * count, 3 * top(), "the regulariser")
        total = exact_sum([h * v * v for h, th in pieces for v in th], "the regulariser")
        loss = loss + from_fmpq([eps * total / 2])
        if not (loss.finite() and all(g.finite() for g in grads)):
            raise ReplayError("the loss or its gradient overflows")
        return loss, grads
