"""``certified bench gradient``: the certified gradient against a float64 forward-sensitivity
computation of the same gradient (RK4 on x, M = dx/dx0 and S = dx/dtheta, vectorised over the
points), measured in the same run, at issue 21's size (d = p = 8, 8 tanh pieces, 100 points);
the certified gradient is the checker's float64 replay (``checker.sensitivity64``), so its
certificate is written and checked too (times and size recorded)."""

from __future__ import annotations

import time

import numpy as np

__all__ = ["bench_gradient", "float64_gradient"]


def float64_gradient(schedule, X: np.ndarray, Y: np.ndarray, eps: float = 0.0, steps: int = 16):
    """(J, [grad_W, grad_A, grad_b] per piece) in float64 by RK4 on the forward sensitivities.

    Guarantee: none (heuristic)."""
    n, d = X.shape
    x = X.astype(float).copy()
    mats = []
    for piece in schedule.pieces:
        W, A, b, h = piece.W_float, piece.A_float, piece.b_float, float(piece.duration) / steps
        p = W.shape[1]
        P = d * p + p * d + p

        def rhs(x, M, S, W=W, A=A, b=b, p=p, P=P):
            z = x @ A.T + b
            y = np.tanh(z)
            D = 1 - y * y
            Df = np.einsum("ij,nj,jk->nik", W, D, A)
            Fth = np.zeros((n, d, P))
            for i in range(d):
                Fth[:, i, i * p : (i + 1) * p] = y
            WD = W[None] * D[:, None, :]  # n x d x p
            Fth[:, :, d * p : 2 * d * p] = (WD[:, :, :, None] * x[:, None, None, :]).reshape(
                n, d, -1
            )
            Fth[:, :, 2 * d * p :] = WD
            return y @ W.T, Df @ M, Df @ S + Fth

        M = np.broadcast_to(np.eye(d), (n, d, d)).copy()
        S = np.zeros((n, d, P))
        for _ in range(steps):
            k1 = rhs(x, M, S)
            k2 = rhs(*(a + h / 2 * k for a, k in zip((x, M, S), k1, strict=True)))
            k3 = rhs(*(a + h / 2 * k for a, k in zip((x, M, S), k2, strict=True)))
            k4 = rhs(*(a + h * k for a, k in zip((x, M, S), k3, strict=True)))
            x, M, S = (
                a + h / 6 * (q1 + 2 * q2 + 2 * q3 + q4)
                for a, q1, q2, q3, q4 in zip((x, M, S), k1, k2, k3, k4, strict=True)
            )
        mats.append((M, S))
    r = x - Y.astype(float)
    J = 0.5 * np.sum(r * r) / n
    q = r / n
    grads = [None] * len(mats)
    for j in reversed(range(len(mats))):
        M, S = mats[j]
        piece = schedule.pieces[j]
        theta = np.concatenate([piece.W_float.ravel(), piece.A_float.ravel(), piece.b_float])
        grads[j] = np.einsum("nip,ni->p", S, q) + eps * float(piece.duration) * theta
        J += eps / 2 * float(piece.duration) * float(theta @ theta)
        q = np.einsum("nij,ni->nj", M, q)
    return J, grads


def _problem(d: int, pieces: int, n: int, seed: int = 21):
    from certified.models import Schedule

    rng = np.random.default_rng(seed)
    obj = {
        "dimension": d,
        "activation": "tanh",
        "pieces": [
            {
                "duration": f"1/{pieces}",
                "W": (rng.standard_normal((d, d)) / np.sqrt(d)).tolist(),
                "A": (rng.standard_normal((d, d)) / np.sqrt(d)).tolist(),
                "b": (0.5 * rng.standard_normal(d)).tolist(),
            }
            for _ in range(pieces)
        ],
    }
    return Schedule.from_json(obj), rng.standard_normal((n, d)), rng.standard_normal((n, d))


def bench_gradient(quick: bool = False):
    """Certified gradient (the checker's float64 replay, ``sensitivity64``) vs float64 forward
    sensitivities (RK4), measured in the same run; then its certificate: written, its size, and
    checked by the checker.

    Guarantee: none (timings)."""
    import json

    from certified.arith.exact import to_fmpq_array
    from certified.checker import check_certificate
    from certified.commands.records import Benchmark
    from certified.training.certificate import gradient_certificate
    from certified.training.gradient import certified_gradient

    d, pieces, n = (2, 2, 10) if quick else (8, 8, 100)
    schedule, X, Y = _problem(d, pieces, n)
    Xq, Yq = to_fmpq_array(X, "X"), to_fmpq_array(Y, "Y")
    t0 = time.perf_counter()
    float64_gradient(schedule, X, Y)
    base = time.perf_counter() - t0
    t0 = time.perf_counter()
    result = certified_gradient(schedule, Xq, Yq, method="float64", for_certificate=True)
    seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    text = json.dumps(gradient_certificate(result))
    write = time.perf_counter() - t0
    t0 = time.perf_counter()
    verdict = check_certificate(json.loads(text))
    check = time.perf_counter() - t0
    steps = sum(len(s) for s in result.hints["steps"])
    return [
        Benchmark(
            f"gradient d=p={d}, {pieces} tanh pieces, {n} points (float64 replay, {steps} steps)",
            seconds,
            f"float64 RK4 forward sensitivities, {n} points",
            base,
            seconds / base,
            target=20.0,
            extra={"max_width": result.max_width, "steps": steps},
        ),
        Benchmark(
            f"gradient certificate, {n} points, checked: {'VERIFIED' * verdict.verified}",
            check,
            f"float64 RK4 forward sensitivities, {n} points",
            base,
            check / base,
            extra={"write_seconds": write, "bytes": len(text), "verified": verdict.verified},
        ),
    ]
