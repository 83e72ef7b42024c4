"""Certified flows of smooth neural ODE fields ``x' = W s(A x + b)`` (s = tanh or sigmoid)
with piecewise-constant parameters: a validated Taylor method vectorised over points.

Each initial set is a Euclidean ball ``B(c, r)`` (a point has r = 0; a box is replaced by its
circumscribed ball). A step of length h maps it to a ball ``B(c', r')`` with
``r' = e^{l h} r + rho``: ``rho`` encloses the Taylor step of the centre (order K, Lagrange
remainder over a Picard a priori box) and ``l`` bounds the logarithmic norm of the Jacobian over
that box (proofs/bounds.md#taylor-step, #picard, #lognorm). Widths therefore grow like the true
dynamics (``e^{int mu}``), not like the interval extension of the field.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from flint import fmpq

from certified.arith import Interval
from certified.arith import interval as iv
from certified.arith.ball import check_precision
from certified.arith.exact import fmpq_to_float, to_fmpq, to_fmpq_array
from certified.errors import InputError, ShapeError
from certified.flow import _smooth_kernels as SK  # noqa: N812
from certified.flow.result import FlowEnclosure, FlowStatus

__all__ = ["smooth_flow"]

_ACTIVATIONS = {"tanh": SK.TANH, "sigmoid": SK.SIGMOID}


def _param(x: Any, shape: tuple[int, ...], field: str) -> tuple[np.ndarray, np.ndarray]:
    """Tightest float64 enclosure of exact parameters (floats are exact doubles)."""
    if isinstance(x, Interval):
        box = x
    else:
        a = np.asarray(x)
        box = Interval.from_exact(a.tolist()) if a.dtype == object else Interval(a)
    if box.shape != shape:
        raise ShapeError(f"{field}: expected shape {shape}, got {box.shape}")
    return np.ascontiguousarray(box.lo), np.ascontiguousarray(box.hi)


def _initial_balls(X0: Any, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Centres (N, d) and Euclidean radii (N,) of balls containing the initial sets."""
    if isinstance(X0, Interval):
        box = X0
    else:
        a = np.asarray(X0, dtype=object) if not isinstance(X0, np.ndarray) else X0
        box = Interval.from_exact(a.tolist()) if a.dtype == object else Interval(a)
    if box.ndim != 2 or box.shape[1] != d:
        raise ShapeError(
            f"X0: expected shape (N, {d}) for a field in dimension {d}, got {box.shape}"
        )
    if box.shape[0] == 0:
        raise ShapeError("X0: no initial points")
    c = box.mid()
    half = Interval(box.rad_upper())  # upper bounds of the half-widths about c
    ss = iv.isum(half * half, axis=1)  # sum of squares; its lower bound may dip below 0
    r = iv.sqrt(Interval(np.maximum(ss.lo, 0.0), ss.hi)).hi
    return np.ascontiguousarray(c), np.ascontiguousarray(r)


def smooth_flow(
    W_list: Sequence[Any],
    A_list: Sequence[Any],
    b_list: Sequence[Any],
    durations: Sequence[Any],
    X0: Any,
    *,
    activation: str = "tanh",
    order: int = 20,
    max_step: Any = "1/32",
    max_halvings: int = 6,
    prec: int = 53,
) -> FlowEnclosure:
    """Certified enclosures of the time-T flow map, T = sum of durations.

    Parameters
    ----------
    W_list, A_list, b_list : per piece, W (d, p), A (p, d), b (p,): float arrays (exact doubles),
        object arrays of exact numbers, or Intervals (then every parameter in the interval).
    durations : per piece, exact positive numbers (int, str, fmpq, float as its double).
    X0 : (N, d) points (floats or exact numbers) or an Interval of boxes.
    activation : "tanh" or "sigmoid".
    order : Taylor order K (tightness and cost only).
    max_step : largest step (exact number); halved up to ``max_halvings`` times on failure.
    prec : working precision in bits. 53 runs the compiled float64 interval kernels
        (vectorised); any other value runs the same method in arb ball arithmetic at that
        precision, one point at a time (slower; for tight enclosures or as a cross-check).

    Returns
    -------
    FlowEnclosure with times ``(T,)``, enclosures of shape (1, N, d), and hints: the number of
    steps per piece and per-point upper bounds ``lipschitz`` on the Lipschitz constant of the
    flow map on each initial ball (Euclidean norm; exp of the integrated log-norm bound).

    Guarantee: if the status is SUCCESS, ``enclosures[0, i]`` contains ``Phi_T(x)`` for every
    x in the i-th initial set.
    """
    if activation not in _ACTIVATIONS:
        raise InputError(f"activation: {activation!r} is not one of {sorted(_ACTIVATIONS)}")
    n_pieces = len(durations)
    if n_pieces == 0 or not (len(W_list) == len(A_list) == len(b_list) == n_pieces):
        raise ShapeError("schedule: need the same positive number of W, A, b and durations")
    if not isinstance(order, int) or not 2 <= order <= 60:
        raise InputError(f"order: expected an integer in [2, 60], got {order!r}")
    d = np.shape(W_list[0])[0] if not isinstance(W_list[0], Interval) else W_list[0].shape[0]
    act = _ACTIVATIONS[activation]
    check_precision(prec)
    if prec != 53:
        return _smooth_flow_arb(
            W_list, A_list, b_list, durations, X0, activation, order, max_step, max_halvings, prec
        )
    c, r = _initial_balls(X0, d)
    n = c.shape[0]
    log_lip = np.zeros(n)
    steps_used = []
    chains = []
    hmax = to_fmpq(max_step, field="max_step")
    if hmax <= 0:
        raise InputError("max_step: must be positive")
    total = fmpq(0)
    for j in range(n_pieces):
        tau = to_fmpq(durations[j], field=f"durations[{j}]")
        if tau <= 0:
            raise InputError(f"durations[{j}]: {tau} is not positive; durations must be > 0")
        total += tau
        p = np.shape(b_list[j])[0] if not isinstance(b_list[j], Interval) else b_list[j].shape[0]
        Wl, Wh = _param(W_list[j], (d, p), f"pieces[{j}].W")
        Al, Ah = _param(A_list[j], (p, d), f"pieces[{j}].A")
        bl, bh = _param(b_list[j], (p,), f"pieces[{j}].b")
        m = max(1, int((tau / hmax).ceil()))
        for _attempt in range(max_halvings + 1):
            result = _run_piece(c, r, tau, m, Wl, Wh, Al, Ah, bl, bh, act, order)
            if result is not None:
                break
            m *= 2
        else:
            return _failure(
                n,
                d,
                str(total),
                f"piece {j}: the a priori enclosure (Picard inclusion) failed even with "
                f"{m // 2} steps; lower max_step or order, or split the initial sets",
            )
        c, r, ell_h, chain = result
        log_lip += ell_h
        steps_used.append(m)
        chains.append(chain)
    R = np.broadcast_to(r[:, None], c.shape)
    enc = Interval(c) + Interval(-R, R)
    lipschitz = iv.exp(Interval(log_lip)).hi  # upper bounds of exp(sum l h)
    return _success(total, enc, order, 53, steps_used, lipschitz, chains)


def _success(total, enc, order, prec, steps_used, lipschitz, chains) -> FlowEnclosure:
    n, d = enc.shape
    return FlowEnclosure(
        times=(str(total),),
        enclosures=enc.reshape(1, n, d),
        status=FlowStatus.SUCCESS,
        hints={
            "method": "taylor-lognorm",
            "order": order,
            "precision": prec,
            "steps": steps_used,
            "lipschitz": lipschitz,
            # per piece: (centres (m+1, N, d), radii (m+1, N), a priori boxes (m, N, d, 2))
            "chains": chains,
        },
    )


def _failure(n: int, d: int, total: str, message: str) -> FlowEnclosure:
    z = np.zeros((1, n, d))
    return FlowEnclosure((total,), Interval(z), FlowStatus.STEP_REJECTED, message)


def _run_piece(c, r, tau, m, Wl, Wh, Al, Ah, bl, bh, act, order):
    """m equal steps of length tau/m for all points; None if a Picard inclusion fails.

    Returns the new centres and radii, the sums of l h per point, and the chain a certificate
    checker replays: centres (m+1, N, d), radii (m+1, N) and a priori boxes (m, N, d, 2)."""
    h = tau / m
    hl = fmpq_to_float(h, "down")
    hh = fmpq_to_float(h, "up")
    n, d = c.shape
    ell_h = np.zeros(n)
    boxes = np.empty((m, n, d, 2))
    centres = np.empty((m + 1, n, d))
    radii = np.empty((m + 1, n))
    centres[0], radii[0] = c, r
    for step in range(m):
        new_c = np.empty_like(c)
        new_r = np.empty_like(r)
        ells = np.empty(n)
        ok = np.zeros(n, dtype=np.int64)
        SK.taylor_step(
            c,
            r,
            hl,
            hh,
            Wl,
            Wh,
            Al,
            Ah,
            bl,
            bh,
            act,
            order,
            0.1,
            new_c,
            new_r,
            ells,
            ok,
            boxes[step],
        )
        if not np.all(ok == 1):
            return None
        # sum of l h, rounded up (for the Lipschitz bound)
        hstep = np.where(ells >= 0, hh, hl)
        ell_h = (Interval(ell_h) + Interval(ells) * Interval(hstep)).hi
        c, r = new_c, new_r
        centres[step + 1], radii[step + 1] = c, r
    return c, r, ell_h, (centres, radii, boxes)


def _smooth_flow_arb(
    W_list, A_list, b_list, durations, X0, activation, order, max_step, max_halvings, prec
) -> FlowEnclosure:
    """smooth_flow at ``prec`` bits in arb (see certified.flow._smooth_arb)."""
    from flint import arb

    from certified.arith.ball import mid_rad
    from certified.flow._smooth_arb import arb_smooth_piece

    if isinstance(X0, Interval):
        lo, hi = to_fmpq_array(X0.lo, "X0"), to_fmpq_array(X0.hi, "X0")
    else:
        lo = hi = to_fmpq_array(np.asarray(X0, dtype=object), "X0")
    if lo.ndim != 2 or lo.shape[0] == 0:
        raise ShapeError(f"X0: expected a non-empty (N, d) array, got shape {lo.shape}")
    n, d = lo.shape
    centres = [[(lo[i, j] + hi[i, j]) / 2 for j in range(d)] for i in range(n)]
    radii = []
    for i in range(n):
        r2 = sum(((hi[i, j] - lo[i, j]) / 2) ** 2 for j in range(d))
        radii.append(mid_rad(arb(r2).sqrt().upper())[0] if r2 else fmpq(0))
    hmax = to_fmpq(max_step, field="max_step")
    chains, steps_used, log_lip = [], [], [fmpq(0)] * n
    total = fmpq(0)
    for j, tau_raw in enumerate(durations):
        tau = to_fmpq(tau_raw, field=f"durations[{j}]")
        if tau <= 0:
            raise InputError(f"durations[{j}]: {tau} is not positive; durations must be > 0")
        total += tau
        W = to_fmpq_array(W_list[j], f"pieces[{j}].W")
        A = to_fmpq_array(A_list[j], f"pieces[{j}].A")
        b = to_fmpq_array(b_list[j], f"pieces[{j}].b")
        p = b.shape[0]
        if W.shape != (d, p) or A.shape != (p, d):
            raise ShapeError(f"pieces[{j}]: W, A, b shapes {W.shape}, {A.shape}, {b.shape}")
        m = max(1, int((tau / hmax).ceil()))
        for _ in range(max_halvings + 1):
            res = arb_smooth_piece(
                centres,
                radii,
                W.tolist(),
                A.tolist(),
                b.tolist(),
                activation,
                tau,
                m,
                order,
                prec,
            )
            if res is not None:
                break
            m *= 2
        else:
            return _failure(n, d, str(total), f"piece {j}: the Picard inclusion failed")
        centres, radii, ells, chain = res
        log_lip = [a + mid_rad(e)[0] for a, e in zip(log_lip, ells, strict=True)]
        steps_used.append(m)
        chains.append(_layout(chain, m, n, d))
    lo_q = np.array([[centres[i][k] - radii[i] for k in range(d)] for i in range(n)], dtype=object)
    hi_q = np.array([[centres[i][k] + radii[i] for k in range(d)] for i in range(n)], dtype=object)
    enc = Interval.from_exact(lo_q.tolist(), hi_q.tolist())
    lipschitz = iv.exp(Interval.from_exact([str(v) for v in log_lip])).hi
    return _success(total, enc, order, prec, steps_used, lipschitz, chains)


def _layout(chain, m: int, n: int, d: int):
    """Per-point chains -> (centres (m+1, N, d), radii (m+1, N), boxes (m, N, d, 2))."""
    centres = np.empty((m + 1, n, d), dtype=object)
    radii = np.empty((m + 1, n), dtype=object)
    boxes = np.empty((m, n, d, 2), dtype=object)
    for q, (cs, rs, bs) in enumerate(chain):
        for k in range(m + 1):
            radii[k, q] = rs[k]
            for j in range(d):
                centres[k, q, j] = cs[k][j]
        for k in range(m):
            for j in range(d):
                boxes[k, q, j, 0], boxes[k, q, j, 1] = bs[k][j]
    return centres, radii, boxes
