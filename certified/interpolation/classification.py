"""Binary classification by a width-1 ReLU neural ODE, exact (Álvarez-López, Orive-Illera,
Zuazua, arXiv 2312.13807; theorems.md §3 "Classification").

Statement: points x_1..x_N in R^d (d >= 2, pairwise distinct) with labels in {0, 1}; find a
schedule of width p = 1 with ``Φ_T(x)^(j) > 1`` on class 1 and ``Φ_T(x)^(j) < 1`` on class 0.
The paper's switch count is ``L = 4⌈min(N₁, N₀)/d⌉ − 1``.

Construction (laminar, exact in rational arithmetic; proofs/interpolation_variants.md
#classification). Let m = min(N₁, N₀) and call the smaller class the *moving* class (class 1 on
a tie). Write ``z = σ(x^(j) − 1)`` with σ = +1 if class 1 moves, −1 otherwise: the goal is
z > 0 on the moving class and z < 0 on the other one.

* Split the moving class into groups of at most d points. For a group choose an integer normal
  a with ``a·x`` equal (= c) on the group, a not parallel to e_j and no point of the other class
  on the hyperplane ``a·x = c`` (d points always lie on a hyperplane; in general position it
  contains no other point). Motion direction ``w = σ(|a|² e_j − a_j a)``: w ⊥ a and
  ``w^(j) = σω`` with ``ω = |a|² − a_j² > 0``.
* Three one-neuron laminar pieces with normals ±a compose to ``x ↦ x + G(a·x) w`` with
  G piecewise linear with three kinks (a·x is invariant):
  - the first group gets a *tent* ``G(s) = H − K|s − c|``
    (``= −K(c − H/K − s)_+ + K(s − c + H/K)_+ − 2K(s − c)_+``): it moves the group across
    and pushes every point of the other class to z < 0 (K large);
  - every later group gets a *hat* ``G(s) = h[(s − c + δ)_+ − 2(s − c)_+ + (s − c − δ)_+]``
    with δ the distance from c to the nearest other-class value of a·x: zero on the other
    class, so it never undoes earlier work (moving-class points inside the hat are only moved
    further the right way).
* Pieces: 3 per group, ``L = 3⌈m/d⌉ − 1 <= 4⌈m/d⌉ − 1`` when every group has d points. If a
  group of d points is degenerate (its hyperplane contains an other-class point or is
  orthogonal to e_j), it is split; the result then reports the switch count it reached.

Verification (:func:`verify_classification`) recomputes ``Φ_T`` exactly piece by piece (laminar
pieces are exact rational maps) and compares with 1 exactly; other schedules are decided from
certified enclosures (:func:`certified.enclose_flow`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import flint
import numpy as np

from certified.arith.exact import fmpq_to_str, to_fmpq
from certified.errors import InputError, ShapeError
from certified.interpolation._variant_common import (
    as_points,
    check_distinct,
    dot,
    integer_nullspace,
    positive_time,
    require_dimension_two,
)
from certified.models import Activation, Piece, Schedule
from certified.verdict import Outcome

__all__ = [
    "Classification",
    "ClassificationVerdict",
    "check_classification_certificate",
    "classification_certificate",
    "classification_switch_formula",
    "construct_classification",
    "verify_classification",
]

_ZERO = flint.fmpq(0)
_ONE = flint.fmpq(1)


def classification_switch_formula(n1: int, n0: int, d: int) -> int:
    """The paper's switch count ``L = 4⌈min(N₁, N₀)/d⌉ − 1``.

    Guarantee: exact.
    """
    m = min(n1, n0)
    return 4 * (-(-m // d)) - 1


@dataclass(frozen=True)
class ClassificationVerdict:
    """Whether a schedule classifies labelled points through coordinate j.

    Attributes
    ----------
    verdict : Outcome
    exact : bool
        The images were computed exactly (laminar ReLU schedule).
    margin : flint.fmpq or None
        ``min_n σ_n (Φ_T(x_n)^(j) − 1)`` (σ_n = +1 on class 1, −1 on class 0): exact when
        ``exact``, a certified lower bound otherwise; None if no enclosure was obtained.
    counterexample : int or None
        REFUTED: index of a point on the wrong side (or on the level 1).
    switches, formula_switches : int
        L of the schedule (merged pieces) and the paper's 4⌈min(N₁, N₀)/d⌉ − 1.
    message : str

    Guarantee: VERIFIED means ``Φ_T(x_n)^(j) > 1`` for every class-1 point and ``< 1`` for
    every class-0 point (exactly, or from certified enclosures); REFUTED (exact images only)
    means the point ``counterexample`` violates it.
    """

    verdict: Outcome
    exact: bool
    margin: flint.fmpq | None
    counterexample: int | None
    switches: int
    formula_switches: int
    message: str = ""

    def __post_init__(self) -> None:
        # producers may pass the contract string: normalised (and validated) here
        object.__setattr__(self, "verdict", Outcome(self.verdict))


@dataclass(frozen=True)
class Classification:
    """A width-1 schedule built by :func:`construct_classification` and its exact verdict.

    Attributes
    ----------
    schedule : Schedule
        ReLU, width 1, every piece laminar, exact rational parameters.
    coordinate : int
        j.
    groups : tuple of tuple of int
        Indices of the moving-class points handled by each group of three pieces.
    moving_class : int
        The class that is moved (the smaller one; 1 on a tie).
    switches, formula_switches : int
    verdict : ClassificationVerdict
        From :func:`verify_classification` (exact).

    Guarantee: exact (the verdict recomputes the flow from the schedule alone).
    """

    schedule: Schedule
    coordinate: int
    groups: tuple[tuple[int, ...], ...]
    moving_class: int
    switches: int
    formula_switches: int
    verdict: ClassificationVerdict


def _labels(labels: Any, n: int) -> np.ndarray:
    arr = np.asarray(labels, dtype=object).reshape(-1) if not isinstance(labels, str) else None
    if arr is None or arr.shape[0] != n:
        got = "a string" if arr is None else f"{arr.shape[0]} labels"
        raise ShapeError(f"labels: expected {n} labels (one per point of X), got {got}")
    out = np.zeros(n, dtype=np.int64)
    for k, v in enumerate(arr):
        if isinstance(v, (bool, np.bool_)):
            out[k] = int(v)
        elif isinstance(v, (int, np.integer)) and int(v) in (0, 1):
            out[k] = int(v)
        elif isinstance(v, (float, np.floating)) and float(v) in (0.0, 1.0):
            out[k] = int(v)
        else:
            raise InputError(f"labels[{k}]: {v!r} is not a class label; use 0 or 1")
    return out


def _parse(X: Any, labels: Any, coordinate: int) -> tuple[np.ndarray, np.ndarray, int]:
    Xq = as_points(X, "X")
    N, d = Xq.shape
    require_dimension_two(d, "classification by a flow")
    lab = _labels(labels, N)
    if isinstance(coordinate, bool) or not isinstance(coordinate, (int, np.integer)):
        raise InputError(f"coordinate: expected an integer index, got {coordinate!r}")
    if not -d <= coordinate < d:
        raise InputError(f"coordinate: {coordinate} is not an index of R^{d}; use 0..{d - 1}")
    return Xq, lab, int(coordinate) % d


def _pick_normal(
    group: list[np.ndarray], j: int, d: int, others: np.ndarray
) -> tuple[list[flint.fmpq], flint.fmpq] | None:
    """An integer normal a (a·x = c on the group, a ∦ e_j, no other-class point on a·x = c)."""
    rows = [[u - v for u, v in zip(g, group[0], strict=True)] for g in group[1:]]
    basis = integer_nullspace(rows, d)
    if not basis:
        return None
    r = len(basis)
    for t in range(1, 4 * (len(others) + d) + 8):
        coef = [flint.fmpz(t) ** k for k in range(r)]
        a = [
            flint.fmpq(sum((c * b[i] for c, b in zip(coef, basis, strict=True)), flint.fmpz(0)))
            for i in range(d)
        ]
        if not any(a[i] != 0 for i in range(d) if i != j):
            if r == 1:
                return None
            continue
        c = dot(a, group[0])
        if any(dot(a, x) == c for x in others):
            if r == 1:
                return None
            continue
        return a, c
    return None  # pragma: no cover - finitely many bad t among the tries


def _pow2_at_least(q: flint.fmpq) -> flint.fmpq:
    """The least power of two >= q > 0."""
    e = int(q.p).bit_length() - int(q.q).bit_length()
    out = flint.fmpq(2) ** e if e >= 0 else flint.fmpq(1, 2 ** (-e))
    while out < q:
        out *= 2
    while out / 2 >= q:
        out /= 2
    return out


def _pow2_at_most(q: flint.fmpq) -> flint.fmpq:
    """The largest power of two <= q (q > 0)."""
    out = _pow2_at_least(q)
    return out if out == q else out / 2


def _neuron_piece(
    d: int,
    a: list[flint.fmpq],
    w: list[flint.fmpq],
    eps: int,
    kink: flint.fmpq,
    coef: flint.fmpq,
    tau: flint.fmpq,
    label: str,
) -> Piece:
    """The piece moving x by ``coef·(eps(a·x − kink))_+ w`` over time tau (one neuron)."""
    A = [[eps * q for q in a]]
    b = [-eps * kink]
    W = [[coef / tau * w[i]] for i in range(d)]
    return Piece(tau, W, A, b, label)


def construct_classification(
    X: Any, labels: Any, *, time: Any = 1, coordinate: int = 0
) -> Classification:
    """A width-1 ReLU schedule with ``Φ_T(x)^(j) > 1`` on class 1 and ``< 1`` on class 0.

    Parameters
    ----------
    X : (N, d) array
        Pairwise distinct points (floats read exactly, exact strings, fmpq), d >= 2.
    labels : (N,) array of 0/1
        Both classes non-empty.
    time : number
        T > 0.
    coordinate : int
        j (default 0).

    Returns
    -------
    Classification
        With ``3 × groups`` laminar pieces: ``L = 3⌈min(N₁, N₀)/d⌉ − 1`` in general position
        (the paper's ``4⌈min(N₁, N₀)/d⌉ − 1`` is an upper bound), and the exact verdict.

    Raises
    ------
    ShapeError
        X not an N x d array with N >= 1, or labels of the wrong length.
    DomainError
        d = 1 (a flow on R^1 preserves order).
    InputError
        A label other than 0/1, one class empty, duplicate points, T <= 0, a bad coordinate.

    Examples
    --------
    >>> from certified.interpolation.classification import construct_classification
    >>> c = construct_classification([[0, 0], [1, 0], [0, 1]], [1, 0, 0])
    >>> print(c.verdict.verdict, c.switches)
    VERIFIED 2

    Guarantee: exact (the returned verdict recomputes Φ_T exactly from the schedule).
    """
    Xq, lab, j = _parse(X, labels, coordinate)
    T = positive_time(time)
    N, d = Xq.shape
    check_distinct(Xq, "X")
    n1 = int(lab.sum())
    n0 = N - n1
    if n1 == 0 or n0 == 0:
        raise InputError(
            f"labels: all {N} points are in class {int(lab[0])}; classification needs both "
            "classes (every point is then trivially on one side)"
        )
    moving = 1 if n1 <= n0 else 0
    sigma = 1 if moving == 1 else -1
    Z = Xq.copy()
    mov = [n for n in range(N) if lab[n] == moving]
    other_idx = [n for n in range(N) if lab[n] != moving]
    # proof: proofs/interpolation_variants.md#classification
    groups: list[tuple[int, ...]] = []
    neurons: list[tuple[list, list, int, flint.fmpq, flint.fmpq]] = []
    pos = 0
    while pos < len(mov):
        size = min(d, len(mov) - pos)
        others = Z[other_idx]
        while True:
            group = [Z[n] for n in mov[pos : pos + size]]
            picked = _pick_normal(group, j, d, others)
            if picked is not None or size == 1:
                break
            size -= 1
        if picked is None:  # pragma: no cover - a single point always has a normal
            raise InputError("X: no admissible normal found; the data are degenerate")
        a, c = picked
        idx = tuple(mov[pos : pos + size])
        pos += size
        norm2 = dot(a, a)
        omega = norm2 - a[j] * a[j]
        w = [sigma * (norm2 * (i == j) - a[j] * a[i]) for i in range(d)]
        zg = [sigma * (Z[n][j] - 1) for n in idx]
        # dyadic amplitudes and widths (powers of two) keep the bit sizes of the positions, and
        # so of the next normals, from compounding
        # the group ends at z >= 1 (its coordinate j moves by ω G(c))
        lift = _pow2_at_least((max(_ZERO, max(-z for z in zg)) + 1) / omega)
        s_all = [dot(a, row) for row in Z]
        if not groups:
            H = lift
            K = _ZERO
            for n in other_idx:
                zn = sigma * (Z[n][j] - 1)
                K = max(K, (zn + omega * H) / (omega * abs(s_all[n] - c)))
            K = _pow2_at_least(2 * K) if K > 0 else _pow2_at_least(H)
            ca = c - H / K
            items = [(-1, ca, -K), (1, ca, K), (1, c, -2 * K)]
        else:
            # the hat touches no point off the hyperplane but the group (other-class points
            # must stay put; the others keep their sizes), nor any other-class point at all
            members = set(idx)
            gaps = [
                abs(s_all[n] - c)
                for n in range(N)
                if n not in members and (s_all[n] != c or lab[n] != moving)
            ]
            delta = _pow2_at_most(min(gaps)) if gaps else _ONE
            h = lift / delta
            items = [(1, c - delta, h), (1, c, -2 * h), (1, c + delta, h)]
        groups.append(idx)
        for eps, kink, coef in items:
            neurons.append((a, w, eps, kink, coef))
            for n in range(N):
                z = eps * (s_all[n] - kink)
                if z > 0:
                    g = coef * z
                    Z[n] = np.array([Z[n][i] + g * w[i] for i in range(d)], dtype=object)
    tau = T / len(neurons)
    pieces = [
        _neuron_piece(d, a, w, eps, kink, coef, tau, f"pieces[{k}]")
        for k, (a, w, eps, kink, coef) in enumerate(neurons)
    ]
    schedule = Schedule(d, Activation.RELU, tuple(pieces))
    verdict = verify_classification(Xq, lab, schedule, coordinate=j)
    return Classification(
        schedule=schedule,
        coordinate=j,
        groups=tuple(groups),
        moving_class=moving,
        switches=schedule.switches,
        formula_switches=classification_switch_formula(n1, n0, d),
        verdict=verdict,
    )


def _exact_images(schedule: Schedule, Xq: np.ndarray) -> np.ndarray:
    from certified.flow.relu import laminar_flow_exact

    Z = Xq
    slope = schedule.slope if schedule.activation is Activation.LEAKY_RELU else None
    for p in schedule.pieces:
        Z = laminar_flow_exact(
            p.W, p.A, p.b, p.duration, Z, activation=schedule.activation.value, slope=slope
        )
    return Z


def verify_classification(
    X: Any, labels: Any, schedule: Schedule, *, coordinate: int = 0, prec: int | None = None
) -> ClassificationVerdict:
    """Check ``Φ_T(x)^(j) > 1`` on class 1 and ``< 1`` on class 0 for a schedule.

    Laminar ReLU / leaky-ReLU schedules are replayed exactly (exact rational images); other
    schedules are enclosed by :func:`certified.enclose_flow` (``prec`` bits) and decided from
    the enclosures (UNDECIDED when an enclosure touches the level 1).

    Raises
    ------
    ShapeError, InputError, DomainError
        As :func:`construct_classification` (duplicates and single classes are allowed here),
        or a schedule of another dimension.

    Guarantee: VERIFIED / REFUTED as in :class:`ClassificationVerdict`.
    """
    Xq, lab, j = _parse(X, labels, coordinate)
    N, d = Xq.shape
    if not isinstance(schedule, Schedule):
        raise InputError(f"schedule: expected a Schedule, got {type(schedule).__name__}")
    if schedule.dimension != d:
        raise ShapeError(
            f"schedule: dimension {schedule.dimension} but the points have {d} coordinates"
        )
    n1 = int(lab.sum())
    formula = classification_switch_formula(n1, N - n1, d)
    sign = [1 if v == 1 else -1 for v in lab]
    L = schedule.switches
    if schedule.activation.is_piecewise_linear and schedule.is_laminar():
        Z = _exact_images(schedule, Xq)
        margins = [sign[n] * (Z[n][j] - 1) for n in range(N)]
        k = min(range(N), key=lambda n: margins[n])
        if margins[k] > 0:
            return ClassificationVerdict(Outcome.VERIFIED, True, margins[k], None, L, formula)
        return ClassificationVerdict(
            Outcome.REFUTED,
            True,
            margins[k],
            k,
            L,
            formula,
            f"point {k} (class {lab[k]}) ends at coordinate {j} = {fmpq_to_str(Z[k][j])}",
        )
    from certified.flow.api import enclose_flow
    from certified.flow.result import FlowStatus

    res = enclose_flow(schedule, Xq, prec=prec)
    if res.status is not FlowStatus.SUCCESS:
        return ClassificationVerdict(Outcome.UNDECIDED, False, None, None, L, formula, res.message)
    lo, hi = res.final.lo[:, j], res.final.hi[:, j]

    def exact(v: float) -> flint.fmpq:
        return flint.fmpq(*float(v).as_integer_ratio())

    # the enclosure ends are doubles, compared exactly: margin is a certified lower bound
    margin = min((exact(lo[n]) - 1) if sign[n] > 0 else (1 - exact(hi[n])) for n in range(N))
    if margin > 0:
        return ClassificationVerdict(Outcome.VERIFIED, False, margin, None, L, formula)
    return ClassificationVerdict(
        Outcome.UNDECIDED,
        False,
        margin,
        None,
        L,
        formula,
        "an enclosure of coordinate j touches the level 1; raise prec or check the schedule",
    )


def classification_certificate(X: Any, classification: Classification) -> dict[str, Any]:
    """A ``flow`` certificate (rule ``laminar-exact``) of the exact images of the points under
    the classification schedule: anyone can re-check the images with ``certified check`` and
    read the classification off them (:func:`check_classification_certificate`).

    Guarantee: none (producer); the checker decides the images.
    """
    from certified.certificates import flow_certificate

    Xq = as_points(X, "X")
    return flow_certificate(classification.schedule.to_json(), Xq)


def check_classification_certificate(
    cert: Any, labels: Any, *, coordinate: int = 0
) -> ClassificationVerdict:
    """Re-check a certificate of :func:`classification_certificate` with the independent
    checker and decide the classification from its (then exact) claimed images.

    Guarantee: VERIFIED means the checker accepted the images and every class-1 image has
    coordinate ``j`` > 1, every class-0 image < 1; REFUTED means an accepted image is on the
    wrong side; UNDECIDED (margin None) that the checker rejected the certificate.
    """
    from certified.checker import check_certificate
    from certified.models import Schedule

    verdict = check_certificate(cert)
    if not verdict.verified or verdict.kind != "flow" or "images" not in cert["claim"]:
        reason = verdict.reason if not verdict.verified else "not a flow certificate of images"
        return ClassificationVerdict(Outcome.UNDECIDED, False, None, None, 0, 0, reason)
    images = np.array(
        [[to_fmpq(v, "claim.images") for v in row] for row in cert["claim"]["images"]],
        dtype=object,
    )
    _, lab, j = _parse(images, labels, coordinate)
    N, d = images.shape
    schedule = Schedule.from_json(cert["instance"]["schedule"])
    n1 = int(lab.sum())
    formula = classification_switch_formula(n1, N - n1, d)
    margins = [(1 if lab[n] == 1 else -1) * (images[n][j] - 1) for n in range(N)]
    k = min(range(N), key=lambda n: margins[n])
    if margins[k] > 0:
        return ClassificationVerdict(
            Outcome.VERIFIED, True, margins[k], None, schedule.switches, formula
        )
    return ClassificationVerdict(
        Outcome.REFUTED, True, margins[k], k, schedule.switches, formula,
        f"point {k} (class {lab[k]}) ends at coordinate {j} = {fmpq_to_str(images[k][j])}",
    )  # fmt: skip
