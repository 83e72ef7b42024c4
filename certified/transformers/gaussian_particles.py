"""Particles against the Gaussian PDE: tokens with masses (sampled from N(m0, Sigma0), or
Gauss-Hermite nodes) moved by the empirical attention of the same heads, their certified
empirical mean and covariance at the final time (theorems.md §9; the particle system is the
Euclidean softmax attention field of ``certified.fields.attention`` with B_h = A_h = Q_hᵀK_h,
whose score convention is the same, ``<B x_i, x_j> = x_jᵀ A x_i``).
"""

from __future__ import annotations

from typing import Any

import flint
import numpy as np

from certified.errors import InputError
from certified.transformers.gaussian_moments import GaussianEnclosure

__all__ = [
    "empirical_moments",
    "gauss_hermite_tokens",
    "particle_instance",
    "particle_moments",
    "sampled_tokens",
]


def particle_instance(pde, tokens: Any, weights: Any = None):
    """The :class:`~certified.transformers.TransformerInstance` of the tokens under the
    schedule of ``pde`` (heads (V_h, B_h = A_h), Euclidean, softmax). Guarantee: exact."""
    from certified.arith.exact import fmpq_to_str
    from certified.transformers.instance import parse_instance

    def mat(M):
        return [[fmpq_to_str(flint.fmpq(q)) for q in row] for row in M]

    pieces = [
        {
            "duration": fmpq_to_str(p.duration),
            "heads": [{"V": mat(h.V), "B": mat(h.A)} for h in p.heads],
        }
        for p in pde.pieces
    ]
    obj: dict[str, Any] = {"tokens": tokens, "pieces": pieces, "geometry": "euclidean",
                           "normalisation": "softmax"}  # fmt: skip
    if weights is not None:
        obj["weights"] = weights
    return parse_instance(obj)


def sampled_tokens(pde, n: int, seed: int = 0) -> list[list[float]]:
    """n tokens drawn from N(m0, Sigma0) in float64 (exact as doubles once drawn; no
    guarantee about the law). Guarantee: none (sampling)."""
    m = np.array([float(q.p) / float(q.q) for q in pde.mean])
    S = np.array([[float(q.p) / float(q.q) for q in row] for row in pde.cov])
    rng = np.random.default_rng(seed)
    return rng.multivariate_normal(m, S, size=n).tolist()


def gauss_hermite_tokens(pde, nodes: int) -> tuple[list[list[float]], list[str]]:
    """Tensor Gauss-Hermite nodes of N(m0, Sigma0) (``m0 + L sqrt(2) xi``, L L ᵀ = Sigma0 in
    float64) and exact positive masses summing to 1 (the float weights made exact).
    Guarantee: none (a quadrature rule; the masses sum to 1 exactly)."""
    from certified.arith.exact import fmpq_to_str, to_fmpq

    d = pde.d
    if nodes**d > 4096:
        raise InputError(f"nodes: {nodes}^{d} tokens is too many (at most 4096)")
    xi, w = np.polynomial.hermite.hermgauss(nodes)
    grids = np.meshgrid(*([xi] * d), indexing="ij")
    Xi = np.stack([g.ravel() for g in grids], axis=1)
    W = np.prod(np.meshgrid(*([w] * d), indexing="ij"), axis=0).ravel()
    m = np.array([float(q.p) / float(q.q) for q in pde.mean])
    S = np.array([[float(q.p) / float(q.q) for q in row] for row in pde.cov])
    X = m + np.sqrt(2.0) * Xi @ np.linalg.cholesky(S).T
    q = [to_fmpq(float(x)) for x in W / W.sum()]
    q[-1] = 1 - sum(q[:-1], flint.fmpq(0))  # exact sum 1; still positive (checked)
    if not q[-1] > 0:
        raise InputError("nodes: the Gauss-Hermite masses could not be made exact")
    return X.tolist(), [fmpq_to_str(v) for v in q]


def empirical_moments(lo: Any, hi: Any, weights: Any, prec: int | None = None):
    """Certified empirical mean ``sum_j w_j x_j`` and covariance
    ``sum_j w_j (x_j - mean)(x_j - mean)ᵀ`` of tokens known to lie in the boxes ``[lo, hi]``
    (n x d doubles) with exact masses ``weights``, as a
    :class:`~certified.transformers.gaussian_moments.GaussianEnclosure` (arb ball arithmetic
    from the exact endpoints; the mean is substituted as a ball, which over-approximates: every
    term contains its value; proofs/particles.md#moments).

    Guarantee: the boxes contain the empirical mean and covariance of every token set in the
    boxes."""
    from certified.arith.ball import endpoints, precision
    from certified.arith.exact import to_fmpq

    lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
    n, d = lo.shape
    w = list(weights)
    with precision(max(prec or 53, 128)):
        X = [[flint.arb(to_fmpq(float(lo[j, c]))).union(flint.arb(to_fmpq(float(hi[j, c]))))
              for c in range(d)] for j in range(n)]  # fmt: skip
        mean = [sum((flint.arb(w[j]) * X[j][c] for j in range(n)), flint.arb(0)) for c in range(d)]
        dev = [[X[j][c] - mean[c] for c in range(d)] for j in range(n)]
        cov = [[sum((flint.arb(w[j]) * dev[j][a] * dev[j][b] for j in range(n)), flint.arb(0))
                for b in range(d)] for a in range(d)]  # fmt: skip
        return GaussianEnclosure(
            tuple(endpoints(x) for x in mean), tuple(tuple(endpoints(x) for x in r) for r in cov)
        )


def particle_moments(
    pde, tokens: Any, weights: Any = None, prec: int | None = None, *, method: str = "engine",
    **options: Any,
):  # fmt: skip
    """Certified empirical mean ``sum_j w_j x_j(T)`` and covariance
    ``sum_j w_j (x_j - mean)(x_j - mean)ᵀ`` of the particle system at the schedule's end,
    as a :class:`~certified.transformers.gaussian_moments.GaussianEnclosure`.

    ``method="engine"``: the token enclosures of rule taylor-lohner (the generic flow engine,
    Lohner sets in dimension n·d; cost ~n³ per step). ``method="vectorised"``: Taylor steps
    vectorised over the particles with the error propagated by a Jacobian-norm bound
    (:func:`~certified.transformers.particle_taylor.particle_taylor_flow`, ``options`` passed
    on; cost ~n² per step; proofs/particles.md). Both are certified enclosures; neither writes
    a certificate.

    Raises
    ------
    InputError
        When the flow of the particles could not be certified (the engine's message), or an
        unknown method.

    Guarantee: the boxes contain the empirical mean and covariance at the final time.
    """
    if method == "vectorised":
        from certified.arith.exact import to_fmpq_array
        from certified.transformers.particle_taylor import particle_taylor_flow

        enc = particle_taylor_flow(pde, tokens, weights, **options)
        box = enc.box()
        n = box.shape[0]
        w = (
            [flint.fmpq(1, n)] * n
            if weights is None
            else list(to_fmpq_array(weights, field="weights").ravel())
        )
        return empirical_moments(box.lo, box.hi, w, prec)
    if method != "engine":
        raise InputError(f"method: expected 'engine' or 'vectorised', got {method!r}")
    from certified.transformers.flow import token_enclosures, transformer_flow

    inst = particle_instance(pde, tokens, weights)
    res = transformer_flow(inst, prec=prec, **options)
    if res.status.name != "SUCCESS":
        raise InputError(f"the particle flow could not be certified: {res.message}")
    box = token_enclosures(inst, res)[0]
    n = box.shape[0]
    w = inst.masses[0] or tuple(flint.fmpq(1, n) for _ in range(n))
    return empirical_moments(box.lo, box.hi, w, prec)
