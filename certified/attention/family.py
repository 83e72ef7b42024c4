"""The adversarial √n family and a search for large certified local Lipschitz constants
(theorems.md section 5, "Tightness family").

Float code here only *proposes* configurations X in (B_R)^n; the reported numbers are
certified lower bounds ``‖Df(X)‖₂ >= ‖Df(X) u‖ / ‖u‖`` evaluated in ball arithmetic at the
exact X (proofs/bounds.md#spectral-lower), hence lower bounds on the Lipschitz constant of f
on (B_R)^n (which is ``sup ‖Df‖₂`` there, the domain being convex).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import flint
import numpy as np

from certified.arith.ball import endpoints, precision
from certified.arith.exact import to_fmpq_array
from certified.attention.instance import AttentionInstance
from certified.attention.maps import attention_jacobian, attention_jvp
from certified.attention.norms import spectral_norm_lower, spectral_norm_upper
from certified.errors import DomainError

__all__ = [
    "FamilyPoint",
    "compare_with_bounds",
    "float_jacobian",
    "search_lipschitz_lower",
    "sqrt_n_family",
    "tightness_configuration",
]


def _float_bilinear(inst: AttentionInstance) -> np.ndarray:
    return inst.K.T.astype(float) @ inst.Q.astype(float) / np.sqrt(inst.k)


def tightness_configuration(inst: AttentionInstance, n: int) -> np.ndarray:
    """The authors' adversarial configuration (float; a heuristic proposal).

    With ``S = (A + Aᵀ)/2`` (only it enters ``xᵀAx``): if ``λ_max > −8 λ_min``, ``x_1 = R u``
    and ``x_2..x_n = R u / 2`` (u the top eigenvector); otherwise ``x_1 = −R u`` and the others
    ``R u`` (u for ``λ_min``).

    Guarantee: none (heuristic).
    """
    A = _float_bilinear(inst)
    lam, vec = np.linalg.eigh((A + A.T) / 2)
    R = float(inst.R)
    if lam[-1] > -8 * lam[0]:
        u = vec[:, -1]
        X = np.tile(R * u / 2, (n, 1))
        X[0] = R * u
    else:
        u = vec[:, 0]
        X = np.tile(R * u, (n, 1))
        X[0] = -R * u
    return X


def float_jacobian(A: np.ndarray, V: np.ndarray, X: np.ndarray) -> np.ndarray:
    """float64 Jacobian of f at X (same formula as the ball version). Guarantee: none."""
    n, d = X.shape
    S = X @ A @ X.T
    P = np.exp(S - S.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    M = P @ X
    XV, F, U = X @ V.T, P @ X @ V.T, X @ A
    J = np.zeros((n, d, n, d))
    for i in range(n):
        Dc = X - M[i]
        C = V @ (Dc.T * P[i]) @ Dc @ A.T
        J[i, :, :, :] = np.einsum("m,ab->amb", P[i], V) + np.einsum(
            "m,ma,b->amb", P[i], XV - F[i], U[i]
        )
        J[i, :, i, :] += C
    return J.reshape(n * d, n * d)


@dataclass(frozen=True)
class FamilyPoint:
    """Certified data at one configuration: ``lower <= ‖Df(X)‖₂ <= upper``.

    ``upper`` is None for large ``n d`` (only the lower bound, from a directional derivative).

    Guarantee: ``lower`` and ``upper`` bound ``‖Df(X)‖₂`` at the exact ``X``.
    """

    n: int
    X: np.ndarray
    lower: flint.fmpq
    upper: flint.fmpq | None


def _top_right_singular_vector(J: np.ndarray, iterations: int = 200) -> np.ndarray:
    """Power iteration on JᵀJ (float heuristic; any vector gives a valid lower bound)."""
    v = np.random.default_rng(0).standard_normal(J.shape[1]) + 1.0
    for _ in range(iterations):
        v = J.T @ (J @ v)
        norm = np.linalg.norm(v)
        if norm == 0:
            break
        v /= norm
    return v


FULL_JACOBIAN_MAX_ND = 128
"""Above this n·d only the lower bound is certified (from a Jacobian-vector product)."""


def certify_point(inst: AttentionInstance, X: Any, prec: int = 128) -> FamilyPoint:
    """Certified bounds on ``‖Df(X)‖₂`` at an exact X (floats read exactly).

    For ``n d <= FULL_JACOBIAN_MAX_ND`` both bounds come from the ball Jacobian; above, the
    lower bound is ``|Df(X) u| / |u|`` for the float top singular vector ``u``, evaluated by
    :func:`~certified.attention.maps.attention_jvp` (O(n² d)), and ``upper`` is None.

    Guarantee: ``lower <= ‖Df(X)‖₂ <= upper`` (proofs/bounds.md#spectral-upper,
    #spectral-lower).
    """
    Xq = to_fmpq_array(X, "X")
    for i, x in enumerate(Xq):
        if sum((v * v for v in x), flint.fmpq(0)) > inst.R * inst.R:
            raise DomainError(f"X[{i}]: lies outside the ball of radius R; scale X")
    n, d = Xq.shape
    if n * d <= FULL_JACOBIAN_MAX_ND:
        J = attention_jacobian(inst.layer, Xq, prec=prec)
        return FamilyPoint(n, Xq, spectral_norm_lower(J, prec), spectral_norm_upper(J, prec))
    Jf = float_jacobian(_float_bilinear(inst), inst.V.astype(float), Xq.astype(float))
    u = to_fmpq_array(_top_right_singular_vector(Jf).reshape(n, d), "u")
    Ju = attention_jvp(inst.layer, Xq, u, prec=prec)
    u2 = sum((x * x for x in u.flat), flint.fmpq(0))
    with precision(prec):
        num = sum((Ju[i, a] * Ju[i, a] for i in range(n) for a in range(d)), flint.arb(0))
        lower = endpoints((num / flint.arb(u2)).sqrt(), "lower")[0]
    return FamilyPoint(n, Xq, max(lower, flint.fmpq(0)), None)


def sqrt_n_family(inst: AttentionInstance, ns: Any, prec: int = 128) -> list[FamilyPoint]:
    """Certified ``‖Df(X_n)‖₂`` on the tightness configuration for each n (the √n family).

    The configuration is shrunk by ``1 - 2^-20`` so that rounding keeps it inside (B_R)^n.

    Guarantee: each ``lower`` is a lower bound on Lip(f) over (B_R)^n for that n.
    """
    return [
        certify_point(inst, tightness_configuration(inst, n) * (1 - 2.0**-20), prec) for n in ns
    ]


def _project(X: np.ndarray, R: float) -> np.ndarray:
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    return np.where(norms > R, X * (R / np.maximum(norms, 1e-300)), X)


def search_lipschitz_lower(
    inst: AttentionInstance,
    n: int,
    *,
    restarts: int = 8,
    steps: int = 60,
    seed: int = 0,
    prec: int = 128,
) -> FamilyPoint:
    """Largest *certified* lower bound on Lip(f) over (B_R)^n found by a float search.

    Projected gradient ascent on ``‖Df(X)‖₂`` (finite-difference gradients of the float
    Jacobian's top singular value) from the tightness configuration and random restarts; the
    best configuration is then certified in ball arithmetic.

    Guarantee: ``lower`` is a lower bound on Lip(f) over (B_R)^n (the search itself: none).
    """
    rng = np.random.default_rng(seed)
    A, V, R, d = _float_bilinear(inst), inst.V.astype(float), float(inst.R), inst.d
    value = lambda X: np.linalg.norm(float_jacobian(A, V, X), 2)  # noqa: E731
    starts = [tightness_configuration(inst, n)]
    starts += [_project(rng.standard_normal((n, d)) * R, R) for _ in range(restarts)]
    best_X, best = starts[0], value(starts[0])
    for X in starts:
        f, lr = value(X), 0.05 * R
        for _ in range(steps):
            g = np.zeros_like(X)
            h = 1e-6 * R
            for idx in np.ndindex(X.shape):
                E = np.zeros_like(X)
                E[idx] = h
                g[idx] = (value(_project(X + E, R)) - f) / h
            if not np.any(g):
                break
            Y = _project(X + lr * g / np.linalg.norm(g), R)
            fy = value(Y)
            if fy > f:
                X, f, lr = Y, fy, lr * 1.2
            else:
                lr /= 2
        if f > best:
            best_X, best = X, f
    return certify_point(inst, best_X * (1 - 2.0**-20), prec)


def compare_with_bounds(inst: AttentionInstance, point: FamilyPoint, prec: int = 128) -> dict:
    """The certified lower bound of a configuration against each hypothesis's right side.

    Returns ``{"lower": fmpq, "H1": (rhs_lower, rhs_upper), "H2": ..., "ratio_lower": {...}}``
    where ``ratio_lower[h] = lower / rhs_upper[h]`` is a certified lower bound on how much of
    the bound the true constant reaches (> 1 would refute the hypothesis).

    Guarantee: every number is a certified bound (as named).
    """
    from certified.attention.lipschitz import norm_hint, rhs_bounds

    hv, hm = norm_hint(inst.V, prec), norm_hint(inst.K.T @ inst.Q, prec)
    norms = ((hv["lower"], hv["upper"]), (hm["lower"], hm["upper"]))
    out: dict[str, Any] = {"n": point.n, "lower": point.lower, "ratio_lower": {}}
    for h in ("H1", "H2"):
        lo, hi = rhs_bounds(h, *norms, inst.R, point.n, inst.k, prec)
        out[h] = (lo, hi)
        out["ratio_lower"][h] = point.lower / hi if hi > 0 else None
    return out
