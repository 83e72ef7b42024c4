"""Vectorised certified flows of ReLU / leaky-ReLU neural ODEs at 53 bits.

All points of a piece advance together, each with its own time and step (no per-point Python
work on the hot path). A point's state is a centre ``c`` (double) and a Euclidean radius
``r``: the true state lies in ``B(c, r)``. Two kinds of steps, both proved in
``proofs/bounds.md`` ("Vectorised ReLU flows"):

* **region step** (#relu-vec-region): the sign region ``S`` of the centre fixes the affine field
  ``f_S(x) = W diag(s) (A x + b)``; its flow from ``c`` is a Taylor polynomial whose
  coefficients ``y_k`` (and the neuron polynomials ``A y_k``) are computed in midpoint-radius
  arithmetic by BLAS products (#relu-vec-matvec), with tail ``rho_K`` (#relu-vec-tail). If every
  neuron polynomial keeps its sign on the whole step, with a margin covering the tail and the
  tube ``r e^{h mu}`` (#relu-vec-lognorm), the true flow equals the affine one on the step.
* **window step** (#relu-vec-window): valid for any Lipschitz field, first order, used for the
  short windows around hyperplane crossings (located by the float polynomial of the crossing
  neuron, so the windows are ~2^-34 of a step and their error second order in the window).

Parameters must be doubles (exact); the caller falls back to the arb engine otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import flint
import numpy as np

from certified.arith import Interval
from certified.arith._kernels import ETA, U
from certified.arith.exact import fmpq_array_to_float, fmpq_to_float, fmpq_to_str
from certified.errors import NonFiniteError, RangeOverflowError, ShapeError
from certified.flow.relu import _vec_kernels as kern
from certified.flow.relu._model import ReluPiece, parse_activation, parse_points, parse_schedule
from certified.flow.relu._vec_plan import plan_pieces, plan_strings
from certified.flow.result import FlowEnclosure, FlowStatus

__all__ = ["VecPiece", "flow_vectorised", "relu_flow_vectorised", "vec_piece"]

_PRE_CROSSING = 2.0**-24  # stop this fraction of the predicted crossing time before it
_W_MIN_REL = 2.0**-30  # smallest window, relative to the largest step (error ~ its square)
_MAX_ITER = 20000  # per piece; then the remaining points take window steps to the end


def _upn(x):
    """Successor bound, numpy (proofs/bounds.md#pred-succ)."""
    return x + (2.0**-53 * (1.0 + 2.0**-52) * np.abs(x) + ETA)


def _dnn(x):
    """Predecessor bound, numpy (proofs/bounds.md#pred-succ)."""
    return x - (2.0**-53 * (1.0 + 2.0**-52) * np.abs(x) + ETA)


def _sqrt_up(x: float) -> float:
    return math.nextafter(math.sqrt(x), math.inf)


def _norm2_up(v: np.ndarray) -> np.ndarray:
    """Upper bounds of the Euclidean norms of the rows of ``v`` (nonnegative entries or not)."""
    d = v.shape[-1]
    s = np.einsum("ij,ij->i", v, v)  # fl sum of squares
    s = _upn(s * (1.0 + 2.0 * (d + 2) * U))  # covers gamma_{d+1} (proofs/bounds.md#relu-vec)
    return _upn(np.sqrt(s))


def _gram_norm_up(M: np.ndarray) -> float:
    """An upper bound of ``||M||_2`` from Gershgorin discs of ``M^T M`` (enclosed rigorously)."""
    G = Interval(M.T) @ Interval(M)
    mag = np.maximum(np.abs(G.lo), np.abs(G.hi))
    n = mag.shape[1]
    rows = _upn(mag.sum(axis=1) * (1.0 + 2.0 * (n + 2) * U))
    return _sqrt_up(float(rows.max()))


def _exact(x: float) -> flint.fmpq:
    n, d = x.as_integer_ratio()
    return flint.fmpq(n, d)


@dataclass
class VecPiece:
    """Float64 constants of a piece, each a rigorous bound where it says so."""

    Wt: np.ndarray  # (p, d) = W^T, exact
    At: np.ndarray  # (d, p) = A^T, exact
    Wabs: np.ndarray
    Aabs: np.ndarray
    b: np.ndarray  # (p,), exact
    check: np.ndarray  # (p,) bool: neurons whose sign matters
    linear: np.ndarray  # (p,) bool: slope 1 on both sides (alpha = 1)
    anorm: np.ndarray  # (p,) upper bounds of |a_i|_2
    nu: np.ndarray  # (p,) upper bounds of |w_i|_2 |a_i|_2 >= ||sym(w_i a_i^T)||_2
    L: float  # upper bound of ||W||_2 ||A||_2 >= Lipschitz constant of f
    Sflat: np.ndarray  # (p, d*d) fl(sym(w_i a_i^T))
    Erow: np.ndarray  # (d,) rounding bound of Gershgorin rows
    alpha: tuple[float, float]  # midpoint-radius of the negative-side slope
    tau: flint.fmpq
    tick: float  # time quantum: step endpoints are integer multiples of it
    tau_ticks: int  # floor(tau / tick)
    tail: float  # upper bound of tau - tau_ticks * tick (0 if exact)
    h_ticks: int  # largest step, <= 1 / (2 L)
    K: int  # Taylor order (number of coefficients y_0 .. y_{K-1})
    g_d: float  # >= gamma_d
    g_p: float
    F_d: float
    F_p: float


def vec_piece(piece: ReluPiece) -> VecPiece | None:
    """Float64 constants of a piece (a view of its :class:`~certified.models.Piece`), or None
    when a parameter is not a double."""
    source = piece.source
    # nearest doubles (RangeOverflowError beyond the double range), as writeable copies
    W, A, b = (np.array(x) for x in (source.W_float, source.A_float, source.b_float))
    if not source.parameters_float_exact:
        return None
    d, p = W.shape
    alpha = piece.alpha
    a_lo = fmpq_to_float(alpha, "down", "slope")
    a_hi = fmpq_to_float(alpha, "up", "slope")
    a_m = 0.5 * (a_lo + a_hi)
    a_r = _upn(max(a_hi - a_m, a_m - a_lo))
    roles = piece.role
    check = np.array([r == "kink" for r in roles])
    linear = np.array([r == "linear" for r in roles])
    anorm = _norm2_up(A)
    nu = _upn(_norm2_up(W.T) * anorm)
    L = _upn(_gram_norm_up(W) * _gram_norm_up(A))
    L = max(L, 2.0**-20)
    # symmetric parts of w_i a_i^T and the rounding bound of their masked sums
    outer = W.T[:, :, None] * A[:, None, :]  # (p, d, d): w_ji a_ik
    Sflat = (0.5 * (outer + outer.transpose(0, 2, 1))).reshape(p, d * d)
    Sabs = (0.5 * (np.abs(outer) + np.abs(outer.transpose(0, 2, 1)))).sum(axis=0)
    Erow = _upn(2.0 * (2.0 * (p + 5) * U) * Sabs.sum(axis=1)) + 4.0 * p * d * ETA
    # time: ticks of 2^-k with tau / tick < 2^52
    tau = piece.tau
    tau_hi = fmpq_to_float(tau, "up", "duration")
    k = 52 - math.frexp(tau_hi)[1]
    tick = math.ldexp(1.0, -k)
    tau_ticks = int(flint.fmpz(tau.p * 2**k) // tau.q) if k >= 0 else int(tau.p // (tau.q * 2**-k))
    rest = tau - flint.fmpq(tau_ticks) * _exact(tick)
    tail = fmpq_to_float(rest, "up", "duration") if rest else 0.0
    h_ticks = max(1, min(int(1.0 / (2.0 * L) / tick) - 1, tau_ticks))  # L h <= 1/2
    # Taylor order (a speed choice; the tail is bounded whatever K): tail <= 2^-56 relative
    lh = L * h_ticks * tick
    K = 3
    while lh ** (K - 1) * 1.65 / math.factorial(K) > 2.0**-56 and K < 40:
        K += 1

    def consts(n):
        return (n + 1) * U, 1.0 + 4.0 * (n + 2) * U

    g_d, F_d = consts(d)
    g_p, F_p = consts(p)
    return VecPiece(
        Wt=np.ascontiguousarray(W.T),
        At=np.ascontiguousarray(A.T),
        Wabs=np.ascontiguousarray(np.abs(W.T)),
        Aabs=np.ascontiguousarray(np.abs(A.T)),
        b=b,
        check=check,
        linear=linear,
        anorm=anorm,
        nu=nu,
        L=L,
        Sflat=np.ascontiguousarray(Sflat),
        Erow=Erow,
        alpha=(a_m, a_r),
        tau=tau,
        tick=tick,
        tau_ticks=tau_ticks,
        tail=tail,
        h_ticks=h_ticks,
        K=K,
        g_d=g_d,
        g_p=g_p,
        F_d=F_d,
        F_p=F_p,
    )


_EMPTY = np.empty(0)


def _matvec(xm, V, P, absP, F, b):
    """``(x @ P)`` in midpoint-radius form: BLAS on midpoints and on the radius bound ``V``."""
    Zm = xm @ P
    What = V @ absP
    Zr = np.empty_like(Zm)
    kern.rad_finish(What, F, b, Zm, Zr)
    return Zm, Zr


def _mask(vp: VecPiece, z0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Midpoint-radius slopes of the region of the centres (``z >= 0``: active)."""
    active = (z0 >= 0) | vp.linear[None, :]
    a_m, a_r = vp.alpha
    sm = np.where(active, 1.0, a_m)
    sr = np.where(active, 0.0, a_r)
    return sm, sr


def _region_step(vp: VecPiece, c: np.ndarray, r: np.ndarray, h_ticks: np.ndarray, cache=None):
    """Try one region step of ``h_ticks`` ticks from each ``B(c, r)``; where it fails because a
    neuron is predicted to cross at ``theta * h``, try the same polynomial truncated just
    before the crossing.

    Returns ``(ok, steps, cnew, rnew, fail0, theta)``: ``ok`` per point (full or truncated
    step validated), ``steps`` the ticks advanced (``h`` or the truncation), the new ball;
    for points not ok, ``fail0`` says the sign test fails at the start already and ``theta``
    (in (0, 1]) is the predicted first crossing as a fraction of ``h`` (1 when none).
    """
    n, d = c.shape
    p = vp.b.shape[0]
    K = vp.K
    h = h_ticks * vp.tick  # exact
    zm = np.empty((K, n, p))
    zr = np.empty((K, n, p))
    ym = np.empty((K, n, d))
    yr = np.empty((K, n, d))
    ym[0] = c
    yr[0] = 0.0
    V = np.empty((n, d))
    kern.point_prep(c, vp.g_d, V)
    np.matmul(c, vp.At, out=zm[0])
    kern.rad_finish(V @ vp.Aabs, vp.F_d, vp.b, zm[0], zr[0])
    active = (zm[0] >= 0) | vp.linear[None, :]
    Sm = c.copy()
    Sr = np.zeros((n, d))
    Um = np.empty((n, p))
    Vp = np.empty((n, p))
    a_m, a_r = vp.alpha
    exact_zero = a_m == 0.0 and a_r == 0.0  # ReLU: inactive neurons contribute exactly 0
    Wp = np.empty((n, d))
    Wd = np.empty((n, p))
    for k in range(K - 1):
        # c = h/(k+1) on active neurons, alpha h/(k+1) on inactive ones, in midpoint-radius;
        # radii as max(FLOOR, fl(x (1 + 8u))) (proofs/bounds.md#relu-vec-matvec)
        fm = h / (k + 1)
        fr = np.zeros(n) if k == 0 else np.maximum(kern.FLOOR, np.abs(fm) * (U * kern.BUMP))
        cm = np.empty((n, 2))
        cr = np.empty((n, 2))
        cm[:, 0] = fm
        cr[:, 0] = fr
        if exact_zero:
            cm[:, 1] = 0.0
            cr[:, 1] = 0.0
        else:
            cm[:, 1] = fm * a_m
            t = abs(a_m) * fr + a_r * (np.abs(fm) + fr) + U * np.abs(cm[:, 1])
            cr[:, 1] = np.maximum(kern.FLOOR, t * kern.BUMP)
        zero = (cm == 0.0) & (cr == 0.0)
        a1 = np.where(zero, 0.0, np.maximum(kern.FLOOR, (cr + U * np.abs(cm)) * kern.BUMP))
        a2 = np.where(zero, 0.0, np.maximum(kern.FLOOR, (np.abs(cm) + cr) * kern.BUMP))
        kern.scale_prep(zm[k], zr[k], active, cm, a1, a2, vp.g_p, Um, Vp)
        np.matmul(Um, vp.Wt, out=ym[k + 1])
        np.matmul(Vp, vp.Wabs, out=Wp)
        kern.y_finish(ym[k + 1], Wp, vp.F_p, vp.g_d, yr[k + 1], V, Sm, Sr)
        np.matmul(ym[k + 1], vp.At, out=zm[k + 1])
        np.matmul(V, vp.Aabs, out=Wd)
        kern.rad_finish(Wd, vp.F_d, _EMPTY, zm[k + 1], zr[k + 1])
    # tail of the affine flow (proofs/bounds.md#relu-vec-tail)
    lh = _upn(vp.L * h)
    coef = np.ones(n)
    for _ in range(K - 1):
        coef = _upn(coef * lh)
    coef = _upn(coef * math.nextafter(1.65 / math.factorial(K), math.inf))  # e^(1/2) <= 1.65
    rho = _upn(coef * _norm2_up(_upn(np.abs(ym[1]) + yr[1])))
    # log-norm of the region's matrix, at most L (proofs/bounds.md#relu-vec-lognorm)
    mask = np.where(active, 1.0, a_m)
    Srows = mask @ vp.Sflat  # symmetric parts, flattened (any summation order: Erow)
    mu = np.empty(n)
    kern.gershgorin_mu(Srows, vp.Erow, d, mu)
    if cache is not None:
        # verified lambda_max once per point and piece (at its first step), then corrected by
        # |Delta s_i| ||S_i||_2 <= nu_i for every neuron whose slope changed since
        c_mask, c_mu = cache
        fresh = np.isinf(c_mu)
        if fresh.any():
            mv = np.empty(int(fresh.sum()))
            kern.lmax_verified(np.ascontiguousarray(Srows[fresh]), vp.Erow, d, mv)
            c_mu[fresh] = mv
            c_mask[fresh] = active[fresh]
        changed = (active != c_mask) & vp.check[None, :]
        corr = _upn((changed * vp.nu[None, :]).sum(axis=1) * (1.0 + 2.0 * (p + 2) * U))
        mu = np.minimum(mu, _upn(c_mu + corr))
    mu = np.clip(mu, 0.0, vp.L)
    x = _upn(h * mu)  # <= 1/2
    growth = _upn(1.0 + _upn(x + _upn(x * x)))  # e^x <= 1 + x + x^2 on [0, 1]
    tube = _upn(_upn(r * growth) + rho)
    margin = _upn(tube[:, None] * vp.anorm[None, :])
    ok_pair = np.empty((n, p), dtype=bool)
    ok0_pair = np.empty((n, p), dtype=bool)
    kern.region_test(zm, zr, active, vp.check, margin, np.ones(n), ok_pair, ok0_pair)
    ok = ok_pair.all(axis=1)
    fail0 = ~ok0_pair.all(axis=1)
    steps = np.where(ok, h_ticks, 0)
    rnew = _upn(tube + _norm2_up(Sr))
    cnew = Sm
    theta = np.ones(n)
    gap = np.zeros(n)
    need = np.nonzero(~ok & ~fail0)[0]
    if need.size:
        theta[need], gap[need] = _predict(zm[:, need], active[need], ~ok_pair[need], margin[need])
        cross = need[theta[need] < 1.0]
        pre = ((theta[cross] - gap[cross]) * h_ticks[cross]).astype(np.int64)
        keep = pre >= 1
        cross, pre = cross[keep], pre[keep]
        if cross.size:
            th_m = pre / h_ticks[cross]
            th_r = _upn(th_m * U)
            th_hi = _upn(th_m + th_r)
            okp = np.empty((cross.size, p), dtype=bool)
            ok0p = np.empty((cross.size, p), dtype=bool)
            zmc = np.ascontiguousarray(zm[:, cross])
            zrc = np.ascontiguousarray(zr[:, cross])
            kern.region_test(zmc, zrc, active[cross], vp.check, margin[cross], th_hi, okp, ok0p)
            good = okp.all(axis=1)
            sel = cross[good]
            if sel.size:
                tm = np.empty((sel.size, d))
                tr = np.empty((sel.size, d))
                ymc = np.ascontiguousarray(ym[:, sel])
                yrc = np.ascontiguousarray(yr[:, sel])
                kern.horner_rows(ymc, yrc, th_m[good], th_r[good], tm, tr)
                cnew[sel] = tm
                rnew[sel] = _upn(tube[sel] + _norm2_up(tr))
                ok[sel] = True
                steps[sel] = pre[good]
    return ok, steps, cnew, rnew, fail0, theta, gap


def _predict(zm: np.ndarray, want_pos: np.ndarray, failing: np.ndarray, margin: np.ndarray):
    """First sign change in (0, 1] of the float polynomials ``sum_k zm[k] theta^k`` of the
    failing neurons (untrusted: only used to choose steps); 1 where none is found. Also a gap
    (in theta) to keep before the crossing so that the neuron clears 8 margins there."""
    K, n, _ = zm.shape
    theta = np.ones(n)
    gap = np.zeros(n)
    tt, jj = np.nonzero(failing)
    if tt.size == 0:
        return theta, gap
    grid = np.linspace(0.0, 1.0, 65)
    coeffs = zm[:, tt, jj]  # (K, m)
    q = (grid[:, None] ** np.arange(K)[None, :]) @ coeffs  # (65, m)
    s = np.where(want_pos[tt, jj], 1.0, -1.0)
    viol = q * s[None, :] < 0
    viol[0] = False
    hit = viol.any(axis=0)
    tt, jj, coeffs, s, viol = tt[hit], jj[hit], coeffs[:, hit], s[hit], viol[:, hit]
    if tt.size == 0:
        return theta, gap
    first = viol.argmax(axis=0)
    a, b = grid[first - 1], grid[first]
    for _ in range(50):
        mid = 0.5 * (a + b)
        val = np.zeros_like(mid)
        for k in range(K - 1, -1, -1):  # Horner
            val = val * mid + coeffs[k]
        bad = s * val < 0
        b = np.where(bad, mid, b)
        a = np.where(bad, a, mid)
    np.minimum.at(theta, tt, a)
    slope = np.zeros_like(a)
    for k in range(K - 1, 0, -1):  # q'(a), Horner
        slope = slope * a + k * coeffs[k]
    need = 8.0 * margin[tt, jj] / np.maximum(np.abs(slope), 1e-300)
    np.maximum.at(gap, tt, np.minimum(need, 1.0))
    return theta, np.maximum(gap, theta * _PRE_CROSSING)


def _window_step(vp: VecPiece, c: np.ndarray, r: np.ndarray, w_lo: np.ndarray, w_hi: np.ndarray):
    """Window step whose exact length lies in ``[w_lo, w_hi]`` with ``L w_hi <= 1/2``:
    proofs/bounds.md#relu-vec-window. Returns the new centre and radius."""
    n, d = c.shape
    V = np.empty((n, d))
    kern.point_prep(c, vp.g_d, V)
    Zm, Zr = _matvec(c, V, vp.At, vp.Aabs, vp.F_d, vp.b)
    lo = _dnn(Zm - Zr)
    hi = _upn(Zm + Zr)
    a_m, a_r = vp.alpha
    a_lo, a_hi = _dnn(a_m - a_r), _upn(a_m + a_r)
    lin = vp.linear[None, :]
    # sigma is increasing: sigma([lo, hi]) = [sigma(lo), sigma(hi)]; alpha z for z < 0 lies in
    # [a_hi z, a_lo z]
    s_lo = np.where((lo >= 0) | lin, lo, _dnn(lo * a_hi))
    s_hi = np.where((hi >= 0) | lin, hi, _upn(hi * a_lo))
    f = Interval(s_lo, s_hi) @ vp.Wt  # f(c), enclosed
    fmag = np.maximum(np.abs(f.lo), np.abs(f.hi))
    box = Interval(c, c) + f * Interval(w_lo, w_hi)[:, None]
    Lw = _upn(vp.L * w_hi)  # <= 1/2
    ew = _upn(1.0 + _upn(2.0 * Lw))  # e^x <= 1 + 2x on [0, 1]
    Rw = _upn(_upn(r * ew) + _upn(_upn(_norm2_up(fmag) * w_hi) * ew))
    rnew0 = _upn(r + _upn(Lw * Rw))
    cnew = 0.5 * (box.lo + box.hi)
    half = _upn(np.maximum(box.hi - cnew, cnew - box.lo))
    return cnew, _upn(rnew0 + _norm2_up(half))


def _plan_failures(vp, reg, ok, fail0, theta, gap_th, h_t, left, state):
    """Next attempt for the points whose region step failed (untrusted bookkeeping: any plan is
    sound, since both kinds of steps are validated; a good plan keeps windows short)."""
    h_try, window, win_len, esc, w_min = state
    bad = ~ok
    g = reg[bad]
    ht = h_t[bad]
    f0 = fail0[bad]
    th = theta[bad]
    escalated = np.minimum(w_min << np.minimum(2 * esc[g], 40), vp.h_ticks)
    crossing = ~f0 & (th < 1.0)
    gap = th * ht  # predicted time to the crossing, in ticks
    pre = ((th - gap_th[bad]) * ht).astype(np.int64)
    imminent = crossing & (pre < w_min)
    plan_pre = crossing & ~imminent
    halve = ~f0 & ~crossing
    halved = ht // 2
    tiny = halve & (halved < w_min)
    go_window = f0 | imminent | tiny
    clear = (2.0 * gap_th[bad] * ht).astype(np.int64) + 1  # past the crossing by one gap
    win = np.where(imminent, np.maximum(w_min, 2 * gap.astype(np.int64) + clear), escalated)
    win = np.where(plan_pre, np.maximum(w_min, clear), win)
    h_try[g] = np.where(plan_pre, np.maximum(pre, 1), np.where(halve, np.maximum(halved, 1), ht))
    win_len[g] = np.minimum(win, vp.h_ticks)
    window[g] = go_window
    esc[g] += (f0 | tiny).astype(np.int64)


def flow_vectorised(pieces: list[VecPiece], c0: np.ndarray, r0: np.ndarray, record=None):
    """Advance every ``B(c0[n], r0[n])`` through all pieces.

    Returns ``(c, r, stats)``: the images lie in ``B(c[n], r[n])``. With ``record`` (a list),
    one list per piece of ``(sets, kind, ticks, full)`` arrays per taken step is appended
    (kind 1: region, 2: window; full: the step was the largest allowed), for :func:`plan_strings`.
    """
    c = np.array(c0, dtype=float, copy=True)
    r = np.array(r0, dtype=float, copy=True)
    stats = {"region_steps": 0, "window_steps": 0, "rejected_steps": 0, "iterations": 0}
    n = c.shape[0]
    for vp in pieces:
        t = np.zeros(n, dtype=np.int64)
        h_try = np.full(n, vp.h_ticks, dtype=np.int64)
        esc = np.zeros(n, dtype=np.int64)
        window = np.zeros(n, dtype=bool)
        w_min = max(1, int(vp.h_ticks * _W_MIN_REL))
        win_len = np.full(n, w_min, dtype=np.int64)
        cache_mask = np.zeros((n, vp.b.shape[0]), dtype=bool)
        cache_mu = np.full(n, np.inf)
        it = 0
        log: list = []
        if record is not None:
            record.append(log)
        while True:
            left = vp.tau_ticks - t
            act = np.nonzero(left > 0)[0]
            if act.size == 0:
                break
            it += 1
            if it > _MAX_ITER:  # give up being tight: window steps always succeed
                window[act] = True
                win_len[act] = np.minimum(left[act], vp.h_ticks)
            win = act[window[act]]
            reg = act[~window[act]]
            if reg.size:
                h_t = np.minimum(h_try[reg], left[reg])
                sub = (cache_mask[reg], cache_mu[reg])
                ok, steps, cn, rn, fail0, theta, gap = _region_step(
                    vp, c[reg], r[reg], h_t, cache=sub
                )
                cache_mask[reg], cache_mu[reg] = sub
                good = reg[ok]
                if record is not None:
                    full = steps[ok] == np.minimum(vp.h_ticks, left[good])
                    log.append((good, 1, steps[ok].copy(), full))
                c[good], r[good] = cn[ok], rn[ok]
                t[good] += steps[ok]
                h_try[good] = vp.h_ticks
                esc[good] = 0
                # a step truncated before a predicted crossing is followed by a window
                trunc = ok & (steps < h_t)
                window[reg[trunc]] = True
                to_cross = theta[trunc] * h_t[trunc] - steps[trunc]  # ticks to the crossing
                win_len[reg[trunc]] = np.minimum(
                    np.maximum(w_min, (2.0 * to_cross).astype(np.int64) + 1), vp.h_ticks
                )
                stats["region_steps"] += int(ok.sum())
                stats["rejected_steps"] += int((~ok).sum())
                if not ok.all():
                    state = (h_try, window, win_len, esc, w_min)
                    _plan_failures(vp, reg, ok, fail0, theta, gap, h_t, left, state)
            if win.size:
                wl = np.minimum(win_len[win], vp.tau_ticks - t[win])
                w = wl * vp.tick
                if record is not None:
                    log.append((win.copy(), 2, wl.copy(), np.zeros(win.size, dtype=bool)))
                c[win], r[win] = _window_step(vp, c[win], r[win], w, w)
                t[win] += wl
                window[win] = False
                h_try[win] = vp.h_ticks
                stats["window_steps"] += int(win.size)
        stats["iterations"] += it
        if vp.tail:
            c, r = _window_step(vp, c, r, np.zeros(n), np.full(n, vp.tail))
    return c, r, stats


def _double_points(X0: Any, d: int) -> np.ndarray | None:
    """The points as doubles when ``X0`` is an (N, d) object array of fmpq that are all doubles
    exactly (what :func:`certified.io.read_points` gives for float input), else None (the
    general path decides). A rational p/q with q = 2^k <= 2^1074 and |p| < 2^53 is a double
    (normal or subnormal), and Python's int / int is correctly rounded, so p / q is exact."""
    if not isinstance(X0, np.ndarray) or X0.dtype != object or X0.ndim != 2:
        return None
    if X0.shape[0] < 1 or X0.shape[1] != d:
        return None
    out = []
    for x in X0.flat:
        if type(x) is not flint.fmpq:
            return None
        p, q = int(x.p), int(x.q)
        if q & (q - 1) or q.bit_length() > 1075 or abs(p).bit_length() > 53:
            return None
        out.append(p / q)
    return np.array(out, dtype=np.float64).reshape(X0.shape)


def _initial_balls(X0: Any, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Centres and Euclidean radii of the initial sets: points (read exactly; a point that is
    not a double gets the nearest double as centre and a radius covering the difference) or
    axis-aligned boxes (an :class:`Interval`)."""
    if isinstance(X0, Interval):
        if X0.ndim != 2 or X0.shape[0] == 0 or X0.shape[1] != d:
            raise ShapeError(
                f"X0: boxes have shape {X0.shape}; expected (N, {d}) with N >= 1 to match the field"
            )
        c = 0.5 * (X0.lo + X0.hi)
        half = _upn(np.maximum(X0.hi - c, c - X0.lo))
        return c, _norm2_up(half)
    if isinstance(X0, np.ndarray) and X0.dtype == np.float64:
        if X0.ndim != 2 or X0.shape[0] == 0 or X0.shape[1] != d:
            raise ShapeError(
                f"X0: has shape {X0.shape}; expected (N, {d}): one point per row, dimension {d}"
            )
        if not np.all(np.isfinite(X0)):
            bad = np.argwhere(~np.isfinite(X0))[0]
            raise NonFiniteError(f"X0[{bad[0]}, {bad[1]}]: {X0[tuple(bad)]} is not finite")
        return np.array(X0, copy=True), np.zeros(X0.shape[0])
    doubles = _double_points(X0, d)
    if doubles is not None:  # every coordinate a double (points read from JSON / npz floats)
        return doubles, np.zeros(doubles.shape[0])
    exact = parse_points(X0, d)
    lo = fmpq_array_to_float(exact, "down", "X0")
    hi = fmpq_array_to_float(exact, "up", "X0")
    c = 0.5 * (lo + hi)
    half = _upn(np.maximum(hi - c, c - lo))
    return c, _norm2_up(half)


def relu_flow_vectorised(
    W_list: Any,
    A_list: Any,
    b_list: Any,
    durations: Any,
    X0: Any,
    *,
    activation: str = "relu",
    slope: Any = None,
) -> FlowEnclosure | None:
    """Certified enclosures of ``Phi_T`` for many initial points at 53 bits, vectorised.

    Same field, schedule and input conventions as :func:`certified.flow.relu.relu_flow`;
    every parameter must be a double (exactly), else ``None`` is returned (use ``relu_flow``).
    Each initial set is carried as a Euclidean ball (centre, radius); the enclosure returned is
    the box around the final ball.

    Returns
    -------
    FlowEnclosure or None
        ``status`` SUCCESS (the method always certifies; hard cases only cost width), hints
        ``{"method": "relu-vectorised", "region_steps", "window_steps", "rejected_steps",
        "iterations", "radius_max", "plan"}``; ``plan`` holds the steps taken, from which
        :func:`certified.flow.flow_certificate_for` makes a certificate of rule relu-vectorised.

    Raises
    ------
    ShapeError, NonFiniteError, NumberFormatError, InputError
        Bad input, as for ``relu_flow``.

    Guarantee: ``enclosures[0, n]`` contains ``Phi_T(x)`` for every x in initial set n.
    """
    alpha = parse_activation(activation, slope)
    pieces = parse_schedule(W_list, A_list, b_list, durations, alpha)
    vps = [vec_piece(q) for q in pieces]
    if any(v is None for v in vps):
        return None
    d = pieces[0].d
    c0, r0 = _initial_balls(X0, d)
    record: list = []
    c, r, stats = flow_vectorised(vps, c0, r0, record)
    lo = _dnn(c - r[:, None])
    hi = _upn(c + r[:, None])
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
        raise RangeOverflowError("relu flow: an enclosure left the double range")
    total = sum((q.tau for q in pieces), flint.fmpq(0))
    hints = {"method": "relu-vectorised", "radius_max": float(r.max()), **stats}
    hints["plan"] = {"pieces": plan_pieces(vps), "steps": plan_strings(record, len(c0))}
    return FlowEnclosure(
        times=(fmpq_to_str(total),),
        enclosures=Interval(lo, hi).reshape(1, *lo.shape),
        status=FlowStatus.SUCCESS,
        hints=hints,
    )
