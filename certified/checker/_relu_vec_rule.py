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
import re
from typing import Any

import flint
import numpy as np

from ._parse import Rejected, array, fields, small_integer

arb = flint.arb

U, ETA, PHI = 2.0**-53, 2.0**-1074, 2.0**-53 + 2.0**-105
FLOOR, BUMP = 2.0**-900, 1.0 + 8.0 * 2.0**-53  # radius rule, bounds.md#relu-vec-matvec
MAX_RELU_VEC_COST = 4 * 10**11  # cost units of the replay (about 1 ns each; 3x honest: format.md)
ROUND_COST, STEP_COST, EIG_COST = 3 * 10**5, 6, 40  # a round; a step per (d + 4)(p + 4) K; d^3
UNITS = (ROUND_COST, STEP_COST, EIG_COST)
_PIECE = re.compile(r"(?:R|[rw][1-9][0-9]{0,15})*")
_TOKEN = re.compile(r"R|([rw])([0-9]+)")


def _fpu_ok() -> bool:
    """Round-to-nearest with gradual underflow, probed on array values (no constant folding)."""
    x = np.array([1.0, -1.0, 2.0**-1022, 2.0**-1074])
    y = np.array([3 * 2.0**-54, 2.0**-54])
    return bool(
        x[0] + y[0] == 1.0 + 2.0**-52 and x[1] - y[0] == -(1.0 + 2.0**-52)
        and x[0] + y[1] == 1.0 and x[2] / 2.0 == 2.0**-1023 and x[3] * 2.0 == 2.0**-1073
    )  # fmt: skip


def up(x):
    """>= succ(x) (bounds.md#pred-succ)."""
    return x + (PHI * np.abs(x) + ETA)


def dn(x):
    return x - (PHI * np.abs(x) + ETA)


def rad(x):
    """Radius rule of bounds.md#relu-vec-matvec (x evaluated in at most four roundings)."""
    return np.maximum(FLOOR, x * BUMP)


def norm_up(v):
    """>= the Euclidean norms of the rows of v (bounds.md#relu-vec)."""
    s = np.einsum("ij,ij->i", v, v)
    return up(np.sqrt(up(s * (1.0 + 2.0 * (v.shape[-1] + 2) * U))))


def _up_float(x: flint.arb) -> float:
    """A double >= every point of the finite ball x."""
    v = float(x.upper())
    return float(np.nextafter(v, np.inf)) if math.isfinite(v) else math.inf


class VecPiece:
    """Float64 data of one piece (every parameter a double, exactly) and its rigorous bounds."""

    def __init__(self, piece: Any, al: flint.fmpq, hint: Any, where: str) -> None:
        fields(hint, where, ("tick", "step", "order"))
        d, p = len(piece.W), len(piece.b)
        self.d, self.p = d, p
        self.W = np.array([[_double(v, piece.where) for v in row] for row in piece.W])
        self.A = np.array([[_double(v, piece.where) for v in row] for row in piece.A])
        self.b = np.array([_double(v, piece.where) for v in piece.b])
        self.Wt, self.At = np.ascontiguousarray(self.W.T), np.ascontiguousarray(self.A.T)
        self.Wabs, self.Aabs = np.abs(self.Wt), np.abs(self.At)
        self.a_m = int(al.p) / int(al.q)  # nearest double: |al - a_m| <= u a_m
        self.a_r = (
            0.0 if flint.fmpq(*self.a_m.as_integer_ratio()) == al else float(up(U * self.a_m))
        )
        self.check = np.array(
            [any(piece.W[k][i] for k in range(d)) and any(piece.A[i]) for i in range(p)]
        )
        Wm, Am = flint.arb_mat(piece.W), flint.arb_mat(piece.A)
        norms = [_up_float(sum((arb(x) ** 2 for x in row), arb(0)).sqrt()) for row in piece.A]
        self.anorm = np.array(norms)
        wn = [
            _up_float(sum((arb(piece.W[k][i]) ** 2 for k in range(d)), arb(0)).sqrt())
            for i in range(p)
        ]
        self.nu = up(np.array(wn) * self.anorm)

        def gram(M):  # ||M||_2^2 <= max row sum of |M^T M| (Gershgorin), enclosed in arb
            G = M.transpose() * M
            return max(
                sum((abs(G[i, j]) for j in range(G.ncols())), arb(0)) for i in range(G.nrows())
            )

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
    out = np.full(n, np.inf)
    try:
        ok, L = np.ones(n, dtype=bool), np.linalg.cholesky(T)
    except np.linalg.LinAlgError:
        ok, L = np.zeros(n, dtype=bool), np.zeros_like(T)
        for i in range(n):
            try:
                L[i], ok[i] = np.linalg.cholesky(T[i]), True
            except np.linalg.LinAlgError:
                pass
    if not ok.any():
        return out
    L, T, t = L[ok], T[ok], t[ok]
    c = norm_up(L.reshape(-1, d)).reshape(-1, d)  # column norms of R = L^T
    dot = L @ L.transpose(0, 2, 1)
    e = np.abs(T - dot)
    bound = up(e * (1.0 + 4.0 * U)) + up(2.0 * (d + 2) * U * up(c[:, :, None] * c[:, None, :]))
    bound = up(up(bound + up(2.0 * U * np.abs(T))) + FLOOR)
    f2 = up(up(bound * bound).sum(axis=(1, 2)) * (1.0 + 2.0 * (d * d + 2) * U))
    out[ok] = up(up(t + up(np.sqrt(f2))) + float(vp.Erow.max()))
    return np.where(np.isfinite(out), out, np.inf)


def _matvec(xm, V, P, absP, F, b=None):
    """x P for x in <xm, .>, V >= rad(x) + g|xm|: (midpoint, radius), bounds.md#relu-vec-matvec."""
    Zm = xm @ P
    r = (V @ absP) * F
    if b is not None:
        Zm = Zm + b
        r = r + U * np.abs(Zm)
    return Zm, rad(r)


def region_step(vp: VecPiece, c, r, h, cache):
    """One region step of length h (exact doubles, per row) from B(c, r): (ok, c', r'), ok where
    every checked neuron keeps the sign of the centre's region with its margin
    (bounds.md#relu-vec-tail, #relu-vec-lognorm, #relu-vec-region)."""
    n, d = c.shape
    K = vp.K
    zm, zr = np.empty((K, n, vp.p)), np.empty((K, n, vp.p))
    zm[0], zr[0] = _matvec(c, rad(vp.g_d * np.abs(c)), vp.At, vp.Aabs, vp.F_d, vp.b)
    active = zm[0] >= 0
    Sm, Sr, y1 = c.copy(), np.zeros((n, d)), None
    ReLU = vp.a_m == 0.0 and vp.a_r == 0.0
    for k in range(K - 1):
        fm = h / (k + 1)  # the row's scalar on active neurons, alpha times it on inactive ones
        fr = np.zeros(n) if k == 0 else np.maximum(FLOOR, fm * (U * BUMP))
        gm = fm * vp.a_m
        gr = rad(vp.a_m * fr + vp.a_r * (fm + fr) + U * gm)
        cm = np.where(active, fm[:, None], 0.0 if ReLU else gm[:, None])
        cr = np.where(active, fr[:, None], 0.0 if ReLU else gr[:, None])
        a1 = np.where((cm == 0) & (cr == 0), 0.0, rad(cr + U * np.abs(cm)))
        a2 = np.where((cm == 0) & (cr == 0), 0.0, rad(np.abs(cm) + cr))
        um = zm[k] * cm
        ur = rad(np.abs(zm[k]) * a1 + zr[k] * a2)
        ym = um @ vp.Wt
        yr = rad((rad(ur + vp.g_p * np.abs(um)) @ vp.Wabs) * vp.F_p)
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
    Srows = np.where(active, 1.0, vp.a_m) @ vp.Sflat
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
    tube = up(up(r * up(1.0 + up(x + up(x * x)))) + rho)  # e^x <= 1 + x + x^2 on [0, 1/2]
    ok = _signs(zm, zr, active, vp.check, up(tube[:, None] * vp.anorm[None, :]))
    return ok, Sm, up(tube + norm_up(Sr))


def _signs(zm, zr, pos, check, m):
    """q(theta) = sum_k z_k theta^k - m >= 0 (pos) or + m <= 0 on [0, 1] for checked neurons:
    |q(theta) - q(0)| <= sum_{k>=1} |z_k|, or q monotone and q(0), q(1) both good."""
    K = zm.shape[0]
    lo0, hi0 = dn(zm[0] - zr[0]), up(zm[0] + zr[0])
    mags = [up(np.abs(zm[k]) + zr[k]) for k in range(1, K)]
    rest, drest = np.zeros_like(lo0), np.zeros_like(lo0)
    for k in range(1, K):
        rest = up(rest + mags[k - 1])
        drest = up(drest + up(k * mags[k - 1])) if k >= 2 else drest
    need = up(rest + m)
    ok = np.where(pos, lo0 >= need, hi0 <= -need)
    qlo, qhi = lo0, hi0
    for k in range(1, K):
        qlo, qhi = dn(qlo + dn(zm[k] - zr[k])), up(qhi + up(zm[k] + zr[k]))
    z1lo, z1hi = dn(zm[1] - zr[1]), up(zm[1] + zr[1])
    mono = (z1lo > drest) | (z1hi < -drest)
    ends = np.where(pos, (lo0 >= m) & (qlo >= m), (hi0 <= -m) & (qhi <= -m))
    return (ok | (mono & ends) | ~check[None, :]).all(axis=1)


def window_step(vp: VecPiece, c, r, w_lo, w_hi):
    """x(w) for w in [w_lo, w_hi], L w_hi <= 1/2, any regions (bounds.md#relu-vec-window)."""
    Zm, Zr = _matvec(c, rad(vp.g_d * np.abs(c)), vp.At, vp.Aabs, vp.F_d, vp.b)
    lo, hi = dn(Zm - Zr), up(Zm + Zr)
    a_lo, a_hi = dn(vp.a_m - vp.a_r), up(vp.a_m + vp.a_r)
    s_lo = np.where(lo >= 0, lo, dn(lo * a_hi))  # sigma increasing; alpha z in [a_hi z, a_lo z]
    s_hi = np.where(hi >= 0, hi, up(hi * a_lo))
    sm = 0.5 * (s_lo + s_hi)
    sr = up(np.maximum(s_hi - sm, sm - s_lo))
    fm, fr = _matvec(sm, rad(sr + vp.g_p * np.abs(sm)), vp.Wt, vp.Wabs, vp.F_p)
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


def _tokens(text: Any, vp: VecPiece, where: str, memo: dict) -> list[tuple[int, int]]:
    """The steps (1: region, 2: window; ticks) of one piece string; they tile the piece."""
    got = memo.get((text, id(vp)))
    if got is None:
        if not isinstance(text, str) or _PIECE.fullmatch(text) is None:
            raise Rejected(f"{where}: expected tokens R, r<ticks>, w<ticks>")
        got, left = [], vp.ticks
        for m in _TOKEN.finditer(text):
            kind, n = (1, min(vp.step, left)) if m[0] == "R" else (1 + (m[1] == "w"), int(m[2]))
            if not 1 <= n <= min(vp.step, left):
                raise Rejected(
                    f"{where}: a step of {n} ticks is empty, over the step or past the end"
                )
            got.append((kind, n))
            left -= n
        if left:
            raise Rejected(f"{where}: the steps stop {left} ticks before the end of the piece")
        memo[(text, id(vp))] = got
    return got


def plans(steps: Any, vps: list[VecPiece], n: int) -> tuple[list, int]:
    """Per piece its rounds (sets, kinds, ticks), and the replay's cost estimate (refused over
    the limit before anything is allocated per round)."""
    rows, memo = [[] for _ in vps], {}
    for q, text in enumerate(array(steps, "hints.steps", n)):
        parts = text.split("/") if isinstance(text, str) else None
        if parts is None or len(parts) != len(vps):
            raise Rejected(f"hints.steps[{q}]: expected {len(vps)} pieces separated by '/'")
        for j, part in enumerate(parts):
            rows[j].append(_tokens(part, vps[j], f"hints.steps[{q}] piece {j}", memo))
    cost = 0
    for vp, row in zip(vps, rows, strict=True):
        steps_j = sum(map(len, row)) + n * (vp.tail > 0)
        cost += max(map(len, row)) * ROUND_COST + EIG_COST * n * vp.d**3  # + lambda_max per set
        cost += STEP_COST * steps_j * vp.K * (vp.d + 4) * (vp.p + 4)
    if cost > MAX_RELU_VEC_COST:
        raise Rejected(
            f"resource limit: the replay costs about {cost:.2g}, over {MAX_RELU_VEC_COST:.0g}"
        )
    out = []
    for row in rows:
        lens, rounds = np.array([len(t) for t in row]), []
        for s in range(int(lens.max())):
            sel = np.nonzero(lens > s)[0]
            kt = np.array([row[q][s] for q in sel], dtype=np.int64)
            rounds.append((sel, kt[:, 0], kt[:, 1]))
        out.append(rounds)
    return out, cost


def _replay(vps: list[VecPiece], c, r, plan: list):
    """Advance every ball B(c[q], r[q]) through the pieces by its steps; returns (c, r, failed)
    with failed a dict {set: (piece, step)} of the region steps that did not validate."""
    n, failed = len(c), {}
    dead = np.zeros(n, dtype=bool)
    for j, (vp, rounds) in enumerate(zip(vps, plan, strict=True)):
        c_mask, c_mu = np.zeros((n, vp.p), dtype=bool), np.full(n, np.inf)
        for s, (sets, kinds, ticks) in enumerate(rounds):
            for kind in (1, 2):
                pick = (kinds == kind) & ~dead[sets]
                sel, h = sets[pick], ticks[pick] * vp.tick  # exact
                if not sel.size:
                    continue
                if kind == 2:
                    c[sel], r[sel] = window_step(vp, c[sel], r[sel], h, h)
                    continue
                cache = (c_mask[sel], c_mu[sel])
                ok, cn, rn = region_step(vp, c[sel], r[sel], h, cache)
                c_mask[sel], c_mu[sel] = cache
                c[sel[ok]], r[sel[ok]] = cn[ok], rn[ok]
                for q in sel[~ok]:
                    failed[int(q)], dead[q] = (j, s), True
        if vp.tail:
            live = np.nonzero(~dead)[0]
            w = np.full(live.size, vp.tail)
            c[live], r[live] = window_step(vp, c[live], r[live], np.zeros(live.size), w)
    return c, r, failed


def _starts(sets: list, boxes: bool):
    """Centres (nearest doubles) and Euclidean radii of the initial points or boxes."""
    n, d = len(sets), len(sets[0])
    c, r = np.empty((n, d)), np.zeros(n)
    for q, row in enumerate(sets):
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


def replay_relu_vectorised(pieces: list, sets: list, hints: Any, al: flint.fmpq, boxes: bool):
    """The replay of rule relu-vectorised: (lo, hi, failed), lo and hi (N x d doubles) around
    the final balls, failed {set: (piece, step)} of the region steps not certified."""
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
    lo, hi, failed = replay_relu_vectorised(pieces, sets, hints, al, boxes)
    if failed:
        q, (j, s) = min(failed.items())
        raise Rejected(f"hints.steps[{q}]: piece {j}, step {s}: region membership not certified")
    for q, row in enumerate(claim):
        for k, (a, b) in enumerate(row):
            x, y = float(lo[q, k]), float(hi[q, k])
            if not (math.isfinite(x) and math.isfinite(y)):
                raise Rejected(f"claim.enclosures[{q}][{k}]: the replayed ball is not finite")
            if not (
                a <= flint.fmpq(*x.as_integer_ratio()) and flint.fmpq(*y.as_integer_ratio()) <= b
            ):
                raise Rejected(f"claim.enclosures[{q}][{k}]: does not contain the replayed ball")
    what = "boxes" if boxes else "points"
    return f"rule relu-vectorised: {len(sets)} {what}, {len(pieces)} pieces, enclosures"
