"""Tilted moments L_k, the log-partition gradient G and their Taylor series, in ball arithmetic.

For a discrete probability measure mu = sum_i w_i delta_{y_i} (exact atoms and weights):

* 1-D: Z(b) = sum w e^{b y}, L_k(b) = sum w y^k e^{b y} / Z(b) (``theorems.md`` section 4);
* d-D: G(q) = sum w y e^{<q, y>} / sum w e^{<q, y>} = grad log Z(q).

Series in b are python-flint ``arb_series`` truncated at ``order`` terms: the coefficients of a
truncated power series product / quotient / exp are exact functions of the lower coefficients,
so every coefficient ball encloses the true Taylor coefficient (no tail is involved; see
``proofs/bounds.md#tilted-series``). The identities of ``proofs/moment_matching.py`` are then
checked coefficient by coefficient: both sides are enclosed, so a residual ball bounds
|lhs - rhs| rigorously and its containing 0 is consistency, never proof, of the identity.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import factorial
from typing import Any

import flint
import numpy as np

from certified.arith.ball import check_precision, endpoints, precision
from certified.arith.exact import to_fmpq
from certified.checker import gradient_coordinate
from certified.errors import InputError, ShapeError
from certified.moments.measure import cumulants_from_moments, discrete_measure

__all__ = [
    "IdentityCheck",
    "check_cumulants",
    "check_gradient_identity",
    "check_moment_identity",
    "log_partition_gradient",
    "tilted_moment_series",
    "tilted_moments",
]


def _exact_point(q: Any, d: int, field: str) -> list[flint.fmpq]:
    q = [to_fmpq(c, f"{field}[{i}]") for i, c in enumerate(np.atleast_1d(np.asarray(q, object)))]
    if len(q) != d:
        raise ShapeError(f"{field}: {len(q)} coordinates, the measure has {d}; give {d}")
    return q


def _power(x: flint.arb, k: int) -> flint.arb:
    # repeated products: python-flint's arb ** k is NaN for a ball containing 0
    out = flint.arb(1)
    for _ in range(k):
        out *= x
    return out


def _coefficients(series: flint.arb_series, n: int) -> list[flint.arb]:
    # arb_series.coeffs() drops trailing exact zeros; pad them back
    c = list(series.coeffs())[:n]
    return c + [flint.arb(0)] * (n - len(c))


def log_partition_gradient(measure: Any, q: Any, prec: int) -> list[flint.arb]:
    """Balls containing every coordinate of G_mu(q) = grad log Z_mu(q).

    Parameters
    ----------
    measure : (points, weights) or mapping, see :func:`~certified.moments.discrete_measure`
    q : sequence of d exact numbers
    prec : int
        Working precision in bits.

    Returns
    -------
    list of flint.arb
        Coordinate k is computed exactly as the checker computes it (same operations, same
        order), so a certificate replays to the same balls.

    Guarantee: encloses G_mu(q)_k for every k.
    """
    points, weights = discrete_measure(measure)
    q = _exact_point(q, points.shape[1], "q")
    with precision(check_precision(prec)):  # proof: proofs/bounds.md#tilted-series (values)
        return [
            gradient_coordinate(points.tolist(), weights.tolist(), q, k)
            for k in range(points.shape[1])
        ]


def _one_dimensional(measure: Any) -> tuple[list[flint.fmpq], list[flint.fmpq]]:
    points, weights = discrete_measure(measure)
    if points.shape[1] != 1:
        raise ShapeError(
            f"mu.points: {points.shape[1]} coordinates; L_k is defined for 1-D measures "
            "(project on a direction first)"
        )
    return list(points[:, 0]), list(weights)


def tilted_moments(measure: Any, b: Any, kmax: int, prec: int) -> list[flint.arb]:
    """Balls containing L_0(b), ..., L_kmax(b) of a 1-D discrete measure.

    Guarantee: encloses L_k(b) for k = 0..kmax.
    """
    x, w = _one_dimensional(measure)
    b = to_fmpq(b, "b")
    with precision(check_precision(prec)):
        e = [
            flint.arb(wi) * (flint.arb(b) * flint.arb(xi)).exp()
            for xi, wi in zip(x, w, strict=True)
        ]
        z = sum(e, flint.arb(0))
        out = []
        for k in range(kmax + 1):
            out.append(
                sum(
                    (ei * _power(flint.arb(xi), k) for ei, xi in zip(e, x, strict=True)),
                    flint.arb(0),
                )
                / z
            )
        return out


def tilted_moment_series(
    measure: Any, b0: Any, kmax: int, order: int, prec: int
) -> list[flint.arb_series]:
    """Taylor series of L_0, ..., L_kmax at b0, truncated at ``order`` terms.

    Coefficient j of series k encloses L_k^{(j)}(b0) / j!.

    Guarantee: encloses every Taylor coefficient (proofs/bounds.md#tilted-series).
    """
    x, w = _one_dimensional(measure)
    b0 = to_fmpq(b0, "b0")
    if not (isinstance(order, int) and 1 <= order <= 200 and isinstance(kmax, int) and kmax >= 0):
        raise InputError("order, kmax: use 1 <= order <= 200 terms and kmax >= 0")
    with precision(check_precision(prec), cap=order):
        terms = []
        for xi, wi in zip(x, w, strict=True):
            xb = flint.arb(xi)
            terms.append(flint.arb(wi) * flint.arb_series([flint.arb(b0) * xb, xb]).exp())
        z = sum(terms, flint.arb_series([0]))
        return [
            sum(
                (t * _power(flint.arb(xi), k) for t, xi in zip(terms, x, strict=True)),
                flint.arb_series([0]),
            )
            / z
            for k in range(kmax + 1)
        ]


@dataclass(frozen=True)
class IdentityCheck:
    """Outcome of an instance check of an identity, coefficient by coefficient.

    ``max_residual`` is an exact upper bound on |lhs - rhs| over all checked coefficients;
    ``consistent`` says whether every residual ball contains 0 (False would refute the
    identity: both sides are rigorous enclosures). ``checked`` counts the coefficients.

    Guarantee: |lhs - rhs| <= max_residual for every checked coefficient.
    """

    name: str
    checked: int
    max_residual: flint.fmpq
    consistent: bool


def _residual_check(name: str, pairs: list[tuple[flint.arb, flint.arb]]) -> IdentityCheck:
    worst, ok = flint.fmpq(0), True
    for lhs, rhs in pairs:
        lo, hi = endpoints(lhs - rhs, name)
        worst = max(worst, -lo, hi)
        ok &= lo <= 0 <= hi
    return IdentityCheck(name, len(pairs), worst, ok)


def check_moment_identity(
    measure: Any, b0: Any = 0, kmax: int = 3, order: int = 8, prec: int = 128
) -> IdentityCheck:
    """Instance check of d/db L_k = L_{k+1} - L_k L_1 at b0 for k = 0..kmax, on the first
    ``order - 1`` Taylor coefficients (``proofs/moment_matching.py``, ``moment_identity``).

    Guarantee: |coefficient of (L_k' - L_{k+1} + L_k L_1)| <= max_residual, for each one checked.
    """
    series = tilted_moment_series(measure, b0, kmax + 1, order, prec)
    pairs = []
    with precision(prec, cap=order):
        for k in range(kmax + 1):
            lhs = _coefficients(series[k].derivative(), order - 1)
            rhs = _coefficients(series[k + 1] - series[k] * series[1], order - 1)
            pairs += [(lhs[j], rhs[j]) for j in range(order - 1)]
    return _residual_check("d/db L_k = L_{k+1} - L_k L_1", pairs)


def check_cumulants(measure: Any, order: int = 8, prec: int = 128) -> IdentityCheck:
    """Instance check of L_1^{(j)}(0) = kappa_{j+1}(mu), j = 0..order-1, against the exact
    cumulants (rational recursion from the exact moments).

    Guarantee: |L_1^{(j)}(0) - kappa_{j+1}| <= max_residual for every j checked (each residual
    ball encloses the exact difference).
    """
    x, w = _one_dimensional(measure)
    moments = [
        sum((wi * xi**j for xi, wi in zip(x, w, strict=True)), flint.fmpq(0))
        for j in range(order + 1)
    ]
    kappa = cumulants_from_moments(moments)
    coeffs = _coefficients(tilted_moment_series(measure, 0, 1, order, prec)[1], order)
    with precision(prec):
        pairs = [(coeffs[j] * factorial(j), flint.arb(kappa[j])) for j in range(order)]
    return _residual_check("L_1^(j)(0) = kappa_{j+1}", pairs)


def check_gradient_identity(measure: Any, q: Sequence[Any], prec: int = 128) -> IdentityCheck:
    """Instance check of G_mu(q) = grad log Z_mu(q): coefficient 1 of the series of
    log Z(q + t e_k) against G_mu(q)_k for every coordinate k.

    Guarantee: |d/dq_k log Z(q) - G_k(q)| <= max_residual for every k.
    """
    points, weights = discrete_measure(measure)
    d = points.shape[1]
    qq = _exact_point(q, d, "q")
    grad = log_partition_gradient((points, weights), qq, prec)
    pairs = []
    with precision(check_precision(prec), cap=2):
        for k in range(d):
            z = flint.arb_series([0])
            for y, wi in zip(points, weights, strict=True):
                dot = sum(
                    (flint.arb(a) * flint.arb(c) for a, c in zip(qq, y, strict=True)), flint.arb(0)
                )
                z += flint.arb(wi) * flint.arb_series([dot, flint.arb(y[k])]).exp()
            pairs.append((_coefficients(z.log(), 2)[1], grad[k]))
    return _residual_check("G_mu(q) = grad log Z_mu(q)", pairs)
