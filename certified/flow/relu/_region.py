"""Affine flow inside one sign region: Taylor expansion with a proved tail, region validation
on a time grid, and the window lemma that carries a trajectory across hyperplanes.

Notation (proofs/bounds.md, section "ReLU flows"): a piece has hyperplanes
``ghat_h(x) = ahat_h . x + bhat_h``; a region is a sign vector ``sigma`` and, on the closed
region ``{sigma_h ghat_h >= 0}``, the field is ``f_S(x) = M x + c``. With ``xt = (x, 1)``
and ``Mt = [[M, c], [0, 0]]`` the affine flow is ``xt(s) = sum_k s^k v_k``,
``v_k = Mt^k xt(0) / k!``. Everything runs at the caller's ``flint.ctx.prec`` (set once by the
public entry point through :func:`certified.arith.ball.precision`).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import flint
import numpy as np
from flint import arb, arb_mat

from certified.flow.relu._model import ReluPiece

__all__ = [
    "ArbPiece",
    "Expansion",
    "Region",
    "dyadic_mid",
    "radii",
    "recentre",
    "validate_points",
    "window",
]

_ONE = arb(1)
_ZERO = arb(0)


def dyadic_mid(x: arb) -> flint.fmpq:
    """The midpoint of a ball as an exact dyadic rational."""
    man, exp = x.mid().man_exp()
    if man == 0:
        return flint.fmpq(0)
    e = int(exp)
    return flint.fmpq(man * flint.fmpz(2) ** e) if e >= 0 else flint.fmpq(man, flint.fmpz(2) ** -e)


def _up(x: arb) -> arb:
    """An exact ball (radius 0) bounding |x| from above."""
    return x.abs_upper()


def _max_up(vals: list[arb]) -> arb:
    """An exact upper bound on max |v| over the balls."""
    out = arb(0)
    for v in vals:
        out = out.max(v.abs_upper())
    return _up(out)


def _norm2_up(vals: list[arb]) -> arb:
    return _up(sum((v * v for v in vals), arb(0)).sqrt())


def _lognorm2_upper(M: arb_mat, Mf: np.ndarray, fallback: arb) -> arb:
    """Upper bound on the Euclidean logarithmic norm ``mu_2(M) = lambda_max((M + M^T)/2)``:
    Gershgorin's theorem applied to ``Q^{-1} S Q`` (similar to ``S = (M + M^T)/2``, nearly
    diagonal for the float eigenvectors ``Q``), else to ``S``, else ``fallback`` (an upper bound
    on ``||M||_2 >= mu_2(M)``). proof: proofs/bounds.md#relu-lognorm"""
    d = M.nrows()
    S = (M + M.transpose()) / 2
    candidates = []
    try:
        _, Q = np.linalg.eigh((Mf + Mf.T) / 2)
        Qa = arb_mat(Q.tolist())
        candidates.append(Qa.inv() * S * Qa)
    except (ValueError, ZeroDivisionError, np.linalg.LinAlgError):
        pass
    candidates.append(S)
    for B in candidates:
        # Gershgorin: lambda <= B_ii + sum_{j != i} |B_ij| <= B_ii + sqrt(d (F F^T)_ii), F the
        # off-diagonal part (Cauchy-Schwarz), so only d entries are read
        diag = [B[i, i] for i in range(d)]
        off = B - arb_mat([[diag[i] if i == k else arb(0) for k in range(d)] for i in range(d)])
        G = off * off.transpose()
        best = None
        for i in range(d):
            r = (diag[i] + (G[i, i] * d).sqrt()).upper()
            if not r.is_finite():
                best = None
                break
            best = r if best is None else best.max(r)
        if best is not None:
            return best.upper()
    return fallback


def _rows(m: arb_mat) -> list[list[arb]]:
    n = m.ncols()
    e = m.entries()
    return [e[i * n : (i + 1) * n] for i in range(m.nrows())]


def _ball(v: arb, radius: arb) -> arb:
    """``v`` widened by ``radius >= 0`` (an exact upper bound)."""
    return v + arb(0, radius) if radius != 0 else v


class ArbPiece:
    """Ball data of one piece at the current precision: hyperplanes, effective weights per
    side, the Lipschitz bound ``Lf = sum_i |w_i|_2 |a_i|_2`` of the field, the weights
    ``omega_h = (1 - alpha) sum_{i on h} |lam_i| |w_i|_2`` of the window lemma, and a cache of
    regions: the per-precision view of a :class:`ReluPiece` (itself the exact view of a
    :class:`certified.models.Piece`). Build inside a precision context."""

    def __init__(self, piece: ReluPiece, prec: int) -> None:
        self.piece = piece
        self.prec = prec
        d, H = piece.d, piece.n_planes
        self.d, self.H = d, H
        alpha = piece.alpha
        self.Atil = (
            arb_mat(
                [[arb(v) for v in piece.planes_a[h]] + [arb(piece.planes_b[h])] for h in range(H)]
            )
            if H
            else None
        )
        self.Atil_f = np.array(
            [[float(v) for v in piece.planes_a[h]] + [float(piece.planes_b[h])] for h in range(H)]
        ).reshape(H, d + 1)
        self.a1 = [_up(sum((abs(arb(v)) for v in piece.planes_a[h]), arb(0))) for h in range(H)]
        self.a2 = [_norm2_up([arb(v) for v in piece.planes_a[h]]) for h in range(H)]
        zero = flint.fmpq(0)
        pos = [np.full(d, zero, dtype=object) for _ in range(H)]
        neg = [np.full(d, zero, dtype=object) for _ in range(H)]
        omega = [arb(0) for _ in range(H)]
        lip = arb(0)
        for i, h, lam in piece.kinks:
            w = piece.W[:, i]
            # on ghat_h >= 0 the neuron sees z = lam ghat >= 0 iff lam > 0
            pos[h] = pos[h] + w * (lam if lam > 0 else alpha * lam)
            neg[h] = neg[h] + w * (alpha * lam if lam > 0 else lam)
            wn = _norm2_up([arb(v) for v in w])
            omega[h] = omega[h] + wn * arb(abs(lam))
            lip = lip + wn * _norm2_up([arb(v) for v in piece.A[i]])
        for i, role in enumerate(piece.role):
            if role == "linear":
                lip = lip + _norm2_up([arb(v) for v in piece.W[:, i]]) * _norm2_up(
                    [arb(v) for v in piece.A[i]]
                )
        self.omega = [_up(o * arb(1 - alpha)) for o in omega]
        self.Lf = _up(lip)
        self.pos = [[arb(v) for v in col] for col in pos]
        self.pos_f = [np.array([float(v) for v in col]) for col in pos]
        self.neg_f = [np.array([float(v) for v in col]) for col in neg]
        self.neg = [[arb(v) for v in col] for col in neg]
        self.c0 = [arb(v) for v in piece.c0]
        C = [[arb(0)] * (d + 1) for _ in range(d + 1)]
        for r in range(d):
            C[r][d] = self.c0[r]
            if piece.M0 is not None:
                for k in range(d):
                    C[r][k] = arb(piece.M0[r, k])
        self.C = arb_mat(C)
        self.C_f = np.array([[float(v.mid()) for v in row] for row in C])
        self.invariant = list(piece.invariant)
        self.checked = [h for h in range(H) if not piece.invariant[h]]
        self.regions: dict[tuple[int, ...], Region] = {}

    def region(self, signs: tuple[int, ...]) -> Region:
        reg = self.regions.get(signs)
        if reg is None:
            reg = self.regions[signs] = Region(self, signs)
        return reg

    def planes_at(self, y: arb_mat) -> list[arb]:
        """``ghat_h`` at the ball point ``y`` ((d+1) x 1, last entry 1)."""
        return (self.Atil * y).entries() if self.H else []

    def field(self, y: arb_mat) -> list[arb]:
        """Ball enclosure of the true field f at every point of ``y`` (sigma on balls)."""
        d = self.d
        g = self.planes_at(y)
        ys = y.entries()
        out = list(self.c0)
        if self.piece.M0 is not None:
            for r in range(d):
                out[r] = out[r] + sum((arb(self.piece.M0[r, k]) * ys[k] for k in range(d)), arb(0))
        for h, gh in enumerate(g):
            gp = gh.nonnegative_part()
            gn = -((-gh).nonnegative_part())
            for r in range(d):
                out[r] = out[r] + self.pos[h][r] * gp + self.neg[h][r] * gn
        return out


class Region:
    """Affine data of one region: ``Mt``, ``||M||_inf`` (upper), the derivative rows
    ``AM = Atil Mt`` (``d/ds ghat_h(x(s)) = AM_h . xt(s)``) and their 1-norms."""

    signs: tuple[int, ...]
    Mt: arb_mat
    normM: arb  # noqa: N815 - the matrix M
    AM: arb_mat | None
    Mf: np.ndarray
    hmax: flint.fmpq | None

    def __init__(self, ap: ArbPiece, signs: tuple[int, ...]) -> None:
        d, H = ap.d, ap.H
        self.signs = signs
        self.prec = ap.prec
        if H:
            cols = [ap.pos[h] if s > 0 else ap.neg[h] for h, s in enumerate(signs)]
            Wt = arb_mat([[cols[h][r] for h in range(H)] for r in range(d)] + [[arb(0)] * H])
            self.Mt = Wt * ap.Atil + ap.C
        else:
            self.Mt = ap.C
        rows = _rows(self.Mt)
        self.normM = _max_up([sum((abs(rows[r][k]) for k in range(d)), arb(0)) for r in range(d)])
        # float copy for heuristics only (exit prediction, number of terms)
        Wf = np.array([ap.pos_f[h] if s_ > 0 else ap.neg_f[h] for h, s_ in enumerate(signs)])
        self.Mf = ap.C_f.copy()
        if H:
            self.Mf[:d] += Wf.T @ ap.Atil_f
        if H:
            self.AM = ap.Atil * self.Mt
            am_rows = _rows(self.AM)
            self._am_rows = am_rows
        else:
            self.AM, self._am_rows = None, []
        self._am: dict[int, tuple[arb, arb]] = {}
        self._mu2: arb | None = None
        self._normF: arb | None = None
        self._M: arb_mat | None = None
        self._d = d
        # steps with ||M|| h <= 1 (a power of two), so that the tail ratio stays <= 1/2
        nmf = float(self.normM.upper())
        self.hmax = None if nmf == 0 else flint.fmpq(1, 2 ** max(0, math.ceil(math.log2(nmf))))

    def am_norms(self, h: int) -> tuple[arb, arb]:
        """Upper bounds on ``||ahat_h^T M||_1`` and ``||ahat_h^T M||_2`` (derivative rows)."""
        out = self._am.get(h)
        if out is None:
            row = self._am_rows[h][: self._d]
            out = self._am[h] = (_up(sum((abs(v) for v in row), arb(0))), _norm2_up(row))
        return out

    def _block(self) -> arb_mat:
        if self._M is None:
            d = self._d
            P = arb_mat([[arb(1 if i == k else 0) for k in range(d + 1)] for i in range(d)])
            self._M = P * self.Mt * P.transpose()
        return self._M

    @property
    def normF(self) -> arb:  # noqa: N802 - the matrix M
        """Upper bound on the Frobenius norm of M (>= ||M||_2 >= mu_2(M)), on first use."""
        if self._normF is None:
            M = self._block()
            G = M.transpose() * M
            self._normF = _up(sum((G[i, i] for i in range(self._d)), arb(0)).sqrt())
        return self._normF

    @property
    def mu2(self) -> arb:
        """Upper bound on the logarithmic norm mu_2(M) (computed on first use)."""
        if self._mu2 is None:
            d = self._d
            self._mu2 = _lognorm2_upper(self._block(), self.Mf[:d, :d], self.normF)
        return self._mu2


class Expansion:
    """Taylor expansion ``xt(s) = sum_{k <= N} s^k v_k + tail(s)`` of the affine flow of one
    region from the columns of ``Y`` ((d+1) x n, balls), with the tail bound
    ``||tail(s)||_inf <= ||v_N||_inf s^N (m s / (N+1)) / (1 - m s / (N+2))``, ``m = ||M||_inf``
    (proof: proofs/bounds.md#relu-taylor-tail), valid for ``m s < N + 2``.
    """

    def __init__(self, ap: ArbPiece, reg: Region, Y: arb_mat, h: flint.fmpq) -> None:
        self.ap, self.reg, self.d = ap, reg, ap.d
        d = ap.d
        n = Y.ncols()
        self.n = n
        prec = ap.prec
        # the number of terms comes from a float64 run of the same recursion (heuristic: any
        # N is rigorous, the tail bound accounts for the rest)
        Yf = np.array([[float(v.mid()) for v in row] for row in _rows(Y)])
        scale = max(1.0, float(np.max(np.abs(Yf[:d]))))
        tol = scale * 2.0 ** -(prec + 4)
        hf = float(h)
        # a priori number of terms from ||v_k|| <= ||M||^k ||y|| / k! (float, heuristic)
        mh = float(reg.normM) * hf
        kmax, term = 2, 1.0
        while kmax < 400:
            term *= mh / kmax
            if kmax >= 2 and term <= 2.0 ** -(prec + 4):
                break
            kmax += 1
        vf = Yf
        fcols = [Yf]
        for j in range(1, kmax + 1):
            vf = reg.Mf @ vf / j
            fcols.append(vf)
        norms = np.abs(np.stack(fcols)[:, :d, :]).max(axis=(1, 2)) * hf ** np.arange(kmax + 1)
        ok = np.nonzero(norms[2:] <= tol)[0]
        k = (int(ok[0]) + 2 if len(ok) else kmax) + 2  # margin against the float estimate
        vs = [Y]
        v = Y
        for j in range(1, k + 1):
            v = (reg.Mt * v) / j
            vs.append(v)
        self.N = k
        self.vs = vs
        last = _rows(vs[-1])
        self.nv = [_max_up([last[r][c] for r in range(d)]) for c in range(n)]
        if n == 1:
            cols = [vk.entries() for vk in vs]
            self.V = arb_mat([[cols[kk][r] for kk in range(k + 1)] for r in range(d + 1)])
            while len(fcols) <= k:
                fcols.append(reg.Mf @ fcols[-1] / len(fcols))
            self.Vf = np.hstack(fcols[: k + 1])
        else:
            self.V = None

    def tail(self, s: flint.fmpq, col: int = 0) -> arb | None:
        """Upper bound on ``||tail(s)||_inf`` for column ``col``; ``None`` if the bound does not
        apply (``m s >= N + 2``)."""
        if s == 0:
            return arb(0)
        sa = arb(s).abs_upper()
        ms = self.reg.normM * sa
        q = ms / (self.N + 2)
        if not q < 1:
            return None
        nv = self.nv[col]
        if nv == 0:
            return arb(0)
        # proof: proofs/bounds.md#relu-taylor-tail
        return _up(nv * sa**self.N * (ms / (self.N + 1)) / (1 - q))

    def _powers(self, x: arb) -> list[arb]:
        p = [_ONE]
        for _ in range(self.N):
            p.append(p[-1] * x)
        return p

    def _point_powers(self, s: flint.fmpq) -> list[arb]:
        return self._powers(arb(s))

    def _interval_powers(self, lo: flint.fmpq, hi: flint.fmpq) -> list[arb]:
        # s >= 0, so s^k ranges over [lo^k, hi^k] (the union of two balls encloses the hull)
        a = self._point_powers(lo)
        b = self._point_powers(hi)
        return [x.union(y) for x, y in zip(a, b, strict=True)]

    def eval_points(self, pts: list[flint.fmpq], cols: list | None = None) -> arb_mat:
        """Polynomial part at the given times, (d+1) x len(pts) (points only, n == 1);
        ``cols``: their power lists if already computed."""
        if cols is None:
            cols = [self._point_powers(s) for s in pts]
        P = arb_mat([[cols[j][k] for j in range(len(pts))] for k in range(self.N + 1)])
        return self.V * P

    def eval_grid(self, us: list[flint.fmpq]) -> tuple[arb_mat, arb_mat]:
        """Polynomial part at the grid points and over the grid intervals."""
        pw = [self._point_powers(u) for u in us]
        ivs = [[x.union(y) for x, y in zip(a, b, strict=True)] for a, b in itertools.pairwise(pw)]
        Xv = self.eval_points(us, pw)
        PI = arb_mat([[ivs[j][k] for j in range(len(ivs))] for k in range(self.N + 1)])
        return Xv, self.V * PI

    def eval_intervals(self, ivs: list[tuple[flint.fmpq, flint.fmpq]]) -> arb_mat:
        """Polynomial part over time intervals, (d+1) x len(ivs) (points only)."""
        cols = [self._interval_powers(a, b) for a, b in ivs]
        P = arb_mat([[cols[j][k] for j in range(len(ivs))] for k in range(self.N + 1)])
        return self.V * P

    def state(self, s: flint.fmpq) -> arb_mat | None:
        """Enclosure of xt(s) for a point expansion, (d+1) x 1, or None if the tail fails."""
        T = self.tail(s)
        if T is None:
            return None
        x = self.eval_points([s]).entries()
        return arb_mat([[_ball(x[r], T)] for r in range(self.d)] + [[_ONE]])

    def plane_poly(self, h: int) -> list[arb]:
        """Coefficients of ghat_h(x(s)) (without tail)."""
        row = arb_mat([_rows(self.ap.Atil)[h]]) * self.V
        return row.entries()


def validate_points(
    ap: ArbPiece, reg: Region, ex: Expansion, b: flint.fmpq, m: int, R: arb | None = None
) -> tuple[int | None, list[int], list[flint.fmpq]]:
    """Certify ``sigma_h ghat_h(x(s)) >= 0`` for all planes h and all s in [0, b] on a grid of
    m subintervals, assuming it holds at s = 0 (proofs/bounds.md#relu-region-membership).
    Invariant planes (``ahat_h . f = 0`` identically) keep their sign and are skipped.
    ``R``: Euclidean radius around the expanded centre over [0, b] (#relu-lognorm).

    Rules on a subinterval I = [u, v] (the left end being known >= 0): sigma g' >= 0 on I; or
    sigma g' <= 0 on I and sigma g(v) >= 0; or sigma g(u) + |I| min(sigma g'(I), 0) >= 0.

    Returns ``(None, [], grid)`` on success, else ``(l, planes, grid)`` with the first failing
    subinterval l: the membership is certified on ``[0, grid[l]]``.
    """
    us = [b * flint.fmpq(i, m) for i in range(m + 1)]
    if ap.H == 0 or not ap.checked:
        return None, [], us
    T = [ex.tail(u) for u in us]
    if T[-1] is None:
        return 0, list(ap.checked), us
    signs = reg.signs
    if R is None or R == 0:
        rv = rd = [arb(0)] * ap.H
    else:
        rv = [_up(ap.a2[h] * R) for h in range(ap.H)]
        rd = None
    # coarse pass: planes whose sign is certified over the whole step need no grid
    whole = ap.Atil * ex.eval_intervals([(us[0], us[-1])])
    gw = whole.entries()
    todo = [
        h for h in ap.checked if not (_ball(gw[h] * signs[h], _up(ap.a1[h] * T[-1] + rv[h])) >= 0)
    ]
    if not todo:
        return None, [], us
    Xv, XI = ex.eval_grid(us)
    Gv = _rows(ap.Atil * Xv)
    Gd = _rows(reg.AM * XI)
    ra = {h: [_up(ap.a1[h] * t + rv[h]) for t in T] for h in todo}
    for i in range(m):
        w = arb(us[i + 1] - us[i])
        bad = []
        for h in todo:
            s = signs[h]
            # proof: proofs/bounds.md#relu-region-membership (rules 1-3)
            am1, am2 = reg.am_norms(h)
            rdh = _up(am2 * R) if rd is None else rd[h]
            dB = _ball(Gd[h][i] if s > 0 else -Gd[h][i], _up(am1 * T[i + 1] + rdh))
            if dB >= 0:
                continue
            gR = _ball(Gv[h][i + 1] if s > 0 else -Gv[h][i + 1], ra[h][i + 1])
            if dB <= 0 and gR >= 0:
                continue
            gL = _ball(Gv[h][i] if s > 0 else -Gv[h][i], ra[h][i])
            if gL + w * dB.min(_ZERO) >= 0:
                continue
            bad.append(h)
        if bad:
            return i, bad, us
    return None, [], us


@dataclass
class WindowResult:
    y: arb_mat | None  # (d+1) x 1 centre ball at the end of the window
    rho: arb  # Euclidean radius around it
    signs: tuple[int, ...] | None  # certified region at the end (None at the end of a piece)
    eps: arb  # Euclidean bound added for the switch
    planes: list[int]  # planes not strictly signed on the window box (J)
    straddling: list[int]  # planes not certified at the end (failure reason)


def window(
    ap: ArbPiece,
    reg: Region,
    ex: Expansion,
    lo: flint.fmpq,
    hi: flint.fmpq,
    end: bool,
    rho: arb | None = None,
) -> WindowResult:
    """Carry the trajectory across hyperplanes over ``[lo, hi]`` (proofs/bounds.md#relu-window).

    Precondition: the true trajectory equals the region's affine flow on ``[0, lo]`` (validated,
    or ``lo = 0``). With ``X`` enclosing the affine flow over ``[lo, hi]``, ``B = X + eps_hat``,
    J the planes not strictly signed on B and ``h = hi - lo``:
    ``|x(hi) - y(hi)|_2 <= e^{Lf h} h sum_{j in J} omega_j max_B |ghat_j| =: eps`` if
    ``eps < eps_hat``. The end state is ``y(hi) +/- eps``; unless ``end``, every plane must be
    strictly signed there (that sign vector is the next region). ``rho``: Euclidean radius
    around the expanded centre at s = 0 (proofs/bounds.md#relu-lognorm).
    """
    d = ap.d
    T = ex.tail(hi)
    if T is None:
        return WindowResult(None, arb(0), None, arb(0), [], list(range(ap.H)))
    Rmax, Rend = radii(reg, rho, hi)
    XW = ex.eval_intervals([(lo, hi)]).entries()
    XW = [_ball(XW[r], _up(T + Rmax)) for r in range(d)]
    Yr = ex.eval_points([hi]).entries()
    Yr = [_ball(Yr[r], T) for r in range(d)]
    hw = arb(hi - lo)
    growth = _up((ap.Lf * hw).exp() * hw)
    signs = reg.signs
    eps_hat = arb(0)
    eps = arb(0)
    J: list[int] = []
    for _ in range(4):
        B = arb_mat([[_ball(v, eps_hat)] for v in XW] + [[_ONE]])
        gB = ap.planes_at(B)
        # invariant planes keep the sign they had at lo (ghat is constant on trajectories)
        J = [h for h in ap.checked if not (gB[h] * signs[h] > 0)]
        if not J:
            eps = arb(0)
            break
        # proof: proofs/bounds.md#relu-window (eps = e^{Lf h} h sum omega_j max_B |g_j|)
        eps = _up(growth * sum((ap.omega[h] * _up(gB[h]) for h in J), arb(0)))
        if eps_hat > 0 and eps < eps_hat:
            break
        eps_hat = _up(2 * eps + arb(2) ** (-2 * ap.prec))
    else:
        return WindowResult(None, arb(0), None, eps, J, J)
    y = arb_mat([[v] for v in Yr] + [[_ONE]])
    rho_new = _up(Rend + eps)
    if end:
        return WindowResult(y, rho_new, None, eps, J, [])
    g = ap.planes_at(arb_mat([[_ball(v, rho_new)] for v in Yr] + [[_ONE]]))
    new = []
    straddling = []
    for h, gh in enumerate(g):
        if ap.invariant[h]:
            new.append(signs[h])
        elif gh > 0:
            new.append(1)
        elif gh < 0:
            new.append(-1)
        else:
            straddling.append(h)
            new.append(0)
    if straddling:
        return WindowResult(None, arb(0), None, eps, J, straddling)
    return WindowResult(y, rho_new, tuple(new), eps, J, [])


def radii(reg: Region, rho: arb | None, s: flint.fmpq) -> tuple[arb, arb]:
    """Euclidean radius around the centre's affine flow: its maximum over ``[0, s]`` and its
    value at ``s``: ``rho e^{s max(mu_2, 0)}`` and ``rho e^{s mu_2}``
    (proof: proofs/bounds.md#relu-lognorm)."""
    if rho is None or rho == 0:
        return arb(0), arb(0)
    sa = arb(s)
    # while the radius is negligible the cheap growth factor e^{s |M|_F} (>= e^{s mu_2}) is
    # used; mu_2 (a few matrix products) only when it matters for tightness
    crude = _up(rho * (sa * reg.normF).exp())
    if crude < arb(2) ** (24 - reg.prec):
        return crude, crude
    mu = reg.mu2
    return _up(rho * (sa * mu.max(arb(0))).exp()), _up(rho * (sa * mu).exp())


def recentre(y: arb_mat, rho: arb | None) -> tuple[arb_mat, arb]:
    """Move the radii of the ball column ``y`` into the Euclidean radius: an exact centre
    (the ball midpoints) and ``rho + |rad(y)|_2``, so that the next expansion starts from a
    point and ball radii are never wrapped through Taylor sums (proofs/bounds.md#relu-lognorm)."""
    e = y.entries()
    rad2 = sum((v.rad() ** 2 for v in e[:-1]), arb(0))
    r = arb(0) if rho is None else rho
    if rad2 == 0:
        return y, r
    c = arb_mat([[v.mid()] for v in e[:-1]] + [[_ONE]])
    return c, _up(r + rad2.sqrt())
