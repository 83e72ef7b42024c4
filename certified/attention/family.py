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
    "batched_float_jacobian",
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


def batched_float_jacobian(A: np.ndarray, V: np.ndarray, X: np.ndarray) -> np.ndarray:
    """float64 Jacobians of f at a batch of configurations ``X`` (shape (B, n, d)); returns
    shape (B, nd, nd) with J_il = P_il V (I + (x_l − m_i) u_iᵀ) + δ_il V Cov_i Aᵀ
    (bounds.md #domain-jacobian 4.; u_i = Aᵀx_i).

    Guarantee: none (heuristic).
    """
    B, n, d = X.shape
    S = np.einsum("bia,ac,bjc->bij", X, A, X)
    P = np.exp(S - S.max(axis=2, keepdims=True))
    P /= P.sum(axis=2, keepdims=True)
    M = P @ X
    Dc = X[:, None, :, :] - M[:, :, None, :]  # (b, i, l, d): x_l − m_i
    Cov = np.einsum("bil,bila,bilc->biac", P, Dc, Dc)
    C = V @ Cov @ A.T
    U = X @ A  # row i: u_iᵀ = x_iᵀA
    VD = Dc @ V.T
    J = np.einsum("bil,ac->biacl", P, V) + np.einsum("bil,bila,bic->biacl", P, VD, U)
    J = J.transpose(0, 1, 2, 4, 3).copy()  # (b, i, a, l, c)
    idx = np.arange(n)
    J[:, idx, :, idx, :] += C.transpose(1, 0, 2, 3)
    return J.reshape(B, n * d, n * d)


def float_jacobian(A: np.ndarray, V: np.ndarray, X: np.ndarray) -> np.ndarray:
    """float64 Jacobian of f at X (same formula as the ball version): the batch of one of
    :func:`batched_float_jacobian`. Guarantee: none."""
    return batched_float_jacobian(A, V, np.asarray(X, dtype=float)[None])[0]


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

    The quasi-Newton ascent of :func:`certified.attention.domain_search.ascend_jacobian_norm`
    on ``‖Df(X)‖₂`` from the tightness configuration and the ``restarts`` best of 2048 random
    configurations (at most ``steps`` iterations each); the best configuration is then
    certified in ball arithmetic.

    Guarantee: ``lower`` is a lower bound on Lip(f) over (B_R)^n (the search itself: none).
    """
    from certified.attention.domain_search import ascend_jacobian_norm  # imports this module

    A, V, R = _float_bilinear(inst), inst.V.astype(float), float(inst.R)
    start = tightness_configuration(inst, n)
    _, best_X = ascend_jacobian_norm(A, V, R, [start], restarts, seed=seed, maxiter=steps)
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
