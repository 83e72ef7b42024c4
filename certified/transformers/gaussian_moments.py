"""Certified statements about an enclosed Gaussian N(m, Sigma) (m, Sigma in interval boxes):
eigenvalues of Sigma (Weyl), its condition number, and the Bures-Wasserstein distance to a
target Gaussian (proofs/transformers_gaussian.md §4-§5).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import flint

from certified.arith.ball import endpoints, precision
from certified.errors import DomainError

__all__ = [
    "GaussianEnclosure",
    "condition_number",
    "covariance_eigenvalues",
    "real_eigenvalues",
    "w2_to_target",
]


@dataclass(frozen=True)
class GaussianEnclosure:
    """``mean[i] = (lo, hi)``, ``cov[i][j] = (lo, hi)`` (exact fmpq endpoints, cov symmetric).

    Guarantee: the enclosed Gaussian's mean and covariance lie in the boxes.
    """

    mean: tuple[tuple[flint.fmpq, flint.fmpq], ...]
    cov: tuple[tuple[tuple[flint.fmpq, flint.fmpq], ...], ...]

    @property
    def d(self) -> int:
        return len(self.mean)

    def centre(self) -> tuple[list[flint.fmpq], flint.fmpq_mat]:
        m = [(lo + hi) / 2 for lo, hi in self.mean]
        d = self.d
        C = flint.fmpq_mat(d, d, [(lo + hi) / 2 for row in self.cov for lo, hi in row])
        return m, C

    def cov_radius_frobenius(self, prec: int = 128) -> flint.fmpq:
        """Upper bound on ``‖Sigma - C‖_F`` for every Sigma in the box (C the centre)."""
        s = sum(((hi - lo) / 2) ** 2 for row in self.cov for lo, hi in row)
        return _sqrt_upper(s, prec)

    def max_width(self) -> flint.fmpq:
        ws = [hi - lo for lo, hi in self.mean] + [hi - lo for r in self.cov for lo, hi in r]
        return max(ws)


def _sqrt_upper(q: flint.fmpq, prec: int) -> flint.fmpq:
    if q == 0:
        return flint.fmpq(0)
    with precision(prec):
        return endpoints(flint.arb(q).sqrt())[1]


def _sqrt_lower(q: flint.fmpq, prec: int) -> flint.fmpq:
    if q <= 0:
        return flint.fmpq(0)
    with precision(prec):
        return max(flint.fmpq(0), endpoints(flint.arb(q).sqrt())[0])


def real_eigenvalues(Y: flint.fmpq_mat, prec: int = 128) -> list[tuple[flint.fmpq, flint.fmpq]]:
    """Enclosures ``(lo_k, hi_k)``, k = 1..d, of the eigenvalues of a rational matrix with real
    spectrum (symmetric, or similar to a symmetric matrix), in increasing order: ``lo_k`` and
    ``hi_k`` are the k-th smallest of the lower and of the upper endpoints of Arb's certified
    eigenvalue balls (``acb_mat.eig``: one ball per eigenvalue counted with multiplicity), so
    ``lo_k <= lambda_k <= hi_k`` (proofs/transformers_gaussian.md §4).

    Guarantee: encloses the k-th smallest eigenvalue.
    """
    # proof: proofs/transformers_gaussian.md#eigenvalues (sorted endpoints of a bijection)
    for bits in (prec, 2 * prec, 4 * prec, 8 * prec):
        with precision(bits):
            A = flint.acb_mat(flint.arb_mat(Y))
            for multiple in (False, True):
                try:
                    eig = A.eig(multiple=multiple)
                except ValueError:
                    continue
                if not all(e.real.is_finite() and e.imag.is_finite() for e in eig):
                    continue
                ends = [endpoints(e.real) for e in eig]
                lo = sorted(a for a, _ in ends)
                hi = sorted(b for _, b in ends)
                return list(zip(lo, hi, strict=True))
    raise DomainError("eigenvalues: Arb could not isolate the spectrum at up to 8x precision")


def covariance_eigenvalues(
    g: GaussianEnclosure, prec: int = 128
) -> list[tuple[flint.fmpq, flint.fmpq]]:
    """Increasing enclosures of the eigenvalues of every symmetric Sigma in the box:
    ``lambda_k(Sigma) in lambda_k(C) + [-r, r]`` with C the centre and ``r >= ‖Sigma - C‖_F >=
    ‖Sigma - C‖_2`` (Weyl's inequality; proofs/transformers_gaussian.md §4).

    Guarantee: encloses the k-th smallest eigenvalue of the enclosed covariance.
    """
    # proof: proofs/transformers_gaussian.md#eigenvalues (Weyl)
    _, C = g.centre()
    r = g.cov_radius_frobenius(prec)
    return [(lo - r, hi + r) for lo, hi in real_eigenvalues(C, prec)]


def condition_number(
    eigs: Sequence[tuple[flint.fmpq, flint.fmpq]],
) -> tuple[flint.fmpq, flint.fmpq] | None:
    """``[lambda_max lower / lambda_min upper, lambda_max upper / lambda_min lower]``, or None
    when the lower bound of lambda_min is not > 0. Guarantee: encloses the condition number."""
    (lmin_lo, lmin_hi), (lmax_lo, lmax_hi) = eigs[0], eigs[-1]
    if not lmin_lo > 0:
        return None
    return max(flint.fmpq(1), lmax_lo / lmin_hi), lmax_hi / lmin_lo


@dataclass(frozen=True)
class W2Bounds:
    """``lower <= W_2(N(m, Sigma), target) <= upper`` for every (m, Sigma) of the enclosure."""

    lower: flint.fmpq
    upper: flint.fmpq


def w2_to_target(
    g: GaussianEnclosure,
    eigs: Sequence[tuple[flint.fmpq, flint.fmpq]],
    target_mean: Any,
    target_cov: Any,
    prec: int = 128,
) -> W2Bounds | None:
    """Bounds on the Bures-Wasserstein distance from every Gaussian of the enclosure to the
    target: ``W_2`` at the centre (:func:`certified.transport.gaussian_w2`) plus or minus
    ``delta >= W_2(N(m, Sigma), N(c, C))``, with ``delta^2 = |m - c|^2 + (‖Sigma - C‖_F /
    (sqrt(lambda_min Sigma) + sqrt(lambda_min C)))^2`` (proofs/transformers_gaussian.md §5).
    None when the centre is not positive semi-definite or lambda_min is not bounded away
    from 0.

    Guarantee: encloses W_2 from each Gaussian of the enclosure to the target.
    """
    from certified.transport import gaussian_w2

    c, C = g.centre()
    lmin_sigma = eigs[0][0]
    lmin_C = real_eigenvalues(C, prec)[0][0]
    denom = _sqrt_lower(lmin_sigma, prec) + _sqrt_lower(lmin_C, prec)
    if not denom > 0 or not lmin_C >= 0:
        return None
    d = g.d
    Cl = [[C[i, j] for j in range(d)] for i in range(d)]
    try:
        w = gaussian_w2(c, Cl, target_mean, target_cov, prec=prec)
    except DomainError:
        return None
    # proof: proofs/transformers_gaussian.md#w2 (triangle inequality, Bures <= Sylvester bound)
    dm2 = sum(((hi - lo) / 2) ** 2 for lo, hi in g.mean)
    rF = g.cov_radius_frobenius(prec)
    bures = rF / denom  # an upper bound: rF is one and denom a lower bound
    delta = _sqrt_upper(dm2 + bures * bures, prec)
    return W2Bounds(max(flint.fmpq(0), w.lower - delta), w.upper + delta)
