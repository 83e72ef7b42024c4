"""The validated Taylor method with QR-Lohner sets for any expression field: one stepping loop,
vectorised over initial sets in float64 interval arithmetic (compiled kernels), or in arb at
any precision through the reference step :func:`certified.checker.taylor.lohner_step`.

Per step of length h (shared by all sets; proofs/bounds.md#taylor-ad, #picard, #lohner):
an a priori box B with ``X + [0, h] f(B)`` inside B (Picard), the Taylor polynomial at the
centre plus the Lagrange remainder ``x_K(B) h^K``, an enclosure of ``DPhi_h`` over the set
from the variational equation (remainder over B with ``V_B = I + [-e, e]``), and the Lohner
update. The step policy only chooses h (tightness and cost).
"""

from __future__ import annotations

import flint
import numpy as np

from certified.arith import Interval
from certified.arith import interval as iv
from certified.arith.exact import fmpq_to_float
from certified.fields.field import PiecewiseField
from certified.flow.options import InitialSets, SaveAt, StepPolicy
from certified.flow.result import FlowEnclosure, FlowStatus
from certified.flow.taylor import _lohner_kernels as LK  # noqa: N812

__all__ = ["lohner_flow"]


class _Jets:
    """Taylor coefficients of the field over boxes for all sets, float64 intervals; a set
    whose box is not finite (an enclosure that blew up) gets a failed status, not an error."""

    def __init__(self, problem: PiecewiseField) -> None:
        from certified.arith.taylor import compile_tape, parameter_intervals

        self.tape = compile_tape(problem.field.expression)
        self.params = [
            tuple(np.ascontiguousarray(a, dtype=np.float64) for a in parameter_intervals(p.values))
            for p in problem.pieces
        ]
        # the fast path validates states and seeds only: parameters once, here
        self.fast = all(np.isfinite(a).all() and np.isfinite(b).all() and (a <= b).all()
                        for a, b in self.params)  # fmt: skip

    def __call__(self, j: int, xl, xh, order: int, sl=None, sh=None):
        from certified.arith.taylor import jets_float64, jets_float64_prevalidated

        pl, ph = self.params[j]
        if self.fast and np.isfinite(xl).all() and np.isfinite(xh).all():  # the common case
            if sl is None or (np.isfinite(sl).all() and np.isfinite(sh).all()):
                out = jets_float64_prevalidated(self.tape, pl, ph, xl, xh, sl, sh, order)
                return _zero_failed(*out)
        bad = ~(np.all(np.isfinite(xl), axis=1) & np.all(np.isfinite(xh), axis=1))
        if sl is not None:
            bad |= ~np.all(np.isfinite(sl) & np.isfinite(sh), axis=(1, 2))
        if bad.any():
            xl, xh = np.where(bad[:, None], 0.0, xl), np.where(bad[:, None], 0.0, xh)
            if sl is not None:
                sl = np.where(bad[:, None, None], 0.0, sl)
                sh = np.where(bad[:, None, None], 0.0, sh)
        lo, hi, status = jets_float64(self.tape, pl, ph, xl, xh, sl, sh, order=order)
        return _zero_failed(lo, hi, np.where(bad, 1, status))


def _zero_failed(lo, hi, status):
    """Failed sets' coefficients are [-inf, inf]: zeros keep the arithmetic finite (their
    status marks them failed)."""
    failed = status != 0
    if failed.any():
        lo[:, failed], hi[:, failed] = 0.0, 0.0
    return lo, hi, status


def _step_size(coefs: np.ndarray, c: np.ndarray, K: int, tol: float) -> float:
    """h with |x_K| h^K ~ tol max(1, |x|) at the centres (heuristic; also bounded by the
    growth of the last coefficients, an estimate of the radius of convergence)."""
    scale = np.maximum(1.0, np.max(np.abs(c), axis=1))
    best = np.inf
    for k in (K - 1, K):
        a = np.max(np.abs(coefs[k]), axis=1)
        with np.errstate(divide="ignore"):
            h = np.where(a > 0, (tol * scale / np.maximum(a, 1e-300)) ** (1.0 / k), np.inf)
        best = min(best, float(np.min(h)))
    return best


def _dyadic_floor(h: float) -> flint.fmpq:
    """A dyadic step of 4 significant bits at most h (short exact numbers in certificates)."""
    e = int(np.floor(np.log2(h)))
    k = min(15, max(8, int(h / 2.0**e * 8)))
    return flint.fmpq(k) * flint.fmpq(2) ** (e - 3)


def _poly(lo: np.ndarray, hi: np.ndarray, h: Interval) -> Interval:
    """sum_k a_k h^k for interval coefficients a_k (first axis), Horner (compiled)."""
    K, shape = lo.shape[0], lo.shape[1:]
    flo = np.ascontiguousarray(lo.reshape(K, -1))
    fhi = np.ascontiguousarray(hi.reshape(K, -1))
    out_lo, out_hi = np.empty(flo.shape[1]), np.empty(flo.shape[1])
    LK.horner(flo, fhi, float(h.lo.min()), float(h.hi.max()), out_lo, out_hi)
    return Interval(out_lo.reshape(shape), out_hi.reshape(shape))


def _apriori(jets, j, X: Interval, h: Interval, halfwidth, at):
    """A box B with X + [0, h] f(B) inside B for every set (``good`` False where not found),
    and, when the one-call guess validated it, Df(B) and its status (else None, None). B keeps
    a margin so that the checker's ball arithmetic also validates it."""
    guess = _apriori_guess(jets, j, X, h, halfwidth, at)
    if guess is not None:
        return guess[0], np.ones(X.shape[0], dtype=bool), guess[1], guess[2]
    return (*_apriori_inflate(jets, j, X, h, halfwidth), None, None)


def _apriori_inflate(jets, j, X: Interval, h: Interval, halfwidth):
    """A box B with X + [0, h] f(B) inside B for every set (None where not found), by
    inflation; B keeps a margin so that the checker's ball arithmetic also validates it."""
    zero_h = Interval(np.zeros_like(h.lo), h.hi)
    lo, hi, st = jets(j, X.lo, X.hi, 1)
    F = Interval(lo[1, :, :, 0], hi[1, :, :, 0])
    T = X + zero_h * F
    w = T.width_upper() + halfwidth
    B = Interval(T.lo - 0.1 * w, T.hi + 0.1 * w)
    good = np.zeros(X.shape[0], dtype=bool)
    for _ in range(12):
        lo, hi, st = jets(j, B.lo, B.hi, 1)
        F = Interval(lo[1, :, :, 0], hi[1, :, :, 0])
        T = X + zero_h * F
        inside = np.all((T.lo > B.lo) & (T.hi < B.hi), axis=1) & (st == 0)
        good |= inside
        if np.all(good):
            break
        grow = np.where(inside[:, None], 0.0, 0.1 * (T.width_upper() + halfwidth))
        B = Interval(np.minimum(B.lo, T.lo) - grow, np.maximum(B.hi, T.hi) + grow)
    # final margin: 25% of the image's width beyond it, kept only where still valid
    w = T.width_upper() * 0.05 + halfwidth
    B2 = Interval(np.minimum(B.lo, T.lo - w), np.maximum(B.hi, T.hi + w))
    lo, hi, st = jets(j, B2.lo, B2.hi, 1)
    T2 = X + zero_h * Interval(lo[1, :, :, 0], hi[1, :, :, 0])
    ok2 = np.all((T2.lo > B2.lo) & (T2.hi < B2.hi), axis=1) & (st == 0)
    B = Interval(np.where(ok2[:, None], B2.lo, B.lo), np.where(ok2[:, None], B2.hi, B.hi))
    return B, good


def _apriori_guess(jets, j, X: Interval, h: Interval, halfwidth, at):
    """A priori boxes in few calls for the common case: B = X + [0, h] f(centre), widened by a
    quarter of its largest width, validated over B by order-1 calls with identity seeds, which
    also give Df(B) for the variational bound; sets that fail are widened to their image and
    tried again (twice). None unless every set validates with the margin that
    :func:`_apriori` leaves (then the caller takes the inflation loop)."""
    n, d = X.shape
    xl, xh, hh = X.lo, X.hi, float(np.max(h.hi))
    Tl, Th = np.empty((n, d)), np.empty((n, d))
    LK.picard_image(xl, xh, hh, at[0][1, :, :, 0], at[1][1, :, :, 0], Tl, Th)
    w = np.max(Th - Tl, axis=1, keepdims=True) * 0.25 + halfwidth
    Bl, Bh = Tl - w, Th + w
    Dl, Dh = np.empty((n, d, d)), np.empty((n, d, d))
    todo = np.arange(n)
    for _ in range(3):
        eye = np.broadcast_to(np.eye(d), (todo.size, d, d))
        dlo, dhi, st = jets(j, Bl[todo], Bh[todo], 1, eye, eye)
        Tl, Th = np.empty((todo.size, d)), np.empty((todo.size, d))
        LK.picard_image(xl[todo], xh[todo], hh, dlo[1, :, :, 0], dhi[1, :, :, 0], Tl, Th)
        margin = (Th - Tl) * 0.05 + halfwidth[todo]
        ok = np.all((Tl - margin >= Bl[todo]) & (Th + margin <= Bh[todo]), axis=1)
        ok &= st == 0
        Dl[todo[ok]], Dh[todo[ok]] = dlo[1, ok, :, 1:], dhi[1, ok, :, 1:]
        bad = ~ok
        if not bad.any():
            return Interval._trusted(Bl, Bh), Interval._trusted(Dl, Dh), np.zeros(n, np.int64)
        grow = np.max((Th - Tl)[bad], axis=1, keepdims=True) * 0.25 + margin[bad]
        idx = todo[bad]
        Bl[idx] = np.minimum(Bl[idx], Tl[bad] - grow)
        Bh[idx] = np.maximum(Bh[idx], Th[bad] + grow)
        todo = idx
    return None


def _step(jets, j, c, C, rl, rh, h: flint.fmpq, K: int, m, at, tol: float, total: float):
    """One step for every set; None if the a priori enclosure fails for some set (the caller
    halves h), else the new state, the a priori boxes, the variational order used with its
    truncation measured against the target (:func:`_order_target`), and the failed-update
    mask, and the step taken: when the remainder over B asks for a shorter step, the step is
    shortened in place (B, x_K(B) and Df(B) stay valid) unless ``total`` is 0. ``m``: the
    variational order, or (None, m_max) to take an a priori estimate; ``total``: the flow's
    final time (0: no order choice, always the given order, shorter steps by the caller)."""
    n, d = c.shape
    hl, hh = fmpq_to_float(h, "down"), fmpq_to_float(h, "up")
    H = Interval(np.full((n, d), hl), np.full((n, d), hh))
    xl, xh = np.empty((n, d)), np.empty((n, d))
    # the hull of the set and of its centre (the mean value form runs from the centre)
    LK.hull(c, C, np.minimum(rl, 0.0), np.maximum(rh, 0.0), xl, xh)
    X = Interval(xl, xh)
    scale = 1e-12 * (1.0 + np.abs(c)) + 1e-300
    B, good, Df, st3 = _apriori(jets, j, X, H, scale, at)
    if not np.all(good):
        return None, np.flatnonzero(~good)
    at_lo, at_hi, st1 = at
    rem_lo, rem_hi, st2 = jets(j, B.lo, B.hi, K)
    # the remainder over B, not the coefficient at the centre, decides the step: the step
    # that would make x_K(B) h^K ~ tol max(1, |x|) (reported, and enforced when tol is given)
    big = np.max(np.maximum(np.abs(rem_lo[K, :, :, 0]), np.abs(rem_hi[K, :, :, 0])), axis=1)
    scale = np.maximum(1.0, np.max(np.abs(c), axis=1))
    with np.errstate(divide="ignore", invalid="ignore"):
        allowed = float(np.min((abs(tol) * scale / big) ** (1.0 / K)))
    if tol > 0 and np.isfinite(allowed) and allowed < hl:  # tol < 0: report, do not enforce
        shorter = _dyadic_floor(0.95 * allowed) if allowed > total * 2.0**-40 else None
        if total <= 0 or shorter is None or not 0 < shorter < h:
            return "shrink", allowed
        # a shorter step in place: B and x_K(B) stay valid for every step within [0, h]
        # (proofs/bounds.md#picard: X + [0, h'] f(B) lies in X + [0, h] f(B))
        h = shorter
        hl, hh = fmpq_to_float(h, "down"), fmpq_to_float(h, "up")
        H = Interval(np.full((n, d), hl), np.full((n, d), hh))
    coef_lo = np.concatenate([at_lo[1:K, :, :, 0], rem_lo[K : K + 1, :, :, 0]])
    coef_hi = np.concatenate([at_hi[1:K, :, :, 0], rem_hi[K : K + 1, :, :, 0]])
    inc = _poly(coef_lo, coef_hi, H) * H
    eye = np.broadcast_to(np.eye(d), (n, d, d))
    if Df is None:
        dlo, dhi, st3 = jets(j, B.lo, B.hi, 1, eye, eye)
        Df = Interval(dlo[1, :, :, 1:], dhi[1, :, :, 1:])
    L = np.max(np.sum(np.maximum(np.abs(Df.lo), np.abs(Df.hi)), axis=2), axis=1)
    blown = ~np.isfinite(L) | (L * hh > 700)  # an a priori box too wide to bound V on
    L = np.where(blown, 0.0, L)
    e = iv.expm1(Interval(L) * Interval(np.full(n, hh))).hi
    e3 = np.broadcast_to(e[:, None, None], (n, d, d))
    bound = _order_target(C, rl, rh, c, tol, hh / total) if total > 0 else None
    if isinstance(m, tuple):  # first step: an a priori estimate from (L h)^k / k!
        m = _variational_order(m[1], L * hh, e, bound)
    vlo, vhi, st4 = jets(j, B.lo, B.hi, m, eye - e3, eye + e3)
    xlo, xhi, st5 = jets(j, X.lo, X.hi, m - 1, eye, eye)
    Hd = Interval(np.full((n, d, d), hl), np.full((n, d, d), hh))
    J = _poly(
        np.concatenate([xlo[:m, :, :, 1:], vlo[m : m + 1, :, :, 1:]]),
        np.concatenate([xhi[:m, :, :, 1:], vhi[m : m + 1, :, :, 1:]]),
        Hd,
    )
    c2, C2 = np.empty_like(c), np.empty_like(C)
    rl2, rh2 = np.empty_like(rl), np.empty_like(rh)
    ok = np.empty(n, dtype=np.int64)
    LK.lohner_update(
        c,
        C,
        rl,
        rh,
        np.ascontiguousarray(inc.lo),
        np.ascontiguousarray(inc.hi),
        np.ascontiguousarray(J.lo),
        np.ascontiguousarray(J.hi),
        c2,
        C2,
        rl2,
        rh2,
        ok,
    )
    status = st1 | st2 | st3 | st4 | st5
    failed = (
        blown | (ok == 0) | (status != 0) | ~np.all(np.isfinite(rl2) & np.isfinite(rh2), axis=1)
    )
    excess = 0.0
    if total > 0:  # the truncation's share of the new width, against SHARE of h / T
        V = (vlo[m, :, :, 1:], vhi[m, :, :, 1:])
        excess = _truncation_share(*V, hh**m, C, rl, rh, C2, rl2, rh2) / (SHARE * hh / total)
    return (c2, C2, rl2, rh2, B, J, allowed, (m, excess), h), np.flatnonzero(failed)


SHARE = 0.3
"""The variational order controller's budget: the truncation term may add about this fraction
of the final width, summed over the steps (tightness and cost only)."""


def _truncation_share(vl, vh, hm: float, C, rl, rh, C2, rl2, rh2) -> float:
    """How much of the new set's width the variational truncation term ``V_m(B) h^m`` made
    (a float estimate, for the order controller only): |C'^T| w(V_m) h^m |C| |r| against the
    width of r', the largest ratio over sets and coordinates. Its effect compounds over the
    steps, so the controller keeps it under SHARE times the step's fraction h / T."""
    with np.errstate(invalid="ignore", over="ignore"):
        rad = np.maximum(np.abs(rl), np.abs(rh))
        spread = np.einsum("nij,nj->ni", np.abs(C), rad)
        E = np.einsum("nji,nj->ni", np.abs(C2), np.einsum("nij,nj->ni", (vh - vl) * hm, spread))
        share = E / np.maximum(rh2 - rl2, 1e-300)
    share = share[np.isfinite(share)]
    return float(share.max()) if share.size else 0.0


def _order_target(C, rl, rh, c, tol: float, fraction: float) -> np.ndarray:
    """Per set, the width allowed to the truncation term V_m(B) h^m of the variational series
    (a heuristic: tightness and cost only; any order is sound, proofs/bounds.md#variational):
    1% of the step's fraction h / T of the flow's time, so that the width it adds to J,
    compounded over all steps, costs about 1% of the final width; and, times the set's radius
    |C r|, the step tolerance. Points (radius ~ rounding) get low orders, boxes high ones."""
    radius = np.max(np.sum(np.abs(C) * np.maximum(np.abs(rl), np.abs(rh))[:, None, :], axis=2), 1)
    target = abs(tol) * np.maximum(1.0, np.max(np.abs(c), axis=1))
    with np.errstate(divide="ignore"):
        return np.minimum(0.01 * fraction, np.where(radius > 0, target / radius, np.inf))


def _variational_order(m: int, Lh, e, bound) -> int:
    """A first variational order (at most m): the smallest k >= 2 whose term, estimated as
    (L h)^k / k! (1 + e), is within ``bound``; later steps measure the term instead
    (:func:`_next_order`)."""
    if bound is None:
        return m
    theta = np.ones_like(Lh) * (1.0 + e)
    for k in range(1, m):
        theta = theta * Lh / k
        if k >= 2 and np.all(theta <= bound):
            return k
    return m


def _next_order(m: int, excess: float, m_max: int) -> int:
    """The next step's variational order from this step's measured truncation / target:
    up when over target (by two when far over), down when far under."""
    if excess > 1.0:
        m += 2 if excess > 30.0 else 1
    elif excess < 0.03:
        m -= 1
    return min(max(m, 2), m_max)


class _FloatSets:
    """All sets advanced together in float64 interval arithmetic (compiled kernels)."""

    def __init__(
        self, problem: PiecewiseField, sets: InitialSets, K: int, m: int, jacobian: bool = False
    ) -> None:
        self.jets, self.K, self.m = _Jets(problem), K, m
        self.order = m if jacobian else (None, m)  # C^1 enclosures keep the full order
        self.total = float(problem.total_time)
        n, d = sets.c.shape
        eye = np.ascontiguousarray(np.broadcast_to(np.eye(d), (n, d, d)))
        self.P = (eye.copy(), eye.copy()) if jacobian else None
        self.c = sets.c.copy()
        self.C = np.ascontiguousarray(np.broadcast_to(np.eye(d), (n, d, d)))
        self.rl, self.rh = sets.rl.copy(), sets.rh.copy()

    def coefficients(self, j: int):
        self.at = self.jets(j, self.c, self.c, self.K)
        return 0.5 * (self.at[0][..., 0] + self.at[1][..., 0]), self.c

    def try_step(self, j: int, h: flint.fmpq, tol):
        res, info = _step(
            self.jets,
            j,
            self.c,
            self.C,
            self.rl,
            self.rh,
            h,
            self.K,
            self.order,
            self.at,
            tol,
            0.0 if self.P is not None else self.total,
        )
        if res == "shrink":
            return "shrink", info
        if res is None or info.size:
            return "fail", info
        self.pending = res
        return "ok", res[-1]  # the step taken (shorter than h when the remainder asked)

    def accept(self) -> Interval:
        self.c, self.C, self.rl, self.rh, B, J, self.allowed, (m, excess), _ = self.pending
        self.used_order = m
        if self.P is None:
            self.order = _next_order(m, excess, self.m)
        else:  # chain rule: DPhi over the set is in J_k ... J_1
            lo, hi = np.empty_like(self.P[0]), np.empty_like(self.P[1])
            LK.imatmul(np.ascontiguousarray(J.lo), np.ascontiguousarray(J.hi), *self.P, lo, hi)
            self.P = (lo, hi)
        return B

    def hull(self) -> Interval:
        n, d = self.c.shape
        xl, xh = np.empty((n, d)), np.empty((n, d))
        LK.hull(self.c, self.C, self.rl, self.rh, xl, xh)
        return Interval(xl, xh), None


def lohner_flow(
    problem: PiecewiseField,
    sets: InitialSets,
    save_at: SaveAt,
    policy: StepPolicy,
    prec: int = 53,
    jacobian: bool = False,
) -> FlowEnclosure:
    """Certified enclosures of the flow of ``problem`` from ``sets`` at the times of
    ``save_at``: float64 interval kernels at ``prec`` 53, arb balls at any other precision
    (the reference step of the checker, one set at a time). With ``jacobian`` (53 bits),
    ``hints["jacobian"]`` encloses ``DPhi_T`` over each initial set (C^1, the product of the
    steps' variational enclosures).

    Guarantee: if the status is SUCCESS, ``enclosures[k, i]`` contains ``Phi_{t_k}(x)`` for
    every x in initial set i (and the tube's box s every point of its trajectory during step s).
    """
    K, m = policy.order, policy.jacobian_order
    if prec == 53:
        state = _FloatSets(problem, sets, K, m, jacobian)
    else:
        from certified.flow.taylor._lohner_arb import ArbSets

        state = ArbSets(problem, sets, K, m, prec)
    n, d = sets.c.shape
    saves = save_at.times(problem.total_time)
    saved, tube_times, steps_hint, boxes_hint, orders_hint = [], [], [], [], []
    t, count, control = flint.fmpq(0), 0, _StepControl(K, policy.tolerance)
    for j, piece in enumerate(problem.pieces):
        end = t + piece.duration
        steps_j, boxes_j, orders_j = [], [], []
        while t < end:
            h = min([end, *(s for s in saves if s > t)]) - t
            if policy.max_step is not None:
                h = min(h, policy.max_step)
            h = control.propose(state, j, h)
            h, failure = _take_step(state, j, h, policy, control, problem.total_time)
            if failure is not None:
                return _failure(saves, n, d, t, *failure, j)
            B = state.accept()
            count += 1
            if count > policy.max_steps:
                return _failure(saves, n, d, t, np.arange(0), "budget", j, policy.max_steps)
            steps_j.append(h)
            boxes_j.append(B)
            orders_j.append(state.used_order)
            if save_at.steps:
                tube_times.append((str(t), str(t + h)))
            t = t + h
            if t in saves:
                saved.append(state.hull())
        steps_hint.append(steps_j)
        boxes_hint.append(boxes_j)
        orders_hint.append(orders_j)
    enc = Interval(np.stack([s.lo for s, _ in saved]), np.stack([s.hi for s, _ in saved]))
    bounds = None if saved[0][1] is None else np.stack([e for _, e in saved])
    hints = {
        "method": "taylor-lohner",
        "order": K,
        "jacobian_order": m,
        "precision": prec,
        "steps": steps_hint,
        "boxes": boxes_hint,
    }
    if any(q != m for qs in orders_hint for q in qs):  # the variational order of each step
        hints["jacobian_orders"] = orders_hint
    if jacobian:
        hints["jacobian"] = Interval(*state.P)
    if save_at.steps:
        flat = [b for bs in boxes_hint for b in bs]
        hints["tube"] = Interval(np.stack([b.lo for b in flat]), np.stack([b.hi for b in flat]))
        hints["tube_times"] = tube_times
    return FlowEnclosure(
        tuple(str(s) for s in saves), enc, FlowStatus.SUCCESS, hints=hints, bounds=bounds
    )


class _StepControl:
    """Where the next step goes (tightness and cost only): the order-K coefficients at the
    centres propose h, corrected by what the last step's remainder over its a priori box
    allowed, and at most doubling the last step (at an equilibrium the centre's coefficients
    vanish)."""

    def __init__(self, K: int, tol: float) -> None:
        self.K, self.tol, self.ratio, self.last, self.raw = K, tol, 1.0, None, np.inf

    def propose(self, state, j: int, h: flint.fmpq) -> flint.fmpq:
        coefs, centres = state.coefficients(j)
        self.raw = _step_size(coefs, centres, self.K, self.tol)
        guess = self.raw * self.ratio
        if self.last is not None:
            guess = min(guess, 2 * self.last)
        return _dyadic_floor(guess) if np.isfinite(guess) and 0 < guess < float(h) else h

    def learn(self, h: flint.fmpq, allowed, shrunk: bool) -> None:
        self.last = float(h)
        if allowed is not None and np.isfinite(allowed) and np.isfinite(self.raw) and self.raw > 0:
            self.ratio = min(1.0, 0.9 * allowed / self.raw)
        elif not shrunk:
            self.ratio = min(1.0, self.ratio * 1.1)


def _take_step(state, j: int, h: flint.fmpq, policy: StepPolicy, control: _StepControl, total):
    """Try h; shorten it when the remainder asks, halve it when a validation fails. Returns
    (h, None) once the state holds an accepted step, or (h, (failed sets, reason))."""
    tol, shrunk = policy.tolerance, False
    for _ in range(policy.halvings + 4):
        verdict, info = state.try_step(j, h, tol)
        if verdict == "ok":
            allowed = getattr(state, "allowed", None)
            if info is not None and info != h:  # shortened in place by the remainder, whose
                # box was the longer step's: learn the ratio only, not that allowance
                control.ratio, shrunk, allowed = control.ratio * float(info / h), True, None
                h = info
            control.learn(h, allowed, shrunk)
            return h, None
        if verdict == "shrink":  # the remainder over B is too large: shorter, then accept
            if not info > float(total) * 2.0**-40:
                return h, (np.arange(0), "tiny")
            new = min(h, _dyadic_floor(0.95 * info))
            control.ratio, shrunk = control.ratio * float(new / h), True
            h, tol = new, -tol
        else:
            h = h / 2
    return h, (info, "halvings")


def _failure(saves, n, d, t, failed, why, j, budget=None) -> FlowEnclosure:
    z = Interval(np.zeros((len(saves), n, d)))
    if why == "tiny":
        msg = (
            f"piece {j}, time {t}: the steps needed for the remainder fall below 2^-40 of "
            "the final time: the solution may blow up near there; end the flow earlier"
        )
    elif why == "budget":
        msg = (
            f"more than {budget} steps (the step budget) by time {t}: the steps "
            "have become very short, usually because the sets grew too wide; split the boxes "
            "into smaller ones, or end the flow earlier (--time); from Python, also "
            "StepPolicy(max_steps=..., tolerance=...) (a larger tolerance takes longer steps)"
        )
    else:
        which = ", ".join(str(i) for i in failed[:5]) + (" ..." if failed.size > 5 else "")
        msg = (
            f"piece {j}, time {t}: the a priori enclosure or the Lohner update failed for "
            f"initial sets [{which}] even after halving the step; the flow may blow up "
            "there, or the sets are too large: split them, or raise the order"
        )
    return FlowEnclosure(tuple(str(s) for s in saves), z, FlowStatus.STEP_REJECTED, msg)
