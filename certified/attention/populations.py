"""Token populations whose infinite-token attention has a closed form (theorems.md §9).

Convention (theorems.md §9, the one :mod:`certified.attention.model` uses): the score of a key
``y`` at a query ``x`` is ``xᵀ A y = ⟨y, a⟩`` with ``a = Aᵀ x`` (``A = KᵀQ``, divided by
``√k`` when the layer is scaled). One head maps a measure μ to

.. math::

    Γ[μ](x) = G \\frac{∫ y\\, e^{⟨y, a⟩} dμ(y)}{∫ e^{⟨y, a⟩} dμ(y)},  \\qquad G = W V,

heads add up. Closed forms of the tilted mean ``E_a[y]`` (sympy proofs in
``tests/attention/test_sample_complexity_proofs.py``, lemmas in
proofs/bounds.md#token-closed-forms):

* Gaussian ``N(m, Σ)``: ``E_a[y] = m + Σ a``;
* uniform on the box ``Π_j [c_j − h_j, c_j + h_j]``: ``E_a[y]_j = c_j + h_j L(h_j a_j)`` with
  the Langevin function ``L(t) = coth t − 1/t`` (``L(0) = 0``); for ``[−1, 1]^d`` this is
  ``L(a)`` coordinatewise.

The Jacobians in ``x`` are ``G Σ Aᵀ`` and ``G diag(h_j² L'(h_j a_j)) Aᵀ``.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from typing import Any

import flint
import numpy as np

from certified.arith.ball import MAX_PREC, endpoints, precision
from certified.arith.exact import to_fmpq_array
from certified.errors import InputError, ShapeError

__all__ = [
    "GaussianPopulation",
    "UniformBox",
    "parse_population",
    "langevin",
    "langevin_derivative_range",
    "langevin_range",
]

MAX_POPULATION_DIM = 8


def _vector(x: Any, field: str) -> np.ndarray:
    v = to_fmpq_array(x, field)
    if v.ndim != 1 or not 1 <= v.shape[0] <= MAX_POPULATION_DIM:
        raise ShapeError(
            f"{field}: has shape {v.shape}; give a vector of 1..{MAX_POPULATION_DIM} numbers"
        )
    return v


def _extra_bits(q: flint.fmpq) -> int:
    # bits lost to cancellation in coth t − 1/t (about 2 log2(1/|t|)) and 1/t² − 1/sinh² t
    # (about 4 log2(1/|t|)): tightness only, the balls are rigorous at any precision
    lost = int(q.q).bit_length() - int(abs(q.p)).bit_length()
    return min(max(lost, 0), MAX_PREC // 8)


def langevin(q: flint.fmpq, prec: int) -> flint.arb:
    """``L(q) = coth q − 1/q`` (``L(0) = 0``) at an exact rational ``q``.

    The cancellation near 0 is absorbed by raising the working precision (the ball is rigorous
    whatever the precision). Guarantee: encloses ``L(q)``.
    """
    if q == 0:
        return flint.arb(0)
    with precision(min(prec + 4 * _extra_bits(q) + 16, MAX_PREC)):
        t = flint.arb(q)
        return t.coth() - 1 / t


def _langevin_prime(q: flint.fmpq, prec: int) -> flint.arb:
    if q == 0:
        return flint.arb(1) / 3
    with precision(min(prec + 8 * _extra_bits(q) + 16, MAX_PREC)):
        t = flint.arb(q)
        return 1 / (t * t) - 1 / t.sinh() ** 2


def _hull(lo: flint.arb, hi: flint.arb) -> flint.arb:
    return lo.union(hi)


def langevin_range(t: flint.arb, prec: int) -> flint.arb:
    """A ball containing ``L(s)`` for every ``s`` in the ball ``t``.

    ``L`` is increasing (``L' > 0``, proofs/bounds.md#langevin), so the image is
    ``[L(lo), L(hi)]``; each endpoint is evaluated at its exact value.
    Guarantee: encloses ``L([t])``.
    """
    lo, hi = endpoints(t, "t")
    with precision(prec):
        return _hull(langevin(lo, prec), langevin(hi, prec))


def langevin_derivative_range(t: flint.arb, prec: int) -> flint.arb:
    """A ball containing ``L'(s) = 1/s² − 1/sinh² s`` (``L'(0) = 1/3``) for every ``s`` in ``t``.

    ``L'`` is even, positive and decreasing in ``|s|`` (proofs/bounds.md#langevin), so the
    image is ``[L'(max|s|), L'(min|s|)]``. Guarantee: encloses ``L'([t])``.
    """
    lo, hi = endpoints(t, "t")
    far = max(abs(lo), abs(hi))
    near = flint.fmpq(0) if lo <= 0 <= hi else min(abs(lo), abs(hi))
    with precision(prec):
        return _hull(_langevin_prime(far, prec), _langevin_prime(near, prec))


@dataclass(frozen=True, eq=False)
class GaussianPopulation:
    """Tokens ``y ~ N(mean, cov)`` with exact parameters.

    Raises
    ------
    ShapeError, InputError
        ``cov`` not ``d x d``, not symmetric or not positive semidefinite (a principal minor
        is negative; decided exactly).

    Guarantee: exact.
    """

    mean: Any
    cov: Any

    def __post_init__(self) -> None:
        m = _vector(self.mean, "mean")
        S = to_fmpq_array(self.cov, "cov")
        d = m.shape[0]
        if S.shape != (d, d):
            raise ShapeError(f"cov: has shape {S.shape}; give a {d} x {d} matrix (d of mean)")
        for i, j in combinations(range(d), 2):
            if S[i, j] != S[j, i]:
                raise InputError(f"cov: not symmetric (entries [{i}][{j}] and [{j}][{i}] differ)")
        for size in range(1, d + 1):
            for idx in combinations(range(d), size):
                minor = flint.fmpq_mat([[S[i, j] for j in idx] for i in idx]).det()
                if minor < 0:
                    raise InputError(
                        f"cov: not positive semidefinite (principal minor {list(idx)} is "
                        f"{minor} < 0)"
                    )
        object.__setattr__(self, "mean", m)
        object.__setattr__(self, "cov", S)

    @property
    def d(self) -> int:
        return int(self.mean.shape[0])

    def tilted_mean(self, a: list[flint.arb], prec: int) -> list[flint.arb]:
        """``m + Σ a`` for the ball vector ``a`` (proofs/bounds.md#token-closed-forms).

        Guarantee: encloses ``E_a[y]`` for every ``a`` in the balls."""
        with precision(prec):
            return [
                flint.arb(self.mean[i])
                + sum((flint.arb(self.cov[i, j]) * a[j] for j in range(self.d)), flint.arb(0))
                for i in range(self.d)
            ]

    def tilted_jacobian(self, a: list[flint.arb], prec: int) -> list[list[flint.arb]]:
        """``∂E_a[y]/∂a = Σ`` (constant). Guarantee: exact (balls of radius 0 or rounding)."""
        with precision(prec):
            return [[flint.arb(self.cov[i, j]) for j in range(self.d)] for i in range(self.d)]

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` float64 samples (heuristic sampler; the samples are then exact data).

        Guarantee: none (heuristic)."""
        m = np.array([float(v) for v in self.mean])
        S = np.array([[float(v) for v in row] for row in self.cov])
        w, U = np.linalg.eigh(S)
        return m + rng.standard_normal((n, self.d)) @ (U * np.sqrt(np.maximum(w, 0.0))).T


@dataclass(frozen=True, eq=False)
class UniformBox:
    """Tokens uniform on the box ``Π_j [lower_j, upper_j]`` (exact, ``lower_j < upper_j``).

    Raises
    ------
    ShapeError, InputError

    Guarantee: exact.
    """

    lower: Any
    upper: Any

    def __post_init__(self) -> None:
        lo, hi = _vector(self.lower, "lower"), _vector(self.upper, "upper")
        if lo.shape != hi.shape:
            raise ShapeError(f"upper: has {hi.shape[0]} entries, lower has {lo.shape[0]}")
        for j, (a, b) in enumerate(zip(lo, hi, strict=True)):
            if not a < b:
                raise InputError(f"upper[{j}]: {b} is not > lower[{j}] = {a}; give a proper box")
        object.__setattr__(self, "lower", lo)
        object.__setattr__(self, "upper", hi)

    @classmethod
    def cube(cls, d: int) -> UniformBox:
        """``[−1, 1]^d``. Guarantee: exact."""
        if isinstance(d, bool) or not isinstance(d, int) or not 1 <= d <= MAX_POPULATION_DIM:
            raise InputError(f"d: {d!r}; give an integer 1 <= d <= {MAX_POPULATION_DIM}")
        return cls([-1] * d, [1] * d)

    @property
    def d(self) -> int:
        return int(self.lower.shape[0])

    def _centre_half(self) -> tuple[list[flint.fmpq], list[flint.fmpq]]:
        c = [(a + b) / 2 for a, b in zip(self.lower, self.upper, strict=True)]
        h = [(b - a) / 2 for a, b in zip(self.lower, self.upper, strict=True)]
        return c, h

    def tilted_mean(self, a: list[flint.arb], prec: int) -> list[flint.arb]:
        """``c_j + h_j L(h_j a_j)`` (proofs/bounds.md#token-closed-forms).

        Guarantee: encloses ``E_a[y]`` for every ``a`` in the balls."""
        c, h = self._centre_half()
        with precision(prec):
            return [
                flint.arb(c[j]) + flint.arb(h[j]) * langevin_range(flint.arb(h[j]) * a[j], prec)
                for j in range(self.d)
            ]

    def tilted_jacobian(self, a: list[flint.arb], prec: int) -> list[list[flint.arb]]:
        """``diag(h_j² L'(h_j a_j))``. Guarantee: encloses ``∂E_a[y]/∂a`` over the balls."""
        _, h = self._centre_half()
        with precision(prec):
            out = [[flint.arb(0)] * self.d for _ in range(self.d)]
            for j in range(self.d):
                hj = flint.arb(h[j])
                out[j][j] = hj * hj * langevin_derivative_range(hj * a[j], prec)
            return out

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` float64 samples (heuristic sampler; the samples are then exact data).

        Guarantee: none (heuristic)."""
        lo = np.array([float(v) for v in self.lower])
        hi = np.array([float(v) for v in self.upper])
        return np.clip(lo + (hi - lo) * rng.random((n, self.d)), lo, hi)


def parse_population(obj: Any, field: str = "population") -> GaussianPopulation | UniformBox:
    """``{"gaussian": {"mean": d, "cov": d×d}}`` or ``{"uniform": {"lower": d, "upper": d}}``
    (numbers as in every input file: JSON numbers are binary64 values, strings exact).

    Raises
    ------
    SchemaError, ShapeError, InputError

    Guarantee: exact.
    """
    from certified.io import check_keys

    check_keys(obj, field, [], ["gaussian", "uniform"])
    if len(obj) != 1:
        raise InputError(f'{field}: give exactly one of "gaussian" or "uniform"')
    ((kind, body),) = obj.items()
    if kind == "gaussian":
        check_keys(body, f"{field}.gaussian", ["mean", "cov"])
        return GaussianPopulation(body["mean"], body["cov"])
    check_keys(body, f"{field}.uniform", ["lower", "upper"])
    return UniformBox(body["lower"], body["upper"])
