"""Variant D: autonomous (L = 0) interpolation of data in the separation event (theorems.md §3,
row D; proofs/interpolation_variants.md#autonomous).

* :func:`separation_probability` -- the exact probability ``q_N = 2^N N!/(2N)!`` that the N
  travel intervals ``[min(x_n^j, y_n^j), max(x_n^j, y_n^j)]`` of one coordinate are pairwise
  disjoint (x, y i.i.d. uniform); :func:`event_probability` ``1 − (1 − q_N)^d``.
* :func:`check_probability_lower_bound` -- ``q_N ≥ (1/√2)(e/(2N))^N`` decided rigorously in
  ball arithmetic (Stirling–Robbins; a certified comparison, not a float).
* :func:`separating_coordinate` -- exactly, a coordinate j in which the data are in the event.
* :func:`construct_autonomous` -- a constant width-N ReLU field ``ẋ = F(x^j)`` (every normal
  ``e_j``) found numerically (mpmath, untrusted), exported to doubles, and its error
  ``max_n |Φ_T(x_n) − y_n|`` certified by :func:`certified.interpolation.verify_interpolation`
  (the piecewise-affine flow engine).
* :func:`sample_separation_frequency` -- Monte Carlo frequency of the event (a sanity check of
  the formula; no guarantee).

The construction (the "transversal field" is not published in what we have; this one is ours):
sort the disjoint travel intervals ``I_1 < ... < I_N`` of coordinate j and put one kink
``κ_n`` strictly below ``I_n`` (in the gap above ``I_{n−1}``). The field component
``g(z) = Σ_i c_i (z − κ_i)_+`` is affine on each ``I_n``; the slope ``α_n = c_1 + ... + c_n``
is the unique value for which ``ż = g(z)`` carries ``x_n^j`` to ``y_n^j`` in time T (the
arrival point is increasing in α and ranges over ``(κ_n, ∞)``). Every other coordinate k moves
by ``Σ_i w_i^k ∫_0^T (z_n(t) − κ_i)_+ dt``: a lower-triangular system with positive diagonal,
solved for the ``w_i^k``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import flint
import numpy as np

from certified.arith.ball import precision
from certified.errors import DomainError, InputError
from certified.interpolation._variant_common import (
    as_points,
    check_distinct,
    positive_time,
    require_dimension_two,
)
from certified.models import Activation, Piece, Schedule

__all__ = [
    "AutonomousInterpolation",
    "autonomous_certificate",
    "check_probability_lower_bound",
    "construct_autonomous",
    "event_probability",
    "sample_separation_frequency",
    "separating_coordinate",
    "separation_probability",
]


def _positive_int(N: Any, field: str) -> int:
    if isinstance(N, bool) or not isinstance(N, (int, np.integer)) or N < 1:
        raise InputError(f"{field}: {N!r} is not an integer >= 1")
    return int(N)


def separation_probability(N: int) -> flint.fmpq:
    """``q_N = 2^N N! / (2N)!``: probability that N i.i.d. uniform pairs ``(x_n, y_n)`` of
    reals have pairwise disjoint intervals ``[min, max]`` (each pair adjacent in the sorted
    order of all 2N numbers).

    Examples
    --------
    >>> separation_probability(2)
    1/3

    Guarantee: exact.
    """
    N = _positive_int(N, "N")
    return flint.fmpq(2**N * math.factorial(N), math.factorial(2 * N))


def event_probability(N: int, d: int) -> flint.fmpq:
    """``1 − (1 − q_N)^d``: probability that some of d coordinates is separating.

    Guarantee: exact.
    """
    q = separation_probability(N)
    d = _positive_int(d, "d")
    return 1 - (1 - q) ** d


def check_probability_lower_bound(N: int, prec: int = 128) -> bool:
    """Decide ``q_N ≥ (1/√2)(e/(2N))^N`` rigorously (ball arithmetic at ``prec`` bits).

    Returns True when the difference is certainly positive, False when it could not be
    certified at this precision (it never is False for 1 <= N <= 200 at 128 bits: tested).

    Guarantee: True means the inequality holds (proofs/interpolation_variants.md#autonomous).
    """
    N = _positive_int(N, "N")
    q = separation_probability(N)
    with precision(prec):
        lhs = flint.arb(q)
        rhs = (flint.arb(1).exp() / (2 * N)) ** N / flint.arb(2).sqrt()
        return bool(lhs - rhs > 0)


def separating_coordinate(X: Any, Y: Any) -> int | None:
    """The first coordinate j whose travel intervals ``[min(x_n^j, y_n^j), max(...)]`` are
    pairwise disjoint (closed intervals), or None.

    Guarantee: exact.
    """
    Xq = as_points(X, "X")
    Yq = as_points(Y, "Y", Xq.shape[1])
    for j in range(Xq.shape[1]):
        iv = sorted((min(x, y), max(x, y)) for x, y in zip(Xq[:, j], Yq[:, j], strict=True))
        if all(iv[k][1] < iv[k + 1][0] for k in range(len(iv) - 1)):
            return j
    return None


def sample_separation_frequency(N: int, d: int, samples: int, seed: int = 0) -> float:
    """Monte Carlo frequency of the event "some coordinate is separating" for x, y i.i.d.
    uniform on [0, 1]^d.

    Guarantee: none (a sanity check of :func:`event_probability`).
    """
    rng = np.random.default_rng(seed)
    X = rng.random((samples, N, d))
    Y = rng.random((samples, N, d))
    lo, hi = np.minimum(X, Y), np.maximum(X, Y)
    order = np.argsort(lo, axis=1)
    lo_s = np.take_along_axis(lo, order, axis=1)
    hi_s = np.take_along_axis(hi, order, axis=1)
    sep = np.all(hi_s[:, :-1, :] < lo_s[:, 1:, :], axis=1)  # (samples, d)
    return float(np.mean(np.any(sep, axis=1)))


@dataclass(frozen=True)
class AutonomousInterpolation:
    """An autonomous (one-piece, L = 0) width-N ReLU schedule for data in the separation event.

    Attributes
    ----------
    schedule : Schedule
        One piece, double parameters, every normal ``e_j``.
    coordinate : int
        The separating coordinate j.
    verdict : certified.interpolation.InterpolationVerdict
        ``max_error``: certified upper bound of ``max_n |Φ_T(x_n) − y_n|_2`` for this schedule.

    Guarantee: ``verdict.max_error`` is a rigorous bound (the parameters themselves are
    heuristic: found in floating point).
    """

    schedule: Schedule
    coordinate: int
    verdict: Any


def _arrival(mp: Any, x: Any, kappa: Any, G: Any, alpha: Any, T: Any) -> Any:
    """z(T) for ż = G + α(z − κ), z(0) = x."""
    e = mp.expm1(alpha * T)
    phi = e / alpha if alpha != 0 else T
    return x + (x - kappa) * e + G * phi


def _integral(mp: Any, x: Any, kappa: Any, G: Any, alpha: Any, T: Any) -> Any:
    """∫_0^T (z(t) − κ) dt for the same motion."""
    u = x - kappa
    if alpha == 0:
        return u * T + G * T * T / 2
    e = mp.expm1(alpha * T)
    return u * e / alpha + G * (e - alpha * T) / (alpha * alpha)


def _solve_slope(mp: Any, x: Any, y: Any, kappa: Any, G: Any, T: Any) -> Any:
    """The α with z(T) = y (z(T) is increasing in α; bisection)."""
    lo, hi = mp.mpf(-1), mp.mpf(1)
    while _arrival(mp, x, kappa, G, lo, T) > y:
        lo *= 2
    while _arrival(mp, x, kappa, G, hi, T) < y:
        hi *= 2
    for _ in range(400):
        mid = (lo + hi) / 2
        if _arrival(mp, x, kappa, G, mid, T) < y:
            lo = mid
        else:
            hi = mid
        if hi - lo <= mp.eps * (abs(lo) + abs(hi) + 1):
            break
    return (lo + hi) / 2


def construct_autonomous(
    X: Any, Y: Any, *, time: Any = 1, coordinate: int | None = None, prec: int | None = None
) -> AutonomousInterpolation:
    """Autonomous interpolation (theorem D): one constant ReLU piece of width N moving each
    ``x_n`` to ``y_n`` in time T, certified a posteriori.

    Parameters
    ----------
    X, Y : (N, d) arrays
        Pairwise distinct x's and y's, d >= 2, in the separation event (some coordinate with
        pairwise disjoint travel intervals).
    time : number
        T > 0.
    coordinate : int, optional
        The separating coordinate to use (default: the first one).
    prec : int, optional
        Precision of the certifying flow engine.

    Returns
    -------
    AutonomousInterpolation

    Raises
    ------
    ShapeError, NonFiniteError, NumberFormatError
        Bad arrays.
    InputError
        Duplicate points, T <= 0.
    DomainError
        d = 1, or no separating coordinate (the data are not in the event of theorem D), or
        the requested coordinate is not separating.

    Examples
    --------
    >>> r = construct_autonomous([[0, 0], [3, 1]], [[1, 2], [4, -1]])
    >>> r.schedule.switches, r.verdict.max_error < flint.fmpq(1, 10**9)
    (0, True)

    Guarantee: ``verdict.max_error`` bounds ``max_n |Φ_T(x_n) − y_n|_2`` rigorously.
    """
    import mpmath

    from certified.interpolation import verify_interpolation

    Xq = as_points(X, "X")
    N, d = Xq.shape
    Yq = as_points(Y, "Y", d)
    if Yq.shape[0] != N:
        from certified.errors import ShapeError

        raise ShapeError(f"Y: {Yq.shape[0]} targets for {N} points; give one target per point")
    require_dimension_two(d, "interpolation")
    check_distinct(Xq, "X")
    check_distinct(Yq, "Y")
    T = positive_time(time)
    j = separating_coordinate(Xq, Yq) if coordinate is None else int(coordinate)
    if j is None or not 0 <= j < d or separating_coordinate(Xq[:, [j]], Yq[:, [j]]) is None:
        raise DomainError(
            "X, Y: no coordinate has pairwise disjoint travel intervals [min(x, y), max(x, y)] "
            "(the separation event of theorem D); the autonomous construction does not apply"
            if coordinate is None
            else f"coordinate: {coordinate} is not a separating coordinate of the data"
        )
    mp = mpmath.mp
    with mpmath.workdps(30):  # producer arithmetic only: the flow engine certifies below

        def m(q: flint.fmpq) -> Any:
            return mp.mpf(int(q.p)) / int(q.q)

        order = sorted(range(N), key=lambda n: min(Xq[n, j], Yq[n, j]))
        lo = [m(min(Xq[n, j], Yq[n, j])) for n in order]
        hi = [m(max(Xq[n, j], Yq[n, j])) for n in order]
        span = hi[-1] - lo[0]
        first_gap = min([lo[k + 1] - hi[k] for k in range(N - 1)] + [span if span > 0 else 1])
        Tm = m(T)
        kappa: list[Any] = []
        c: list[Any] = []
        G_list, alpha_list = [], []
        for k, n in enumerate(order):
            # the kink may sit anywhere in the gap below I_k (below I_1: any distance); take the
            # candidate with the smallest |α_k|: the flow of the rounded parameters then
            # amplifies rounding errors least (about e^{|α|T}); tightness only
            if k == 0:
                cands = [lo[0] - first_gap * f for f in (1, 4, 16, 64)]
            else:
                gap = lo[k] - hi[k - 1]
                cands = [hi[k - 1] + gap * f for f in (0.125, 0.3125, 0.5, 0.6875, 0.875)]
            prev = sum(c, mp.mpf(0))
            best = None
            for kap in cands:
                G = sum((c[i] * (kap - kappa[i]) for i in range(k)), mp.mpf(0))
                alpha = _solve_slope(mp, m(Xq[n, j]), m(Yq[n, j]), kap, G, Tm)
                if best is None or abs(alpha) < abs(best[2]):
                    best = (kap, G, alpha)
            kap, G, alpha = best
            kappa.append(kap)
            c.append(alpha - prev)
            G_list.append(G)
            alpha_list.append(alpha)
        # M[k][i] = ∫ (z_k − κ_i)_+ dt: z_k stays in (κ_k, κ_{k+1}), so (z_k − κ_i)_+ is
        # z_k − κ_i for i <= k and 0 for i > k
        M = [[mp.mpf(0)] * N for _ in range(N)]
        for k, n in enumerate(order):
            base = _integral(mp, m(Xq[n, j]), kappa[k], G_list[k], alpha_list[k], Tm)
            for i in range(k + 1):
                M[k][i] = base + (kappa[k] - kappa[i]) * Tm
        W = [[0.0] * N for _ in range(d)]
        for i in range(N):
            W[j][i] = float(c[i])
        for r in range(d):
            if r == j:
                continue
            sol: list[Any] = []
            for k, n in enumerate(order):
                rhs = m(Yq[n, r]) - m(Xq[n, r])
                rhs -= sum((M[k][i] * sol[i] for i in range(k)), mp.mpf(0))
                sol.append(rhs / M[k][k])
            for i in range(N):
                W[r][i] = float(sol[i])
        b = [float(-kv) for kv in kappa]
    A = [[1.0 if k == j else 0.0 for k in range(d)] for _ in range(N)]
    piece = Piece(T, W, A, b)
    schedule = Schedule(d, Activation.RELU, (piece,))
    verdict = verify_interpolation(Xq, Yq, schedule, prec=prec)
    return AutonomousInterpolation(schedule=schedule, coordinate=j, verdict=verdict)


def autonomous_certificate(X: Any, result: AutonomousInterpolation, *, prec: int = 128) -> dict:
    """A ``flow`` certificate (rule ``relu-regions``) enclosing ``Φ_T(x_n)`` for the autonomous
    schedule, re-checkable with ``certified check``; the certified error against ``y_n`` is the
    farthest point of each enclosure box from ``y_n``.

    Raises
    ------
    InputError
        The region engine did not certify the flow (no certificate to give).

    Guarantee: none (producer); the checker decides the enclosures.
    """
    from certified.errors import InputError
    from certified.flow.api import enclose_flow, flow_certificate_for

    Xq = as_points(X, "X", result.schedule.dimension)
    res = enclose_flow(result.schedule, Xq, prec=prec, method="regions")
    cert = flow_certificate_for(result.schedule, Xq, res, precision=prec)
    if cert is None:
        raise InputError(f"X: the flow was not certified ({res.message}); no certificate")
    return cert
