"""One laminar phase rebuilt with float64 parameters that stay exactly laminar
(proofs/bounds.md#interp-rounded-phase).

A phase whose rows of A all equal ``−a`` and whose every ``w_i`` satisfies ``a·w_i = 0`` maps
``x`` to ``x + Σ_i τ w_i (c_i − a·x)_+`` exactly, whatever its numbers are
(proofs/bounds.md#interp-phase); so float64 parameters keep the exact evaluation of the error
as long as ``a·w_i = 0`` holds *exactly* between doubles. Variant C's normal ``u`` is a long
integer vector (hundreds of bits): its nearest doubles are not orthogonal to the nearest
doubles of the ``w_i``, the rounded pieces are not laminar, and the error of their flow was not
certified. Here:

* the normal is an integer vector ``a`` of a few dozen bits: ``u`` rounded
  (:func:`integer_normal`, tilted when rounding ties two points) or a short LLL vector nearly
  orthogonal to every ``y_n − x_n`` (:func:`lll_normals`); it need not be exactly orthogonal
  to them: the displacements are projected onto ``a^⊥`` and the lost component is part of the
  (exactly computed) error;
* the ``w_i`` are doubles on a grid ``2^e`` with ``a·w_i = 0`` exactly: the coordinates outside
  a set S of at most 12 are rounded, those in S are the nearest point of an affine integer
  lattice (LLL-reduced basis of ``{n ∈ Z^S : a_S·n = 0}``, Babai rounding, exact integers);
* the neurons are solved one after another for the *rounded* earlier ones (thresholds rounded
  first), so each point's error comes from its own neuron's rounding only, not amplified by
  the steep slopes of ``G``.

Nothing here is trusted: the guarantee is the exact evaluation of the rounded schedule
(:func:`certified.interpolation.verify.verify_interpolation`), checked by the callers.
"""

from __future__ import annotations

import itertools
import math

import flint
import numpy as np

from certified.arith.exact import fmpq_to_float
from certified.errors import RangeOverflowError
from certified.models import Piece

__all__ = ["KernelLattice", "integer_normal", "lll_normals", "rebuild_phase"]

_ZERO = flint.fmpq(0)
_HALF = flint.fmpq(1, 2)
_MAX_S = 12  # coordinates solved on the lattice (LLL in dimension <= 13, once per phase)


def _round_int(q: flint.fmpq) -> int:
    return int((q + _HALF).floor())


def _pow2(e: int) -> flint.fmpq:
    return flint.fmpq(1 << e) if e >= 0 else flint.fmpq(1, 1 << -e)


def _exact_double(q: flint.fmpq) -> bool:
    try:
        f = fmpq_to_float(q, "nearest")
    except RangeOverflowError:
        return False
    return flint.fmpq(*f.as_integer_ratio()) == q


def integer_normal(u, bits: int) -> list[int]:
    """Integers ``a_k`` nearest to ``2^bits u_k / max_k |u_k|`` (``|a_k| <= 2^bits``, doubles
    for ``bits <= 53``).

    Guarantee: none needed (any nonzero integer normal gives an exactly laminar phase).
    """
    big = max(abs(flint.fmpq(q)) for q in u)
    return [_round_int(flint.fmpq(q) * (1 << bits) / big) for q in u]


def lll_normals(delta: np.ndarray, bits: int, count: int = 3) -> list[list[int]]:
    """Short integer vectors ``a`` (about ``bits`` bits) with every ``a·Δ_n`` small: the first
    rows of the LLL-reduced basis of ``[e_k | round(C Δ_{n,k})]`` (simultaneous approximation
    of the null space of the ``Δ_n``, ``C = 2^{bits d/N}``): ``|a·Δ_n|/|a| ≈ 2^{−bits d/N}``
    against ``2^{−bits}`` for a rounded ``u``, so fewer bits reach the same direction and the
    lattice rounding of the ``w_i`` is finer.

    Guarantee: none needed (any nonzero integer normal gives an exactly laminar phase).
    """
    N, d = delta.shape
    C = flint.fmpq(1 << min(2000, max(0, round(bits * d / N))))
    rows = [
        [int(i == k) for i in range(d)] + [_round_int(C * delta[n, k]) for n in range(N)]
        for k in range(d)
    ]
    reduced = flint.fmpz_mat(rows).lll().tolist()
    out = [[int(x) for x in row[:d]] for row in reduced]
    return [a for a in out if any(a)][:count]


class KernelLattice:
    """Integer points ``n_S`` with ``a_S·n_S = r`` (``S``: up to 12 coordinates of ``a``, gcd 1)
    near a rational target: an LLL-reduced basis of the kernel lattice, a particular solution
    of ``a_S·e = 1``, and Babai's rounding in exact rational arithmetic.

    Raises ValueError when the reduced basis does not split as expected (gcd of ``a_S`` > 1).

    Guarantee: exact (integer arithmetic; proofs/bounds.md#interp-rounded-phase).
    """

    def __init__(self, a: list[int], S: list[int]):
        self.S = S
        aS = [a[k] for k in S]
        k = len(S)
        K = 1 << (max(abs(x) for x in aS).bit_length() + k + 8)
        M = flint.fmpz_mat([[int(i == j) for j in range(k)] + [K * aS[i]] for i in range(k)])
        rows = [[int(x) for x in row] for row in M.lll().tolist()]
        kernel = [row[:k] for row in rows if row[k] == 0]
        other = [row for row in rows if row[k] != 0]
        if len(kernel) != k - 1 or len(other) != 1 or abs(other[0][k]) != K:
            raise ValueError("no unimodular kernel basis (gcd of the normal's entries > 1)")
        sign = 1 if other[0][k] > 0 else -1
        self.e = [sign * x for x in other[0][:k]]  # a_S·e = 1
        self.basis = kernel
        if kernel:
            B = flint.fmpq_mat(kernel)
            self._proj = (B * B.transpose()).inv() * B  # (k-1)×k: coefficients of the projection
        else:
            self._proj = None

    def closest(self, target: list[flint.fmpq], r: int) -> list[int]:
        """An integer vector ``n`` with ``a_S·n = r`` exactly, near ``target``.

        Guarantee: ``a_S·n = r`` exactly (nearness is best effort: Babai's rounding).
        """
        base = [r * x for x in self.e]
        if self._proj is None:
            return base
        diff = flint.fmpq_mat([[t - b] for t, b in zip(target, base, strict=True)])
        coef = self._proj * diff
        out = list(base)
        for j, row in enumerate(self.basis):
            c = _round_int(coef[j, 0])
            if c:
                out = [o + c * x for o, x in zip(out, row, strict=True)]
        return out


def lattice_for(a: list[int]) -> tuple[list[int], KernelLattice] | None:
    """``(a', lattice)``: ``a`` with its S-entries' gcd made 1 (by moving the smallest of them
    by one unit when needed) and the lattice of those coordinates; None if that fails.

    Guarantee: exact (the returned a' is the normal the lattice belongs to).
    """
    a = list(a)
    S = sorted(range(len(a)), key=lambda k: -abs(a[k]))[:_MAX_S]
    S = [k for k in S if a[k] != 0] or S[:1]
    for _ in range(4):
        if math.gcd(*(a[k] for k in S)) == 1:
            try:
                return a, KernelLattice(a, sorted(S))
            except ValueError:  # pragma: no cover - LLL always separates the kernel here
                return None
        a[S[-1]] += 1
    return None


def round_orthogonal(w: list[flint.fmpq], a: list[int], lat: KernelLattice) -> list | None:
    """Doubles ``w'`` near ``w`` with ``a·w' = 0`` exactly, or None (out of double range).

    Guarantee: ``a·w' = 0`` exactly when not None (integer arithmetic).
    """
    big = max(abs(q) for q in w)
    if big == 0:
        return [_ZERO] * len(w)
    e = int(big.p).bit_length() - int(big.q).bit_length() + 1 - 51
    g = _pow2(e)
    n = [0] * len(w)
    inS = set(lat.S)
    rest = 0
    for k, q in enumerate(w):
        if k not in inS:
            n[k] = _round_int(q / g)
            rest += a[k] * n[k]
    nS = lat.closest([w[k] / g for k in lat.S], -rest)
    for k, v in zip(lat.S, nS, strict=True):
        n[k] = v
    if sum(ak * nk for ak, nk in zip(a, n, strict=True)) != 0:  # pragma: no cover - by design
        return None
    out = [flint.fmpq(v) * g for v in n]
    return out if all(_exact_double(q) for q in out) else None


def _double(q: flint.fmpq, rounding: str = "nearest") -> flint.fmpq:
    return flint.fmpq(*fmpq_to_float(q, rounding).as_integer_ratio())


def _above(q: flint.fmpq) -> flint.fmpq:
    """The smallest double > q."""
    up = _double(q, "up")
    if up > q:
        return up
    nxt = math.nextafter(float(up), math.inf)
    if math.isinf(nxt):
        raise RangeOverflowError("a threshold above the largest double")
    return flint.fmpq(*nxt.as_integer_ratio())


def _thresholds(s: list, delta: np.ndarray) -> list:
    """Double thresholds: those of the exact construction (``c_1 > s_1``,
    ``s_i < c_i < s_{i−1}``) rounded to the nearest double, raised to the smallest double above
    ``s_i`` when rounding put them at or below it. When no double lies strictly between ``s_i``
    and ``s_{i−1}`` (points a few ulps apart), such a threshold also moves point ``i − 1``:
    the schedule stays laminar and its error, computed exactly, says how much that costs.
    Raises RangeOverflowError when a threshold is out of the double range."""
    from certified.interpolation.construct import phase_kinks

    sa = np.empty(len(s), dtype=object)
    sa[:] = s
    c, _, _ = phase_kinks(sa, delta[:, :1])
    out = [_double(q) for q in c]
    return [q if q > s[i] else _above(s[i]) for i, q in enumerate(out)]


def _scale(a: list[int], s: list) -> int:
    """``σ`` with ``max |2^σ s| ≈ 1`` (thresholds and slopes of moderate size), clamped so that
    every ``2^σ a_k`` is a normal double (exact: an integer of <= 53 bits times 2^σ)."""
    big = max(abs(q) for q in s)
    if big == 0:
        return 0
    sigma = -(int(big.p).bit_length() - int(big.q).bit_length())
    top = max(abs(k) for k in a).bit_length()  # a != 0; every nonzero |a_k| >= 1
    return max(min(sigma, 1000 - top), -1000)


def _solve_neurons(s, c, delta, tau, a, lat) -> list | None:
    """The ``w_n`` one after another, each for the rounded earlier ones (exact residuals):
    point n's error is its own neuron's rounding only."""
    d = delta.shape[1]
    acc_c = np.full(d, _ZERO, dtype=object)  # Σ J_i c_i over the neurons so far
    acc_1 = np.full(d, _ZERO, dtype=object)  # Σ J_i
    W = []
    for n in range(len(s)):
        need = delta[n] - (acc_c - acc_1 * s[n])  # exactly ⊥ a
        w = round_orthogonal(list(need * (1 / (tau * (c[n] - s[n])))), a, lat)
        if w is None:
            return None
        J = np.empty(d, dtype=object)
        J[:] = [tau * q for q in w]
        acc_c = acc_c + J * c[n]
        acc_1 = acc_1 + J
        W.append(w)
    return W


def rebuild_phase(
    Z: np.ndarray, target: np.ndarray, a: list[int], tau: flint.fmpq, p: int
) -> list[Piece] | None:
    """Pieces of width ``p`` (normal ``−2^σ a`` for a power of two ``2^σ`` fitting the data's
    scale, duration ``tau``, every parameter a double, every ``w ⊥ a`` exactly) moving each
    ``Z[n]`` close to ``target[n]``; None when the points are not separated by ``a`` or a
    parameter leaves the double range.

    Guarantee: the pieces are laminar with one normal (exact checks); their accuracy is only
    what the exact evaluation of the caller certifies.
    """
    N, d = Z.shape
    if not all(_exact_double(flint.fmpq(k)) for k in a) or not _exact_double(tau) or tau <= 0:
        return None
    fixed = lattice_for(a)
    if fixed is None:
        return None
    a, lat = fixed
    s_int = Z.dot(np.array([flint.fmpq(k) for k in a], dtype=object))
    unit = flint.fmpq(2) ** _scale(a, list(s_int))
    aq = np.empty(d, dtype=object)
    aq[:] = [k * unit for k in a]
    order = sorted(range(N), key=lambda n: s_int[n], reverse=True)
    s = [s_int[n] * unit for n in order]
    if any(x == y for x, y in itertools.pairwise(s)) or not all(map(_exact_double, aq)):
        return None
    delta = target[order] - Z[order]
    delta = delta - (delta.dot(aq) * (1 / aq.dot(aq)))[:, None] * aq[None, :]
    try:
        c = _thresholds(s, delta)
    except RangeOverflowError:
        return None
    W = _solve_neurons(s, c, delta, tau, a, lat)
    if W is None:
        return None
    pieces = []
    for start in range(0, N, p):
        stop = min(start + p, N)
        Wp = np.array([W[i] for i in range(start, stop)], dtype=object).T
        A = np.array([list(-aq)] * (stop - start), dtype=object)
        b = np.array(c[start:stop], dtype=object)
        pieces.append(Piece(tau, Wp, A, b))
    return pieces
