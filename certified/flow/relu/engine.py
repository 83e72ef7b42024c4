"""Certified flows of ReLU and leaky-ReLU neural ODEs, piece by piece.

Field of a piece: ``f(x) = sum_i w_i sigma(a_i . x + b_i)`` (``W`` is d x p with columns
``w_i``, ``A`` is p x d with rows ``a_i``), ``sigma(z) = max(z, 0)`` or
``max(z, alpha z)`` (leaky, exact ``0 <= alpha <= 1``, default 1/100). Schedules are plain
lists (``W_list``, ``A_list``, ``b_list``, ``durations``); numbers are float64 arrays (read as
their exact binary values), object arrays of ``flint.fmpq``, or strings ``"p/q"``.

* :func:`laminar_flow_exact` -- exact rational flow map of a laminar piece.
* :func:`relu_flow` -- enclosures of the time-T map for points (and axis-aligned boxes), with
  hints describing the regions and hyperplane crossings of every trajectory.
* :func:`gronwall_lipschitz`, :func:`relu_flow_jacobian` -- certified Lipschitz constants of
  the flow map (global Gronwall bound; C^1 enclosure of D Phi over a box);
  :func:`gronwall_bound` -- the Grönwall exponent and bound as balls (used by attention).

Methods and lemmas: proofs/bounds.md, section "ReLU flows".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import flint
import numpy as np

from certified.arith import Interval
from certified.arith.ball import check_precision, endpoints, precision
from certified.arith.exact import fmpq_to_float, fmpq_to_str, to_fmpq
from certified.errors import InputError, ShapeError
from certified.flow.relu._boxes import flow_box_schedule
from certified.flow.relu._float import relu_flow_float64
from certified.flow.relu._laminar import laminar_runs, piece_map_ball, run_map_exact
from certified.flow.relu._model import (
    parse_activation,
    parse_piece,
    parse_points,
    parse_schedule,
    schedule_pieces,
)
from certified.flow.relu._points import GRID, Rejected, flow_point_piece, point_ball
from certified.flow.relu._region import ArbPiece
from certified.flow.result import FlowEnclosure, FlowStatus

__all__ = [
    "DEFAULT_PREC",
    "FlowLipschitzBound",
    "NotLaminarError",
    "gronwall_bound",
    "gronwall_lipschitz",
    "laminar_flow_exact",
    "relu_flow",
    "relu_flow_float64",
    "relu_flow_jacobian",
]

DEFAULT_PREC = 128
"""Default working precision (bits) of the ball arithmetic: final enclosures are then limited
by the float64 output (a few ulps), with margin for thousands of hyperplane crossings."""

_BIG = float.fromhex("0x1.fffffffffffffp+1023")


class NotLaminarError(InputError):
    """A piece passed to :func:`laminar_flow_exact` is not laminar."""


@dataclass(frozen=True)
class FlowLipschitzBound:
    """A certified upper bound on the Lipschitz constant of a flow map (Euclidean norm).

    Attributes
    ----------
    upper : float
        Upper bound on ``Lip(Phi_T)`` (``inf`` when ``status`` is not SUCCESS).
    upper_exact : flint.fmpq or None
        Exact rational upper bound; ``upper`` is it rounded up to a double.
    method : str
        ``"gronwall"`` (global) or ``"c1-box"`` (on the box, from an enclosure of D Phi).
    norm : str
        ``"euclidean"``.
    jacobian : Interval or None
        ``"c1-box"``: a (d, d) interval matrix containing ``D Phi(x)`` wherever it exists on
        the box, and a matrix ``D`` with ``Phi(x) - Phi(y) = D (x - y)`` for all x, y in it.
    status, message : as in :class:`FlowEnclosure`.

    Guarantee: if ``status is SUCCESS``, ``|Phi_T(x) - Phi_T(y)|_2 <= upper |x - y|_2`` (for
    x, y in the box for ``"c1-box"``).
    """

    upper: float
    upper_exact: flint.fmpq | None
    method: str
    norm: str = "euclidean"
    jacobian: Interval | None = None
    status: FlowStatus = FlowStatus.SUCCESS
    message: str = ""
    hints: dict[str, Any] = field(default_factory=dict)


def laminar_flow_exact(
    W: Any,
    A: Any,
    b: Any,
    tau: Any,
    X: Any,
    *,
    activation: str = "relu",
    slope: Any = None,
) -> np.ndarray:
    """Exact image of rational points under one laminar piece.

    .. math::

        \\Phi_\\tau(x) = x + \\tau \\sum_i w_i \\sigma(a_i \\cdot x + b_i)

    valid when every ``a_i`` (with ``w_i != 0``) is parallel to one vector ``a`` and
    ``a . f = 0`` (every such ``w_i`` orthogonal to ``a``), so that ``a . x`` is invariant
    (proofs/bounds.md#relu-laminar). Vectorised: the breakpoints are sorted once and the
    slopes summed by prefix sums.

    Parameters
    ----------
    W : (d, p) array, A : (p, d) array, b : (p,) array
        Floats (exact binary values), fmpq or exact strings.
    tau : number
        Positive duration.
    X : (N, d) array
        Points, read exactly.
    activation : {"relu", "leaky_relu"}
    slope : number, optional
        Leaky slope alpha (default 1/100), leaky only.

    Returns
    -------
    numpy.ndarray
        ``dtype=object`` (N, d) of :class:`flint.fmpq`.

    Raises
    ------
    NotLaminarError
        The piece is not laminar.
    ShapeError, NonFiniteError, NumberFormatError, InputError
        Bad input, named.

    Guarantee: exact.
    """
    alpha = parse_activation(activation, slope)
    piece = parse_piece(W, A, b, tau, alpha)
    Xq = parse_points(X, piece.d, "X")
    if not piece.laminar:
        raise NotLaminarError(
            "W, A: the piece is not laminar (normals of the active neurons are not all "
            "parallel to one vector a with every w_i orthogonal to a); use relu_flow"
        )
    return run_map_exact([piece], Xq)


def _full_range(d: int) -> tuple[list[float], list[float]]:
    return [-_BIG] * d, [_BIG] * d


def _balls_to_interval(rows: list[list[flint.arb] | None], d: int) -> Interval:
    lo = np.empty((len(rows), d))
    hi = np.empty((len(rows), d))
    for n, row in enumerate(rows):
        if row is None:
            lo[n], hi[n] = _full_range(d)
        else:
            iv = Interval.from_balls(row)
            lo[n], hi[n] = iv.lo, iv.hi
    return Interval(lo, hi)


def _widen(v: flint.arb, rho: flint.arb) -> flint.arb:
    return v if rho == 0 else v + flint.arb(0, rho)


def _flow_points(pieces, X: np.ndarray, prec: int):
    N, d = X.shape
    aps: dict[int, ArbPiece] = {}
    exact = X.copy()  # rows still exact (rational) states
    is_exact = np.ones(N, dtype=bool)
    balls: list[Any] = [None] * N
    hints: list[list[dict]] = [[] for _ in range(N)]
    rejected: dict[int, str] = {}
    for start, stop in laminar_runs(pieces):
        run = pieces[start:stop]
        if run[0].laminar:
            idx = np.nonzero(is_exact)[0]
            if len(idx):
                exact[idx] = run_map_exact(run, exact[idx])
            for n in np.nonzero(~is_exact)[0]:
                if n in rejected:
                    continue
                y, rho = balls[n]
                y = [_widen(v, rho) for v in y]
                for q in run:
                    y = piece_map_ball(q, y)
                balls[n] = (y, flint.arb(0))
            for n in range(N):
                hints[n].extend({"kind": "laminar"} for _ in run)
            continue
        piece = run[0]
        ap = aps.setdefault(piece.index, ArbPiece(piece, prec))
        for n in range(N):
            if n in rejected:
                hints[n].append({"kind": "skipped"})
                continue
            x_exact = None
            rho = flint.arb(0)
            if is_exact[n]:
                x_exact = exact[n]
                y = point_ball(x_exact)
                is_exact[n] = False
            else:
                y = flint.arb_mat([[v] for v in balls[n][0]] + [[flint.arb(1)]])
                rho = balls[n][1]
            try:
                y, rho, hint = flow_point_piece(ap, y, x_exact, rho)
            except Rejected as exc:
                rejected[n] = f"point {n}: {exc}"
                hints[n].append({"kind": "rejected", "message": str(exc)})
                continue
            balls[n] = (y.entries()[:d], rho)
            hints[n].append(hint)
    rows: list[Any] = []
    for n in range(N):
        if n in rejected:
            rows.append(None)
        elif is_exact[n]:
            rows.append([flint.arb(v) for v in exact[n]])
        else:
            y, rho = balls[n]
            rows.append([_widen(v, rho) for v in y])
    all_exact = bool(np.all(is_exact))
    return rows, (exact if all_exact else None), hints, rejected


def _parse_boxes(X0: Interval, d: int):
    if X0.ndim != 2 or X0.shape[1] != d or X0.shape[0] == 0:
        raise ShapeError(
            f"X0: boxes have shape {X0.shape}; expected (N, {d}) with N >= 1 to match the field"
        )
    lo = [[to_fmpq(float(v)) for v in row] for row in X0.lo]
    hi = [[to_fmpq(float(v)) for v in row] for row in X0.hi]
    return lo, hi


def relu_flow(
    W_list: Any,
    A_list: Any,
    b_list: Any,
    durations: Any,
    X0: Any,
    *,
    activation: str = "relu",
    slope: Any = None,
    prec: int = DEFAULT_PREC,
) -> FlowEnclosure:
    """Certified enclosures of the flow map of a piecewise-constant ReLU neural ODE.

    .. math::

        \\dot x = \\sum_i w_i^{(j)} \\sigma(a_i^{(j)} \\cdot x + b_i^{(j)}) \\quad
        \\text{on piece } j, \\qquad T = \\sum_j \\tau_j

    Laminar pieces are exact maps (proofs/bounds.md#relu-laminar). General pieces are
    integrated region by region: inside a sign region the field is affine and its flow is a
    Taylor series with a proved tail (#relu-taylor-tail) from an exact centre, the state's
    uncertainty being a Euclidean radius grown by the logarithmic norm (#relu-lognorm, no
    wrapping); membership in the closed region is
    certified on a time grid (#relu-region-membership); hyperplane crossings are carried by
    the window lemma (#relu-window), whose error is second order in the crossing-time
    uncertainty because the field is continuous across the hyperplane. A point lying exactly
    on a hyperplane takes the side given by the certified sign of ``a_i . f(x)``; when that
    sign cannot be certified (tangency) the point is rejected, never guessed.

    Parameters
    ----------
    W_list, A_list, b_list : lists of (d, p_j), (p_j, d), (p_j,) arrays
        One entry per piece; ``p_j`` may vary, ``d`` may not.
    durations : list of numbers
        Positive durations (exact: floats, fmpq, ``"p/q"``).
    X0 : (N, d) array of points, or :class:`Interval` (N, d) of axis-aligned boxes
        Points are read exactly. A box must stay in one sign region during each general
        piece (otherwise it is rejected: split it); laminar pieces accept any box.
    activation : {"relu", "leaky_relu"}
    slope : number, optional
        Leaky slope alpha in [0, 1] (default 1/100); leaky only.
    prec : int
        Working precision of the ball arithmetic in bits (default 128).

    Returns
    -------
    FlowEnclosure
        ``times = (str(T),)``; ``enclosures`` of shape (1, N, d) (outward-rounded float64 from
        the balls); ``status`` SUCCESS iff every point/box was certified, else STEP_REJECTED
        with a message naming the first failure (the other enclosures are still certified;
        rejected ones are the whole float range). ``exact``: the exact images (object array
        of fmpq, shape (1, N, d)) when every piece is laminar and X0 are points.
        ``hints`` (all times exact strings, local to their piece)::

            {"method": "relu-regions", "version": 1, "prec": int,
             "activation": str, "slope": str | None, "total_time": str,
             "laminar": [bool per piece], "grid": int (subintervals per validated step),
             "points": [                       # (or "boxes") one list per initial point
                 [                             # one entry per piece
                   {"kind": "laminar"}                    # exact map of a laminar piece
                 | {"kind": "regions",                    # general piece, points
                    "segments": [{"region": "+-.", "start": t, "end": t,
                                  "steps": [[t0, t1], ...]}],   # validated Taylor steps
                    "crossings": [{"neurons": [i, ...],  # neurons whose hyperplanes were
                                   "window": [lo, hi],   #   within the window box
                                   "eps": e}]}           # Euclidean error bound added
                 | {"kind": "region", "region": "+-.", "steps": [...]}   # boxes
                 | {"kind": "equilibrium"}       # f(x) = 0 exactly: the point does not move
                 | {"kind": "rejected", "message": str} | {"kind": "skipped"}
                 ]],
             "rejected": {str(index): message}}

        A region string has one character per neuron: ``+`` active, ``-`` inactive,
        ``.`` irrelevant (``w_i = 0``, ``a_i = 0`` or a linear neuron). The crossing of a
        hyperplane happens inside its ``window``; a replay validates each step on
        ``[t0, t1]`` in its region and re-derives each window bound.

    Raises
    ------
    ShapeError, NonFiniteError, NumberFormatError, InputError, PrecisionError
        Bad input: mismatched shapes or dimensions, an empty schedule, NaN/inf, non-positive
        durations, an unknown activation, a slope outside [0, 1], a precision out of range.

    Guarantee: if ``status is SUCCESS``, ``enclosures[0, n]`` contains ``Phi_T(x)`` for the
    point ``X0[n]`` (every point of the box ``X0[n]``), and equals it exactly when ``exact``
    is given; on STEP_REJECTED the same holds for every index not in ``hints["rejected"]``.
    """
    prec = check_precision(prec)
    alpha = parse_activation(activation, slope)
    pieces = parse_schedule(W_list, A_list, b_list, durations, alpha)
    d = pieces[0].d
    total = sum((q.tau for q in pieces), flint.fmpq(0))
    boxes = isinstance(X0, Interval)
    if boxes:
        lo, hi = _parse_boxes(X0, d)
    else:
        X = parse_points(X0, d)
    hints: dict[str, Any] = {
        "method": "relu-regions",
        "version": 1,
        "prec": prec,
        "activation": activation,
        "slope": None if activation == "relu" else fmpq_to_str(alpha),
        "total_time": fmpq_to_str(total),
        "laminar": [q.laminar for q in pieces],
        "grid": GRID,  # validation subintervals per step (the checker replays on this grid)
    }
    exact = None
    rejected: dict[int, str] = {}
    with precision(prec):
        if boxes:
            aps = [ArbPiece(q, prec) for q in pieces]
            rows: list[Any] = []
            per: list[list[dict]] = []
            for n in range(len(lo)):
                try:
                    hull_balls, _, h = flow_box_schedule(aps, lo[n], hi[n])
                    rows.append(hull_balls)
                    per.append(h)
                except Rejected as exc:
                    rejected[n] = f"box {n}: {exc}"
                    rows.append(None)
                    per.append([{"kind": "rejected", "message": str(exc)}])
            hints["boxes"] = per
        else:
            rows, exact_rows, per, rejected = _flow_points(pieces, X, prec)
            hints["points"] = per
            if exact_rows is not None:
                exact = exact_rows[None, :, :]
        enclosures = _balls_to_interval(rows, d)
    hints["rejected"] = {str(k): v for k, v in rejected.items()}
    if rejected:
        first = min(rejected)
        status = FlowStatus.STEP_REJECTED
        message = f"{len(rejected)} of {len(rows)} initial sets rejected; first: {rejected[first]}"
    else:
        status, message = FlowStatus.SUCCESS, ""
    if exact is not None:
        enclosures = Interval.from_exact(exact[0])
    return FlowEnclosure(
        times=(fmpq_to_str(total),),
        enclosures=enclosures.reshape(1, *enclosures.shape),
        status=status,
        message=message,
        exact=exact,
        hints=hints,
    )


def _lists(W_list: Any, A_list: Any, durations: Any):
    for name, x in (("W_list", W_list), ("A_list", A_list), ("durations", durations)):
        if not isinstance(x, (list, tuple, np.ndarray)):
            raise InputError(f"{name}: expected a list with one entry per piece")
    if len(W_list) == 0:
        raise InputError("W_list: the schedule is empty; give at least one piece")
    if not len(W_list) == len(A_list) == len(durations):
        raise ShapeError(
            f"schedule: W_list, A_list and durations have lengths {len(W_list)}, "
            f"{len(A_list)}, {len(durations)}; give one entry per piece in each"
        )


def gronwall_bound(
    pieces: Sequence[tuple[flint.fmpq, np.ndarray, np.ndarray]], *, prec: int = DEFAULT_PREC
) -> tuple[flint.arb, flint.arb]:
    """Balls enclosing the Grönwall exponent ``E = sum_j tau_j sum_i |w_ij|_2 |a_ij|_2`` and
    ``G = exp(E)``, for pieces given as exact ``(tau, W (d x p), A (p x d))`` (fmpq; already
    validated by the caller's parser). The one Grönwall bound of the package: see
    :func:`gronwall_lipschitz` for its meaning.

    Guarantee: the balls contain E and G (proofs/bounds.md#relu-gronwall), so
    ``Lip(Phi_T) <= G`` for any 1-Lipschitz activation.
    """
    with precision(check_precision(prec)):
        expo = flint.arb(0)
        for tau, W, A in pieces:
            s = flint.arb(0)
            for i in range(A.shape[0]):
                w2 = sum((v * v for v in W[:, i]), flint.fmpq(0))
                a2 = sum((v * v for v in A[i]), flint.fmpq(0))
                if w2 and a2:
                    s += (flint.arb(w2) * flint.arb(a2)).sqrt()
            expo += flint.arb(tau) * s  # proof: proofs/bounds.md#relu-gronwall
        return expo, expo.exp()


def gronwall_lipschitz(
    W_list: Any, A_list: Any, durations: Any, *, prec: int = DEFAULT_PREC
) -> FlowLipschitzBound:
    """Gronwall bound on the Lipschitz constant of the flow map (Euclidean norm).

    .. math::

        \\mathrm{Lip}(\\Phi_T) \\le \\exp\\Big(\\sum_j \\tau_j \\sum_i |w_{ij}|_2 |a_{ij}|_2\\Big)

    for any 1-Lipschitz activation (ReLU, leaky ReLU with slope in [0, 1], tanh; also sigmoid,
    which is 1/4-Lipschitz), since ``sum_i |w_i| |a_i|`` bounds the Lipschitz constant of
    each piece's field (theorems.md section 5; proofs/bounds.md#relu-gronwall). Biases do not
    enter.

    Returns
    -------
    FlowLipschitzBound
        ``method="gronwall"``; ``upper_exact`` the exact upper endpoint of an arb enclosure of
        the exponential, ``upper`` that rounded up to a double (``inf`` if it overflows).

    Raises
    ------
    ShapeError, NonFiniteError, NumberFormatError, InputError, PrecisionError

    Guarantee: upper bound on Lip(Phi_T) in the Euclidean norm.
    """
    prec = check_precision(prec)
    _lists(W_list, A_list, durations)
    zeros = [[0] * (len(A) if hasattr(A, "__len__") else 0) for A in A_list]
    pieces = schedule_pieces(W_list, A_list, zeros, durations)
    expo, value = gronwall_bound([(q.duration, q.W, q.A) for q in pieces], prec=prec)
    upper_q = endpoints(value, "gronwall bound")[1]
    expo_q = endpoints(expo, "gronwall exponent")[1]
    try:
        upper = fmpq_to_float(upper_q, "up")
    except Exception:  # RangeOverflowError: the bound exceeds the float range
        upper = float("inf")
    return FlowLipschitzBound(
        upper=upper,
        upper_exact=upper_q,
        method="gronwall",
        hints={"exponent_upper": fmpq_to_str(expo_q)},
    )


def _spectral_norm_upper(J: flint.arb_mat) -> flint.arb | None:
    """Upper bound on ``max ||D||_2`` over the ball matrix ``J``: ``mu I - J^T J`` is certified
    positive definite by a Cholesky factorisation in ball arithmetic (all pivots > 0) for a
    ``mu`` slightly above the float estimate of ``||mid J||_2^2`` (Rump's method; proof:
    proofs/bounds.md#relu-gronwall). None if no candidate is certified."""
    d = J.nrows()
    mid = np.array([[float(J[r, k].mid()) for k in range(d)] for r in range(d)])
    est = float(np.linalg.norm(mid, 2)) ** 2
    S = J.transpose() * J
    for rel in (2.0**-40, 2.0**-20, 2.0**-10, 2.0**-4):
        mu = flint.arb(est * (1 + rel) + 2.0**-100)
        ok = True
        L = [[flint.arb(0)] * d for _ in range(d)]
        for i in range(d):
            for j in range(i + 1):
                a = (mu if i == j else flint.arb(0)) - S[i, j]
                a -= sum((L[i][k] * L[j][k] for k in range(j)), flint.arb(0))
                if i == j:
                    if not a > 0:
                        ok = False
                        break
                    L[i][i] = a.sqrt()
                else:
                    L[i][j] = a / L[j][j]
            if not ok:
                break
        if ok:
            return mu.sqrt().abs_upper()
    return None


def relu_flow_jacobian(
    W_list: Any,
    A_list: Any,
    b_list: Any,
    durations: Any,
    box: Interval,
    *,
    activation: str = "relu",
    slope: Any = None,
    prec: int = DEFAULT_PREC,
) -> FlowLipschitzBound:
    """C^1 enclosure of ``D Phi_T`` over an axis-aligned box and the Lipschitz bound it gives.

    On a general piece during which the box stays in one region (certified), the flow is
    affine on the box and ``D Phi = exp(tau M)``; on a laminar piece ``D Phi`` lies in
    ``I + tau sum_i w_i lam_i [sigma'] a^T`` (Clarke's mean value theorem,
    proofs/bounds.md#relu-box-laminar). The product over pieces encloses a matrix ``D`` with
    ``Phi(x) - Phi(y) = D (x - y)`` for x, y in the box, so
    ``Lip <= max ||D||_2``, bounded by a certified spectral bound (Cholesky of
    ``mu I - D^T D`` in ball arithmetic) or ``|| |D| ||_F``, whichever is smaller.

    Parameters
    ----------
    box : Interval of shape (d,) or (1, d)
    Others as in :func:`relu_flow`.

    Returns
    -------
    FlowLipschitzBound
        ``method="c1-box"``, ``jacobian`` the (d, d) enclosure; STEP_REJECTED (``upper`` inf)
        if the box crosses a hyperplane during a general piece (split the box).

    Guarantee: upper bound on the Lipschitz constant of Phi_T restricted to the box.
    """
    prec = check_precision(prec)
    alpha = parse_activation(activation, slope)
    pieces = parse_schedule(W_list, A_list, b_list, durations, alpha)
    d = pieces[0].d
    if not isinstance(box, Interval):
        raise InputError("box: expected an Interval of shape (d,); build it with Interval(lo, hi)")
    lo, hi = _parse_boxes(box.reshape(1, -1), d)
    with precision(prec):
        aps = [ArbPiece(q, prec) for q in pieces]
        try:
            _, J, per = flow_box_schedule(aps, lo[0], hi[0])
        except Rejected as exc:
            return FlowLipschitzBound(
                upper=float("inf"),
                upper_exact=None,
                method="c1-box",
                status=FlowStatus.STEP_REJECTED,
                message=str(exc),
            )
        entries = [[J[r, k] for k in range(d)] for r in range(d)]
        frob = sum((e.abs_upper() ** 2 for row in entries for e in row), flint.arb(0)).sqrt()
        bound = frob
        spec = _spectral_norm_upper(J)
        if spec is not None and spec < frob:
            bound = spec
        upper_q = endpoints(bound, "norm bound")[1]
        jac = Interval.from_balls(entries)
    return FlowLipschitzBound(
        upper=fmpq_to_float(upper_q, "up"),
        upper_exact=upper_q,
        method="c1-box",
        jacobian=jac,
        hints={"pieces": per},
    )
