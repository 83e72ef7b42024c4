"""Producer side of flow certificates (kind ``"flow"``, version 1; ``proofs/format.md``).

Untrusted: nothing here needs to be right for a VERIFIED verdict to be sound, since the
checker (``certified.checker``) re-derives every claim from the certificate alone. It only
has to be right for the certificates it writes to be accepted.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import flint
import numpy as np

from certified.arith.exact import dyadic_to_str, fmpq_to_str, is_dyadic, to_fmpq, to_fmpq_array
from certified.errors import InputError, ShapeError

if TYPE_CHECKING:
    from certified.models import Piece, Schedule

__all__ = [
    "RELU_REGIONS_MAX_OPS",
    "exact_number",
    "flow_certificate",
    "laminar_flow_exact",
    "relu_regions_min_ops",
    "relu_vectorised_certificate",
    "relu_vectorised_min_cost",
]

FORMAT_VERSION = 1
_METHODS = (
    "laminar-exact",
    "relu-regions",
    "relu-vectorised",
)  # smooth fields: certificates/field_flow.py
_DYADIC_FROM = 2**32  # dyadics with a larger denominator are written "m*2^e" (shorter)


def exact_number(x: Any, field: str = "value") -> str:
    """Canonical certificate string of an exact number.

    ``"p"`` for an integer, ``"p/q"`` in lowest terms, except that a dyadic with denominator
    ``>= 2**32`` is written ``"m*2^e"`` with ``m`` odd (shorter; same value).

    Guarantee: exact (the checker reads back the same rational).
    """
    if type(x) is flint.fmpq:  # fast path (millions of parameters): same strings as below
        den = int(x.q)
        if den >= _DYADIC_FROM and den & (den - 1) == 0:
            return f"{x.p}*2^{1 - den.bit_length()}"
        return str(x)
    q = to_fmpq(x, field)
    if q.q >= _DYADIC_FROM and is_dyadic(q):
        return dyadic_to_str(q)
    return fmpq_to_str(q)


def double_strings(a: np.ndarray) -> list:
    """:func:`exact_number` of every entry of a float64 array, as nested lists (same shape):
    the same canonical strings, computed from the exponent and integer significand of each
    double (``np.frexp``) instead of one rational at a time.

    Guarantee: exact (each string is the double's value); raises InputError on a non-finite
    entry.
    """
    a = np.asarray(a, dtype=np.float64)
    if not np.all(np.isfinite(a)):
        raise InputError("certificate: a non-finite double has no exact value")
    m, e = np.frexp(a)
    mi = (m * 2.0**53).astype(np.int64)  # exact: |m| < 1 has at most 53 significant bits
    ex = e.astype(np.int64) - 53
    low = np.frexp((mi & -mi).astype(np.float64))[1].astype(np.int64) - 1  # trailing zeros
    low = np.where(mi == 0, 0, low)
    mi, ex = mi >> low, np.where(mi == 0, 0, ex + low)  # mi odd (or 0): lowest terms

    den = [f"/{1 << j}" for j in range(32)]  # "p/q" below 2^32, else "m*2^e" (exact_number)
    flat = [
        f"{n}{den[-k]}" if -32 < k < 0 else (f"{n}*2^{k}" if k < 0 else str(n << k))
        for n, k in zip(mi.ravel().tolist(), ex.ravel().tolist(), strict=True)
    ]
    for size in reversed(a.shape[1:]):
        flat = [flat[i : i + size] for i in range(0, len(flat), size)]
    return flat


def _exact_matrix(x: Any, field: str, shape: tuple[int | None, int | None]) -> np.ndarray:
    exact = isinstance(x, np.ndarray) and x.dtype == object and x.ndim == 2
    if exact and all(type(v) is flint.fmpq for v in x.flat):  # already exact (read_points)
        a = x.copy()
    else:
        a = to_fmpq_array(x, field)
    if (
        a.ndim != 2
        or a.size == 0
        or any(n is not None and n != m for n, m in zip(shape, a.shape, strict=False))
    ):
        want = " x ".join("n" if n is None else str(n) for n in shape)
        raise ShapeError(f"{field}: shape {a.shape} is not {want}; give a non-empty {want} array")
    return a


def _strings(a: Any, field: str) -> Any:
    if not isinstance(a, np.ndarray):
        return exact_number(a, field)
    return [_strings(row, f"{field}[{i}]") for i, row in enumerate(a)]


def _schedule(schedule: Schedule | Mapping[str, Any]) -> Schedule:
    """The schedule, read by the one schedule parser (:meth:`Schedule.from_json`); messages
    start with ``"schedule: "``."""
    from certified.io import prefixed_errors  # lazy: ~10 ms that most importers never need
    from certified.models import Schedule

    if isinstance(schedule, Schedule):
        return schedule
    with prefixed_errors("schedule"):
        return Schedule.from_json(schedule)


def _laminar_normal(piece: Piece, j: int) -> np.ndarray:
    """The shared normal ``a`` of a piece whose rows of A all equal ``a`` and whose columns of
    W are orthogonal to it (the laminar-exact rule's condition)."""
    a = piece.A[0]
    if any(list(row) != list(a) for row in piece.A) or not piece.has_invariant_normals():
        raise InputError(
            f"schedule: pieces[{j}]: not laminar with a shared normal (rows of A equal, every "
            "column of W orthogonal to them); the exact laminar replay does not apply"
        )
    return a


def laminar_flow_exact(schedule_json: Schedule | Mapping[str, Any], points: Any) -> np.ndarray:
    """Exact images ``Phi_T(x_n)`` under a ReLU schedule of laminar pieces, T = total time.

    Each piece with shared normal ``a`` maps ``x -> x + tau * sum_i w_i (a.x + b_i)_+`` exactly
    (theorems.md section 2, "Laminar block"), by the flow engine's laminar map
    (:func:`certified.flow.relu._laminar.laminar_map_exact`); the checker's rule
    ``laminar-exact`` replays it independently.

    Parameters
    ----------
    schedule_json : dict or Schedule
        ``{"dimension": d, "activation": "relu", "pieces": [{"duration", "W", "A", "b"}]}``,
        read by :meth:`certified.models.Schedule.from_json` (numbers as in input files: ints,
        floats read exactly, exact strings), or a :class:`~certified.models.Schedule`.
    points : N x d array-like of numbers

    Returns
    -------
    numpy.ndarray
        ``dtype=object``, shape (N, d), entries :class:`flint.fmpq`.

    Raises
    ------
    InputError, ShapeError
        Malformed schedule or points, activation other than relu, a non-laminar piece.

    Guarantee: exact.
    """
    schedule = _schedule(schedule_json)
    if schedule.activation.value != "relu":
        raise InputError(
            f"schedule.activation: {schedule.activation.value!r}; the exact replay needs 'relu'"
        )
    from certified.flow.relu._laminar import laminar_map_exact

    normals = [_laminar_normal(piece, j) for j, piece in enumerate(schedule.pieces)]
    x = _exact_matrix(points, "points", (None, schedule.dimension)).copy()
    for piece, a in zip(schedule.pieces, normals, strict=True):
        ones = np.full(piece.width, flint.fmpq(1), dtype=object)  # (1 a.x + b_i)_+
        x = laminar_map_exact(x, a, piece.W.T * piece.duration, ones, piece.b, flint.fmpq(0))
    return x


def flow_certificate(
    schedule_json: Schedule | Mapping[str, Any],
    points: Any,
    images: Any = None,
    enclosures: Any = None,
    method: str = "laminar-exact",
    extra_hints: Mapping[str, Any] | None = None,
    boxes: Any = None,
) -> dict[str, Any]:
    """Build a flow certificate, version 1 (``proofs/format.md`` section 4).

    Parameters
    ----------
    schedule_json : dict or Schedule
        The schedule (input-file format of the CLI contract, read by
        :meth:`certified.models.Schedule.from_json`; ``"slope"`` for ``leaky_relu``), or a
        :class:`~certified.models.Schedule`.
    points : N x d array-like of exact numbers (floats are read as their exact binary value)
        Ignored (give None) when ``boxes`` is given.
    images : N x d array-like, optional
        Claimed exact images. If neither ``images`` nor ``enclosures`` is given, the exact
        images are computed by :func:`laminar_flow_exact`.
    enclosures : N x d x 2 array-like, optional
        Claimed enclosures ``[lo, hi]`` per coordinate.
    method : str
        The checker rule named in the hints: ``"laminar-exact"`` or ``"relu-regions"`` (smooth
        fields: :func:`certified.certificates.field_flow.field_flow_certificate`).
    extra_hints : dict, optional
        For ``"relu-regions"``: the hints of :func:`certified.flow.relu.relu_flow`.
    boxes : N x d x 2 array-like, optional
        Initial boxes ``[lo, hi]`` instead of points (rules laminar-exact and relu-regions,
        claim ``enclosures``): the claim is then about every point of each box.

    Returns
    -------
    dict
        ``{"kind", "version", "instance", "claim", "hints"}`` with every number a canonical
        exact string (:func:`exact_number`) and the dimension and version JSON integers.

    Guarantee: none (the checker decides); the numbers are written exactly.
    """
    if method not in _METHODS:
        raise InputError(f"method: {method!r} is not a rule of version 1; use one of {_METHODS}")
    if method != "laminar-exact" and (enclosures is None or extra_hints is None):
        raise InputError(f"{method}: give enclosures and extra_hints (the engine's hints)")
    if images is not None and enclosures is not None:
        raise InputError("images, enclosures: give at most one claim")
    if boxes is not None and enclosures is None:
        raise InputError("boxes: give the claimed enclosures of their images")
    schedule = _schedule(schedule_json)
    d = schedule.dimension
    starts = None
    if boxes is not None:
        starts = to_fmpq_array(boxes, "boxes")
        if starts.ndim != 3 or starts.shape[1:] != (d, 2) or starts.shape[0] == 0:
            raise ShapeError(f"boxes: shape {starts.shape} is not (N, {d}, 2)")
        if np.any(starts[..., 0] > starts[..., 1]):
            raise InputError("boxes: some lower end exceeds its upper end; swap them")
        x = starts[..., 0]
    else:
        x = _exact_matrix(points, "points", (None, d))
    n = x.shape[0]
    if images is None and enclosures is None:
        images = laminar_flow_exact(schedule, x)
    if images is not None:
        claim = {"images": _strings(_exact_matrix(images, "images", (n, d)), "images")}
    elif isinstance(enclosures, np.ndarray) and enclosures.dtype == np.float64:
        if enclosures.shape != (n, d, 2):  # doubles (the engines' claims): strings directly
            raise ShapeError(f"enclosures: shape {enclosures.shape} is not {(n, d, 2)}")
        if np.any(enclosures[..., 0] > enclosures[..., 1]):
            raise InputError("enclosures: some lower end exceeds its upper end; swap them")
        claim = {"enclosures": double_strings(enclosures)}
    else:
        claimed = to_fmpq_array(enclosures, "enclosures")
        if claimed.shape != (n, d, 2):
            raise ShapeError(f"enclosures: shape {claimed.shape} is not {(n, d, 2)}")
        if np.any(claimed[..., 0] > claimed[..., 1]):
            raise InputError("enclosures: some lower end exceeds its upper end; swap them")
        claim = {"enclosures": _strings(claimed, "enclosures")}
    # "slope" as given: a dict without one keeps the default implicitly (as the checker does)
    give_slope = schedule.slope is not None and (
        schedule is schedule_json or "slope" in schedule_json
    )
    instance = {
        "schedule": {
            "dimension": d,
            "activation": schedule.activation.value,
            **({"slope": exact_number(schedule.slope)} if give_slope else {}),
            "pieces": _piece_strings(schedule),
        },
        **(
            {"points": _strings(x, "points")}
            if starts is None
            else {"boxes": _strings(starts, "boxes")}
        ),
        "time": exact_number(schedule.total_time),
    }
    return {
        "kind": "flow",
        "version": FORMAT_VERSION,
        "instance": instance,
        "claim": claim,
        "hints": (
            {"method": method}
            if method == "laminar-exact"
            else _relu_hints(extra_hints)
            if method == "relu-regions"
            else {"method": method, **extra_hints}
        ),
    }


RELU_ORDER = 40  # least Taylor order of the checker's replay (steps have m h <= 1)
_RELU_KINDS = {"laminar": ("kind",), "equilibrium": ("kind",)}


def relu_order(prec: int) -> int:
    """Taylor order of the relu-regions replay for a producer at ``prec`` bits: the least
    N >= 40 with N! >= 2^(prec + 40) (at most 100), so that the tail (about |x| (m h)^N / N!
    with m h <= 1) stays far below the producer's margins near hyperplanes."""
    n = RELU_ORDER
    while n < 100 and math.lgamma(n + 1) / math.log(2) < prec + 40:
        n += 1
    return n


RELU_REGIONS_MAX_OPS = 10**8  # the checker's budget of rule relu-regions (a test pins it)


def relu_regions_min_ops(schedule: Schedule, n_sets: int, boxes: bool, prec: int) -> int:
    """A lower bound of the operation count that the checker's rule relu-regions charges,
    before any replay, to a certificate of :func:`certified.flow.relu.relu_flow`'s hints on
    ``n_sets`` points or boxes at ``prec`` bits: every piece entry costs ``(p + 1)(d + 1)``;
    a ``regions`` entry (k >= 1 steps and windows) at least ``2 series (1 + d [boxes])``,
    ``series = (N + 1)((d + 1)^2 + 3 (G + 2) p (d + 1))`` with the order N of
    :func:`relu_order` and the grid G of the engine. The engine gives every non-laminar piece
    a ``regions`` entry, except that a point may be an exact equilibrium of one of them.
    Comparing it with :data:`RELU_REGIONS_MAX_OPS` lets ``certified flow`` refuse at once
    rather than run the region engine for an hour to be refused by the checker.

    Guarantee: none needed (untrusted); tests pin it below the checker's estimate.
    """
    from certified.flow.relu._model import parse_activation, relu_pieces
    from certified.flow.relu._points import GRID

    alpha = parse_activation(schedule.activation.value, schedule.slope)
    d, order = schedule.dimension, relu_order(prec)
    views = relu_pieces(schedule.pieces, alpha)
    base = sum((q.source.width + 1) * (d + 1) for q in views)
    regions = [
        2 * (order + 1) * ((d + 1) ** 2 + 3 * (GRID + 2) * q.source.width * (d + 1))
        for q in views
        if not q.laminar
    ]
    per_set = sum(regions) * (1 + d * boxes) - (0 if boxes or not regions else max(regions))
    return n_sets * (base + per_set)


def _relu_hints(extra: Mapping[str, Any]) -> dict[str, Any]:
    """Hints of rule relu-regions from :func:`certified.flow.relu.relu_flow`'s hints (points
    or boxes; a box's one-region piece becomes one segment without crossings)."""
    if "points" not in extra and "boxes" not in extra:
        raise InputError("relu-regions: the hints hold neither points nor boxes")
    per = []
    for n, entries in enumerate(extra.get("points", extra.get("boxes"))):
        row = []
        for j, e in enumerate(entries):
            kind = e["kind"]
            if kind in _RELU_KINDS:
                row.append({"kind": kind})
            elif kind == "region":  # a box in one region for the whole piece
                end = e["steps"][-1][1]
                seg = {"region": e["region"], "start": "0", "end": end, "steps": e["steps"]}
                row.append({"kind": "regions", "segments": [seg], "crossings": []})
            elif kind == "regions":
                row.append(
                    {
                        "kind": kind,
                        "segments": [
                            {k: s[k] for k in ("region", "start", "end", "steps")}
                            for s in e["segments"]
                        ],
                        "crossings": [
                            {k: c[k] for k in ("neurons", "window", "eps")} for c in e["crossings"]
                        ],
                    }
                )
            else:
                raise InputError(f"relu-regions: point {n}, piece {j} was not certified ({kind})")
        per.append(row)
    return {
        "method": "relu-regions",
        "precision": min(2 * int(extra["prec"]), 4096),  # margin over the windows' widths
        "order": relu_order(int(extra["prec"])),
        "grid": int(extra["grid"]),
        "points": per,
    }


def relu_vectorised_min_cost(schedule: Schedule, n_sets: int) -> int:
    """A lower bound of the cost that the checker's rule relu-vectorised charges (its units,
    :func:`certified.checker.flow.relu_vectorised_limits`) for ``n_sets`` points or boxes: one
    step per set and piece, the engine's Taylor orders. Computed before any flow, so that
    ``certified flow`` refuses at once what the checker would refuse.

    Guarantee: none needed (untrusted); the checker charges at least this much.
    """
    from certified.checker.flow import relu_vectorised_limits
    from certified.flow.relu._model import parse_activation, relu_pieces
    from certified.flow.relu._vec import vec_piece

    alpha = parse_activation(schedule.activation.value, schedule.slope)
    d, total = schedule.dimension, 0
    round_cost, step_cost, eig_cost = relu_vectorised_limits()[1]
    for q in relu_pieces(schedule.pieces, alpha):
        vp = vec_piece(q)
        K, p = (3, q.source.width) if vp is None else (vp.K, vp.b.shape[0])
        per_set = eig_cost * d**3 + step_cost * K * (d + 4) * (p + 4)
        total += round_cost * (K + 4) + n_sets * per_set
    return total


def _resolved(text: str, hint: Mapping[str, Any], tau: flint.fmpq) -> list[tuple[str, int]]:
    """The tokens of one piece with "R" written out as "r<ticks>" (the same steps)."""
    left = int((tau * flint.fmpq(2) ** hint["tick"]).floor()) if hint["tick"] >= 0 else None
    if left is None:
        left = int((tau / flint.fmpq(2) ** -hint["tick"]).floor())
    out = []
    for m in re.finditer(r"R|([rws])([0-9]+)", text):
        k, t = ("r", min(hint["step"], left)) if m[0] == "R" else (m[1], int(m[2]))
        out.append((k, t))
        left -= t
    return out


def _piece_strings(schedule: Schedule) -> list[dict[str, Any]]:
    """The pieces of a schedule as certificate JSON (every number an exact string)."""
    return [
        {
            "duration": exact_number(piece.duration),
            "W": _strings(piece.W, f"pieces[{j}].W"),
            "A": _strings(piece.A, f"pieces[{j}].A"),
            "b": _strings(piece.b, f"pieces[{j}].b"),
        }
        for j, piece in enumerate(schedule.pieces)
    ]


def _sets_of(x: np.ndarray, boxes: bool) -> list:
    return [[(lo, hi) for lo, hi in row] for row in x] if boxes else [list(row) for row in x]


def relu_vectorised_certificate(
    schedule_json: Schedule | Mapping[str, Any],
    points: Any = None,
    plan: Mapping[str, Any] | None = None,
    boxes: Any = None,
    repairs: int = 24,
    partition: list | None = None,
    leaves: Any = None,
    claims: Any = None,
) -> dict[str, Any]:
    """A certificate of rule relu-vectorised from the vectorised engine's step plan
    (``result.hints["plan"]`` of :func:`certified.flow.enclose_flow`, ``method="vectorised"``).

    The claimed enclosures are those of the checker's own replay of the plan
    (:func:`certified.checker.flow.replay_relu_vectorised`), so the certificate is accepted
    exactly when that replay certifies every step. A region step that the replay does not
    certify (rare: the engine validated it with slightly different roundings) is split in
    halves, and after three splits of one set replaced by a window step (always valid), and
    the sets concerned replayed again, at most ``repairs`` times. For boxes the engine's
    windows are written as straddle steps (bounds.md#relu-vec-straddle; one that does not
    close becomes a window). ``partition`` (one flat tree per box, e.g. from
    :func:`certified.flow.relu._split.split_relu_boxes`) with its ``leaves`` (boxes, in the
    trees' order): the leaves are replayed and each box claims the hull of its leaves'.
    ``claims``: claim these enclosures without any replay (the writer's check decides).

    Raises
    ------
    InputError
        The replay is over the checker's resource limit (its message says by how much), or a
        step could not be repaired.

    Guarantee: none (the checker decides).
    """
    from certified.checker import Rejected
    from certified.checker.flow import Piece, replay_relu_vectorised

    if plan is None:
        raise InputError("plan: give the vectorised engine's hints['plan']")
    schedule = _schedule(schedule_json)
    d, n_boxes = schedule.dimension, boxes is not None
    if claims is not None:  # the engine's enclosures as they are: no replay here
        plan = {"pieces": plan["pieces"], "steps": plan["steps"]}
        return flow_certificate(schedule, points, enclosures=claims, method="relu-vectorised",
                                extra_hints=plan, boxes=boxes)  # fmt: skip
    starts = (  # with a partition (one flat tree per box), its leaves ``leaves`` are replayed
        to_fmpq_array(boxes if partition is None else leaves, "boxes")
        if n_boxes
        else _exact_matrix(points, "points", (None, d))
    )
    n = starts.shape[0]
    pieces = [Piece(p, f"pieces[{j}]", d) for j, p in enumerate(_piece_strings(schedule))]
    al = flint.fmpq(0) if schedule.activation.value == "relu" else schedule.slope
    sets = _sets_of(starts, n_boxes)
    window = "s" if n_boxes else "w"  # boxes: straddle steps (bounds.md#relu-vec-straddle)
    steps = [s.replace("w", window).split("/") for s in plan["steps"]]
    hints = {"method": "relu-vectorised", "pieces": plan["pieces"]}
    todo, tries = list(range(n)), [0] * n
    lo = hi = None
    for _ in range(repairs + 1):
        sub = {**hints, "steps": ["/".join(steps[q]) for q in todo]}
        try:
            l_, h_, failed = replay_relu_vectorised(
                pieces, [sets[q] for q in todo], sub, al, n_boxes
            )
        except Rejected as exc:
            raise InputError(f"no certificate: the checker would refuse it ({exc})") from None
        if lo is None:
            lo, hi = l_, h_
        else:
            lo[todo], hi[todo] = l_, h_
        todo_next = []
        for i, (j, s) in failed.items():
            q = todo[i]
            tries[q] += 1
            toks = _resolved(steps[q][j], plan["pieces"][j], schedule.pieces[j].duration)
            t = toks[s][1]
            if toks[s][0] == "s":  # a straddle step that did not close: a window
                toks[s] = ("w", t)
            elif tries[q] <= 3 and t >= 2:
                toks[s : s + 1] = [("r", t // 2), ("r", t - t // 2)]
            else:
                toks[s] = ("w", t)
            steps[q][j] = "".join(f"{k}{v}" for k, v in toks)
            if tries[q] > 3:  # give up straddle steps for this set: windows (always valid)
                steps[q] = [part.replace("s", "w") for part in steps[q]]
            todo_next.append(q)
        todo = sorted(todo_next)
        if not todo:
            break
    else:
        raise InputError(f"no certificate: {len(todo)} sets still fail after {repairs} repairs")
    enc = np.stack([lo, hi], axis=-1)
    final = {"pieces": plan["pieces"], "steps": ["/".join(s) for s in steps]}
    if partition is not None:  # one claim per input box: the hull of its leaves' enclosures
        owner = np.repeat(np.arange(len(partition)), [t.count(None) for t in partition])
        enc = np.array([np.stack([enc[owner == i, :, 0].min(axis=0),
                                  enc[owner == i, :, 1].max(axis=0)], axis=-1)
                        for i in range(len(partition))])  # fmt: skip
        final["partition"] = [
            [exact_number(v) if isinstance(v, float) else v for v in tree] for tree in partition
        ]
        starts = to_fmpq_array(boxes, "boxes")
    return flow_certificate(schedule, None if n_boxes else starts, enclosures=enc,
                            method="relu-vectorised", extra_hints=final,
                            boxes=starts if n_boxes else None)  # fmt: skip
