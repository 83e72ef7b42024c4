"""Certified flow of single points through ReLU pieces, region by region.

The stepping loop (CAPD-style: heuristics propose, a rigorous test decides):

1. at the start of a piece, the region is read off the certified signs of ``ghat_h(x)``; a
   point exactly on a hyperplane takes the side given by the certified sign of
   ``ahat_h . f(x)`` (the field is continuous, so this sign does not depend on the side); a
   point whose ball straddles a hyperplane, or an exact tangency, goes through a window
   (step 3) from time 0;
2. a Taylor expansion of the region's affine flow with a proved tail; a float64 sweep of the
   hyperplane polynomials predicts the first exit; without one, membership is validated on
   the whole step (proofs/bounds.md#relu-region-membership);
3. with a predicted exit at ``s*``, a Newton refinement in ball arithmetic gives a bracket
   ``[lo, hi]``; membership is validated on ``[0, lo]`` and the window lemma
   (proofs/bounds.md#relu-window) carries the point across ``[lo, hi]`` with a second-order
   error; the next region is the certified sign vector at ``hi``. Several hyperplanes crossed in
   the same window are handled by the same lemma; a window that cannot certify the next side
   is widened, and after a few attempts the point is rejected (tangency or grazing contact);
4. failed validations fall back to the certified prefix of the step, or to shorter steps.

A state is a ball column plus a Euclidean radius (proofs/bounds.md#relu-lognorm): each
expansion starts from the exact centre, and the radius grows with the logarithmic norm of the
region's matrix, so long schedules do not suffer from wrapping.

Nothing here guesses: every state is an enclosure, every region change is certified.
"""

from __future__ import annotations

import math

import flint
import numpy as np
from flint import arb, arb_mat

from certified.arith.exact import fmpq_to_str
from certified.flow.relu._region import (
    ArbPiece,
    Expansion,
    Region,
    _ball,
    dyadic_mid,
    radii,
    recentre,
    validate_points,
    window,
)

__all__ = ["Rejected", "flow_point_piece", "point_ball"]

GRID = 8  # subintervals per validated step
MAX_ITERATIONS = 4000  # steps per point and piece before giving up
SAMPLES = 64  # float64 samples per step for predicting the first exit
WINDOW_ATTEMPTS = 6


class Rejected(Exception):  # noqa: N818 - internal signal, turned into a status
    """A point whose flow through a piece cannot be certified; the message says why."""


def point_ball(x: np.ndarray) -> arb_mat:
    """(d+1) x 1 ball column ``(x, 1)`` of an exact point (radius 0 for dyadic entries)."""
    return arb_mat([[arb(v)] for v in x] + [[arb(1)]])


def _pow2_at_least(x: float) -> flint.fmpq:
    if not x > 0 or not math.isfinite(x):
        x = 2.0**-1000 if not x > 0 else 2.0**1000
    e = math.ceil(math.log2(x))
    return flint.fmpq(2) ** e if e >= 0 else flint.fmpq(1, 2**-e)


def inflate(y: arb_mat, rho: arb | None) -> arb_mat:
    """The ball column ``y`` widened coordinate-wise by the Euclidean radius ``rho``."""
    if rho is None or rho == 0:
        return y
    e = y.entries()
    return arb_mat([[_ball(v, rho)] for v in e[:-1]] + [[arb(1)]])


def _neurons(ap: ArbPiece, planes: list[int]) -> list[int]:
    return sorted(i for h in planes for i in ap.piece.neurons_of_plane[h])


def initial_signs(
    ap: ArbPiece, y: arb_mat, x_exact: np.ndarray | None = None, rho: arb | None = None
) -> tuple[list[int], list[int]]:
    """Signs of the planes at the start point, and the planes whose side is not certified
    (``pending``: a straddling ball, or an inexact contact). For an exact point the plane
    values and the field are computed exactly: a plane through the point takes the side of the
    exact sign of ``ahat . f(x)`` (continuous across the plane); when that is 0 (tangency) or
    the plane is invariant, a side is chosen and the region validation decides."""
    piece = ap.piece
    if x_exact is not None:
        g = piece.planes_exact(x_exact)
        f = None
        signs = []
        for h, gh in enumerate(g):
            if gh != 0:
                signs.append(1 if gh > 0 else -1)
                continue
            if f is None:
                f = piece.field_exact(x_exact)
            dh = sum((a * v for a, v in zip(piece.planes_a[h], f, strict=True)), flint.fmpq(0))
            signs.append(-1 if dh < 0 else 1)
        return signs, []
    y = inflate(y, rho)
    g = ap.planes_at(y)
    signs = []
    pending: list[int] = []
    fb = None
    for h, gh in enumerate(g):
        if gh > 0:
            signs.append(1)
            continue
        if gh < 0:
            signs.append(-1)
            continue
        if ap.invariant[h]:
            # ghat_h is constant along trajectories: an exact 0 stays 0 (either side is
            # right); an unknown sign stays unknown and the window lemma does not apply
            if not gh.is_zero():
                raise Rejected(
                    f"piece {piece.index}: the point lies within the enclosure radius of the "
                    f"invariant hyperplane of neurons {_neurons(ap, [h])}; its side cannot be "
                    "certified; raise prec"
                )
            signs.append(1)
            continue
        if fb is None:
            fb = ap.field(y)
        dh = sum((arb(v) * fi for v, fi in zip(piece.planes_a[h], fb, strict=True)), arb(0))
        side = 1 if dh > 0 else (-1 if dh < 0 else 0)
        signs.append(side if side else 1)
        # an exact zero with a certified direction is already "known >= 0" on that side
        if not (gh.is_zero() and side):
            pending.append(h)
    return signs, pending


def _first_exit(ap: ArbPiece, reg: Region, ex: Expansion, h: flint.fmpq):
    """Float64 prediction (heuristic) of the first time in (0, h] at which some
    ``sigma_h ghat_h`` becomes negative: ``(s, plane)`` or None."""
    if ap.H == 0:
        return None
    G = ap.Atil_f @ ex.Vf * np.array(reg.signs, dtype=float)[:, None]
    G[[h for h in range(ap.H) if ap.invariant[h]], :] = 1.0  # never exit through those
    hf = float(h)
    s = hf * np.arange(SAMPLES + 1) / SAMPLES
    vals = np.zeros((ap.H, SAMPLES + 1))
    for k in range(G.shape[1] - 1, -1, -1):
        vals = vals * s[None, :] + G[:, k : k + 1]
    neg = vals[:, 1:] < 0
    rows = np.nonzero(neg.any(axis=1))[0]
    if not len(rows):
        return None
    first = np.argmax(neg[rows], axis=1)
    i = int(first.min()) + 1
    best = None
    # only the planes with the earliest negative sample can give the earliest exit
    for r in rows[first == i - 1]:
        root = _float_root(list(G[r]), s[i - 1], s[i])
        if best is None or root < best[0]:
            best = (root, int(r))
    return best


def _float_root(c: list[float], a: float, b: float) -> float:
    """A root of the polynomial ``sum c_k s^k`` in [a, b] where it goes from >= 0 to < 0
    (safeguarded Newton; heuristic)."""
    x = 0.5 * (a + b)
    for _ in range(60):
        p = dp = 0.0
        for ck in reversed(c):
            dp = dp * x + p
            p = p * x + ck
        if p < 0:
            b = x
        else:
            a = x
        x_new = x - p / dp if dp != 0 else 0.5 * (a + b)
        if not a < x_new < b:
            x_new = 0.5 * (a + b)
        if abs(x_new - x) <= 1e-16 * max(abs(x), 1e-300) or b - a <= 1e-16 * b:
            return x_new
        x = x_new
    return x


def _horner(coeffs: list[arb], t: arb) -> tuple[arb, arb]:
    p = arb(0)
    dp = arb(0)
    for c in reversed(coeffs):
        dp = dp * t + p
        p = p * t + c
    return p, dp


def _bracket(ap: ArbPiece, ex: Expansion, plane: int, s0: float, h: flint.fmpq, rho: arb):
    """Newton refinement (heuristic, in ball midpoints) of the predicted exit time, and a
    half-width ``eta`` a few times the uncertainty of the crossing time."""
    coeffs = ex.plane_poly(plane)
    t = flint.fmpq(0) if s0 <= 0 else dyadic_mid(arb(s0))
    p = dp = arb(0)
    for _ in range(8):
        p, dp = _horner(coeffs, arb(t))
        if dp.mid() == 0:
            break
        t_new = dyadic_mid(arb(t) - p.mid() / dp.mid())
        if t_new < 0:
            t_new = flint.fmpq(0)
        done = abs(float(t_new - t)) <= 2.0 ** -(ap.prec + 4) * (float(t) + 2.0**-60)
        t = t_new
        if done:
            break
    p, dp = _horner(coeffs, arb(t))
    T = ex.tail(t)
    rho = float(p.rad()) + float(ap.a2[plane] * rho) * 4
    rho += float(ap.a1[plane] * T) if T is not None else math.inf
    slope = abs(float(dp.mid()))
    floor = 2.0 ** -(ap.prec - 8) * (float(t) + 2.0**-20 * float(h))
    eta = 4 * rho / slope if slope > 0 else math.inf
    return t, _pow2_at_least(max(eta, floor) if math.isfinite(eta) else float(h) / 64)


class _Trace:
    """Hint recorder for one point and one piece (times local to the piece, exact strings)."""

    def __init__(self, ap: ArbPiece) -> None:
        self.ap = ap
        self.segments: list[dict] = []
        self.crossings: list[dict] = []

    def region(self, signs, t) -> None:
        self.segments.append(
            {
                "region": self.ap.piece.region_string(tuple(signs)),
                "start": fmpq_to_str(t),
                "steps": [],
            }
        )

    def step(self, t0, t1) -> None:
        self.segments[-1]["steps"].append([fmpq_to_str(t0), fmpq_to_str(t1)])

    def crossing(self, planes, lo, hi, eps) -> None:
        self.crossings.append(
            {
                "neurons": _neurons(self.ap, planes),
                "window": [fmpq_to_str(lo), fmpq_to_str(hi)],
                "eps": fmpq_to_str(dyadic_mid(eps.abs_upper())),
            }
        )

    def close(self, t) -> dict:
        for seg, nxt in zip(self.segments, self.segments[1:] + [None], strict=True):
            seg["end"] = fmpq_to_str(t) if nxt is None else nxt["start"]
        return {"kind": "regions", "segments": self.segments, "crossings": self.crossings}


def _start_window(ap, y, rho, signs, pending, tau, trace):
    """Leave an uncertain start (straddling ball or exact tangency) through a window from t=0."""
    reg = ap.region(tuple(signs))
    h = tau if reg.hmax is None or reg.hmax > tau else reg.hmax
    y, rho = recentre(y, rho)
    ex = Expansion(ap, reg, y, h)
    g = ap.planes_at(inflate(y, rho))
    f = ap.field(inflate(y, rho))
    r = None
    slope_lo = None
    for hp in pending:
        dh = sum((arb(v) * fi for v, fi in zip(ap.piece.planes_a[hp], f, strict=True)), arb(0))
        if not dh.contains(0):
            s = float(dh.abs_lower())
            slope_lo = s if slope_lo is None else min(slope_lo, s)
    if slope_lo:
        r = _pow2_at_least(4 * max(float(g[hp].abs_upper()) for hp in pending) / slope_lo)
    else:
        r = _pow2_at_least(2.0 ** -(ap.prec / 2) * float(h))
    for _ in range(WINDOW_ATTEMPTS + 2):
        hi = min(r, h)
        end = hi >= tau
        w = window(ap, reg, ex, flint.fmpq(0), hi, end, rho)
        if w.y is not None:
            trace.crossing(w.planes, flint.fmpq(0), hi, w.eps)
            return w.y, w.rho, (w.signs if not end else tuple(signs)), hi
        if hi >= h:
            break
        r *= 16
    raise Rejected(
        f"piece {ap.piece.index}: the side of the hyperplane of neurons "
        f"{_neurons(ap, pending)} at the start of the piece cannot be certified (the point lies "
        "on it or within the enclosure radius, and the field is tangent or the contact is "
        "not resolved); perturb the point or raise prec"
    )


def flow_point_piece(
    ap: ArbPiece, y: arb_mat, x_exact: np.ndarray | None = None, rho: arb | None = None
) -> tuple[arb_mat, arb, dict]:
    """Enclosure of ``Phi_tau(x)`` for every x in ``y + B_2(rho)`` (``y`` a ball column
    (d+1) x 1, ``rho`` a Euclidean radius), in the same form, and its hints. ``x_exact``: the
    exact point when ``y`` is one (enables exact decisions at the start).

    Raises Rejected when a contact with a hyperplane cannot be certified.
    """
    rho = arb(0) if rho is None else rho
    piece = ap.piece
    tau = piece.tau
    t = flint.fmpq(0)
    trace = _Trace(ap)
    if x_exact is not None and any(v == 0 for v in piece.planes_exact(x_exact)):
        if all(v == 0 for v in piece.field_exact(x_exact)):
            # an equilibrium: the constant solution is the solution (uniqueness)
            # proof: proofs/bounds.md#relu-region-membership
            return y, rho, {"kind": "equilibrium"}
    signs, pending = initial_signs(ap, y, x_exact, rho)
    trace.region(signs, t)
    if pending:
        y, rho, new_signs, t = _start_window(ap, y, rho, signs, pending, tau, trace)
        if t < tau and tuple(new_signs) != tuple(signs):
            signs = list(new_signs)
            trace.region(signs, t)
    signs = tuple(signs)
    cap = None
    for _ in range(MAX_ITERATIONS):
        if t >= tau:
            return y, rho, trace.close(tau)
        y, rho = recentre(y, rho)
        reg = ap.region(signs)
        rem = tau - t
        h = rem
        if reg.hmax is not None and reg.hmax < h:
            h = reg.hmax
        if cap is not None and cap < h:
            h = cap
        ex = Expansion(ap, reg, y, h)
        pred = _first_exit(ap, reg, ex, h)
        fail = None
        if pred is None:
            lf, bad, us = validate_points(ap, reg, ex, h, GRID, radii(reg, rho, h)[0])
            if lf is None:
                y_new = ex.state(h)
                if y_new is not None:
                    trace.step(t, t + h)
                    y, rho, t = y_new, radii(reg, rho, h)[1], t + h
                    cap = None if cap is None else 2 * cap
                    continue
                lf, bad = 0, []
            fail = (lf, bad, us)
        else:
            s0, plane = pred
            ts, eta = _bracket(ap, ex, plane, s0, h, rho)
            crossed = False
            for _attempt in range(WINDOW_ATTEMPTS):
                lo = ts - eta if ts > eta else flint.fmpq(0)
                hi = ts + eta
                end = hi >= rem
                if end:
                    hi = rem
                if lo > 0:
                    lf, bad, us = validate_points(ap, reg, ex, lo, GRID, radii(reg, rho, lo)[0])
                    if lf is not None:
                        fail = (lf, bad, us)
                        break
                w = window(ap, reg, ex, lo, hi, end, rho)
                if w.y is not None:
                    if lo > 0:
                        trace.step(t, t + lo)
                    trace.crossing(w.planes, t + lo, t + hi, w.eps)
                    y, rho, t = w.y, w.rho, t + hi
                    if not end and w.signs != signs:
                        signs = w.signs
                        trace.region(signs, t)
                    crossed = True
                    cap = None
                    break
                eta *= 8
            if crossed:
                continue
            if fail is None:
                fail = (0, [plane], [flint.fmpq(0)])
        lf, bad, us = fail
        if lf > 0:
            y_new = ex.state(us[lf])
            if y_new is not None:
                trace.step(t, t + us[lf])
                y, rho, t = y_new, radii(reg, rho, us[lf])[1], t + us[lf]
                cap = h / 2
                continue
        cap = h / 4
        if cap < tau * flint.fmpq(1, 2**80):
            planes = bad or list(range(ap.H))
            raise Rejected(
                f"piece {piece.index}: contact with the hyperplane of neurons "
                f"{_neurons(ap, planes)} near local time t ~ {float(t):.17g} cannot be "
                "certified (tangency, grazing or simultaneous switching below the working "
                "precision); perturb the data or raise prec"
            )
    raise Rejected(
        f"piece {piece.index}: more than {MAX_ITERATIONS} steps; the trajectory switches too "
        "often at this precision; raise prec or shorten the piece"
    )
