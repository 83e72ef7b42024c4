"""Float64 evaluation of a ReLU / leaky-ReLU flow by the same region-by-region algorithm as the
certified engine (Taylor series of the affine flow, first-exit prediction by sampling and
bisection), without any validation. The baseline of ``certified bench`` for ReLU flows.

Guarantee: none (heuristic).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["relu_flow_float64"]

SAMPLES = 64


def _exit(G: np.ndarray, h: float):
    s = h * np.arange(SAMPLES + 1) / SAMPLES
    vals = np.zeros((G.shape[0], SAMPLES + 1))
    for k in range(G.shape[1] - 1, -1, -1):
        vals = vals * s[None, :] + G[:, k : k + 1]
    neg = vals[:, 1:] < 0
    rows = np.nonzero(neg.any(axis=1))[0]
    best = None
    for r in rows:
        i = int(np.argmax(neg[r])) + 1
        a, b = s[i - 1], s[i]
        coeffs = G[r, ::-1]
        for _ in range(60):
            m = 0.5 * (a + b)
            if m <= a or m >= b:
                break
            if np.polyval(coeffs, m) < 0:
                b = m
            else:
                a = m
        if best is None or b < best[0]:
            best = (b, int(r))
    return best


def _taylor(Mt: np.ndarray, y: np.ndarray, h: float) -> np.ndarray:
    cols = [y]
    v = y
    scale = max(1.0, float(np.max(np.abs(y))))
    for k in range(1, 200):
        v = Mt @ v / k
        cols.append(v)
        if k >= 2 and float(np.max(np.abs(v))) * h**k <= 1e-18 * scale:
            break
    return np.array(cols).T


def relu_flow_float64(
    W_list: Sequence[np.ndarray],
    A_list: Sequence[np.ndarray],
    b_list: Sequence[np.ndarray],
    durations: Sequence[float],
    X0: np.ndarray,
    *,
    alpha: float = 0.0,
) -> np.ndarray:
    """Float64 image of the points ``X0`` (N, d) under the schedule; ``alpha`` is the negative
    slope (0 for ReLU).

    Guarantee: none (heuristic).
    """
    X = np.array(X0, dtype=np.float64)
    N, d = X.shape
    out = np.empty_like(X)
    data = []
    for W, A, b, tau in zip(W_list, A_list, b_list, durations, strict=True):
        W = np.asarray(W, dtype=np.float64)
        A = np.asarray(A, dtype=np.float64)
        b = np.asarray(b, dtype=np.float64)
        At = np.hstack([A, b[:, None]])
        data.append((W, A, b, At, float(tau)))
    for n in range(N):
        x = X[n].copy()
        for W, A, b, At, tau in data:
            g = A @ x + b
            act = g > 0
            zero = g == 0
            if np.any(zero):
                f = W @ np.where(act, g, alpha * g)
                act = np.where(zero, A @ f > 0, act)
            t = 0.0
            steps = 0
            while t < tau and steps < 10000:
                steps += 1
                sl = np.where(act, 1.0, alpha)
                Ws = W * sl[None, :]
                Mt = np.zeros((d + 1, d + 1))
                Mt[:d, :] = Ws @ At
                nm = float(np.max(np.sum(np.abs(Mt[:d, :d]), axis=1)))
                h = tau - t
                if nm > 1:
                    h = min(h, 1.0 / nm)
                V = _taylor(Mt, np.append(x, 1.0), h)
                sig = np.where(act, 1.0, -1.0)
                ex = _exit(At @ V * sig[:, None], h)
                s = h if ex is None else ex[0]
                x = (V @ (s ** np.arange(V.shape[1])))[:d]
                t += s
                if ex is not None:
                    act[ex[1]] = not act[ex[1]]
        out[n] = x
    return out
