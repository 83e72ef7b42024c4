"""The Taylor step with QR-Lohner sets for many sets at once, in float64 intervals.

The step of :func:`certified.checker.lohner.lohner_step` (proofs/bounds.md#lohner, #picard,
#taylor-step, #variational), batched: a set is ``x^ + C r`` with ``x^`` (sets, d) and ``C``
(sets, d, d) doubles (exact), ``r`` an :class:`~certified.checker.ivec.Iv` (sets, d); a doubleton
(``hints.sets``) adds ``M u``, M (sets, d, d) doubles, u in the initial box's U; a zonotope
carries its errors as generators ``G e`` (G (sets, d, m) doubles, e in [-1, 1]^m) instead of
``C r`` (proofs/bounds.md#zonotope). Matrix
products are sums of ``ivec`` products taken one index at a time (no BLAS); the inverse of the
new basis ``C'`` is enclosed by ``C'^T`` plus a Neumann bound (proofs/checker_soundness.md
#float-intervals). Used by rule taylor-lohner at 53 bits when every operation of the field has
a float64 form (``lohner.SUPPORTED``)."""

from __future__ import annotations

import numpy as np
from flint import arb, fmpq

from .ivec import Iv, check_fpu, from_arb, from_fmpq
from .jets64 import Program, jets64
from .quad64 import quadratic_hull, spread
from .taylor import ReplayError

__all__ = ["GENERATORS", "Sets", "apriori64", "lohner_step64", "replay_flow64"]


def _point(x: np.ndarray) -> Iv:
    return Iv(x, x.copy())


def _stack(a: Iv, b: Iv) -> Iv:
    return Iv(np.concatenate([a.lo, b.lo]), np.concatenate([a.hi, b.hi]))


def _matvec(C: np.ndarray, r: Iv) -> Iv:
    """C r for exact C (n, d, d) and intervals r (n, d): all products, then one sum."""
    return r[:, None, :].scale(C).sum(axis=2)


def _cat(a: Iv, b: Iv) -> Iv:
    return Iv(np.concatenate([a.lo, b.lo], axis=2), np.concatenate([a.hi, b.hi], axis=2))


def _imatmul(P: Iv, Q: Iv) -> Iv:
    """P Q for interval matrices (n, d, d): all products (n, d, d, d), then one sum."""
    return (P[:, :, :, None] * Q[:, None, :, :]).sum(axis=2)


def _imatvec(P: Iv, r: Iv) -> Iv:
    return (P * r[:, None, :]).sum(axis=2)


def _poly(coefs: list[Iv], h: Iv) -> Iv:
    out, point = coefs[-1], h.lo[0] == h.hi[0]  # a dyadic step: products by a double
    for c in reversed(coefs[:-1]):
        out = (out.scale_pos(h.lo[0]) if point else out * h) + c  # h > 0
    return out


def _inverse(C: np.ndarray) -> Iv:
    """Enclosures of C^-1 for float matrices C (n, d, d) near orthogonal: with
    E = I - C^T C and ||E||_inf <= delta < 1/2, C^-1 = (I - E)^-1 C^T lies in C^T + F C^T with
    ||F||_inf <= delta / (1 - delta), so each entry within that times max_k |C_jk|."""
    n, d, _ = C.shape
    Ct = np.swapaxes(C, 1, 2).copy()
    G = _imatmul(_point(Ct), _point(C))
    eye = np.broadcast_to(np.eye(d), (n, d, d))
    E = _point(eye.copy()) - G
    delta = E.mag()[:, :, 0].copy()
    acc = Iv(delta, delta.copy())
    for k in range(1, d):
        m = E.mag()[:, :, k]
        acc = acc + Iv(m, m.copy())
    delta = acc.hi.max(axis=1)  # upper bounds of ||E||_inf per set
    if not (np.isfinite(delta).all() and (delta < 0.5).all()):
        i = int(np.argmin(np.isfinite(delta) & (delta < 0.5)))
        raise ReplayError(f"set {i}: the new basis C is singular")
    dl = Iv(delta, delta.copy())
    eta = (dl / (Iv(np.ones(n), np.ones(n)) - dl)).hi  # delta / (1 - delta), rounded up
    colmax = np.abs(C).max(axis=2)  # (n, d): max_k |C_jk| for row j of C = column j of C^T
    rad = np.nextafter(eta[:, None] * colmax, np.inf)[:, None, :]  # (i, j): eta max_k |C_jk|
    return Iv(np.nextafter(Ct - rad, -np.inf), np.nextafter(Ct + rad, np.inf))


GENERATORS = 16  # a zonotope keeps at most 16 d error generators (bounds.md#zonotope)


class Sets:
    """``centre + C r`` (and ``+ M u``, u in U, for doubletons; ``centre + M u + G e`` for
    zonotopes, C = I and r = 0 unused; ``+ Q(u, u) / 2`` for quadratic sets, Q (n, d, d, d)
    doubles, :mod:`.quad64`) for n sets at once."""

    __slots__ = ("C", "G", "M", "Q", "U", "centre", "r")

    def __init__(self, centre: np.ndarray, C: np.ndarray, r: Iv, M=None, U=None, G=None,
                 Q=None) -> None:  # fmt: skip
        self.centre, self.C, self.r, self.M, self.U, self.G = centre, C, r, M, U, G
        self.Q = Q

    @classmethod
    def boxes(cls, starts: list[list[tuple[fmpq, fmpq]]], sets: str = "lohner") -> Sets:
        n, d = len(starts), len(starts[0])
        lo = from_fmpq([a for s in starts for a, _ in s]).lo.reshape(n, d)
        hi = from_fmpq([b for s in starts for _, b in s]).hi.reshape(n, d)
        centre = lo + (hi - lo) / 2  # any doubles: r absorbs the difference
        r, eye = Iv(lo, hi) - _point(centre), np.broadcast_to(np.eye(d), (n, d, d)).copy()
        if sets != "lohner":  # the box as M U with M = I, U fixed; r = 0 (G empty): the errors
            G = np.zeros((n, d, 0)) if sets in ("zonotope", "quadratic") else None
            Q = np.zeros((n, d, d, d)) if sets == "quadratic" else None
            return cls(centre, eye, Iv.zeros((n, d)), eye.copy(), r, G, Q)
        return cls(centre, eye, r)

    def hull(self, with_centre: bool = False) -> Iv:
        r = self.r.union_zero() if with_centre else self.r
        out = _point(self.centre) + _matvec(self.C, r)
        if self.M is not None:
            out = out + _matvec(self.M, self.U.union_zero() if with_centre else self.U)
        if self.Q is not None:  # Q(u, u) / 2 (quad64.quadratic_hull)
            out = out + quadratic_hull(_point(self.Q), self.U.union_zero()).scale_pos(0.5)
        if self.G is not None and self.G.shape[2]:  # |G| 1, rounded up
            w = Iv(np.abs(self.G), np.abs(self.G)).sum(axis=2).hi
            out = out + Iv(-w, w)
        return out


def lohner_step64(prog: Program, params: Iv, S: Sets, h: fmpq, B: Iv, K: int, m: int,
                  out: dict | None = None) -> Sets:  # fmt: skip
    """One step of length h of every set with the a priori boxes B (n, d); ``out``, if given,
    receives ``L`` (n,), the bounds on ``|Df(B)|_inf`` (bounds.md#variational).
    Guarantee: the returned sets contain Phi_h(x) for every x in the given ones."""
    n, d = B.shape
    hb = from_fmpq([h])
    eye = np.broadcast_to(np.eye(d), (n, d, d)).copy()
    ident = _point(eye)
    df = jets64(prog, params, B, ident, 1)[1]  # f(B) and Df(B)
    X = S.hull(with_centre=True)
    T = X + df[..., 0].union_zero() * hb
    bad = (T.lo < B.lo) | (T.hi > B.hi)
    if bad.any():
        i, j = map(int, np.argwhere(bad)[0])
        raise ReplayError(f"set {i}: the Picard inclusion fails in coordinate {j}")
    Dmag = df[..., 1:].mag()
    acc = Iv(Dmag[:, :, 0].copy(), Dmag[:, :, 0].copy())
    for j in range(1, d):
        acc = acc + Iv(Dmag[:, :, j].copy(), Dmag[:, :, j].copy())
    L = acc.hi.max(axis=1)  # >= |Df(B)|_inf per set
    e = from_arb([(arb(float(x)) * arb(h)).exp() - 1 for x in L.tolist()]).hi
    VB = ident + Iv(np.broadcast_to(-e[:, None, None], (n, d, d)).copy(),
                    np.broadcast_to(e[:, None, None], (n, d, d)).copy())  # fmt: skip
    if out is not None:
        out["L"] = L
    if S.Q is not None:  # quadratic sets (proofs/bounds.md#quadratic)
        from .quad64 import quadratic_step

        return quadratic_step(prog, params, S, hb, B, K, m, X, VB)
    # the variational series over B (remainder, seeds V_B) and over X (seeds I), the order-K
    # series at the centres and over B (remainder: the variational call's values if m >= K)
    sB, sX = VB, ident
    if S.M is not None:  # doubleton: seeds [I | M], [V_B | V_B M] also give J M directly
        Mi = _point(S.M)
        sB, sX = _cat(VB, _imatmul(VB, Mi)), _cat(ident, Mi)
    var = jets64(prog, params, _stack(B, X), _stack(sB, sX), m)
    both = jets64(prog, params, _point(S.centre) if m >= K else _stack(_point(S.centre), B),
                  None, K - 1 if m >= K else K)  # fmt: skip
    rem = var[K][:n, :, 0] if m >= K else both[K][n:, :, 0]
    inc = hb * _poly([both[k][:n, :, 0] for k in range(1, K)] + [rem], hb)
    J = _poly([var[k][n:, :, 1 : d + 1] for k in range(m)] + [var[m][:n, :, 1 : d + 1]], hb)
    centre = S.centre + (inc.lo + inc.hi) / 2  # any doubles
    z = (_point(S.centre) - _point(centre)) + inc
    M = None
    if S.M is not None:  # doubleton: J M u in M' u + (J M - M') U, M' = mid(J M)
        AM = _poly([var[k][n:, :, d + 1 :] for k in range(m)] + [var[m][:n, :, d + 1 :]], hb)
        M = (AM.lo + AM.hi) / 2  # any doubles
        z = z + _imatvec(AM - _point(M), S.U)
    if S.G is not None:  # zonotope: no basis, the errors become generators
        return _zonotope(S, J, z, centre, M)
    A = (J[:, :, :, None].scale(S.C[:, None, :, :])).sum(axis=2)  # J C, C exact
    Am = (A.lo + A.hi) / 2
    size = (Am * Am).sum(axis=1) * (S.r.hi - S.r.lo)  # a heuristic order only
    order = np.argsort(-size, axis=1, kind="stable")
    Q, _ = np.linalg.qr(np.take_along_axis(Am, order[:, None, :], axis=2))
    C = np.empty_like(Q)
    np.put_along_axis(C, order[:, None, :], Q, axis=2)  # column order[c] of C is Q's column c
    if not np.isfinite(C).all():
        i = int(np.argmin(np.isfinite(C).all(axis=(1, 2))))
        raise ReplayError(f"set {i}: the new basis C is singular")
    Ci = _inverse(C)
    r = _imatvec(_imatmul(Ci, A), S.r) + _imatvec(Ci, z)
    return Sets(centre, C, r, M, S.U)


def _zonotope(S: Sets, J: Iv, z: Iv, centre: np.ndarray, M: np.ndarray) -> Sets:
    """The zonotope ``centre' + M' u + G' e`` after a step (proofs/bounds.md#zonotope):
    ``N G e`` in ``G' e + (J G - G') [-1, 1]^m`` with ``G' = mid(J G)``; the step's error box
    (``z``, the spread and rounding) recentred and appended as d new generators ``diag(w)``;
    past GENERATORS d, those of least ``|g|_1 - |g|_inf`` are boxed into d more."""
    G = S.G
    if G.shape[2]:
        JG = (J[:, :, :, None].scale(G[:, None, :, :])).sum(axis=2)  # (n, d, m)
        G = (JG.lo + JG.hi) / 2  # any doubles
        z = z + spread(JG, G)
    return generators(G, z, centre, M, S.U)


def generators(G: np.ndarray, z: Iv, centre: np.ndarray, M, U: Iv, Q=None) -> Sets:
    """The set ``centre' + M u (+ Q(u, u) / 2) + G' e`` with the error box ``centre + z``
    recentred and appended to G as d generators ``diag(w)``, G' reduced to GENERATORS d."""
    n, d, _ = G.shape
    shift = (z.lo + z.hi) / 2
    new = centre + shift  # any doubles
    diag = np.zeros((n, d, d))
    diag[:, np.arange(d), np.arange(d)] = ((_point(centre) + z) - _point(new)).mag()
    G = np.concatenate([G, diag], axis=2)
    if G.shape[2] > GENERATORS * d:
        a = np.abs(G)
        order = np.argsort(a.sum(axis=1) - a.max(axis=1), axis=1, kind="stable")
        cut = G.shape[2] - GENERATORS * d + d
        boxed = np.take_along_axis(a, order[:, None, :cut], axis=2)
        diag[:, np.arange(d), np.arange(d)] = Iv(boxed, boxed).sum(axis=2).hi
        kept = np.take_along_axis(G, np.sort(order[:, cut:], axis=1)[:, None, :], axis=2)
        G = np.concatenate([kept, diag], axis=2)
    eye = np.broadcast_to(np.eye(d), (n, d, d)).copy()
    return Sets(new, eye, Iv.zeros((n, d)), M, U, G, Q)


def apriori64(prog: Program, params: Iv, S: Sets, hb: Iv, rho: float) -> Iv:
    """The a priori boxes of a step from the factor rho (``hints.apriori``): from the Euler boxes
    Y = X + [0, h] f(X) of the hulls X, two rounds of B = inflate(Y), Y = X + [0, h] f(B), where
    inflate widens each coordinate by rho (w(Y_k) + 2^-10 max_k w(Y_k) + 2^-30 |Y_k| + 2^-200).
    Any box is only a candidate: the Picard inclusion decides (proofs/bounds.md#picard)."""
    X = S.hull(with_centre=True)
    B = X
    for _ in range(3):
        Y = X + jets64(prog, params, B, None, 1)[1][..., 0].union_zero() * hb
        w = Y.hi - Y.lo
        pad = rho * (w + 2.0**-10 * w.max(axis=1, keepdims=True) + 2.0**-30 * Y.mag() + 2.0**-200)
        B = Iv(Y.lo - pad, Y.hi + pad)
    return B


MAX_FAILED_TRIES = 16  # plus a quarter of the steps: the failed tries of a factor search
# (hints.apriori "search"; each costs about a tenth of a step: replay_cost stays within 1.1x)
_RHOS = [2.0**k for k in range(-8, 7)]  # the factors the producer tries (hints.apriori)


def replay_flow64(field, pieces, starts, steps, boxes, K: int, orders, times, apriori,
                  sets: str = "lohner") -> list:  # fmt: skip
    """As :func:`certified.checker.lohner.replay_flow`, for all sets at once in float64
    intervals; the enclosures are returned as arb balls. The a priori boxes are ``boxes`` or,
    when it is None, built from ``apriori[j][s]`` (:func:`apriori64`); an entry None is chosen
    (the smallest factor of ``_RHOS`` from the last one on that passes) and stored; ``sets``
    "lohner", "doubleton" or "zonotope" (proofs/bounds.md#lohner, #doubleton, #zonotope). Raises
    ReplayError naming the piece, step and set.
    Guarantee: encloses (proofs/checker_soundness.md#float-intervals)."""
    check_fpu()
    with np.errstate(all="ignore"):  # non-finite values are rejected by the checks, not warned
        return _replay(field, pieces, starts, steps, boxes, K, orders, times, apriori, sets)


def _replay(field, pieces, starts, steps, boxes, K: int, orders, times, apriori, kind) -> list:
    prog = Program(field)
    S = Sets.boxes(starts, kind)
    fails = [MAX_FAILED_TRIES + sum(len(s) for s in steps) // 4]  # failed tries left (search)
    n, d = S.centre.shape
    out, t, pending = [], fmpq(0), list(times)
    for j, (duration, params) in enumerate(pieces):
        if sum(steps[j], fmpq(0)) != duration or not all(h > 0 for h in steps[j]):
            raise ReplayError(f"piece {j}: the steps are not positive or do not sum to {duration}")
        P = from_arb(params)
        for s, h in enumerate(steps[j]):
            try:
                S = _step(prog, P, S, h, K, orders[j][s], boxes, apriori, j, s, n, d, fails)
            except ReplayError as exc:
                raise ReplayError(f"piece {j}, step {s}, {exc}") from None
            t += h
            while pending and pending[0] == t:
                H = S.hull()
                rows = zip(H.lo.tolist(), H.hi.tolist(), strict=True)
                out.append([[arb(a).union(arb(b)) for a, b in zip(lo, hi, strict=True)]
                            for lo, hi in rows])  # fmt: skip
                pending.pop(0)
    if pending:
        raise ReplayError(f"time {pending[0]} is not the end of a step")
    return out


def _step(prog, P, S, h, K, m, boxes, apriori, j, s, n, d, fails) -> Sets:
    if boxes is not None:
        Bq = from_fmpq([q for box in boxes[j][s] for pair in box for q in pair])
        B = Iv(Bq.lo[0::2].reshape(n, d), Bq.hi[1::2].reshape(n, d))
        return lohner_step64(prog, P, S, h, B, K, m)
    hb = from_fmpq([h])
    if apriori[j][s] is not None:
        return lohner_step64(prog, P, S, h, apriori64(prog, P, S, hb, float(apriori[j][s])), K, m)
    last = next((a for a in reversed([a for row in apriori for a in row]) if a is not None), 0)
    for rho in [r for r in _RHOS if r >= float(last)]:  # the last factor first: one try a step
        try:
            out = lohner_step64(prog, P, S, h, apriori64(prog, P, S, hb, rho), K, m)
        except ReplayError as exc:
            if "Picard" not in str(exc):
                raise
            fails[0] -= 1
            if fails[0] < 0:
                raise ReplayError("resource limit: the a priori factor search failed more than "
                                  f"{MAX_FAILED_TRIES} + steps / 4 times") from None  # fmt: skip
            continue
        apriori[j][s] = fmpq(int(rho * 256), 256) if rho < 1 else fmpq(int(rho))
        return out
    raise ReplayError("the Picard inclusion fails for every a priori factor up to 64")
