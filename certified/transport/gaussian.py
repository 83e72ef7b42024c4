r"""Certified W₂ between Gaussian measures (the Bures-Wasserstein formula).

.. math::

    W_2(N(m_1, Σ_1), N(m_2, Σ_2))^2 = |m_1 - m_2|^2 + \operatorname{tr} Σ_1 + \operatorname{tr} Σ_2
        - 2 \operatorname{tr}\big(Σ_1^{1/2} Σ_2 Σ_1^{1/2}\big)^{1/2}

and ``tr (Σ_1^{1/2} Σ_2 Σ_1^{1/2})^{1/2} = Σ_i √λ_i(Σ_1 Σ_2)``: the matrices are similar, so
the eigenvalues of the rational matrix ``Σ_1 Σ_2`` (all real and ``>= 0``) are enclosed with
Arb's rigorous eigenvalue routines (``acb_mat.eig``; clusters with ``multiple=True``) and the
square roots summed in ball arithmetic (proofs/bounds.md#w-gaussian).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import flint

from certified.arith.ball import endpoints, precision
from certified.errors import DomainError, ShapeError
from certified.io import exact_matrix, exact_vector

__all__ = ["GaussianW2Enclosure", "gaussian_w2"]


@dataclass(frozen=True)
class GaussianW2Enclosure:
    """``lower_sq <= W_2^2 <= upper_sq`` and ``lower <= W_2 <= upper`` (exact ``fmpq``);
    ``method`` says how the trace term was enclosed.

    Guarantee: encloses ``W_2`` between the two Gaussians (rigorous).
    """

    lower: flint.fmpq
    upper: flint.fmpq
    lower_sq: flint.fmpq
    upper_sq: flint.fmpq
    method: str

    @property
    def gap(self) -> flint.fmpq:
        """``upper - lower``. Guarantee: exact."""
        return self.upper - self.lower


def _psd(S: flint.fmpq_mat, name: str) -> None:
    """Exact test of positive semi-definiteness: a symmetric matrix has real eigenvalues, which
    are all ``>= 0`` iff the coefficients of ``det(xI - S)`` alternate in sign (Descartes)."""
    d = S.nrows()
    for i in range(d):
        for j in range(i):
            if S[i, j] != S[j, i]:
                raise DomainError(f"{name}: not symmetric ({name}[{i}][{j}] != {name}[{j}][{i}])")
    coeffs = S.charpoly().coeffs()  # c_0, ..., c_d (c_d = 1)
    if any(c * (-1) ** (d - k) < 0 for k, c in enumerate(coeffs)):
        raise DomainError(f"{name}: not positive semi-definite (a negative eigenvalue)")


def _trace_sqrt(P: flint.fmpq_mat, prec: int) -> tuple[flint.arb, str]:
    """A ball containing ``Σ √λ_i(P)`` for P with real eigenvalues ``>= 0``."""
    d = P.nrows()
    for bits in (prec, 2 * prec, 4 * prec):
        with precision(bits):
            A = flint.acb_mat(flint.arb_mat(P))
            for multiple in (False, True):
                try:
                    eig = A.eig(multiple=multiple)
                except ValueError:
                    continue
                total = flint.arb(0)
                for lam in eig:
                    lo, hi = endpoints(lam.real)
                    # the true eigenvalue is real, >= 0 and in the ball: sqrt of [max(lo,0), hi]
                    total += flint.arb(max(lo, flint.fmpq(0))).sqrt().union(flint.arb(hi).sqrt())
                if total.is_finite():
                    return total, f"acb_mat.eig{' (multiple)' if multiple else ''}, {bits} bits"
    # fallback: 0 <= Σ √λ_i <= √(d Σ λ_i) = √(d tr P)  (Cauchy-Schwarz)
    with precision(prec):
        hi = (flint.arb(d) * flint.arb(_trace(P))).sqrt()
        return flint.arb(0).union(hi), "Cauchy-Schwarz fallback"


def _trace(P: flint.fmpq_mat) -> flint.fmpq:
    return sum((P[i, i] for i in range(P.nrows())), flint.fmpq(0))


def gaussian_w2(m1: Any, S1: Any, m2: Any, S2: Any, *, prec: int = 128) -> GaussianW2Enclosure:
    """Certified enclosure of ``W_2(N(m1, S1), N(m2, S2))``.

    Parameters
    ----------
    m1, m2 : array_like, shape (d,)
        Means (exact numbers: floats are their binary values, strings such as ``"1/3"``).
    S1, S2 : array_like, shape (d, d)
        Covariances, symmetric positive semi-definite (checked exactly).
    prec : int
        Working precision of the eigenvalue enclosures (raised automatically if needed).

    Raises
    ------
    ShapeError
        Inconsistent dimensions.
    DomainError
        A covariance that is not symmetric or not positive semi-definite.

    Guarantee: ``lower <= W_2 <= upper`` and ``lower_sq <= W_2^2 <= upper_sq`` (rigorous).
    """
    a = exact_vector(m1, "m1", what="coordinates")
    b = exact_vector(m2, "m2", length=len(a), what="coordinates")
    d = len(a)
    A = exact_matrix(S1, "S1", rows=d, cols=d, col_what="entries (S1 is d x d)")
    B = exact_matrix(S2, "S2", rows=d, cols=d, col_what="entries (S2 is d x d)")
    if A.shape != (d, d) or B.shape != (d, d):
        raise ShapeError(f"S1, S2: expected {d} x {d} matrices")
    SA, SB = flint.fmpq_mat(A.tolist()), flint.fmpq_mat(B.tolist())
    _psd(SA, "S1")
    _psd(SB, "S2")
    exact_part = sum(((x - y) ** 2 for x, y in zip(a, b, strict=True)), flint.fmpq(0))
    exact_part += _trace(SA) + _trace(SB)
    T, method = _trace_sqrt(SA * SB, prec)
    lo_t, hi_t = endpoints(T)
    lower_sq = max(flint.fmpq(0), exact_part - 2 * hi_t)
    upper_sq = max(flint.fmpq(0), exact_part - 2 * lo_t)
    with precision(prec):
        lower = endpoints(flint.arb(lower_sq).sqrt())[0] if lower_sq > 0 else flint.fmpq(0)
        upper = endpoints(flint.arb(upper_sq).sqrt())[1]
    return GaussianW2Enclosure(max(lower, flint.fmpq(0)), upper, lower_sq, upper_sq, method)
