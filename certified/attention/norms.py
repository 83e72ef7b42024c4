"""Certified two-sided bounds on spectral norms ``‖M‖₂`` of exact or ball matrices.

* Upper (proofs/bounds.md#spectral-upper): a float estimate ``s`` of ``‖mid M‖₂`` is inflated
  and accepted only if ``s² I − MᵀM`` is certified positive definite (a Cholesky factorisation
  in ball arithmetic with every pivot certified > 0, Rump's method; exact rational ``LDLᵀ`` for
  exact matrices). The Frobenius norm is the fallback.
* Lower (proofs/bounds.md#spectral-lower): ``‖M v‖ / ‖v‖`` for the float top right singular
  vector ``v`` of ``mid M``, evaluated in ball arithmetic (valid for any ``v``; tightness only).

Heuristics propose (numpy SVD), one rigorous test decides.
"""

from __future__ import annotations

import math
from typing import Any

import flint
import numpy as np

from certified.arith.ball import arb_matrix, check_precision, endpoints, mid_rad, precision
from certified.arith.exact import to_fmpq, to_fmpq_array

__all__ = [
    "exact_norm_upper",
    "scaled_float",
    "frobenius_upper",
    "is_positive_definite_exact",
    "spectral_norm_bounds",
    "spectral_norm_lower",
    "spectral_norm_upper",
]


def _mid(M: flint.arb_mat) -> tuple[np.ndarray, int] | None:
    """``scaled_float`` of the exact midpoints of ``M`` (None if a ball is not finite): the
    float heuristics' view of a matrix of balls of any magnitude."""
    if not all(M[i, j].is_finite() for i in range(M.nrows()) for j in range(M.ncols())):
        return None
    mids = [[mid_rad(M[i, j])[0] for j in range(M.ncols())] for i in range(M.nrows())]
    return scaled_float(np.array(mids, dtype=object))


def _gram(M: flint.arb_mat) -> flint.arb_mat:
    # the smaller of MᵀM and MMᵀ: both have the same largest eigenvalue ‖M‖₂²
    return M.transpose() * M if M.ncols() <= M.nrows() else M * M.transpose()


def _cholesky_pd(S: flint.arb_mat, mu: flint.arb) -> bool:
    """True only if ``mu I - S'`` is positive definite for every symmetric ``S'`` in the ball
    matrix ``S`` (the lower triangle is used). Guarantee: exact (True is certain)."""
    n = S.nrows()
    L = [[flint.arb(0)] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1):
            a = (mu if i == j else flint.arb(0)) - S[i, j]
            for k in range(j):
                a -= L[i][k] * L[j][k]
            if i == j:
                if not a > 0:
                    return False
                L[i][i] = a.sqrt()
            else:
                L[i][j] = a / L[j][j]
    return True


def frobenius_upper(M: Any, prec: int = 128) -> flint.fmpq:
    """Exact rational upper bound on ``‖M‖_F >= ‖M‖₂`` (for every matrix in the ball ``M``).

    Guarantee: upper bound on ``‖M‖₂`` and ``‖M‖_F``.
    """
    prec = check_precision(prec)
    with precision(prec):
        M = arb_matrix(M, prec, "M")
        total = sum(
            (
                M[i, j].abs_upper() * M[i, j].abs_upper()
                for i in range(M.nrows())
                for j in range(M.ncols())
            ),
            flint.arb(0),
        )
        return endpoints(total.sqrt(), "Frobenius norm")[1]


def spectral_norm_upper(M: Any, prec: int = 128) -> flint.fmpq:
    """Certified upper bound on ``max ‖M'‖₂`` over the matrices ``M'`` of the ball ``M``.

    Parameters
    ----------
    M : 2-D array of exact numbers or balls, or an arb_mat
    prec : int

    Returns
    -------
    flint.fmpq
        The smaller of a Cholesky-certified bound and the Frobenius norm (exact upper
        endpoint of its ball).

    Guarantee: upper bound on ``‖M‖₂`` (proof: proofs/bounds.md#spectral-upper).
    """
    prec = check_precision(prec)
    frob = frobenius_upper(M, prec)
    with precision(prec):
        M = arb_matrix(M, prec, "M")
        view = _mid(M)
        if view is None:
            return frob
        est, unit = float(np.linalg.norm(view[0], 2)), flint.fmpq(2) ** view[1]
        S = _gram(M)
        for rel in (2.0**-40, 2.0**-24, 2.0**-12, 2.0**-6):
            s = flint.fmpq(*float(est * (1 + rel) + 2.0**-200).as_integer_ratio()) * unit
            if s >= frob:
                break
            if _cholesky_pd(S, flint.arb(s * s)):
                return s
    return frob


def spectral_norm_lower(M: Any, prec: int = 128, v: Any = None) -> flint.fmpq:
    """Certified lower bound ``‖M v‖₂ / ‖v‖₂`` (for every matrix in the ball ``M``).

    Parameters
    ----------
    v : 1-D exact test vector, optional
        Default: the float top right singular vector of ``mid M``.

    Returns
    -------
    flint.fmpq
        ``>= 0``; 0 when nothing positive is certified.

    Guarantee: lower bound on ``‖M‖₂`` (proof: proofs/bounds.md#spectral-lower).
    """
    prec = check_precision(prec)
    with precision(prec):
        M = arb_matrix(M, prec, "M")
        if v is None:
            view = _mid(M)
            if view is None or not np.all(np.isfinite(view[0])):
                return flint.fmpq(0)
            v = np.linalg.svd(view[0])[2][0]
        vq = to_fmpq_array(v, "v")
        v2 = sum((x * x for x in vq), flint.fmpq(0))
        if vq.shape != (M.ncols(),) or v2 == 0:
            return flint.fmpq(0)
        Mv = M * flint.arb_mat([[flint.arb(x)] for x in vq])
        num = sum((Mv[i, 0] * Mv[i, 0] for i in range(M.nrows())), flint.arb(0))
        ratio = (num / flint.arb(v2)).sqrt()
        lo = endpoints(ratio, "norm ratio")[0] if ratio.is_finite() else flint.fmpq(0)
        return max(lo, flint.fmpq(0))


def spectral_norm_bounds(M: Any, prec: int = 128) -> tuple[flint.fmpq, flint.fmpq]:
    """``(lower, upper)`` with ``lower <= ‖M‖₂ <= upper``. Guarantee: encloses ``‖M‖₂``."""
    return spectral_norm_lower(M, prec), spectral_norm_upper(M, prec)


def is_positive_definite_exact(S: Any) -> bool:
    """Whether the exact symmetric rational matrix ``S`` is positive definite (LDLᵀ without
    pivoting: all pivots > 0, Sylvester). Guarantee: exact."""
    a = [list(row) for row in to_fmpq_array(S, "S")]
    n = len(a)
    for k in range(n):
        if a[k][k] <= 0:
            return False
        for i in range(k + 1, n):
            f = a[i][k] / a[k][k]
            for j in range(k + 1, n):
                a[i][j] -= f * a[k][j]
    return True


def scaled_float(M: Any) -> tuple[np.ndarray, int]:
    """``(F, e)`` with ``F`` the nearest doubles of ``M / 2**e``, ``e`` chosen so that the
    largest entry is about 1: float heuristics (test vectors, norm estimates) on exact
    matrices whose entries lie beyond the double range. Guarantee: none (heuristic)."""
    Mq = to_fmpq_array(M, "M")
    big = max((abs(x) for x in Mq.flat), default=flint.fmpq(0))
    e = int(big.p.bit_length()) - int(big.q.bit_length()) if big else 0
    scale = flint.fmpq(1, 2**e) if e >= 0 else flint.fmpq(2 ** (-e))
    return np.array([float(x * scale) for x in Mq.flat]).reshape(Mq.shape), e


def exact_norm_upper(M: Any, candidate: Any = None) -> flint.fmpq:
    """A short rational ``s >= ‖M‖₂`` for an exact matrix, certified by exact ``LDLᵀ`` of
    ``s² I − MᵀM`` (``s = 0`` only for ``M = 0``). This is what a checker can re-verify exactly.

    Guarantee: upper bound on ``‖M‖₂`` (exact test; proofs/bounds.md#spectral-upper).
    """
    Mq = to_fmpq_array(M, "M")
    if all(x == 0 for x in Mq.flat):
        return flint.fmpq(0)
    G = (Mq.T @ Mq).astype(object)
    starts = [to_fmpq(candidate, "candidate")] if candidate is not None else []
    if candidate is None:  # a float estimate of ||M / 2^e||, then exact candidates above it
        F, e = scaled_float(Mq)
        est = float(np.linalg.norm(F, 2))
        unit = flint.fmpq(2**e) if e >= 0 else flint.fmpq(1, 2 ** (-e))
        for rel in (2.0**-30, 2.0**-16, 2.0**-6, 1.0):
            scaled = flint.fmpq(*float(est * (1 + rel) + 2.0**-60).as_integer_ratio())
            starts.append(scaled * unit)
    for s in starts:
        S = (s * s) * np.eye(G.shape[0], dtype=int).astype(object) - G
        if is_positive_definite_exact(S):
            return s
    # the Frobenius norm squared is an exact rational upper bound on ‖M‖₂²; an integer-ish
    # ceiling of its square root is then always certified
    f2 = sum((x * x for x in Mq.flat), flint.fmpq(0))
    ceiling = -(-int(f2.p) // int(f2.q))
    return flint.fmpq(math.isqrt(ceiling) + 1)  # its square exceeds ceil(f2) >= f2
