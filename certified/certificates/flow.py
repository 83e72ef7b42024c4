"""Producer side of flow certificates (kind ``"flow"``, version 1; ``proofs/format.md``).

Untrusted: nothing here needs to be right for a VERIFIED verdict to be sound, since the
checker (``certified.checker``) re-derives every claim from the certificate alone. It only
has to be right for the certificates it writes to be accepted.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import flint
import numpy as np

from certified.arith.exact import dyadic_to_str, fmpq_to_str, is_dyadic, to_fmpq, to_fmpq_array
from certified.errors import InputError, ShapeError

__all__ = ["exact_number", "flow_certificate", "laminar_flow_exact"]

FORMAT_VERSION = 1
_ACTIVATIONS = ("relu", "leaky_relu", "tanh", "sigmoid")
_METHODS = ("laminar-exact", "relu-regions")  # smooth fields: certificates/field_flow.py
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


def _exact_matrix(x: Any, field: str, shape: tuple[int | None, int | None]) -> np.ndarray:
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


def _key(obj: Mapping[str, Any], key: str, field: str) -> Any:
    if key not in obj:
        raise InputError(f"{field}: missing field {key!r}; see the schedule format in design.md")
    return obj[key]


class _Piece:
    def __init__(self, piece: Mapping[str, Any], field: str, d: int) -> None:
        extra = set(piece) - {"duration", "W", "A", "b"}
        if extra:
            raise InputError(f"{field}: unknown field {sorted(extra)[0]!r}; remove it")
        self.duration = to_fmpq(_key(piece, "duration", field), f"{field}.duration")
        if self.duration <= 0:
            raise InputError(f"{field}.duration: {self.duration} is not > 0; use a positive time")
        self.W = _exact_matrix(_key(piece, "W", field), f"{field}.W", (d, None))
        p = self.W.shape[1]
        self.A = _exact_matrix(_key(piece, "A", field), f"{field}.A", (p, d))
        self.b = _exact_matrix([_key(piece, "b", field)], f"{field}.b", (1, p))[0]
        self.field = field

    def normal(self) -> np.ndarray:
        a = self.A[0]
        if any(list(row) != list(a) for row in self.A) or any(
            sum((a * self.W[:, i]).tolist(), flint.fmpq(0)) != 0 for i in range(len(self.b))
        ):
            raise InputError(
                f"{self.field}: not laminar with a shared normal (rows of A equal, every column "
                "of W orthogonal to them); the exact laminar replay does not apply"
            )
        return a


def _schedule(schedule: Mapping[str, Any]) -> tuple[int, str, list[_Piece]]:
    extra = set(schedule) - {"dimension", "activation", "pieces", "slope"}
    if extra:
        raise InputError(f"schedule: unknown field {sorted(extra)[0]!r}; remove it")
    d = _key(schedule, "dimension", "schedule")
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
        raise InputError(f"schedule.dimension: {d!r} is not an integer >= 1")
    activation = _key(schedule, "activation", "schedule")
    if activation not in _ACTIVATIONS:
        raise InputError(f"schedule.activation: {activation!r} is not one of {_ACTIVATIONS}")
    if "slope" in schedule and activation != "leaky_relu":
        raise InputError("schedule.slope: only allowed with activation leaky_relu; remove it")
    pieces = _key(schedule, "pieces", "schedule")
    if not isinstance(pieces, Sequence) or not pieces:
        raise InputError("schedule.pieces: expected a non-empty list of pieces")
    return (
        int(d),
        activation,
        [_Piece(p, f"schedule.pieces[{j}]", int(d)) for j, p in enumerate(pieces)],
    )


def laminar_flow_exact(schedule_json: Mapping[str, Any], points: Any) -> np.ndarray:
    """Exact images ``Phi_T(x_n)`` under a ReLU schedule of laminar pieces, T = total time.

    Each piece with shared normal ``a`` maps ``x -> x + tau * sum_i w_i (a.x + b_i)_+`` exactly
    (theorems.md section 2, "Laminar block"), by the flow engine's laminar map
    (:func:`certified.flow._relu_laminar.laminar_map_exact`); the checker's rule
    ``laminar-exact`` replays it independently.

    Parameters
    ----------
    schedule_json : dict
        ``{"dimension": d, "activation": "relu", "pieces": [{"duration", "W", "A", "b"}]}``;
        numbers as in input files (ints, floats read exactly, exact strings).
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
    d, activation, pieces = _schedule(schedule_json)
    if activation != "relu":
        raise InputError(f"schedule.activation: {activation!r}; the exact replay needs 'relu'")
    from certified.flow._relu_laminar import laminar_map_exact

    normals = [piece.normal() for piece in pieces]
    x = _exact_matrix(points, "points", (None, d)).copy()
    for piece, a in zip(pieces, normals, strict=True):
        ones = np.full(len(piece.b), flint.fmpq(1), dtype=object)  # (1 a.x + b_i)_+
        x = laminar_map_exact(x, a, piece.W.T * piece.duration, ones, piece.b, flint.fmpq(0))
    return x


def flow_certificate(
    schedule_json: Mapping[str, Any],
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
    schedule_json : dict
        The schedule (input-file format of the CLI contract; ``"slope"`` for ``leaky_relu``).
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
    if method == "relu-regions" and (enclosures is None or extra_hints is None):
        raise InputError("relu-regions: give enclosures and extra_hints (relu_flow's hints)")
    if images is not None and enclosures is not None:
        raise InputError("images, enclosures: give at most one claim")
    if boxes is not None and enclosures is None:
        raise InputError("boxes: give the claimed enclosures of their images")
    d, activation, pieces = _schedule(schedule_json)
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
        images = laminar_flow_exact(schedule_json, x)
    if images is not None:
        claim = {"images": _strings(_exact_matrix(images, "images", (n, d)), "images")}
    else:
        claimed = to_fmpq_array(enclosures, "enclosures")
        if claimed.shape != (n, d, 2):
            raise ShapeError(f"enclosures: shape {claimed.shape} is not {(n, d, 2)}")
        if np.any(claimed[..., 0] > claimed[..., 1]):
            raise InputError("enclosures: some lower end exceeds its upper end; swap them")
        claim = {"enclosures": _strings(claimed, "enclosures")}
    total = sum((piece.duration for piece in pieces), flint.fmpq(0))
    slope = {"slope": exact_number(schedule_json["slope"])} if "slope" in schedule_json else {}
    instance = {
        "schedule": {
            "dimension": d,
            "activation": activation,
            **slope,
            "pieces": [
                {
                    "duration": exact_number(piece.duration),
                    "W": _strings(piece.W, f"{piece.field}.W"),
                    "A": _strings(piece.A, f"{piece.field}.A"),
                    "b": _strings(piece.b, f"{piece.field}.b"),
                }
                for piece in pieces
            ],
        },
        **(
            {"points": _strings(x, "points")}
            if starts is None
            else {"boxes": _strings(starts, "boxes")}
        ),
        "time": exact_number(total),
    }
    return {
        "kind": "flow",
        "version": FORMAT_VERSION,
        "instance": instance,
        "claim": claim,
        "hints": {"method": method} if method != "relu-regions" else _relu_hints(extra_hints),
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
