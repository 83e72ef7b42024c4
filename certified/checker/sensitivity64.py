"""The C^1 enclosures in the parameters and the loss gradient of ``sensitivity.py``, for all
points at once in float64 intervals (public: producers compute with it the claims the checker
replays; proofs/training.md#sensitivity64).

The flow of every point is the batched Lohner step of ``lohner64`` (a priori boxes from the
hints' factors, ``apriori64``); each step's ``(M_h, S_h)`` is bounds.md#variational for the
augmented field ``(f(x; theta), 0)`` over ``X x {theta}`` and ``B x {theta}`` as in
``sensitivity.step_jacobian``, its Taylor coefficients computed by :func:`theta_jets`: the
recurrences of ``jets64`` over the compiled groups of the field (``jets64.Program``), each
node's dual carrying the d state and the P parameter directions. A parameter is a constant
whose dual is a unit vector, so a row ``sum_t c_t v_t`` of constants is one ``ivec.matmul``
plus the values ``v_t`` scattered into the columns of its parameters: the parameters' series
cost nothing. The adjoint runs backwards over the steps, ``g += S_h^T q``, ``q <- M_h^T q``,
in the same intervals (proofs/training.md#gradient)."""

from __future__ import annotations

import flint
import numpy as np
from flint import arb, fmpq

from .ivec import Iv, check_fpu, dn, from_arb, from_fmpq, matmul, up
from .jets64 import Program, _dual_mul, _monotone
from .lohner64 import MAX_FAILED_TRIES, Sets, apriori64, lohner_step64
from .taylor import ReplayError

__all__ = ["OPS64", "ThetaProgram", "cost64", "loss_and_gradient64", "replay_gradient64",
           "supported64", "theta_jets"]  # fmt: skip

OPS64 = ("x", "p", "c", "add", "sub", "neg", "sum", "mul", "sqr", "exp", "tanh", "sigmoid")
FACTORS = [2.0**k for k in range(-8, 7)]  # the a priori factors a producer tries, in order
MAX_CELLS = 10**8  # the coefficients of one step held at once (1.6 GB)
FORWARD_M = 3  # the Lohner step's variational order (the sets of points stay thin: J C r is tiny)


def supported64(field) -> bool:
    """Operations of :data:`OPS64`, every node depending only on parameters a leaf."""
    return all(op in OPS64 and (op in ("p", "c") or not c)
               for (op, *_), c in zip(field.nodes, field.const, strict=True))  # fmt: skip


def cost64(field, n: int, steps: int, K: int, m: int) -> int:
    """Estimated cost of :func:`replay_gradient64` in the units of ``lohner.MAX_TAYLOR_OPS``
    (~0.1 us): per step, the series of the nodes with 1 + d + P dual parts (m^2 / 2
    convolution terms for the nonlinear ones, m matrix products), and the Lohner step."""
    d, P = field.dimension, len(field.names)
    conv = sum(op in ("mul", "sqr", "exp", "tanh", "sigmoid") for op, *_ in field.nodes) - P
    rows = len(field.nodes) - P
    cells = (d + P + 1) * (2 * n) * (3 * max(conv, 0) * (m * m + 2 * m) + rows * m) // 8
    return int(steps * (cells + 400 * (2 * K + 3 * m) + n * (K * K + 8 * d**3) * 4))


class ThetaProgram:
    """A field compiled for :func:`theta_jets`: its ``jets64.Program`` and the storage slots of
    the nodes computed at each order (the non-constant ones and the constant leaves read as
    arguments)."""

    def __init__(self, field) -> None:
        if not supported64(field):
            raise ReplayError(f"the float64 gradient replay takes the operations {OPS64}")
        self.field, self.prog = field, Program(field)
        self.d, self.P = field.dimension, len(field.names)
        nodes, const = field.nodes, field.const
        self.pidx = {i: a[0] for i, (op, *a) in enumerate(nodes) if op == "p"}
        slots, leaves = {}, set()
        for op, cst, kind, idx, args, _ in self.prog.groups:
            if cst:
                continue
            base = len(slots)
            slots.update((int(i), base + k) for k, i in enumerate(idx))
            if op != "lincomb":
                for col in range(args.shape[1]):
                    if not (op == "mul" and kind[col]):
                        leaves.update(int(a) for a in args[:, col] if const[a])
        for i in sorted(leaves):
            slots[i] = len(slots)
        self.slots, self.leaves = slots, sorted(leaves)
        self.terms = {}  # lincomb group -> rounds of (row, column, parameter) with one
        for gi, (op, _, _, _, _, value) in enumerate(self.prog.groups):  # (row, parameter) each
            if op == "lincomb":
                rows, cols, cn = value
                seen, rounds = {}, []
                for r, c, q in zip(rows.tolist(), cols.tolist(), cn.tolist(), strict=True):
                    if q in self.pidx:
                        k = seen.get((r, self.pidx[q]), 0)
                        seen[(r, self.pidx[q])] = k + 1
                        rounds.extend([] for _ in range(k + 1 - len(rounds)))
                        rounds[k].append((r, c, self.pidx[q]))
                self.terms[gi] = [tuple(np.array(t) for t in zip(*rd, strict=True))
                                  for rd in rounds]  # fmt: skip


def _gather(H: Iv, where: np.ndarray) -> Iv:
    return Iv(H.lo[where], H.hi[where])


def _mr(x: Iv) -> tuple[np.ndarray, np.ndarray]:
    """Midpoints and radii (bounds.md#matmul: the radius covers both exact differences)."""
    m = x.lo + (x.hi - x.lo) * 0.5
    return m, up(np.maximum(x.hi - m, m - x.lo))


class _Series:
    """Coefficients 0, 1, ... of G nodes for n sets: values as intervals, dual parts (D of them)
    as midpoints with the two factors of bounds.md#matmul, ``max(r + g|m|, 2^-900)`` and
    ``max(|m| + r, 2^-900)``, g >= gamma_c for the dot products of up to ``c`` terms."""

    def __init__(self, size: int, G: int, n: int, D: int, c: int) -> None:
        self.lo, self.hi = np.zeros((size, G, n)), np.zeros((size, G, n))
        self.m, self.f1, self.f2 = (np.empty((size, G, n, D)) for _ in range(3))
        self.g, self.k = (c + 1) * 2.0**-53, 0

    def push(self, x: Iv) -> None:
        k = self.k
        self.lo[k], self.hi[k] = x.lo[..., 0], x.hi[..., 0]
        m, r = _mr(x[..., 1:])
        am = np.abs(m)
        self.m[k] = m
        self.f1[k] = np.maximum(r + self.g * am, 2.0**-900)
        self.f2[k] = np.maximum(am + r, 2.0**-900)
        self.k = k + 1

    def values(self, at: slice) -> Iv:
        return Iv(self.lo[at], self.hi[at])


def _einsum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.einsum("jgn,jgnd->gnd", a, b)


def _conv(A: _Series, B: _Series, k: int, first: int = 0, weighted: bool = False) -> Iv:
    """sum_{j=first..k} A_j B_{k-j} (times j if weighted) as duals: the values in intervals;
    the dual parts ``sum_j (a_j0 b'_{k-j} + a'_j b_{k-j,0})`` one dot product of c = 2J terms
    per entry, by midpoint and radius with the bound of ivec.matmul (bounds.md#matmul)."""
    ja, jb = slice(first, k + 1), slice(k - first, None, -1) if k > first else slice(0, 1)
    a, b = A.values(ja), B.values(jb)
    if weighted:
        w = np.arange(first, k + 1, dtype=float).reshape(-1, 1, 1)
        a, bw = a.scale(w), b.scale(w)
    else:
        bw = b
    val = (a * b).sum(axis=0)
    (am1, ar1), (am2, ar2) = _mr(a), _mr(bw)
    Ym = _einsum(am1, B.m[jb]) + _einsum(am2, A.m[ja])
    R = (_einsum(np.abs(am1), B.f1[jb]) + _einsum(np.abs(am2), A.f1[ja])) + (
        _einsum(ar1, B.f2[jb]) + _einsum(ar2, A.f2[ja]))  # fmt: skip
    c = 2 * (k + 1 - first)
    R = R * (1.0 + 4 * (c + 4) * 2.0**-53) + 4 * c * 2.0**-1074
    out = Iv(np.empty((*val.shape, 1 + Ym.shape[-1])), np.empty((*val.shape, 1 + Ym.shape[-1])))
    out[..., 0] = val
    out.lo[..., 1:], out.hi[..., 1:] = dn(Ym - R), up(Ym + R)
    return out


def theta_jets(tp: ThetaProgram, theta: Iv, x0: Iv, seeds: Iv, order: int) -> list[Iv]:
    """Coefficients ``X[k]`` (n, d, 1 + d + P), k = 0..order, of the solutions of the augmented
    field through ``x0 x {theta}`` with dual parts ``D z_k`` times the seeds: ``seeds`` (n, d,
    d + P) the x-rows, the theta-rows those of the identity. Raises ReplayError on overflow.
    Guarantee: as :func:`certified.checker.taylor.field_jets` for the augmented field."""
    n, d = x0.shape
    D, prog, slots, nodes = seeds.shape[2], tp.prog, tp.slots, tp.field.nodes
    cv = from_fmpq([nodes[i][1] if nodes[i][0] == "c" else fmpq(0) for i in range(len(nodes))])
    for i, q in tp.pidx.items():
        cv.lo[i], cv.hi[i] = theta.lo[q], theta.hi[q]
    X0 = Iv.zeros((n, d, 1 + D))
    X0[..., 0] = x0
    X0[..., 1:] = seeds
    X, H, Z, mats = [X0], [], {"order": order}, {}
    for k in range(order):
        Hk = Iv.zeros((len(slots), n, 1 + D))
        H.append(Hk)
        if k == 0:
            for i in tp.leaves:
                Hk.lo[slots[i], :, 0], Hk.hi[slots[i], :, 0] = cv.lo[i], cv.hi[i]
                if i in tp.pidx:
                    Hk.lo[slots[i], :, 1 + d + tp.pidx[i]] = 1.0
                    Hk.hi[slots[i], :, 1 + d + tp.pidx[i]] = 1.0
        for gi, (op, cst, kind, idx, args, value) in enumerate(prog.groups):
            if cst:
                continue
            out = _group(tp, op, kind, idx, args, value, k, H, X, Z, mats, gi, cv, n, d)
            if not out.finite():
                raise ReplayError(f"node {int(idx[0])} ({op}) leaves its domain or overflows")
            where = np.array([slots[int(i)] for i in idx])
            Hk.lo[where], Hk.hi[where] = out.lo, out.hi
        Xk = _gather(Hk, np.array([slots[o] for o in prog.outputs]))
        X.append(Iv(np.swapaxes(Xk.lo, 0, 1), np.swapaxes(Xk.hi, 0, 1)).divide_int(k + 1))
    return X


def _group(tp, op, kind, idx, args, value, k, H, X, Z, mats, gi, cv, n, d) -> Iv:
    slots = tp.slots

    def ser(col: int, j: int) -> Iv:  # coefficient j of argument col of every member
        return _gather(H[j], np.array([slots[int(a)] for a in args[:, col]]))

    if op == "x":
        Xk = X[k][:, args[:, 0]]
        return Iv(np.swapaxes(Xk.lo, 0, 1), np.swapaxes(Xk.hi, 0, 1))
    if op in ("add", "sub", "neg"):
        out = -ser(0, k) if op == "neg" else ser(0, k)
        for col in range(1, args.shape[1]):
            out = out - ser(col, k) if op == "sub" else out + ser(col, k)
        return out
    if op == "sum":
        where = np.array([[slots[int(a)] for a in row] for row in args])
        A = _gather(H[k], where)  # (G, arity, n, 1 + D)
        return A.sum(axis=1)
    if op == "lincomb":
        rows, cols, cn = value
        if k == 0:
            G = len(idx)
            Mlo, Mhi = np.zeros((G, len(args))), np.zeros((G, len(args)))
            Mlo[rows, cols], Mhi[rows, cols] = cv.lo[cn], cv.hi[cn]
            mats[gi] = (Mlo, Mhi)
        var = [slots[int(a)] for a in args[:, 0] if a >= 0]
        V = Iv.zeros((len(args), n, H[k].shape[2]))
        V[: len(var)] = _gather(H[k], np.array(var, dtype=np.int64))
        if args[-1, 0] == -1 and k == 0:  # the constant 1 (an offset)
            V.lo[-1, :, 0] = V.hi[-1, :, 0] = 1.0
        out = matmul(*mats[gi], V)
        for r, c, q in tp.terms[gi]:  # d(c_t v_t)/d theta_q = v_t: the value, scattered
            at = (r, slice(None), 1 + d + q)
            out[at] = out[at] + V[c, :, 0]
        return out
    if op == "mul" and (kind[0] or kind[1]):
        cc, vv = (0, 1) if kind[0] else (1, 0)
        V, c = ser(vv, k), args[:, cc]
        out = V * Iv(cv.lo[c][:, None, None], cv.hi[c][:, None, None])
        rows = [(r, tp.pidx[int(a)]) for r, a in enumerate(c) if int(a) in tp.pidx]
        if rows:
            r, q = (np.array(t) for t in zip(*rows, strict=True))
            out[r, :, 1 + d + q] = out[r, :, 1 + d + q] + V[r, :, 0]
        return out
    G, D = len(idx), H[k].shape[2] - 1
    if k == 0:
        Z[gi] = [_Series(Z["order"] + 1, G, n, D, 2 * Z["order"] + 2) for _ in range(4)]
    A, B, own, aux = Z[gi]
    A.push(ser(0, k))
    if op in ("mul", "sqr"):
        if op == "sqr":
            return _conv(A, A, k)
        B.push(ser(1, k))
        return _conv(A, B, k)
    if k == 0:  # exp, tanh, sigmoid: y' = a' u with u = y, 1 - y^2, y - y^2
        a0 = ser(0, 0)
        y = Iv(np.empty(a0.shape), np.empty(a0.shape))
        y[..., 0] = y0 = _monotone(op, a0[..., 0])
        one = Iv(np.ones(y0.shape), np.ones(y0.shape))
        u0 = y0 if op == "exp" else one - y0 * y0 if op == "tanh" else y0 - y0 * y0
        y[..., 1:] = a0[..., 1:] * u0[..., None]
        own.push(y)
        if op != "exp":
            u = _dual_mul(y, y)
            u = -u if op == "tanh" else y - u
            u[..., 0] = u0
            aux.push(u)
        return y
    y = _conv(A, own if op == "exp" else aux, k, 1, True).divide_int(k)
    own.push(y)
    if op != "exp":
        cc = _conv(own, own, k)
        aux.push(-cc if op == "tanh" else y - cc)
    return y


def _poly(coefs: list[Iv], h: Iv) -> Iv:
    out = coefs[-1]
    for c in reversed(coefs[:-1]):
        out = out * h + c
    return out


def step_jacobian64(tp: ThetaProgram, theta: Iv, X: Iv, B: Iv, h: fmpq, m: int) -> tuple:
    """``(M_h, S_h)`` (n, d, d) and (n, d, P) enclosing the step's Jacobians at every x in the
    boxes X, B the step's a priori boxes (Picard-validated by ``lohner_step64``).
    Guarantee: encloses (proofs/training.md#sensitivity, #sensitivity64)."""
    n, d = X.shape
    D = d + tp.P
    hb = from_fmpq([h])
    eye = np.broadcast_to(np.eye(d, D), (n, d, D))
    df = theta_jets(tp, theta, B, Iv(eye, eye), 1)[1][..., 1:].mag()
    # >= |D_x f(B)|_inf and |D_theta f(B)|_inf per point (row sums, rounded up)
    Lx = Iv(df[..., :d], df[..., :d]).sum(axis=2).hi.max(axis=1)
    Lt = Iv(df[..., d:], df[..., d:]).sum(axis=2).hi.max(axis=1)
    with flint.ctx.workprec(53):
        grow = [(arb(float(x)) * arb(h)).exp() for x in Lx.tolist()]  # e^{L_x h}
        e = from_arb([g - 1 for g in grow]).hi
        hg = [arb(h) * g for g in grow]  # h e^{L_x h}
        s = from_arb([arb(float(t)) * q for t, q in zip(Lt.tolist(), hg, strict=True)]).hi
    if not (np.isfinite(e).all() and np.isfinite(s).all()):
        raise ReplayError("the variational bound overflows")
    rad = np.concatenate([np.broadcast_to(e[:, None, None], (n, d, d)),
                          np.broadcast_to(s[:, None, None], (n, d, D - d))], axis=2)  # fmt: skip
    VB = Iv(eye, eye) + Iv(-rad, rad)  # rounded outward
    BX = Iv(np.concatenate([B.lo, X.lo]), np.concatenate([B.hi, X.hi]))
    both = theta_jets(
        tp, theta, BX, Iv(np.concatenate([VB.lo, eye]), np.concatenate([VB.hi, eye])), m
    )
    J = _poly([both[k][n:, :, 1:] for k in range(m)] + [both[m][:n, :, 1:]], hb)
    return J[..., :d], J[..., d:]


def replay_gradient64(field, pieces, points, steps, apriori, K: int, m: int):
    """The final boxes (n, d) and, per piece and step, ``(M_h, S_h)`` of every point: pieces are
    (duration, exact parameters), ``apriori[j][s]`` the factor of step s of piece j (None:
    chosen from :data:`FACTORS`, from half the last one, and stored). Raises ReplayError naming
    the piece and step. Guarantee: encloses (proofs/training.md#sensitivity64)."""
    check_fpu()
    with np.errstate(all="ignore"):  # non-finite values are rejected by checks, not warned
        tp = ThetaProgram(field)
        series = sum(len(g[3]) for g in tp.prog.groups if g[0] in OPS64[7:])  # 4 series each
        cells = (m + 1) * (len(tp.slots) + 4 * series) * 2 * len(points) * (1 + tp.d + tp.P)
        if cells > MAX_CELLS:  # the stored coefficients of one step, 16 bytes a cell
            raise ReplayError(f"resource limit: a step stores {cells:.2g} interval cells "
                              f"(limit {MAX_CELLS:.2g}): fewer points per certificate")  # fmt: skip
        S = Sets.boxes([[(x, x) for x in row] for row in points])
        out, last = [], FACTORS[0]
        fails = MAX_FAILED_TRIES + sum(len(s) for s in steps) // 4  # failed tries left (search)
        for j, (duration, values) in enumerate(pieces):
            if sum(steps[j], fmpq(0)) != duration or not all(h > 0 for h in steps[j]):
                raise ReplayError(f"piece {j}: the steps are not positive or do not sum to "
                                  f"{duration}")  # fmt: skip
            theta, mats = from_fmpq(values), []
            for s, h in enumerate(steps[j]):
                try:
                    X, hb = S.hull(with_centre=True), from_fmpq([h])
                    tries = [apriori[j][s]] if apriori[j][s] is not None else [
                        fmpq(int(r * 256), 256) for r in FACTORS if r >= last / 2]  # fmt: skip
                    for t, rho in enumerate(tries):
                        B = apriori64(tp.prog, theta, S, hb, float(rho))
                        try:
                            new = lohner_step64(tp.prog, theta, S, h, B, K, min(m, FORWARD_M))
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
                    mats.append(step_jacobian64(tp, theta, X, B, h, m))
                except ReplayError as exc:
                    raise ReplayError(f"piece {j}, step {s}: {exc}") from None
            out.append(mats)
        return S.hull(), out


def loss_and_gradient64(finals: Iv, mats, targets, pieces, eps: fmpq) -> tuple:
    """Intervals of J (shape (1,)) and of ``grad_{theta_l} J`` (shape (P,) per piece), for
    ``J = (1/N) sum_i |x_i(T) - y_i|^2 / 2 + (eps/2) sum_l h_l |theta_l|^2``: the adjoint
    ``q = (x(T) - y) / N`` carried back over the steps, ``g_l += sum_i S_h^T q``,
    ``q <- M_h^T q``. Guarantee: encloses (proofs/training.md#gradient, #sensitivity64)."""
    n, d = finals.shape
    with np.errstate(all="ignore"):
        Y = from_fmpq([v for row in targets for v in row])
        r = finals - Iv(Y.lo.reshape(n, d), Y.hi.reshape(n, d))
        sq = r * r
        sq = Iv(np.maximum(sq.lo, 0.0), sq.hi)
        loss = sq.sum(axis=1).sum(axis=0).divide_int(2 * n)
        q, grads = r.divide_int(n), [None] * len(pieces)
        for j in reversed(range(len(pieces))):
            g = None
            for Mh, Sh in reversed(mats[j]):
                t = (Sh * q[:, :, None]).sum(axis=1)
                g = t if g is None else g + t
                q = (Mh * q[:, :, None]).sum(axis=1)
            h, theta = pieces[j]
            reg = from_fmpq([eps * h * v for v in theta])
            grads[j] = g.sum(axis=0) + Iv(reg.lo, reg.hi)
        total = sum((h * sum((v * v for v in th), fmpq(0)) for h, th in pieces), fmpq(0))
        loss = loss + from_fmpq([eps * total / 2])
        if not (loss.finite() and all(g.finite() for g in grads)):
            raise ReplayError("the loss or its gradient overflows")
        return loss, grads
