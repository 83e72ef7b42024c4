"""Certified separation witnesses for two discrete probability measures (``theorems.md`` §4).

For mu != nu (exact atoms and weights) a *witness* is a point q in R^d and a coordinate k
such that G_mu(q)_k and G_nu(q)_k, with G(q) = grad log Z(q) = sum w y e^{<q,y>} / sum w
e^{<q,y>}, lie in disjoint intervals. In 1-D, G = L_1. The search is a heuristic (untrusted);
the verdict comes from the checker (``certified.checker``, rule ``separation``), which replays
the two enclosures from the exact data before any witness is returned.

The search. Equal measures are recognised exactly (merge repeated atoms, drop zero weights,
compare) and get no witness. Otherwise pick a direction u on which the projected measures
differ (the axes, then the moment curve u_t = (1, t, ..., t^{d-1}), t = 1, 2, ...: a nonzero
difference <u_t, y - y'> vanishes for at most d - 1 values of t, so some t <= C(N, 2)(d - 1) + 1
makes the projection injective on the N atoms). Along u, if the first m - 1 centred moments
agree and the m-th differs by delta, then L_1(mu)(b) - L_1(nu)(b) = delta b^{m-1} / (m - 1)!
+ O(b^m) (the first m - 1 cumulants agree and kappa_m differs by delta), so b of the order of
1 / spread gives a difference of about delta / (spread^{m-1} (m - 1)!), which sets the first
precision; q = b u, the precision doubles until some coordinate separates.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from math import comb, factorial
from typing import Any

import flint

from certified.arith.ball import check_precision, endpoints, precision
from certified.certificates import exact_number
from certified.checker import MAX_SEPARATION_COST, check_certificate
from certified.errors import PrecisionError, ShapeError
from certified.moments.measure import (
    discrete_measure,
    first_differing_moment,
    merged_atoms,
    project,
)
from certified.verdict import Outcome

__all__ = [
    "SeparationResult",
    "SeparationStatus",
    "SeparationWitness",
    "separation_witness",
]

MAX_CHECKER_PRECISION = 16384
_BETAS = ("1", "-1", "2", "-2", "1/2", "-1/2", "3", "-3", "1/4", "-1/4", "4", "-4")


class SeparationStatus(enum.Enum):
    """``separated``: a witness, re-checked; ``equal``: mu = nu exactly (no witness exists);
    ``undecided``: distinct measures, no witness found within the limits."""

    SEPARATED = "separated"
    EQUAL = "equal"
    UNDECIDED = "undecided"


_OUTCOMES = {
    SeparationStatus.SEPARATED: Outcome.VERIFIED,
    SeparationStatus.EQUAL: Outcome.REFUTED,
    SeparationStatus.UNDECIDED: Outcome.UNDECIDED,
}


@dataclass(frozen=True)
class SeparationWitness:
    """A point q and coordinate k with G_mu(q)_k in ``mu_enclosure``, G_nu(q)_k in
    ``nu_enclosure`` (closed, disjoint, exact endpoints), replayed at ``precision`` bits.
    ``direction`` is the u with q = b u used by the search (informative only).

    Guarantee: the enclosures contain the exact values (checked by the independent checker).
    """

    q: tuple[flint.fmpq, ...]
    coordinate: int
    mu_enclosure: tuple[flint.fmpq, flint.fmpq]
    nu_enclosure: tuple[flint.fmpq, flint.fmpq]
    precision: int
    direction: tuple[flint.fmpq, ...]

    def gap(self) -> flint.fmpq:
        """Distance between the two enclosures (> 0)."""
        (a, b), (c, d) = self.mu_enclosure, self.nu_enclosure
        return c - b if b < c else a - d

    def to_json(self) -> dict[str, Any]:
        """Exact strings: ``{"q", "coordinate", "mu", "nu", "precision", "direction"}``."""
        return {
            "q": [exact_number(c) for c in self.q],
            "coordinate": self.coordinate,
            "mu": [exact_number(c) for c in self.mu_enclosure],
            "nu": [exact_number(c) for c in self.nu_enclosure],
            "precision": self.precision,
            "direction": [exact_number(c) for c in self.direction],
        }


@dataclass(frozen=True)
class SeparationResult:
    """Outcome of :func:`separation_witness`: status, witness (or None), one-line reason,
    the order of the first differing moment along ``witness.direction`` (None if equal) and
    the certificate (kind ``separation``, already accepted by the checker) when separated.

    Guarantee: status SEPARATED implies mu != nu (the certificate was VERIFIED); EQUAL implies
    mu = nu (exact comparison of canonical forms).
    """

    status: SeparationStatus
    witness: SeparationWitness | None
    reason: str
    first_differing_moment: int | None = None
    certificate: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def verdict(self) -> Outcome:
        """The shared verdict: VERIFIED (witness), REFUTED (mu = nu: no witness can exist),
        UNDECIDED."""
        return _OUTCOMES[self.status]


def _bits(q: flint.fmpq) -> int:
    """About log2 |q| (q != 0), from the sizes of numerator and denominator."""
    return int(abs(q.p)).bit_length() - int(q.q).bit_length()


def _power_of_two(e: int) -> flint.fmpq:
    return flint.fmpq(flint.fmpz(2) ** e) if e >= 0 else flint.fmpq(1, flint.fmpz(2) ** -e)


def _directions(d: int, atoms: int, limit: int):
    for k in range(d):
        yield tuple(flint.fmpq(int(i == k)) for i in range(d))
    if d == 1:
        return
    enough = comb(atoms, 2) * (d - 1) + 1  # some t <= enough is injective on the atoms
    for t in range(1, min(enough, max(limit - d, 0)) + 1):
        yield tuple(flint.fmpq(t**i) for i in range(d))


def _gradients(points: list, weights: list, q: list) -> list[flint.arb]:
    # The checker's gradient_coordinate, all coordinates at once with the same operations in
    # the same order, so that its replay gives the same balls.
    qb = [flint.arb(c) for c in q]
    d = len(q)
    num, den = [flint.arb(0)] * d, flint.arb(0)
    for y, w in zip(points, weights, strict=True):
        e = (
            flint.arb(w)
            * sum((a * flint.arb(c) for a, c in zip(qb, y, strict=True)), flint.arb(0)).exp()
        )
        num = [num[k] + e * flint.arb(y[k]) for k in range(d)]
        den = den + e
    return [v / den for v in num]


def _outward(lo: flint.fmpq, hi: flint.fmpq, grid: int) -> tuple[flint.fmpq, flint.fmpq]:
    """[lo, hi] rounded outward to multiples of 2^-grid."""
    scale = _power_of_two(grid)
    lo_n, hi_n = lo * scale, hi * scale
    return flint.fmpq(lo_n.floor()) / scale, flint.fmpq(hi_n.ceil()) / scale


def _enclosures(gm: flint.arb, gn: flint.arb):
    """Disjoint dyadic intervals around two disjoint balls, and the bits they need."""
    (a, b), (c, d) = endpoints(gm), endpoints(gn)
    gap = c - b if b < c else a - d
    margin = gap / 4
    grid = 2 - _bits(margin)  # 2^-grid <= margin / 2
    mu, nu = _outward(a - margin, b + margin, grid), _outward(c - margin, d + margin, grid)
    bits = max(_bits(abs(v)) for v in (*mu, *nu) if v != 0) + grid if any((*mu, *nu)) else 0
    return mu, nu, bits


def _certificate(mu, nu, witness: SeparationWitness) -> dict[str, Any]:
    def measure(m):
        return {
            "points": [[exact_number(c) for c in row] for row in m[0]],
            "weights": [exact_number(w) for w in m[1]],
        }

    return {
        "kind": "separation",
        "version": 1,
        "instance": {"mu": measure(mu), "nu": measure(nu)},
        "claim": {
            "q": [exact_number(c) for c in witness.q],
            "coordinate": witness.coordinate,
            "mu": [exact_number(c) for c in witness.mu_enclosure],
            "nu": [exact_number(c) for c in witness.nu_enclosure],
        },
        "hints": {"precision": witness.precision},
    }


def _try(mu, nu, q, u, prec: int, lists) -> tuple[SeparationWitness, dict] | None:
    # proof: proofs/bounds.md#tilted-series (separation); the checker's replay decides
    with precision(prec):
        gm, gn = _gradients(*lists[0], q), _gradients(*lists[1], q)
    best = None
    for k in range(len(q)):
        if not (gm[k].is_finite() and gn[k].is_finite()) or gm[k].overlaps(gn[k]):
            continue
        mu_box, nu_box, bits = _enclosures(gm[k], gn[k])
        score = bits  # fewest bits: the clearest separation
        if best is None or score < best[0]:
            best = (score, k, mu_box, nu_box)
    if best is None:
        return None
    _, k, mu_box, nu_box = best
    hint = max(prec, -(-(best[0] + 16) // 32) * 32)
    if hint > MAX_CHECKER_PRECISION:
        return None
    witness = SeparationWitness(tuple(q), k, mu_box, nu_box, hint, tuple(u))
    cert = _certificate(mu, nu, witness)
    return (witness, cert) if check_certificate(cert).verified else None


def separation_witness(mu: Any, nu: Any, *, max_prec: int = 4096, max_directions: int = 64):
    """Find and certify a separation witness for two discrete probability measures.

    Parameters
    ----------
    mu, nu : (points, weights) pairs or mappings ``{"points", "weights"}``
        See :func:`~certified.moments.discrete_measure`; same dimension d >= 1.
    max_prec : int
        Largest working precision the search may use (bits, <= 16384).
    max_directions : int
        Most projection directions tried (d-D).

    Returns
    -------
    SeparationResult
        SEPARATED with a witness and a certificate the checker has accepted; EQUAL with the
        reason (mu = nu exactly: no witness exists); UNDECIDED with the reason and what to
        change (limits reached).

    Raises
    ------
    ShapeError, InputError, NonFiniteError, NumberFormatError
        Bad measures (see :func:`~certified.moments.discrete_measure`), dimension mismatch.
    PrecisionError
        ``max_prec`` out of range.

    Guarantee: SEPARATED implies mu != nu, with G_mu(q)_k and G_nu(q)_k in the witness's
    disjoint enclosures (replayed by the independent checker); EQUAL implies mu = nu.
    """
    mu, nu = discrete_measure(mu, "mu"), discrete_measure(nu, "nu")
    max_prec = check_precision(max_prec, "max_prec")
    if max_prec > MAX_CHECKER_PRECISION:
        raise PrecisionError(f"max_prec: {max_prec} exceeds {MAX_CHECKER_PRECISION}; lower it")
    d = mu[0].shape[1]
    if nu[0].shape[1] != d:
        raise ShapeError(
            f"nu.points: {nu[0].shape[1]} coordinates, mu.points has {d}; give two measures "
            "in the same dimension"
        )
    if merged_atoms(*mu) == merged_atoms(*nu):
        return SeparationResult(
            SeparationStatus.EQUAL,
            None,
            "mu = nu: the measures are equal after merging repeated atoms and dropping zero "
            "weights (exact comparison), so G_mu = G_nu everywhere and no witness exists",
        )
    lists = [(m[0].tolist(), m[1].tolist()) for m in (mu, nu)]
    atoms = len(set(merged_atoms(*mu)) | set(merged_atoms(*nu)))
    budget = MAX_SEPARATION_COST // ((len(mu[1]) + len(nu[1])) * (d + 1)) - 512
    top = min(max_prec, budget)
    if top < 53:
        return SeparationResult(
            SeparationStatus.UNDECIDED,
            None,
            f"mu != nu, but {len(mu[1]) + len(nu[1])} atoms in dimension {d} exceed the checker's "
            "resource limit (proofs/separation.md, condition 5); use fewer atoms",
        )
    largest = max(max(abs(c) for c in m[0].flat) for m in (mu, nu))
    tried = 0
    for u in _directions(d, atoms, max_directions):
        x_mu, x_nu = merged_atoms(project(mu[0], u), mu[1]), merged_atoms(project(nu[0], u), nu[1])
        if x_mu == x_nu:
            tried += 1
            continue
        center = sum((x[0] * w for x, w in x_mu.items()), flint.fmpq(0))
        spread = max(abs(x[0] - center) for x in (*x_mu, *x_nu))
        m, delta = first_differing_moment(x_mu, x_nu, center)
        unit = _power_of_two(-_bits(spread) - 1)  # |b| spread is about |beta| / 2 .. 2 |beta|
        # log2 of the expected coordinate gap: |delta| (b)^(m-1) / (m-1)! / |u|_1, b ~ 1/spread
        gap_bits = _bits(abs(delta)) - (m - 1) * _bits(spread) - factorial(m - 1).bit_length()
        gap_bits -= int(sum(abs(c) for c in u)).bit_length()
        scale_bits = max(_bits(largest), 0) if largest != 0 else 0
        prec = max(64, -(-(64 + scale_bits - gap_bits + (atoms.bit_length())) // 32) * 32)
        while True:
            p = min(prec, top)
            for beta in _BETAS:
                b = flint.fmpq(beta) * unit
                q = [b * c for c in u]
                found = _try(mu, nu, q, u, p, lists)
                if found is not None:
                    witness, cert = found
                    return SeparationResult(
                        SeparationStatus.SEPARATED,
                        witness,
                        f"G_mu(q) and G_nu(q) differ in coordinate {witness.coordinate}: "
                        f"gap {float(witness.gap()):.3e} at {witness.precision} bits; the first "
                        f"differing moment along the search direction has order {m}",
                        m,
                        cert,
                    )
            if p >= top:
                break
            prec *= 4
        tried += 1
    limit = (
        f"max_prec = {max_prec} bits"
        if top == max_prec
        else f"the checker's resource limit ({top} bits for this size)"
    )
    return SeparationResult(
        SeparationStatus.UNDECIDED,
        None,
        f"mu != nu, but no witness was certified within {limit} and {tried} directions; raise "
        "max_prec or max_directions",
    )
