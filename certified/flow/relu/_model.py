"""Exact ReLU / leaky-ReLU view of a schedule piece: hyperplanes, regions, laminarity.

A schedule is parsed once, into :class:`certified.models.Piece` objects (the one piece type;
:func:`schedule_pieces` reads the list API of :func:`certified.flow.relu.relu_flow` into
them). :class:`ReluPiece` is a derived view of one such piece for a negative-side slope
``alpha``: the piece's field ``f(x) = sum_i w_i sigma(a_i . x + b_i)`` rewritten exactly
(rationals) as

    f(x) = M0 x + c0 + sum_{kink neurons i} w_i sigma(lam_i * (ahat_h . x + bhat_h)),

where neurons with ``w_i = 0`` are dropped, neurons with ``a_i = 0`` are constants
``w_i sigma(b_i)`` (folded into ``c0``), neurons of slope 1 on both sides (leaky with alpha = 1)
are affine (folded into ``M0``, ``c0``), and the remaining "kink" neurons are grouped by their
hyperplane: ``(a_i, b_i) = lam_i (ahat_h, bhat_h)`` with ``lam_i != 0`` rational, so that
duplicated or opposite neurons switch together and are one constraint, not a "simultaneous
crossing". Everything here is exact; nothing is rounded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import flint
import numpy as np

from certified.arith.exact import to_fmpq, to_fmpq_array
from certified.errors import InputError, ShapeError
from certified.models import DEFAULT_LEAKY_SLOPE, Piece

__all__ = [
    "ACTIVATIONS",
    "ReluPiece",
    "parse_activation",
    "parse_piece",
    "parse_points",
    "parse_schedule",
    "relu_pieces",
    "schedule_pieces",
]

ACTIVATIONS = ("relu", "leaky_relu")

_ZERO = flint.fmpq(0)


def parse_activation(activation: Any, slope: Any) -> flint.fmpq:
    """The slope ``alpha`` of sigma on the negative side (0 for ReLU). Exact."""
    if activation not in ACTIVATIONS:
        raise InputError(
            f"activation: {activation!r} is not supported here; use one of {ACTIVATIONS} "
            "(tanh and sigmoid fields go through the smooth flow methods)"
        )
    if activation == "relu":
        if slope is not None:
            raise InputError(
                "slope: only meaningful with activation='leaky_relu'; drop it for 'relu'"
            )
        return _ZERO
    alpha = DEFAULT_LEAKY_SLOPE if slope is None else to_fmpq(slope, "slope")
    if not 0 <= alpha <= 1:
        raise InputError(
            f"slope: {alpha} is outside [0, 1]; leaky ReLU max(z, alpha z) needs 0 <= alpha <= 1"
        )
    return alpha


def _dot(u: np.ndarray, v: np.ndarray) -> flint.fmpq:
    total = flint.fmpq(0)
    for a, b in zip(u, v, strict=True):
        if a and b:
            total += a * b
    return total


def _normalise(a: np.ndarray, b: flint.fmpq) -> tuple[tuple, flint.fmpq]:
    """Key of the hyperplane ``a.x + b = 0`` and ``lam`` with ``(a, b) = lam * (ahat, bhat)``,
    ``ahat`` having first nonzero entry 1."""
    k = next(i for i, v in enumerate(a) if v != 0)
    lam = a[k]
    key = tuple(v / lam for v in a) + (b / lam,)
    return key, lam


@dataclass
class ReluPiece:
    """The exact ReLU view of one :class:`~certified.models.Piece` for the slope ``alpha``
    (see the module docstring); build it with :meth:`of`.

    ``source`` is the piece (its ``duration``, ``W``, ``A``, ``b`` are ``tau``, ``W``, ``A``,
    ``b`` here). ``kinks`` lists ``(neuron, plane, lam)``; ``role[i]`` is ``"kink"``, ``"off"``
    (w_i = 0), ``"const"`` (a_i = 0) or ``"linear"`` (alpha = 1). ``laminar`` means: some
    normal ``a`` has ``a . f(x) = 0`` identically and every kink neuron's normal is parallel
    to ``a``, so ``a . x`` is invariant and ``Phi_tau(x) = x + tau f(x)`` exactly.
    """

    index: int
    source: Piece
    alpha: flint.fmpq
    role: list[str]
    kinks: list[tuple[int, int, flint.fmpq]]
    planes_a: np.ndarray  # (H, d) fmpq
    planes_b: np.ndarray  # (H,)
    M0: np.ndarray | None  # (d, d) fmpq, None when zero
    c0: np.ndarray  # (d,)
    laminar: bool
    normal: np.ndarray | None  # (d,) when laminar with kink neurons
    neurons_of_plane: list[list[int]] = field(default_factory=list)
    invariant: list[bool] = field(default_factory=list)

    @property
    def tau(self) -> flint.fmpq:
        return self.source.duration

    @property
    def W(self) -> np.ndarray:  # noqa: N802 (the matrix is W in the mathematics)
        return self.source.W

    @property
    def A(self) -> np.ndarray:  # noqa: N802
        return self.source.A

    @property
    def b(self) -> np.ndarray:
        return self.source.b

    @property
    def d(self) -> int:
        return self.source.dimension

    @property
    def p(self) -> int:
        return self.source.width

    @property
    def n_planes(self) -> int:
        return len(self.planes_b)

    def planes_exact(self, x: np.ndarray) -> list[flint.fmpq]:
        """``ghat_h(x)`` for an exact point, exactly."""
        return [_dot(self.planes_a[h], x) + self.planes_b[h] for h in range(self.n_planes)]

    def field_exact(self, x: np.ndarray) -> np.ndarray:
        """``f(x)`` for an exact point, exactly."""
        g = self.planes_exact(x)
        out = self.c0.copy()
        if self.M0 is not None:
            out = out + np.array([_dot(row, x) for row in self.M0], dtype=object)
        for i, h, lam in self.kinks:
            z = lam * g[h]
            if z > 0:
                out = out + self.W[:, i] * z
            elif z < 0 and self.alpha:
                out = out + self.W[:, i] * (self.alpha * z)
        return out

    def region_string(self, signs: tuple[int, ...]) -> str:
        """One character per neuron: ``+`` active, ``-`` inactive (slope alpha), ``.`` no kink."""
        chars = ["."] * self.p
        for i, h, lam in self.kinks:
            chars[i] = "+" if (lam > 0) == (signs[h] > 0) else "-"
        return "".join(chars)

    @classmethod
    def of(cls, piece: Piece, alpha: flint.fmpq, index: int = 0) -> ReluPiece:
        """The exact ReLU view of ``piece`` (number ``index`` of its schedule) for the slope
        ``alpha``.

        Guarantee: exact.
        """
        Wq, Aq, bq = piece.W, piece.A, piece.b
        dd, p = Wq.shape
        role: list[str] = []
        kinks: list[tuple[int, int, flint.fmpq]] = []
        keys: dict[tuple, int] = {}
        planes_a: list[np.ndarray] = []
        planes_b: list[flint.fmpq] = []
        neurons_of_plane: list[list[int]] = []
        M0 = np.full((dd, dd), _ZERO, dtype=object)
        c0 = np.full(dd, _ZERO, dtype=object)
        has_m0 = False
        for i in range(p):
            w = Wq[:, i]
            a = Aq[i]
            if all(v == 0 for v in w):
                role.append("off")
            elif all(v == 0 for v in a):
                role.append("const")
                bi = bq[i]
                c0 = c0 + w * (bi if bi > 0 else alpha * bi)
            elif alpha == 1:
                role.append("linear")
                M0 = M0 + np.outer(w, a)
                c0 = c0 + w * bq[i]
                has_m0 = True
            else:
                role.append("kink")
                key, lam = _normalise(a, bq[i])
                h = keys.get(key)
                if h is None:
                    h = keys[key] = len(planes_b)
                    planes_a.append(np.array(key[:-1], dtype=object))
                    planes_b.append(key[-1])
                    neurons_of_plane.append([])
                kinks.append((i, h, lam))
                neurons_of_plane[h].append(i)
        if has_m0 and all(v == 0 for v in M0.ravel()):
            has_m0 = False
        pa = np.array(planes_a, dtype=object).reshape(len(planes_b), dd)
        pb = np.array(planes_b, dtype=object)

        # laminar: one normal direction, every kink w_i orthogonal to it, no drift along it
        laminar, normal = False, None
        if not has_m0:
            if not kinks:
                laminar = True
            else:
                # all kink normals parallel <=> all planes share ahat (ahat is normalised)
                n0 = pa[0]
                parallel = all(all(u == v for u, v in zip(row, n0, strict=True)) for row in pa)
                if parallel and _dot(n0, c0) == 0:
                    if all(_dot(Wq[:, i], n0) == 0 for i, _, _ in kinks):
                        laminar, normal = True, n0
        # a plane is invariant when ahat . f vanishes identically: ghat_h is then constant
        # along every trajectory and its sign never needs validating
        invariant = []
        for h in range(len(planes_b)):
            ah = pa[h]
            inv = _dot(ah, c0) == 0 and all(_dot(ah, Wq[:, i]) == 0 for i, _, _ in kinks)
            if inv and has_m0:
                inv = all(_dot(ah, M0[:, k]) == 0 for k in range(dd))
            invariant.append(inv)
        return cls(
            index=index,
            source=piece,
            alpha=alpha,
            role=role,
            kinks=kinks,
            planes_a=pa,
            planes_b=pb,
            M0=M0 if has_m0 else None,
            c0=c0,
            laminar=laminar,
            normal=normal,
            neurons_of_plane=neurons_of_plane,
            invariant=invariant,
        )


def _piece(W: Any, A: Any, b: Any, tau: Any, index: int, d: int | None = None) -> Piece:
    """One piece of the list API, read by :class:`~certified.models.Piece` with the list
    API's names in messages (``W_list[2][0][1]: ...``, ``durations[2]: ...``); ``d`` is the
    dimension of piece 0."""
    tag = f"[{index}]"
    if isinstance(tau, (list, tuple, np.ndarray)) and np.ndim(tau) > 0:
        raise ShapeError(f"durations{tag}: expected one number, got a sequence")
    rows = len(W) if isinstance(W, (list, tuple, np.ndarray)) and np.ndim(W) > 0 else None
    if d is not None and rows is not None and rows != d:
        raise ShapeError(
            f"W_list{tag}: has {rows} rows but piece 0 has dimension {d}; all pieces need the "
            "same dimension d"
        )
    names = {"W": f"W_list{tag}", "A": f"A_list{tag}", "b": f"b_list{tag}"}
    return Piece(tau, W, A, b, names={**names, "duration": f"durations{tag}"})


def parse_piece(W: Any, A: Any, b: Any, tau: Any, alpha: flint.fmpq, index: int = 0) -> ReluPiece:
    """Read one piece (:class:`~certified.models.Piece`) and take its ReLU view.

    Raises ShapeError / NonFiniteError / NumberFormatError / InputError naming the field.
    """
    return ReluPiece.of(_piece(W, A, b, tau, index), alpha, index)


def _as_list(x: Any, name: str) -> list:
    if isinstance(x, np.ndarray) and x.dtype != object and x.ndim >= 1:
        return list(x)
    if isinstance(x, (list, tuple)):
        return list(x)
    if isinstance(x, np.ndarray) and x.dtype == object and x.ndim >= 1:
        return list(x)
    raise InputError(f"{name}: expected a list (one entry per piece), got {type(x).__name__}")


def schedule_pieces(W_list: Any, A_list: Any, b_list: Any, durations: Any) -> list[Piece]:
    """Read the list API of a schedule (one entry per piece in each list) into
    :class:`~certified.models.Piece` objects, every piece of the same dimension.

    Raises
    ------
    InputError, ShapeError, NonFiniteError, NumberFormatError
        An empty schedule, lists of different lengths, a bad piece (named like
        ``W_list[2][0][1]``), pieces of different dimensions.

    Guarantee: exact.
    """
    Ws = _as_list(W_list, "W_list")
    As = _as_list(A_list, "A_list")
    bs = _as_list(b_list, "b_list")
    ts = _as_list(durations, "durations")
    if not Ws:
        raise InputError("W_list: the schedule is empty; give at least one piece")
    if not len(Ws) == len(As) == len(bs) == len(ts):
        raise ShapeError(
            f"schedule: W_list, A_list, b_list and durations have lengths {len(Ws)}, "
            f"{len(As)}, {len(bs)}, {len(ts)}; give one entry per piece in each"
        )
    pieces: list[Piece] = []
    for j, (W, A, b, t) in enumerate(zip(Ws, As, bs, ts, strict=True)):
        pieces.append(_piece(W, A, b, t, j, pieces[0].dimension if pieces else None))
    return pieces


def relu_pieces(pieces: Sequence[Piece], alpha: flint.fmpq) -> list[ReluPiece]:
    """The ReLU views of a schedule's pieces for the slope ``alpha``. Guarantee: exact."""
    return [ReluPiece.of(piece, alpha, j) for j, piece in enumerate(pieces)]


def parse_schedule(
    W_list: Any, A_list: Any, b_list: Any, durations: Any, alpha: flint.fmpq
) -> list[ReluPiece]:
    """Read a whole schedule of the list API (:func:`schedule_pieces`) and take the ReLU
    views of its pieces."""
    return relu_pieces(schedule_pieces(W_list, A_list, b_list, durations), alpha)


def parse_points(X: Any, d: int, name: str = "X0") -> np.ndarray:
    """Exact points, object array (N, d) of fmpq, N >= 1."""
    arr = to_fmpq_array(X, name)
    if arr.ndim != 2:
        raise ShapeError(f"{name}: has shape {arr.shape}; expected (N, d) with one point per row")
    if arr.shape[0] == 0:
        raise ShapeError(f"{name}: has no points; give at least one row")
    if arr.shape[1] != d:
        raise ShapeError(
            f"{name}: points have dimension {arr.shape[1]} but the field has dimension {d}"
        )
    return arr
