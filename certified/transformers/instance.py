"""Transformer instances: tokens (one or several measures) and a piecewise-constant schedule
theta(t) = (V, B, W, U, b)(t) (theorems.md §1.3-1.4), read exactly from JSON.

File format (``certified transformer flow --instance F``)::

    {"tokens": n x d, "weights": n (optional, exact, sum 1),
     or "measures": [{"tokens": n_g x d, "weights": n_g (optional)}, ...],
     "pieces": [{"duration": t, "V": d x d, "B": d x d, "W": d x p, "U": p x d, "b": p,
                 "activation": "tanh" | "sigmoid", "heads": [{"V": .., "B": ..}, ...]}],
     "geometry": "sphere" | "euclidean", "normalisation": "softmax" | "mean",
     "causal": false}

Score convention (theorems.md §1.4, §9; the one of :mod:`certified.attention`): the score of
key y at query x is ``<Qy, Kx> = <y, a>`` with ``a = QᵀK x``; here ``B = QᵀK``, so token i
weighs token j by ``e^{<B x_i, x_j>}`` (give ``B = QᵀK``, not ``KᵀQ``: they differ when QᵀK is
not symmetric).

Absent matrices are 0 (V = 0: the sphere neural ODE; W = 0: pure self-attention; B = 0: the
barycentre flow). ``heads`` replaces ``V`` and ``B`` (multi-head: the heads' outputs add up).
On the sphere every token must have |x| = 1 to within 1e-12 (the flow is certified for the
exact numbers given, which the projected field keeps at their distance from the sphere).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import flint
import numpy as np

from certified.errors import InputError, ShapeError
from certified.io import check_keys, exact_matrix, exact_vector, read_json

__all__ = ["TransformerInstance", "TransformerPiece", "parse_instance", "read_instance"]

_SPHERE_TOLERANCE = flint.fmpq(1, 10**12)
_PIECE_KEYS = ("V", "B", "W", "U", "b", "activation", "heads")


@dataclass(frozen=True, eq=False)
class TransformerPiece:
    """theta on one time interval: per head (V_h, B_h), and W, U, b (hidden width p, may be 0),
    all exact object arrays. Guarantee: exact."""

    duration: flint.fmpq
    heads: tuple[tuple[np.ndarray, np.ndarray], ...]
    W: np.ndarray
    U: np.ndarray
    b: np.ndarray
    activation: str = "tanh"


@dataclass(frozen=True, eq=False)
class TransformerInstance:
    """Measures (exact tokens and masses) driven by the same schedule. Guarantee: exact."""

    measures: tuple[np.ndarray, ...]
    masses: tuple[tuple[flint.fmpq, ...] | None, ...]
    pieces: tuple[TransformerPiece, ...]
    geometry: str = "sphere"
    normalisation: str = "softmax"
    causal: bool = False

    @property
    def d(self) -> int:
        return int(self.measures[0].shape[1])

    @property
    def sizes(self) -> list[int]:
        return [int(m.shape[0]) for m in self.measures]

    @property
    def heads(self) -> int:
        return max(len(p.heads) for p in self.pieces)

    @property
    def hidden(self) -> int:
        return max(p.W.shape[1] for p in self.pieces)

    @property
    def activation(self) -> str:
        acts = {p.activation for p in self.pieces if p.W.shape[1]}
        return acts.pop() if acts else "tanh"

    @property
    def total_time(self) -> flint.fmpq:
        return sum((p.duration for p in self.pieces), flint.fmpq(0))

    def state(self) -> np.ndarray:
        """The exact initial state, one row of ``sum(sizes) * d`` numbers."""
        return np.concatenate([m.ravel() for m in self.measures])[None, :]

    def field(self):
        """The :class:`~certified.fields.VectorField` of the dynamics (certified.fields.attention).

        Guarantee: exact."""
        from certified.fields.attention import attention_field

        masses = None
        if any(m is not None for m in self.masses):
            masses = [m if m is not None else [flint.fmpq(1, n)] * n
                      for m, n in zip(self.masses, self.sizes, strict=True)]  # fmt: skip
        return attention_field(
            self.sizes,
            self.d,
            heads=self.heads,
            hidden=self.hidden,
            activation=self.activation,
            geometry=self.geometry,
            normalisation=self.normalisation,
            causal=self.causal,
            masses=masses,
        )

    @cached_property
    def problem(self):
        """The field with the schedule's pieces (a PiecewiseField). Guarantee: exact."""
        return self.field().on(*[(p.duration, self.values(p)) for p in self.pieces])

    def values(self, piece: TransformerPiece) -> list[flint.fmpq]:
        """The parameter values of one piece, padded with zero heads and zero neurons, in the
        order of :func:`certified.fields.attention.attention_parameter_names`."""
        d, H, p = self.d, self.heads, self.hidden
        zero = np.full((d, d), flint.fmpq(0), dtype=object)
        out: list[flint.fmpq] = []
        for h in range(H):
            V, B = piece.heads[h] if h < len(piece.heads) else (zero, zero)
            out += [*V.ravel(), *B.ravel()]
        W = np.full((d, p), flint.fmpq(0), dtype=object)
        U = np.full((p, d), flint.fmpq(0), dtype=object)
        b = np.full(p, flint.fmpq(0), dtype=object)
        q = piece.W.shape[1]
        W[:, :q], U[:q], b[:q] = piece.W, piece.U, piece.b
        return out + [*W.ravel(), *U.ravel(), *b]


def _tokens(obj: Any, where: str, d: int | None, geometry: str):
    X = exact_matrix(obj["tokens"], f"{where}tokens", cols=d, row_what="tokens",
                     col_what="coordinates")  # fmt: skip
    if geometry == "sphere":
        for i, row in enumerate(X):
            norm2 = sum((q * q for q in row), flint.fmpq(0))
            if abs(norm2 - 1) > _SPHERE_TOLERANCE:
                raise InputError(
                    f"{where}tokens[{i}]: |x|^2 = {float(norm2.p) / float(norm2.q):.17g} is off "
                    'the unit sphere; normalise the tokens (or set "geometry": "euclidean")'
                )
    w = None
    if obj.get("weights") is not None:
        wv = exact_vector(obj["weights"], f"{where}weights", length=X.shape[0], what="weights")
        if any(not q > 0 for q in wv):
            raise InputError(f"{where}weights: every weight must be > 0")
        if sum(wv, flint.fmpq(0)) != 1:
            raise InputError(
                f"{where}weights: they sum to {sum(wv, flint.fmpq(0))}, not exactly 1; give "
                'exact weights (strings such as "1/3")'
            )
        w = tuple(wv)
    return X, w


def _square(value: Any, where: str, d: int) -> np.ndarray:
    return exact_matrix(value, where, rows=d, cols=d)


def _piece(obj: Any, j: int, d: int) -> TransformerPiece:
    at = f"pieces[{j}]"
    check_keys(obj, at, ("duration",), _PIECE_KEYS)
    from certified.arith.exact import to_fmpq

    t = to_fmpq(obj["duration"], f"{at}.duration")
    if not t > 0:
        raise InputError(f"{at}.duration: {t} is not positive; durations must be > 0")
    zero = np.full((d, d), flint.fmpq(0), dtype=object)
    if "heads" in obj:
        if "V" in obj or "B" in obj:
            raise InputError(f"{at}: give either 'heads' or 'V'/'B', not both")
        if not isinstance(obj["heads"], list) or not obj["heads"]:
            raise ShapeError(f"{at}.heads: expected a non-empty list of {{'V', 'B'}}")
        heads = []
        for h, head in enumerate(obj["heads"]):
            check_keys(head, f"{at}.heads[{h}]", (), ("V", "B"))
            heads.append(tuple(
                _square(head[k], f"{at}.heads[{h}].{k}", d) if k in head else zero
                for k in ("V", "B")
            ))  # fmt: skip
    else:
        heads = [tuple(_square(obj[k], f"{at}.{k}", d) if k in obj else zero for k in "VB")]
    act = obj.get("activation", "tanh")
    if act not in ("tanh", "sigmoid"):
        raise InputError(f"{at}.activation: expected 'tanh' or 'sigmoid', got {act!r}")
    if any(k in obj for k in "WUb"):
        if not all(k in obj for k in "WUb"):
            raise InputError(f"{at}: give all of W, U, b (or none)")
        W = exact_matrix(obj["W"], f"{at}.W", rows=d)
        p = W.shape[1]
        U = exact_matrix(obj["U"], f"{at}.U", rows=p, cols=d)
        b = exact_vector(obj["b"], f"{at}.b", length=p)
    else:
        W = np.empty((d, 0), dtype=object)
        U = np.empty((0, d), dtype=object)
        b = np.empty(0, dtype=object)
    return TransformerPiece(t, tuple(heads), W, U, b, act)  # type: ignore[arg-type]


def parse_instance(obj: Any) -> TransformerInstance:
    """A :class:`TransformerInstance` from the JSON value of an instance file.

    Raises
    ------
    InputError (SchemaError, ShapeError, NonFiniteError, ...)
        Naming the field: tokens off the sphere, weights not summing to 1, non-finite numbers,
        shapes, unknown keys.

    Guarantee: exact.
    """
    keys = ("pieces",)
    optional = ("tokens", "weights", "measures", "geometry", "normalisation", "causal")
    check_keys(obj, "", keys, optional)
    geometry = obj.get("geometry", "sphere")
    if geometry not in ("sphere", "euclidean"):
        raise InputError(f"geometry: expected 'sphere' or 'euclidean', got {geometry!r}")
    normalisation = obj.get("normalisation", "softmax")
    if normalisation not in ("softmax", "mean"):
        raise InputError(f"normalisation: expected 'softmax' or 'mean', got {normalisation!r}")
    causal = obj.get("causal", False)
    if not isinstance(causal, bool):
        raise InputError("causal: expected true or false")
    if ("tokens" in obj) == ("measures" in obj):
        raise InputError("give either 'tokens' (one measure) or 'measures' (a list), not both")
    if "measures" in obj:
        if "weights" in obj:
            raise InputError("weights: give them inside each measure of 'measures'")
        items = obj["measures"]
        if not isinstance(items, list) or not items:
            raise ShapeError("measures: expected a non-empty list of {'tokens', 'weights'}")
        for g, m in enumerate(items):
            check_keys(m, f"measures[{g}]", ("tokens",), ("weights",))
        prefixes = [f"measures[{g}]." for g in range(len(items))]
    else:
        items, prefixes = [obj], [""]
    measures, masses, d = [], [], None
    for m, where in zip(items, prefixes, strict=True):
        X, w = _tokens(m, where, d, geometry)
        d = X.shape[1]
        measures.append(X)
        masses.append(w)
    if not isinstance(obj["pieces"], list) or not obj["pieces"]:
        raise ShapeError("pieces: expected a non-empty list of pieces")
    assert d is not None
    pieces = tuple(_piece(p, j, d) for j, p in enumerate(obj["pieces"]))
    return TransformerInstance(tuple(measures), tuple(masses), pieces, geometry, normalisation,
                               causal)  # fmt: skip


def read_instance(path: Any) -> TransformerInstance:
    """Read and parse an instance file (errors prefixed with the file name).
    Guarantee: exact."""
    from certified.io import prefixed_errors

    obj = read_json(path)
    with prefixed_errors(path):
        if not isinstance(obj, Mapping):
            raise InputError("expected a JSON object (a transformer instance)")
        return parse_instance(obj)
