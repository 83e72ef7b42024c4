"""Verdicts on interpolation instances: does a schedule's flow send each ``x_n`` to ``y_n``?

* Laminar ReLU / leaky-ReLU schedules (every piece laminar with a shared normal): exact. Runs
  of consecutive pieces whose normals lie on one line compose to ``x + G(a·x)`` with ``G``
  piecewise linear (proofs/bounds.md#interp-phase); ``G`` is evaluated for all points at once by
  the flow's laminar map (:func:`certified.flow.relu._laminar.laminar_map_exact`: sorted
  breakpoints and prefix sums, O(P log P + N log P + (P + N) d) rational operations per run).
* Any other schedule: the certified flow engines (:func:`~certified.flow.api.enclose_flow`:
  the 53-bit vectorised engine or the arb region engine) enclose ``Φ_T(x_n)`` in boxes, which
  bound the error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import flint
import numpy as np

from certified.arith.exact import fmpq_to_float, to_fmpq
from certified.errors import InputError, RangeOverflowError, ShapeError
from certified.flow.relu._laminar import laminar_map_exact
from certified.interpolation.construct import Interpolation, formula_switches, read_pairs
from certified.models import Activation, Piece, Schedule
from certified.verdict import Outcome

__all__ = [
    "InterpolationVerdict",
    "export_float64",
    "laminar_images",
    "sqrt_upper",
    "verify_interpolation",
]

_ZERO = flint.fmpq(0)


@dataclass(frozen=True)
class InterpolationVerdict:
    """What is certified about ``Φ_T(x_n)`` against ``y_n``.

    Attributes
    ----------
    verdict : Outcome
        ``VERIFIED``: ``exact`` is True or ``max_error`` is a certified bound;
        ``UNDECIDED``: the flow engines could not enclose every image (``message`` says why).
    exact : bool
        ``Φ_T(x_n) = y_n`` for every n, in exact rational arithmetic.
    max_error : flint.fmpq or None
        Upper bound of ``max_n |Φ_T(x_n) − y_n|_2`` (0 when exact; None when UNDECIDED).
    switches : int
        ``L`` of the schedule (pieces of its merged form minus one).
    formula_switches : int
        ``2⌈N/p⌉ − 1`` for the schedule's width p (theorem A's count).
    method : str
        ``"laminar-exact"`` or the flow engine used.
    message : str
    max_error_squared : flint.fmpq or None
        ``max_n |Φ_T(x_n) − y_n|_2^2`` exactly (laminar schedules only, else None).

    Guarantee: ``exact`` is exact; ``max_error`` is a rigorous upper bound.
    """

    verdict: Outcome
    exact: bool
    max_error: flint.fmpq | None
    switches: int
    formula_switches: int
    method: str
    message: str = ""
    max_error_squared: flint.fmpq | None = None

    def __post_init__(self) -> None:
        # producers may pass the contract string: normalised (and validated) here
        object.__setattr__(self, "verdict", Outcome(self.verdict))


# --- exact sqrt bound --------------------------------------------------------------------------


def sqrt_upper(q: flint.fmpq, bits: int = 64) -> flint.fmpq:
    """A rational ``r >= sqrt(q)`` with relative excess below ``2^{-bits}`` (q >= 0).

    Guarantee: upper bound (integer square roots, proofs/bounds.md#interp-error).
    """
    if q == 0:
        return _ZERO
    num, den = int(q.p), int(q.q)
    k = max(0, bits - (num.bit_length() - den.bit_length()) // 2)
    # sqrt(num/den) = sqrt(num den 4^k) / (den 2^k) <= (isqrt(.) + 1) / (den 2^k)
    return flint.fmpq(math.isqrt(num * den << (2 * k)) + 1, den << k)


# --- exact laminar evaluation ------------------------------------------------------------------


def _alpha(schedule: Schedule) -> flint.fmpq:
    return schedule.slope if schedule.activation is Activation.LEAKY_RELU else _ZERO


def _ratio(a: np.ndarray, normal: np.ndarray) -> flint.fmpq | None:
    """``λ`` with ``a = λ normal``, or None when not parallel."""
    k = next(i for i, q in enumerate(normal) if q != 0)
    lam = a[k] / normal[k]
    if lam == 0 or any(x != lam * y for x, y in zip(a, normal, strict=True)):
        return None
    return lam


def _normal_and_scales(piece: Piece) -> tuple[np.ndarray | None, tuple | None]:
    """:meth:`Piece.laminar_normal` and :meth:`Piece.laminar_scales`, with a vectorised fast
    path for the common case of equal rows of A (scales 1)."""
    A = piece.A
    a = A[0]
    if any(q != 0 for q in a) and bool(np.all(A == a[None, :])):
        if all(q == 0 for q in a.dot(piece.W)):
            return a, (flint.fmpq(1),) * piece.width
        return None, None
    return piece.laminar_normal(), piece.laminar_scales()


def laminar_runs(schedule: Schedule) -> list[tuple[int, int, np.ndarray, list[flint.fmpq]]]:
    """Maximal runs of consecutive laminar pieces whose normals lie on one line.

    Returns ``(start, stop, normal, lambdas, scales)`` with ``piece_j normal = lambdas[j] ·
    normal`` and ``scales[j]`` the factors of its rows (:meth:`Piece.laminar_scales`).
    Raises ValueError when a piece is not laminar.
    """
    runs: list = []
    for j, piece in enumerate(schedule.pieces):
        a, scales = _normal_and_scales(piece)
        if a is None:
            raise ValueError(f"pieces[{j}] is not laminar")
        if runs:
            start, _stop, normal, lams, sc = runs[-1]
            lam = _ratio(a, normal)
            if lam is not None:
                runs[-1] = (start, j + 1, normal, [*lams, lam], [*sc, scales])
                continue
        runs.append((j, j + 1, a, [flint.fmpq(1)], [scales]))
    return runs


def _run_map(pieces, normal, lams, scales, alpha, X: np.ndarray) -> np.ndarray:
    """``x + G(a·x)`` for a run: exact (proofs/bounds.md#interp-phase), by the flow's laminar
    map (one term ``τ w_i σ(μ_i s + b_i)`` per neuron, ``μ_i`` = scale × lambda)."""
    # only coordinates some w_i moves (phase 2 of A moves one): the others keep their values
    cols = [k for k in range(X.shape[1]) if any(q != 0 for p in pieces for q in p.W[k])]
    C = np.concatenate([piece.W[cols].T * piece.duration for piece in pieces])
    mu = np.empty(len(C), dtype=object)
    mu[:] = [c * lam for sc, lam in zip(scales, lams, strict=True) for c in sc]
    beta = np.concatenate([piece.b for piece in pieces])
    return laminar_map_exact(X, normal, C, mu, beta, alpha, cols)


def laminar_images(schedule: Schedule, X: np.ndarray) -> np.ndarray:
    """Exact ``Φ_T(x_n)`` for a laminar ReLU / leaky-ReLU schedule (object array of fmpq).

    Raises ValueError when a piece is not laminar.

    Guarantee: exact (proofs/bounds.md#interp-phase).
    """
    if not schedule.activation.is_piecewise_linear:
        raise ValueError("the activation is not piecewise linear")
    alpha = _alpha(schedule)
    out = X
    for start, stop, normal, lams, scales in laminar_runs(schedule):
        out = _run_map(schedule.pieces[start:stop], normal, lams, scales, alpha, out)
    return out


# --- verdicts ----------------------------------------------------------------------------------


def _squared_errors(images: np.ndarray, Y: np.ndarray) -> list[flint.fmpq]:
    D = images - Y
    return [sum((q * q for q in row), _ZERO) for row in D.tolist()]


def verify_interpolation(
    X: Any, Y: Any, schedule: Schedule, *, prec: int | None = None
) -> InterpolationVerdict:
    """Certify how close the flow of ``schedule`` (time = its total time) sends ``x_n`` to
    ``y_n``, for any schedule.

    .. math::

        \\text{exact} \\iff \\Phi_T(x_n) = y_n\\ \\forall n, \\qquad
        \\text{max\\_error} \\ge \\max_n \\lVert \\Phi_T(x_n) - y_n \\rVert_2

    Parameters
    ----------
    X, Y : (N, d) arrays of numbers, read exactly
    schedule : Schedule
        Of dimension d. Laminar ReLU / leaky-ReLU schedules are evaluated exactly; others by
        :func:`~certified.flow.api.enclose_flow` (``prec`` as there).
    prec : int, optional
        Working precision of the flow engines (non-laminar schedules only).

    Returns
    -------
    InterpolationVerdict

    Raises
    ------
    ShapeError, NonFiniteError, DuplicatePointError
        Bad data (as :func:`construct_interpolation`), or a schedule of another dimension.

    Guarantee: ``exact`` is exact; ``max_error`` is an upper bound of the Euclidean error
    (proofs/bounds.md#interp-error).
    """
    if not isinstance(schedule, Schedule):
        raise InputError(f"schedule: expected a Schedule, got {type(schedule).__name__}")
    Xq, Yq = read_pairs(X, Y)
    N, d = Xq.shape
    if schedule.dimension != d:
        raise ShapeError(
            f"schedule: dimension {schedule.dimension} but the points have {d} coordinates"
        )
    L = schedule.switches
    formula = formula_switches(N, schedule.width, "general")
    try:
        images = laminar_images(schedule, Xq)
    except ValueError:  # not laminar, or not piecewise linear
        images = None
    if images is not None:
        sq = max(_squared_errors(images, Yq))
        return InterpolationVerdict(
            Outcome.VERIFIED, sq == 0, sqrt_upper(sq), L, formula, "laminar-exact", "", sq
        )
    from certified.flow.api import enclose_flow

    try:
        res = enclose_flow(schedule, Xq, prec=prec)
    except RangeOverflowError as exc:  # an enclosure beyond the double range: no bound
        return InterpolationVerdict(
            Outcome.UNDECIDED, False, None, L, formula, "flow", f"the flow enclosure: {exc}"
        )
    method = str((res.hints or {}).get("method", "flow")) if isinstance(res.hints, dict) else "flow"
    if res.status.name != "SUCCESS":
        return InterpolationVerdict(Outcome.UNDECIDED, False, None, L, formula, method, res.message)
    box = res.final
    lo, hi = box.lo, box.hi
    sq = []
    for n in range(N):
        total = _ZERO
        for k in range(d):
            y = Yq[n, k]
            e = max(abs(to_fmpq(float(lo[n, k])) - y), abs(to_fmpq(float(hi[n, k])) - y))
            total += e * e
        sq.append(total)
    err = sqrt_upper(max(sq))
    exact = res.exact is not None and bool(np.all(res.exact[-1] == Yq))
    return InterpolationVerdict(
        Outcome.VERIFIED, exact, _ZERO if exact else err, L, formula, method
    )


# --- float64 export ----------------------------------------------------------------------------


def _is_double(q: flint.fmpq) -> bool:
    try:
        f = fmpq_to_float(q, "nearest")
    except RangeOverflowError:
        return False
    return flint.fmpq(*f.as_integer_ratio()) == q


def _nearest(q: flint.fmpq) -> flint.fmpq:
    return flint.fmpq(*fmpq_to_float(q, "nearest").as_integer_ratio())


def _doubles(P: np.ndarray) -> np.ndarray | None:
    """The float64 array equal to ``P`` (fmpq), or None if an entry is not a double."""
    out = np.array([fmpq_to_float(q, "nearest") if _is_double(q) else np.nan for q in P.flat])
    return None if np.isnan(out).any() else out.reshape(P.shape)


def _round_orthogonal(w: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Doubles ``w'`` near ``w`` with ``a·w' = a·w = 0`` exactly when possible.

    The pivot is an entry of ``a`` that is ± a power of two; the other entries are rounded
    to one grid ``2^e`` so that ``Σ a_k w'_k`` has at most 53 significant bits, and the pivot
    entry solves the equation exactly (a double again). Falls back to the nearest doubles.
    """
    pivots = [k for k, q in enumerate(a) if q != 0 and q.q == 1 and abs(int(q.p)).bit_count() == 1]
    if not pivots or not all(_is_double(q) for q in a):
        return np.array([_nearest(q) for q in w], dtype=object)
    k0 = min(pivots, key=lambda k: abs(a[k]))
    others = [k for k in range(len(w)) if k != k0]
    S = max(sum((abs(a[k] * w[k]) for k in others), _ZERO), max(abs(w[k]) for k in others))
    if S == 0:
        return np.full(len(w), _ZERO, dtype=object)
    e = max(int(S.p).bit_length() - int(S.q).bit_length() + 1 - 51, -1074)
    grid = flint.fmpq(1 << e) if e >= 0 else flint.fmpq(1, 1 << -e)
    out = np.empty(len(w), dtype=object)
    for k in range(len(w)):
        if k != k0:
            q = w[k] / grid
            out[k] = (
                flint.fmpq(int(q.floor()) if q - q.floor() < flint.fmpq(1, 2) else int(q.ceil()))
                * grid
            )
    out[k0] = -sum((a[k] * out[k] for k in range(len(w)) if k != k0), _ZERO) / a[k0]
    if not all(_is_double(q) for q in out):
        return np.array([_nearest(q) for q in w], dtype=object)
    return out


def _round_piece(piece: Piece) -> Piece:
    """Every parameter to a double (w_i kept orthogonal to a laminar normal when possible)."""
    a = piece.laminar_normal()
    W = np.empty(piece.W.shape, dtype=object)
    for i in range(piece.width):
        W[:, i] = (
            _round_orthogonal(piece.W[:, i], a)
            if a is not None
            else [_nearest(q) for q in piece.W[:, i]]
        )
    A = np.vectorize(_nearest, otypes=[object])(piece.A)
    b = np.array([_nearest(q) for q in piece.b], dtype=object)
    return Piece(_nearest(piece.duration), W, A, b)


def _resolve_last_phase(interp: Interpolation, pieces: list, span: tuple) -> list | None:
    """Pieces with the last phase of construction A rebuilt for where the *rounded* first phase
    really sends the points, then rounded; None when that is not possible.

    Rounding the first phase moves its images z_n by tiny amounts, but the last phase's
    slopes are large (one kink per gap, proofs/bounds.md#interp-phase), so re-using its
    exact parameters amplifies those errors (to ~1e2 at N = 2,000, d = 16). Rebuilt with the
    same normal v for the exact images z'_n of the rounded first phase (kinks between the
    sorted v·z'_n, displacements y_n − z'_n with their v-component removed), only the
    v-components v·(z'_n − z_n) and the last phase's own rounding remain (~1e-6 there).
    """
    from certified.interpolation.construct import _obj, _phase_pieces

    lo, hi = span
    N, d = interp.X.shape
    first = pieces[:lo]
    Z = laminar_images(Schedule(d, interp.schedule.activation, tuple(first)), interp.X)
    v = list(interp.directions[1])
    vq = _obj(v)
    s = Z.dot(vq)
    if len(set(s.tolist())) < N:
        return None
    D = interp.Y - Z
    D = D - (D.dot(vq) * flint.fmpq(1, sum(k * k for k in v)))[:, None] * vq[None, :]
    rest = sum((q.duration for q in interp.schedule.pieces), _ZERO) - sum(
        (q.duration for q in first), _ZERO
    )
    tau = _nearest(rest / (hi - lo))
    if tau <= 0:
        return None
    width = max(q.width for q in interp.schedule.pieces[lo:hi])
    new, _ = _phase_pieces(s, D, v, tau, width)
    if len(new) != hi - lo:  # pragma: no cover - same N and width as the construction
        return None
    return first + [_round_piece(q) for q in new]


def _high_dim_normals(interp: Interpolation, quick: bool):
    """Candidate integer normals for C's rebuilt phase, by family and size (see
    :func:`_rebuild_high_dim`)."""
    from certified.interpolation._rounded_phase import integer_normal, lll_normals

    d = interp.X.shape[1]
    k = min(d, 12)
    top = max(12, min(50, (52 * (k - 1)) // k))
    for b in (top - 8,) if quick else (top - 12, top - 8, top - 4, top):
        a = integer_normal(interp.directions[0], b)
        # rounding can tie the s of some points (u's entries repeat, or span more than 2^b so
        # the small ones vanish): a tilt by (1, t, ..., t^{d-1}) separates any distinct points
        # for all but finitely many t, at a cost of ~t^{d-1} 2^-b in direction
        yield [a, *([x + t**k for k, x in enumerate(a)] for t in range(1, 12))]
    if not quick and d <= 60:
        for b in range(16, 48, 4):
            yield lll_normals(interp.Y - interp.X, b)


def _rebuild_high_dim(interp: Interpolation) -> list | None:
    """Variant C's phase rebuilt with an integer normal of a few dozen bits and doubles ``w_i``
    exactly orthogonal to it (:mod:`certified.interpolation._rounded_phase`,
    proofs/bounds.md#interp-rounded-phase); None when no tried normal separates the points.
    The nearest doubles of C's own parameters are not laminar (``u`` has hundreds of bits):
    the region engine had to enclose a non-laminar flow running along its switching
    hyperplanes, and gave no bound.

    The error is about the normal's angle to the null space of the ``y_n − x_n`` plus the
    lattice rounding of the ``w_i`` (finer for shorter normals). Normals tried: ``u`` rounded to
    a few sizes, and short LLL vectors nearly orthogonal to every ``y_n − x_n`` (small
    instances); the smallest exact error is kept (large instances: the first that works).
    """
    from certified.interpolation._rounded_phase import rebuild_phase

    N, d = interp.X.shape
    tau = _nearest(interp.schedule.pieces[0].duration)
    p = max(q.width for q in interp.schedule.pieces)
    quick = N * d > 20_000
    best, best_sq = None, None
    for normals in _high_dim_normals(interp, quick):
        pieces = next(
            (r for a in normals if (r := rebuild_phase(interp.X, interp.Y, a, tau, p))), None
        )
        if pieces is None:
            continue
        if quick:
            return pieces
        sched = Schedule(d, interp.schedule.activation, tuple(pieces))
        sq = max(_squared_errors(laminar_images(sched, interp.X), interp.Y))
        if best_sq is None or sq < best_sq:
            best, best_sq = pieces, sq
    return best


def export_float64(
    interp: Interpolation, *, method: str = "exact", rebuild: bool = True
) -> tuple[Schedule, flint.fmpq | None]:
    """The schedule of ``interp`` with every parameter a binary64 double, and a certified upper
    bound of ``max_n |Φ_T(x_n) − y_n|_2`` for the flow of those doubles.

    Durations, thresholds and normals are rounded to the nearest double; each ``w_i`` is
    rounded so that it stays exactly orthogonal to its piece's normal (when the normal has an
    entry ± a power of two, as ``u`` and ``v`` of construction A do), so the rounded pieces
    stay laminar and the error is computed exactly. Otherwise the flow engines bound it.
    Variant C's normal ``u`` (hundreds of bits) has no such entry: its one phase is rebuilt in
    doubles with an integer normal of a few dozen bits near ``u`` and every ``w_i`` exactly
    orthogonal to it (:mod:`certified.interpolation._rounded_phase`), so C's export is laminar
    and exact too (2e-14 .. 8e-14 on the 4×8 instances of issue 15, where no bound came out). For
    construction A the second phase is rebuilt for the exact images of the rounded first
    phase before it is rounded (its exact parameters would amplify the first phase's
    rounding errors by its large slopes): at N = 2,000, d = p = 16 the error drops from
    2.6e2 to 6e-7. The second phase's directions are then any w ⊥ v, not only multiples of u.

    Parameters
    ----------
    interp : Interpolation
    method : {"exact", "float64"}
        ``"exact"``: the error computed exactly (rational flow of the doubles; its square is
        what an interpolation certificate claims). ``"float64"``: an upper bound in float64
        with a priori rounding-error bounds (:mod:`certified.interpolation.fast`), a few times
        the cost of a float64 evaluation; falls back to ``"exact"`` when the data or the
        rounded pieces do not qualify.
    rebuild : bool
        Rebuild construction A's second phase for the rounded first phase, and C's phase in
        laminar doubles (default). False rounds every piece on its own (for comparison: far
        larger errors beyond small N for A; for C, pieces that are not laminar, usually no bound).

    Returns
    -------
    (Schedule, flint.fmpq or None)
        None when the engines could not certify the flow (UNDECIDED).

    Raises
    ------
    InputError
        ``method`` or ``rebuild`` not one of the allowed values.
    RangeOverflowError
        A parameter the rounded construction needs is beyond the float64 range.

    Guarantee: the bound is rigorous (proofs/bounds.md#interp-error,
    proofs/bounds.md#interp-rounded-phase).
    """
    if method not in ("exact", "float64"):
        raise InputError(f"method: {method!r} is not 'exact' or 'float64'")
    if not isinstance(rebuild, bool):
        raise InputError(f"rebuild: expected True or False, got {rebuild!r}")
    spans = [tuple(h["pieces"]) for h in interp.hints["phases"]]
    try:
        pieces = _rebuild_high_dim(interp) if rebuild and interp.variant == "high-dim" else None
        if pieces is None:
            pieces = [_round_piece(piece) for piece in interp.schedule.pieces]
        if rebuild and interp.variant == "general" and len(spans) == 2:
            pieces = _resolve_last_phase(interp, pieces, spans[1]) or pieces
    except RangeOverflowError:
        raise RangeOverflowError(
            "export_float64: a parameter of this construction (a slope, threshold or normal) "
            "lies beyond the float64 range, as data spanning extreme magnitudes can require; "
            "keep the exact schedule (its certificate needs no doubles)"
        ) from None
    sched = Schedule(interp.schedule.dimension, interp.schedule.activation, tuple(pieces))
    if method == "float64":
        from certified.interpolation.fast import certified_error_float64, float_phases

        phases = float_phases(sched, spans)
        Xf, Yf = _doubles(interp.X), _doubles(interp.Y)
        if phases is not None and Xf is not None and Yf is not None:
            bound = certified_error_float64(phases, Xf, Yf)
            if math.isfinite(bound):  # else (overflow): the exact evaluation below
                return sched, to_fmpq(bound)
    verdict = verify_interpolation(interp.X, interp.Y, sched)
    return sched, verdict.max_error
