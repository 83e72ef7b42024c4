"""Exact description of a ReLU / leaky-ReLU schedule: parsing, validation, hyperplanes, laminarity.

A piece's field ``f(x) = sum_i w_i sigma(a_i . x + b_i)`` is rewritten exactly (rationals) as

    f(x) = M0 x + c0 + sum_{kink neurons i} w_i sigma(lam_i * (ahat_h . x + bhat_h)),

where neurons with ``w_i = 0`` are dropped, neurons with ``a_i = 0`` are constants
``w_i sigma(b_i)`` (folded into ``c0``), neurons of slope 1 on both sides (leaky with alpha = 1)
are affine (folded into ``M0``, ``c0``), and the remaining "kink" neurons are grouped by their
hyperplane: ``(a_i, b_i) = lam_i (ahat_h, bhat_h)`` with ``lam_i != 0`` rational, so that
duplicated or opposite neurons switch together and are one constraint, not a "simultaneous
crossing". Everything here is exact; nothing is rounded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import flint
import numpy as np

from certified.arith.exact import to_fmpq, to_fmpq_array
from certified.errors import InputError, ShapeError

__all__ = [
    "ACTIVATIONS",
    "ReluPiece",
    "parse_activation",
    "parse_duration",
    "parse_piece",
    "parse_points",
    "parse_schedule",
]

ACTIVATIONS = ("relu", "leaky_relu")
DEFAULT_LEAKY_SLOPE = flint.fmpq(1, 100)

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


def parse_duration(tau: Any, field_name: str) -> flint.fmpq:
    """A positive exact duration."""
    if isinstance(tau, (list, tuple, np.ndarray)) and np.ndim(tau) > 0:
        raise ShapeError(f"{field_name}: expected one number, got a sequence")
    q = to_fmpq(tau, field_name)
    if q <= 0:
        raise InputError(f"{field_name}: {q} is not positive; durations must be > 0")
    return q


def _matrix(x: Any, field_name: str, ndim: int) -> np.ndarray:
    arr = to_fmpq_array(x, field_name)
    if arr.ndim != ndim:
        what = "a 1-D vector" if ndim == 1 else "a 2-D matrix"
        raise ShapeError(f"{field_name}: has shape {arr.shape}; expected {what}")
    if 0 in arr.shape:
        raise ShapeError(f"{field_name}: has shape {arr.shape}; it must not be empty")
    return arr


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
    """One piece of a schedule, preprocessed exactly (see the module docstring).

    ``kinks`` lists ``(neuron, plane, lam)``; ``role[i]`` is ``"kink"``, ``"off"`` (w_i = 0),
    ``"const"`` (a_i = 0) or ``"linear"`` (alpha = 1). ``laminar`` means: some normal ``a``
    has ``a . f(x) = 0`` identically and every kink neuron's normal is parallel to ``a``,
    so ``a . x`` is invariant and ``Phi_tau(x) = x + tau f(x)`` exactly.
    """

    index: int
    tau: flint.fmpq
    W: np.ndarray  # (d, p) fmpq
    A: np.ndarray  # (p, d)
    b: np.ndarray  # (p,)
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
    def d(self) -> int:
        return self.W.shape[0]

    @property
    def p(self) -> int:
        return self.W.shape[1]

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


def parse_piece(
    W: Any, A: Any, b: Any, tau: Any, alpha: flint.fmpq, index: int = 0, d: int | None = None
) -> ReluPiece:
    """Validate and preprocess one piece exactly.

    Raises ShapeError / NonFiniteError / NumberFormatError / InputError naming the field.
    """
    tag = f"[{index}]"
    Wq = _matrix(W, f"W_list{tag}", 2)
    Aq = _matrix(A, f"A_list{tag}", 2)
    bq = _matrix(b, f"b_list{tag}", 1)
    dd, p = Wq.shape
    if d is not None and dd != d:
        raise ShapeError(
            f"W_list{tag}: has {dd} rows but piece 0 has dimension {d}; all pieces need the "
            "same dimension d"
        )
    if Aq.shape != (p, dd):
        raise ShapeError(
            f"A_list{tag}: has shape {Aq.shape}; W_list{tag} is {dd}x{p}, so A must be {p}x{dd}"
        )
    if bq.shape != (p,):
        raise ShapeError(f"b_list{tag}: has shape {bq.shape}; expected ({p},) to match W")
    tq = parse_duration(tau, f"durations{tag}")

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
    # a plane is invariant when ahat . f vanishes identically: ghat_h is then constant along
    # every trajectory and its sign never needs validating
    invariant = []
    for h in range(len(planes_b)):
        ah = pa[h]
        inv = _dot(ah, c0) == 0 and all(_dot(ah, Wq[:, i]) == 0 for i, _, _ in kinks)
        if inv and has_m0:
            inv = all(_dot(ah, M0[:, k]) == 0 for k in range(dd))
        invariant.append(inv)
    return ReluPiece(
        index=index,
        tau=tq,
        W=Wq,
        A=Aq,
        b=bq,
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


def _as_list(x: Any, name: str) -> list:
    if isinstance(x, np.ndarray) and x.dtype != object and x.ndim >= 1:
        return list(x)
    if isinstance(x, (list, tuple)):
        return list(x)
    if isinstance(x, np.ndarray) and x.dtype == object and x.ndim >= 1:
        return list(x)
    raise InputError(f"{name}: expected a list (one entry per piece), got {type(x).__name__}")


def parse_schedule(
    W_list: Any, A_list: Any, b_list: Any, durations: Any, alpha: flint.fmpq
) -> list[ReluPiece]:
    """Validate and preprocess a whole schedule (a non-empty list of pieces)."""
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
    pieces: list[ReluPiece] = []
    for j, (W, A, b, t) in enumerate(zip(Ws, As, bs, ts, strict=True)):
        d = pieces[0].d if pieces else None
        pieces.append(parse_piece(W, A, b, t, alpha, index=j, d=d))
    return pieces


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
