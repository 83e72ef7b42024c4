"""A float64 Taylor integrator without enclosures: the same steps and the same coefficient
kernel as the certified method, but only the Taylor polynomial at the current points (no a
priori box, no remainder, no variational equation, no Lohner sets). The benchmarks' baseline
("the float64 evaluation of the same Taylor steps") and a sampler of trajectories.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from certified.arith.exact import fmpq_to_float
from certified.fields.field import PiecewiseField

__all__ = ["float_taylor_flow", "predict_steps"]


def float_taylor_flow(
    problem: PiecewiseField, X0: Any, steps: list[list[Any]], order: int = 20, save: bool = False
) -> np.ndarray:
    """Phi_T(x) approximately for points X0 (N, d), stepping with ``steps`` (per piece, the
    step lengths of a certified run) at Taylor order ``order``; with ``save``, the states after
    every step, shape (steps + 1, N, d).

    Guarantee: none (heuristic).
    """
    from certified.arith.taylor import compile_tape, jets_float64

    tape = compile_tape(problem.field.expression)
    x = np.ascontiguousarray(np.asarray(X0, dtype=float))
    out = [x.copy()] if save else None
    for piece, hs in zip(problem.pieces, steps, strict=True):
        p = np.array([fmpq_to_float(v, "nearest") for v in piece.values], dtype=float)
        for h in hs:
            hf = fmpq_to_float(h, "nearest")
            lo, hi, _ = jets_float64(tape, p, p, x, x, order=order)
            coef = 0.5 * (lo[..., 0] + hi[..., 0])
            y = coef[order]
            for k in range(order - 1, -1, -1):
                y = y * hf + coef[k]
            x = np.ascontiguousarray(y)
            if save:
                out.append(x.copy())
    return np.stack(out) if save else x


def predict_steps(
    problem: PiecewiseField, X0: Any, saves: list, order: int = 24, jacobian_order: int = 8,
    tol: float = 2.0**-52, watch: int = 16, share: float = 0.03, low: int = 6,
) -> dict:  # fmt: skip
    """Steps and variational orders of the certified method for the points X0 (N, d), chosen in
    float64 without enclosures: the step policy of ``lohner._StepControl`` (the order-K
    coefficients at the points propose h, the order-K coefficient over the step's Euler box
    shortens it) on the ``watch`` points whose order-``low`` coefficients ask for the shortest
    steps, all points advanced by their order-``low`` Taylor polynomials; the variational
    order from ``(L h)^k / k! <= share h / T`` with L = |Df|_inf over those boxes
    (``lohner._variational_order``). Order 24 and share 0.03 (the engine: 20 and 0.01): on
    issue 18's tanh instance 52 steps of mean variational order 3.9 instead of 66 of 4.0, the
    replay ~25% cheaper, widths 1.16e-12 instead of 1.03e-12 (measured, seed 0).
    ``saves``: the exact times the steps must end at. Returns the hints of a taylor-lohner
    result (steps, order, jacobian_order, jacobian_orders) for the one-pass writer of
    ``certified flow``, whose single replay decides everything.

    Guarantee: none (heuristic: a step too long makes the replay fail or widen, never wrong).
    """
    import flint

    from certified.flow.taylor.lohner import _dyadic_floor, _Jets, _step_size, _variational_order

    jets, K, m_max, low = _Jets(problem), order, jacobian_order, min(order, low)
    x = np.ascontiguousarray(np.asarray(X0, dtype=float))
    n, d = x.shape
    k_watch = min(n, watch)
    eye = np.ascontiguousarray(np.broadcast_to(np.eye(d), (k_watch, d, d)))
    total = float(problem.total_time)
    t, steps, orders, ratio, last = flint.fmpq(0), [], [], 1.0, None
    for j, piece in enumerate(problem.pieces):
        end, hs, ms = t + piece.duration, [], []
        while t < end:
            h = min([end, *(s for s in saves if s > t)]) - t
            lo, hi, _ = jets(j, x, x, low)
            c10 = 0.5 * (lo[..., 0] + hi[..., 0])
            scale = np.maximum(1.0, np.max(np.abs(x), axis=1))
            a = np.maximum(np.max(np.abs(c10[low]), axis=1), 1e-300)
            w_idx = np.argsort((tol * scale / a) ** (1.0 / low), kind="stable")[:k_watch]
            xw = np.ascontiguousarray(x[w_idx])
            lo, hi, _ = jets(j, xw, xw, K)
            coef = 0.5 * (lo[..., 0] + hi[..., 0])
            raw = _step_size(coef, xw, K, tol)
            guess = raw * ratio if last is None else min(raw * ratio, 2 * last)
            if np.isfinite(guess) and 0 < guess < float(h):
                h = _dyadic_floor(guess)
            hf = float(h)
            T0, T1 = xw, xw + hf * coef[1]  # the Euler box of the step, widened by a quarter
            w = np.max(np.abs(T1 - T0), axis=1, keepdims=True) * 0.25 + 1e-12 * (1 + np.abs(xw))
            Bl = np.ascontiguousarray(np.minimum(T0, T1) - w)
            Bh = np.ascontiguousarray(np.maximum(T0, T1) + w)
            rlo, rhi, _ = jets(j, Bl, Bh, K)
            big = np.max(np.maximum(np.abs(rlo[K, :, :, 0]), np.abs(rhi[K, :, :, 0])), axis=1)
            with np.errstate(divide="ignore", invalid="ignore"):
                allowed = float(np.min((tol * scale[w_idx] / big) ** (1.0 / K)))
            if np.isfinite(allowed) and allowed < hf:
                h2 = _dyadic_floor(0.95 * allowed)
                ratio, h, hf = ratio * float(h2) / hf, h2, float(h2)
            elif np.isfinite(allowed) and np.isfinite(raw) and raw > 0:
                ratio = min(1.0, 0.9 * allowed / raw)
            dlo, dhi, _ = jets(j, Bl, Bh, 1, eye, eye)
            L = np.sum(np.maximum(np.abs(dlo[1, :, :, 1:]), np.abs(dhi[1, :, :, 1:])), axis=2)
            Lh = np.max(L, axis=1) * hf
            m = _variational_order(m_max, Lh, np.expm1(Lh), share * hf / total)
            y = c10[low]
            for k in range(low - 1, -1, -1):
                y = y * hf + c10[k]
            x, last, t = np.ascontiguousarray(y), hf, t + h
            hs.append(h)
            ms.append(m)
        steps.append(hs)
        orders.append(ms)
    return {"method": "taylor-lohner", "order": K, "jacobian_order": m_max, "precision": 53,
            "steps": steps, "jacobian_orders": orders}  # fmt: skip
