"""Rule ``relu-vectorised`` of kind ``flow`` v1: enclosures of (leaky) ReLU flows from points or
boxes, replayed step by step in numpy float64 midpoint-radius arithmetic with outward rounding,
all initial sets at once (proofs/checker_soundness.md#relu-vectorised; lemmas
proofs/bounds.md#relu-vec). Hints: per piece ``{"tick": k, "step": n, "order": K}`` (steps are
multiples of the tick 2^-k, at most n ticks, Taylor order K) and per initial set one string of
step tokens, pieces separated by "/": ``R`` (a region step of min(n, rest) ticks), ``r<m>`` (a
region step of m ticks), ``w<m>`` (a window step of m ticks). Only *where* steps end; every
enclosure is recomputed. numpy is imported here only (the argument: checker_soundness.md)."""

from __future__ import annotations

import math
from typing import Any

import flint
import numpy as np

from ._parse import Rejected, array, fields, small_integer
from ._partition import partition_leaves
from ._relu_vec_plan import plans
from .ivec import dn, up
from .ivec import fpu_ok as _fpu_ok

arb = flint.arb

U, ETA, PHI = 2.0**-53, 2.0**-1074, 2.0**-53 + 2.0**-105
FLOOR, BUMP = 2.0**-900, 1.0 + 8.0 * 2.0**-53  # radius rule, bounds.md#relu-vec-matvec
CHUNK = 1024  # sets per numpy batch (single-threaded BLAS sizes)


def rad(x):
    """Radius rule of bounds.md#relu-vec-matvec (x evaluated in at most four roundings)."""
    return np.maximum(FLOOR, x * BUMP)


def norm_up(v):
    """>= the Euclidean norms of the rows of v (bounds.md#relu-vec)."""
    s = np.einsum("ij,ij->i", v, v)  # + d eta: the squares' underflow (bounds.md#matmul)
    return up(np.sqrt(up(up(s * (1.0 + 2.0 * (v.shape[-1] + 2) * U)) + 2 * v.shape[-1] * ETA)))


def _up_float(x: flint.arb) -> float:  # a double >= every point of the finite ball x
    v = float(x.upper())
    return float(np.nextafter(v, np.inf)) if math.isfinite(v) else math.inf


class VecPiece:
    """Float64 data of one piece (every parameter a double, exactly) and its rigorous bounds."""

    def __init__(self, piece: Any, al: flint.fmpq, hint: Any, where: str) -> None:
        fields(hint, where, ("tick", "step", "order"))
        d, p = len(piece.W), len(piece.b)
        self.d, self.p = d, p
        self.W, self.A = (
            np.array([[_double(v, piece.where) for v in r] for r in M]) for M in (piece.W, piece.A)
        )
        self.b = np.array([_double(v, piece.where) for v in piece.b])
        self.Wt, self.At = np.ascontiguousarray(self.W.T), np.ascontiguousarray(self.A.T)
        self.Wabs, self.Aabs = np.abs(self.Wt), np.abs(self.At)
        self.a_m = int(al.p) / int(al.q)  # nearest double: |al - a_m| <= u a_m
        exact = flint.fmpq(*self.a_m.as_integer_ratio()) == al
        self.a_r = 0.0 if exact else float(up(U * self.a_m))
        cols = list(zip(*piece.W, strict=True))
        self.check = np.array(list(map(any, cols))) & np.array(list(map(any, piece.A)))
        self.anorm, self.wnorm = _norms(piece.A), _norms(cols)
        self.nu = up(self.wnorm * self.anorm)  # >= |w_i|_2 |a_i|_2

        def gram(M):  # ||M||_2^2 <= max row sum of |M^T M| (Gershgorin), enclosed in arb
            G = M.transpose() * M
            return max(
                sum((abs(G[i, j]) for j in range(G.ncols())), arb(0)) for i in range(G.nrows())
            )

        Wm, Am = flint.arb_mat(piece.W), flint.arb_mat(piece.A)
        self.L = max(_up_float((gram(Wm) * gram(Am)).sqrt()), 2.0**-20)
        outer = self.Wt[:, :, None] * self.A[:, None, :]  # (p, d, d): w_ji a_ik
        self.Sflat = np.ascontiguousarray(
            (0.5 * (outer + outer.transpose(0, 2, 1))).reshape(p, d * d)
        )
        Sabs = (0.5 * (np.abs(outer) + np.abs(outer.transpose(0, 2, 1)))).sum(axis=0)
        self.Erow = up(2.0 * (2.0 * (p + 5) * U) * Sabs.sum(axis=1)) + 4.0 * p * d * ETA
        k = small_integer(hint["tick"], f"{where}.tick", -60, 1000)
        self.tick = 2.0**-k
        tau = piece.duration * flint.fmpq(2) ** k if k >= 0 else piece.duration / 2**-k
        self.ticks = int(tau.p // tau.q)
        if not 1 <= self.ticks < 2**52:
            raise Rejected(f"{where}.tick: the duration is not between 1 and 2^52 ticks")
        rest = piece.duration - flint.fmpq(self.ticks) * flint.fmpq(2) ** -k
        self.tail = _up_float(arb(rest)) if rest else 0.0
        self.step = small_integer(hint["step"], f"{where}.step", 1, self.ticks)
        if not up(self.L * (self.step * self.tick)) <= 0.5 or not up(self.L * self.tail) <= 0.5:
            raise Rejected(f"{where}.step: L h > 1/2 for L = {self.L:.17g}")
        self.K = small_integer(hint["order"], f"{where}.order", 3, 40)
        self.g_d, self.F_d = (d + 1) * U, 1.0 + 4.0 * (d + 2) * U
        self.g_p, self.F_p = (p + 1) * U, 1.0 + 4.0 * (p + 2) * U


def _norms(rows) -> np.ndarray:
    return np.array([_up_float(sum((arb(x) ** 2 for x in r), arb(0)).sqrt()) for r in rows])


def _double(v: flint.fmpq, where: str) -> float:
    x = int(v.p) / int(v.q)
    if not math.isfinite(x) or flint.fmpq(*x.as_integer_ratio()) != v:
        raise Rejected(f"{where}: rule relu-vectorised needs parameters that are doubles")
    return x


def _mu(vp: VecPiece, Srows, n: int):
    """Gershgorin bounds of lambda_max of the float matrices Srows (bounds.md#relu-vec-lognorm)."""
    d = vp.d
    S = Srows.reshape(n, d, d)
    diag = np.einsum("njj->nj", S)
    T = np.abs(S)
    absrow = T.sum(axis=2)
    idx = np.arange(d)
    T[:, idx, idx] = diag
    row = T.sum(axis=2)
    b = up(up(row + up(absrow * (2.0 * (d + 2) * U))) + vp.Erow[None, :])
    return b.max(axis=1)


def _lmax_verified(vp: VecPiece, Srows, n: int):
    """lambda_max(S) <= t + ||E||_F + max E_row from a float Cholesky factor of t I - S_f,
    t above a LAPACK estimate (untrusted); inf where the factorisation fails
    (bounds.md#relu-vec-lognorm)."""
    d = vp.d
    S = Srows.reshape(n, d, d)
    est = np.linalg.eigvalsh(S)
    scale = np.maximum(np.abs(est).max(axis=1), 1e-300)
    t = est[:, -1] + 1e-10 * scale + 64 * d * U * scale
    eye = np.eye(d, dtype=bool)
    T = np.where(eye[None], t[:, None, None] - S, -S)
    try:
        L = np.linalg.cholesky(T)
    except np.linalg.LinAlgError:  # one by one: a set's bound must not depend on its chunk
        one = [_lmax_verified(vp, Srows[i : i + 1], 1)[0] for i in range(n)] if n > 1 else [np.inf]
        return np.array(one)
    nL = norm_up(L.reshape(-1, d * d))  # ||L||_F^2 = |c|^2, c_j the column norms of R = L^T
    e = np.abs(T - L @ L.transpose(0, 2, 1)).reshape(-1, d * d)
    T = T.reshape(-1, d * d)
    # ||E||_F <= (1 + 4u)||e||_F + 2(d + 2)u |c|^2 + 2u ||T||_F + d 2^-900 (triangle inequality)
    enorm = up(up(norm_up(e) * (1.0 + 4.0 * U)) + up(2.0 * (d + 2) * U * up(nL * nL)))
    enorm = up(up(enorm + up(2.0 * U * norm_up(T))) + d * FLOOR)
    out = up(up(t + enorm) + float(vp.Erow.max()))
    return np.where(np.isfinite(out), out, np.inf)


def _matvec(xm, V, P, absP, F, b=None):
    """x P for x in <xm, .>, V >= rad(x) + g|xm|: (midpoint, radius), bounds.md#relu-vec-matvec."""
    Zm = xm @ P
    r = (V @ absP) * F
    if b is not None:
        Zm = Zm + b
        r = r + U * np.abs(Zm)
    return Zm, rad(r)


def region_step(vp: VecPiece, c, r, h, cache, straddle: bool = False, span: bool = False):
    """One region step of length h (exact doubles, per row) from B(c, r): (ok, c', r'), ok where
    every checked neuron keeps the sign of the centre's region with its margin
    (bounds.md#relu-vec-tail, #relu-vec-lognorm, #relu-vec-region); ``straddle``: the tube may
    reach the wrong side of some planes, which adds E = phi h e^(h mu) (#relu-vec-straddle);
    ``span``: also the neurons' ranges over the step where ok (bounds.md#relu-mv)."""
    n, d = c.shape
    K = vp.K
    zm, zr = np.empty((K, n, vp.p)), np.empty((K, n, vp.p))
    zm[0], zr[0] = _matvec(c, rad(vp.g_d * np.abs(c)), vp.At, vp.Aabs, vp.F_d, vp.b)
    active = zm[0] >= 0
    Sm, Sr, y1 = c.copy(), np.zeros((n, d)), None
    relu = vp.a_m == 0.0 and vp.a_r == 0.0  # slopes 0 / 1: masking is exact
    sm = np.where(active, 1.0, vp.a_m)  # y_{k+1} = (h / (k + 1)) W (s z_k), s in <sm, sr>
    A1 = np.where(active, 0.0, rad(vp.a_r + U * vp.a_m))  # >= sr + u|sm| (0 where s = 1)
    A2 = np.where(active, 1.0, rad(vp.a_m + vp.a_r))  # >= |sm| + sr
    for k in range(K - 1):
        um = zm[k] * sm
        ur = zr[k] * sm if relu else rad(np.abs(zm[k]) * A1 + zr[k] * A2)
        Ym = um @ vp.Wt
        Yr = rad((rad(ur + vp.g_p * np.abs(um)) @ vp.Wabs) * vp.F_p)
        fm = h / (k + 1)  # rows scaled by <fm, fr>
        fr = np.zeros(n) if k == 0 else np.maximum(FLOOR, fm * (U * BUMP))
        a1, a2 = rad(fr + U * fm)[:, None], rad(fm + fr)[:, None]
        ym = Ym * fm[:, None]
        yr = rad(np.abs(Ym) * a1 + Yr * a2)
        y1 = (ym, yr) if k == 0 else y1
        Sm = Sm + ym
        Sr = rad((Sr + yr) + U * np.abs(Sm))
        zm[k + 1], zr[k + 1] = _matvec(ym, rad(yr + vp.g_d * np.abs(ym)), vp.At, vp.Aabs, vp.F_d)
    lh = up(vp.L * h)
    coef = np.ones(n)
    for _ in range(K - 1):
        coef = up(coef * lh)
    coef = up(coef * math.nextafter(1.65 / math.factorial(K), math.inf))  # e^(1/2) <= 1.65
    rho = up(coef * norm_up(up(np.abs(y1[0]) + y1[1])))
    Srows = sm @ vp.Sflat
    mu = _mu(vp, Srows, n)
    c_mask, c_mu = cache
    fresh = np.isinf(c_mu)
    if fresh.any():  # verified once per set and piece, then moved by nu_i per changed slope
        c_mu[fresh] = _lmax_verified(vp, np.ascontiguousarray(Srows[fresh]), int(fresh.sum()))
        c_mask[fresh] = active[fresh]
    changed = (active != c_mask) & vp.check[None, :]
    corr = up((changed * vp.nu[None, :]).sum(axis=1) * (1.0 + 2.0 * (vp.p + 2) * U))
    mu = np.clip(np.minimum(mu, up(c_mu + corr)), 0.0, vp.L)
    x = up(h * mu)
    growth = up(1.0 + up(x + up(x * x)))  # e^x <= 1 + x + x^2 on [0, 1/2]
    tube = up(up(r * growth) + rho)
    if straddle:
        ok, E = _straddle(vp, zm, zr, active, tube, up(h * growth))
        return ok, Sm, up(up(tube + E) + norm_up(Sr))
    m = up(tube[:, None] * vp.anorm[None, :])
    ok = _signs(zm, zr, active, vp.check, m)
    if span:  # q(theta) in q_0 + theta q_1 + sum_{k>=2} |q_k| [-1, 1], plus the margin m
        lo, hi = dn(zm - zr), up(zm + zr)
        r2 = _sum_up(np.maximum(np.abs(lo[2:]), np.abs(hi[2:])))
        zlo = dn(dn(dn(lo[0] + np.minimum(lo[1], 0.0)) - r2) - m)
        zhi = up(up(up(hi[0] + np.maximum(hi[1], 0.0)) + r2) + m)
        return ok, Sm, up(tube + norm_up(Sr)), (zlo, zhi)
    return ok, Sm, up(tube + norm_up(Sr))


def _straddle(vp: VecPiece, zm, zr, pos, tube, hG):
    """(ok, E): E >= phi(E) h e^(h mu) strictly, phi(E) = sum_i |w_i| D_i, D_i >= how far the
    tube of radius tube + E reaches past plane i on the wrong side of the centre's region."""
    lo, hi = dn(zm - zr), up(zm + zr)
    rest = _sum_up(np.maximum(np.abs(lo[1:]), np.abs(hi[1:])))
    qmin, qmax = dn(lo[0] - rest), up(hi[0] + rest)  # q_i on [0, 1] lies in [qmin, qmax]
    E = np.zeros(tube.shape)
    for _ in range(4):
        ext = up(up(tube + E)[:, None] * vp.anorm[None, :])
        D = np.maximum(0.0, np.where(pos, up(ext - qmin), up(qmax + ext))) * vp.check[None, :]
        new = up(_sum_up(up(D * vp.wnorm[None, :]).T) * hG)
        ok = new < E
        E = np.where(ok, E, up(2.0 * new))
    return ok, new


def _sum_up(x, weights=None):
    """>= the exact (weighted) sums over axis 0 of nonnegative x (bounds.md#matmul, dot
    products: x^T y <= (fl(x^T y) + n eta) / (1 - gamma_n))."""
    n = x.shape[0]
    s = x.sum(axis=0) if weights is None else np.tensordot(weights, x, axes=1)
    return up(up(s * (1.0 + 2.0 * (n + 2) * U)) + 2 * n * ETA)


def _signs(zm, zr, pos, check, m):
    """q(theta) = sum_k z_k theta^k - m >= 0 (pos) or + m <= 0 on [0, 1] for checked neurons:
    |q(theta) - q(0)| <= sum_{k>=1} |z_k|, or q monotone and q(0), q(1) both good."""
    K = zm.shape[0]
    lo, hi = dn(zm - zr), up(zm + zr)  # (K, n, p) coefficient intervals
    mags = np.maximum(np.abs(lo[1:]), np.abs(hi[1:]))
    rest = _sum_up(mags)
    drest = _sum_up(mags[1:], np.arange(2.0, K)) if K > 2 else 0.0 * rest
    need = up(rest + m)
    ok = np.where(pos, lo[0] >= need, hi[0] <= -need)
    err = up(2.0 * (K + 2) * U * _sum_up(np.maximum(np.abs(lo), np.abs(hi))))
    qlo, qhi = dn(lo.sum(axis=0) - err), up(hi.sum(axis=0) + err)  # q(1), any summation order
    mono = (lo[1] > drest) | (hi[1] < -drest)
    ends = np.where(pos, (lo[0] >= m) & (qlo >= m), (hi[0] <= -m) & (qhi <= -m))
    return (ok | (mono & ends) | ~check[None, :]).all(axis=1)


def _field(vp: VecPiece, Zm, Zr):
    """f(c) = W sigma(z) in midpoint-radius form from the neuron values z in <Zm, Zr>."""
    lo, hi = dn(Zm - Zr), up(Zm + Zr)
    a_lo, a_hi = dn(vp.a_m - vp.a_r), up(vp.a_m + vp.a_r)
    s_lo = np.where(lo >= 0, lo, dn(lo * a_hi))  # sigma increasing; alpha z in [a_hi z, a_lo z]
    s_hi = np.where(hi >= 0, hi, up(hi * a_lo))
    sm = 0.5 * (s_lo + s_hi)
    sr = up(np.maximum(s_hi - sm, sm - s_lo))
    return _matvec(sm, rad(sr + vp.g_p * np.abs(sm)), vp.Wt, vp.Wabs, vp.F_p)


def window_step(vp: VecPiece, c, r, w_lo, w_hi):
    """x(w) for w in [w_lo, w_hi], L w_hi <= 1/2, any regions (bounds.md#relu-vec-window)."""
    fm, fr = _field(vp, *_matvec(c, rad(vp.g_d * np.abs(c)), vp.At, vp.Aabs, vp.F_d, vp.b))
    wm = 0.5 * (w_lo + w_hi)
    wr = up(np.maximum(w_hi - wm, wm - w_lo))  # bounds.md#matmul: >= both exact differences
    pm = fm * wm[:, None]
    pr = up(
        up(up(np.abs(fm) * wr[:, None]) + up(fr * up(wm + wr)[:, None]))
        + up(PHI * np.abs(pm) + ETA)
    )
    cm = c + pm
    half = up(pr + up(PHI * np.abs(cm) + ETA))
    Lw = up(vp.L * w_hi)
    ew = up(1.0 + up(2.0 * Lw))  # e^x <= 1 + 2x on [0, 1]
    Rw = up(up(r * ew) + up(up(norm_up(up(np.abs(fm) + fr)) * w_hi) * ew))
    return cm, up(up(r + up(Lw * Rw)) + norm_up(half))


def _replay(vps: list[VecPiece], c, r, plan: list):
    """Advance every ball B(c[q], r[q]) through the pieces by its steps, CHUNK sets at a time
    (single-threaded BLAS sizes); returns (c, r, failed) with failed a dict {set: (piece,
    step)} of the region steps that did not validate."""
    n, failed = len(c), {}
    dead = np.zeros(n, dtype=bool)
    for j, (vp, rounds) in enumerate(zip(vps, plan, strict=True)):
        c_mask, c_mu = np.zeros((n, vp.p), dtype=bool), np.full(n, np.inf)
        tail = [] if not vp.tail else [(np.arange(n), np.zeros(n, dtype=np.int8), None)]
        for s, (sets, kinds, ticks) in enumerate(rounds + tail):
            for kind in (1, 2, 3, 0):
                pick = (kinds == kind) & ~dead[sets]
                for a in range(0, int(pick.sum()), CHUNK):
                    sel = sets[pick][a : a + CHUNK]
                    if kind == 0:  # the tail of a non-dyadic piece: length in [0, tail]
                        w = np.full(sel.size, vp.tail)
                        c[sel], r[sel] = window_step(vp, c[sel], r[sel], 0 * w, w)
                        continue
                    h = ticks[pick][a : a + CHUNK] * vp.tick  # exact
                    if kind == 2:
                        c[sel], r[sel] = window_step(vp, c[sel], r[sel], h, h)
                        continue
                    cache = (c_mask[sel], c_mu[sel])
                    ok, cn, rn = region_step(vp, c[sel], r[sel], h, cache, kind == 3)
                    c_mask[sel], c_mu[sel] = cache
                    c[sel[ok]], r[sel[ok]] = cn[ok], rn[ok]
                    for q in sel[~ok]:
                        failed[int(q)], dead[q] = (j, s), True
    return c, r, failed


def _starts(sets: list, boxes: bool):
    """Centres (nearest doubles) and Euclidean radii of the initial points or boxes."""
    n, d = len(sets), len(sets[0])
    c, r = np.empty((n, d)), np.zeros(n)
    for q, row in enumerate(sets):
        pq = () if boxes else [(int(x.p), int(x.q)) for x in row]  # doubles: p / 2^k exact
        if pq and all(b & (b - 1) == 0 and b < 2**1075 and -(2**53) < a < 2**53 for a, b in pq):
            c[q] = [a / b for a, b in pq]
            continue
        err = flint.fmpq(0)
        for k, (lo, hi) in enumerate(row if boxes else [(x, x) for x in row]):
            mid = (lo + hi) / 2
            c[q, k] = x = int(mid.p) / int(mid.q)
            if not math.isfinite(x):
                raise Rejected(f"instance: initial set {q} lies beyond the double range")
            fx = flint.fmpq(*x.as_integer_ratio())
            if lo != fx or hi != fx:
                err += max(abs(lo - fx), abs(hi - fx)) ** 2
        r[q] = _up_float(arb(err).sqrt()) if err else 0.0
    return c, r


def replay_relu_vectorised(pieces: list, sets: list, hints: Any, al, boxes: bool, trace=None):
    """The replay of rule relu-vectorised: (lo, hi, failed), lo and hi (N x d doubles) around
    the final balls, failed {set: (piece, step)} of the region steps not certified. Boxes with
    ``hints.form``: the mean-value form (_relu_mv_rule.py; ``trace`` collects its diagnostics)."""
    if boxes and isinstance(hints, dict) and "form" in hints:  # bounds.md#relu-mv
        from ._relu_mv_rule import replay_mean_value

        return replay_mean_value(pieces, sets, hints, al, trace)
    fields(hints, "hints", ("method", "pieces", "steps"))
    if not _fpu_ok():
        raise Rejected("floating point: not round-to-nearest with gradual underflow here")
    raw = array(hints["pieces"], "hints.pieces", len(pieces))
    where = [f"hints.pieces[{j}]" for j in range(len(pieces))]
    vps = [VecPiece(p, al, h, w) for p, h, w in zip(pieces, raw, where, strict=True)]
    plan, _ = plans(hints["steps"], vps, len(sets))
    c, r = _starts(sets, boxes)
    with np.errstate(all="ignore"):
        c, r, failed = _replay(vps, c, r, plan)
        return dn(c - r[:, None]), up(c + r[:, None]), failed


def check_relu_vectorised(pieces, sets, claim, hints, al, boxes: bool) -> str:
    """Check enclosures (claim: N x d x (lo, hi)) of a (leaky, slope al) ReLU flow from points
    or boxes by the replay above; return a summary or raise Rejected."""
    owner = range(len(sets))  # boxes split by hints.partition: its leaves are the sets replayed
    if boxes and isinstance(hints, dict) and "partition" in hints:
        tree, hints = hints["partition"], {k: v for k, v in hints.items() if k != "partition"}
        sets, owner = partition_leaves(tree, "hints.partition", sets)
    lo, hi, failed = replay_relu_vectorised(pieces, sets, hints, al, boxes)
    if failed:
        q, (j, s) = min(failed.items())
        raise Rejected(f"hints.steps[{q}]: piece {j}, step {s}: region membership not certified")
    for q, i in enumerate(owner):
        for k, (a, b) in enumerate(claim[i]):
            x, y = float(lo[q, k]), float(hi[q, k])
            if not (math.isfinite(x) and math.isfinite(y)):
                raise Rejected(f"claim.enclosures[{i}][{k}]: set {q}'s replayed ball is not finite")
            if not a <= flint.fmpq(*x.as_integer_ratio()) or flint.fmpq(*y.as_integer_ratio()) > b:
                raise Rejected(f"claim.enclosures[{i}][{k}]: does not contain set {q}'s ball")
    return f"rule relu-vectorised: {len(claim)} {'boxes' if boxes else 'points'}, enclosures"
