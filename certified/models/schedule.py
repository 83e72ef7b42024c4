"""Neural ODE schedules: piecewise-constant controls of ``ẋ = W σ(A x + b)`` in R^d.

A :class:`Schedule` is a sequence of :class:`Piece` s, each a duration τ > 0 and constant
parameters ``W`` (d×p), ``A`` (p×d), ``b`` (p), giving on its time interval the field

.. math::

    \\dot x = W\\,\\sigma(A x + b) = \\sum_{i=1}^{p} w_i\\,\\sigma(a_i \\cdot x + b_i),
    \\qquad w_i = W[:, i],\\; a_i = A[i, :],\\; b_i = b[i]

(theorems.md §1.1). Every parameter is an exact rational (:class:`flint.fmpq`): a float is read
as the binary64 value it stores, a string such as ``"0.1"`` or ``"1/3"`` as the rational it
spells (:func:`~certified.arith.exact.to_fmpq`). Float64 copies (``W_float``, ...) are cached
for the fast paths; :attr:`Piece.is_float_exact` says whether they are exact.

Decisions:

* The activation is one per schedule. ``leaky_relu`` is ``σ(z) = z`` for ``z >= 0`` and
  ``slope·z`` for ``z < 0`` with an exact rational ``slope`` in the open interval (0, 1):
  :data:`DEFAULT_LEAKY_SLOPE` = 1/100 unless the schedule gives ``"slope"`` (only allowed with
  ``leaky_relu``; :meth:`Schedule.to_json` always writes it, so files are self-describing).
* Widths may differ between pieces (a construction may use fewer neurons in its last block);
  :attr:`Schedule.width` is the largest, the ``p`` of "a schedule of width p".
* Pieces merge only when consecutive and with identical ``(W, A, b)`` (exactly, same neuron
  order); :attr:`Schedule.switches` counts the switches of :meth:`Schedule.merged`, the L of
  theorems.md. Equality (and hashing) is exact and structural: a schedule and its merged form
  are different objects with the same flow.
* Laminar with a shared normal (theorems.md §2): every ``a_i = c_i a`` with a rational
  ``c_i > 0`` (``c_i = 1``: the theorem's ``a_i = a``) and every ``w_j ⊥ a``.
  :meth:`Piece.laminar_normal` returns ``a = a_1`` (the first row of A);
  :meth:`Piece.laminar_scales` the ``c_i``.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping
from dataclasses import InitVar, dataclass
from functools import cached_property
from typing import Any

import flint
import numpy as np

from certified.arith.exact import fmpq_to_float, fmpq_to_str, to_fmpq
from certified.errors import InputError, RangeOverflowError, ShapeError
from certified.io import (
    SchemaError,
    check_keys,
    exact_matrix,
    exact_vector,
    prefixed_errors,
    read_json,
    validate_json,
)

__all__ = ["DEFAULT_LEAKY_SLOPE", "Activation", "Piece", "Schedule"]

DEFAULT_LEAKY_SLOPE = flint.fmpq(1, 100)
"""Slope of ``leaky_relu`` on the negative half-line when the schedule gives none."""


class Activation(enum.Enum):
    """The activation σ of a schedule; the value is its name in schedule files."""

    RELU = "relu"
    LEAKY_RELU = "leaky_relu"
    TANH = "tanh"
    SIGMOID = "sigmoid"

    @property
    def is_piecewise_linear(self) -> bool:
        """Whether σ is piecewise linear (then laminar flows are exact rational maps).

        Guarantee: exact.
        """
        return self in (Activation.RELU, Activation.LEAKY_RELU)

    @classmethod
    def parse(cls, value: Any, field: str = "activation") -> Activation:
        """The activation named ``value`` (an :class:`Activation` or its name).

        Raises
        ------
        SchemaError
            ``value`` is not one of the names.

        Guarantee: exact.
        """
        if isinstance(value, cls):
            return value
        names = ", ".join(a.value for a in cls)
        if not isinstance(value, str):
            raise SchemaError(f"{field}: expected one of the names {names}, got {value!r}")
        try:
            return cls(value)
        except ValueError:
            raise SchemaError(
                f"{field}: unknown activation {value!r}; use one of {names}"
            ) from None


def _frozen(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


def _is_double(q: flint.fmpq) -> bool:
    try:
        f = fmpq_to_float(q, "nearest")
    except RangeOverflowError:
        return False
    return flint.fmpq(*f.as_integer_ratio()) == q


def _nearest(a: np.ndarray, field: str) -> np.ndarray:
    out = np.array([fmpq_to_float(q, "nearest", field) for q in a.flat], dtype=np.float64)
    return _frozen(out.reshape(a.shape))


def _strings(a: np.ndarray) -> list[Any]:
    return np.vectorize(fmpq_to_str, otypes=[object])(a).tolist()


@dataclass(frozen=True, eq=False, repr=False)
class Piece:
    """One constant piece of a schedule: the field ``W σ(A x + b)`` for a time ``duration``.

    Parameters
    ----------
    duration : number
        ``τ > 0`` (anything :func:`~certified.arith.exact.to_fmpq` reads).
    W : d×p nested list or array of numbers; column ``i`` is ``w_i``.
    A : p×d nested list or array of numbers; row ``i`` is ``a_i``.
    b : length-p list or array of numbers.
    label : str
        Name of the piece in error messages (``"pieces[2]"``, fields ``pieces[2].W``, ...);
        not stored.
    names : dict, optional
        Names of single fields in error messages, overriding ``label`` (the list API of
        :func:`certified.flow.relu.relu_flow` names them ``{"W": "W_list[2]", ...,
        "duration": "durations[2]"}``); not stored.

    Attributes
    ----------
    duration : flint.fmpq
    W, A, b : numpy.ndarray
        Read-only ``dtype=object`` arrays of :class:`flint.fmpq`.

    Raises
    ------
    ShapeError
        ``W`` is not a non-empty d×p matrix, ``A`` not p×d, ``b`` not of length p.
    InputError
        ``duration <= 0``.
    NonFiniteError, NumberFormatError
        A NaN, an infinity or a non-number, named like ``pieces[2].W[0][1]``.

    Equality and hashing are exact (same duration and same entries).

    Guarantee: exact.
    """

    duration: flint.fmpq
    W: np.ndarray
    A: np.ndarray
    b: np.ndarray
    label: InitVar[str] = "piece"
    names: InitVar[Mapping[str, str] | None] = None

    def __post_init__(self, label: str, names: Mapping[str, str] | None) -> None:
        name = {key: f"{label}.{key}" for key in _PIECE_KEYS}
        name.update(names or {})
        duration = to_fmpq(self.duration, name["duration"])
        if duration <= 0:
            raise InputError(
                f"{name['duration']}: {fmpq_to_str(duration)} is not positive; "
                "give every piece a duration > 0 (drop pieces of zero duration)"
            )
        W = exact_matrix(
            self.W,
            name["W"],
            row_what="rows (one per coordinate)",
            col_what="entries (one per neuron)",
        )
        d, p = W.shape
        A = exact_matrix(
            self.A,
            name["A"],
            rows=p,
            cols=d,
            row_what=f"rows (one per neuron; W has {p} columns)",
            col_what=f"entries (one per coordinate; W has {d} rows)",
        )
        b = exact_vector(
            self.b, name["b"], length=p, what=f"entries (one per neuron; W has {p} columns)"
        )
        object.__setattr__(self, "duration", duration)
        object.__setattr__(self, "W", _frozen(W))
        object.__setattr__(self, "A", _frozen(A))
        object.__setattr__(self, "b", _frozen(b))

    # --- shape, equality ---------------------------------------------------------------------

    @property
    def dimension(self) -> int:
        """``d``, the dimension of the state space."""
        return self.W.shape[0]

    @property
    def width(self) -> int:
        """``p``, the number of neurons."""
        return self.W.shape[1]

    def has_same_parameters(self, other: Piece) -> bool:
        """Whether ``other`` has exactly the same ``W``, ``A``, ``b`` (any duration).

        Guarantee: exact.
        """
        return all(
            x.shape == y.shape and all(u == v for u, v in zip(x.flat, y.flat, strict=True))
            for x, y in ((self.W, other.W), (self.A, other.A), (self.b, other.b))
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Piece):
            return NotImplemented
        return self.duration == other.duration and self.has_same_parameters(other)

    @cached_property
    def _hash(self) -> int:
        return hash(
            (self.duration, self.W.shape, tuple(self.W.flat), tuple(self.A.flat), tuple(self.b))
        )

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        d, p = self.W.shape
        return f"Piece(duration={fmpq_to_str(self.duration)}, W=<{d}×{p}>, A=<{p}×{d}>, b=<{p}>)"

    # --- float64 views -----------------------------------------------------------------------

    @cached_property
    def duration_float(self) -> float:
        """``duration`` rounded to the nearest double.

        Guarantee: exact rounding (nearest); exact iff :attr:`is_float_exact` covers it.
        """
        return fmpq_to_float(self.duration, "nearest", "duration")

    @cached_property
    def W_float(self) -> np.ndarray:  # noqa: N802 (the matrix is W in the mathematics)
        """Read-only float64 ``W``, each entry rounded to the nearest double.

        Raises
        ------
        RangeOverflowError
            An entry is beyond the double range.

        Guarantee: exact rounding (nearest); exact when :attr:`is_float_exact`.
        """
        return _nearest(self.W, "W")

    @cached_property
    def A_float(self) -> np.ndarray:  # noqa: N802
        """Read-only float64 ``A`` (nearest doubles; see :attr:`W_float`).

        Guarantee: exact rounding (nearest); exact when :attr:`is_float_exact`.
        """
        return _nearest(self.A, "A")

    @cached_property
    def b_float(self) -> np.ndarray:
        """Read-only float64 ``b`` (nearest doubles; see :attr:`W_float`).

        Guarantee: exact rounding (nearest); exact when :attr:`is_float_exact`.
        """
        return _nearest(self.b, "b")

    @cached_property
    def parameters_float_exact(self) -> bool:
        """Whether every entry of ``W``, ``A``, ``b`` is a binary64 double, so that
        :attr:`W_float`, :attr:`A_float`, :attr:`b_float` are the exact parameters (the
        duration may be any rational).

        Guarantee: exact.
        """
        return all(_is_double(q) for a in (self.W, self.A, self.b) for q in a.flat)

    @cached_property
    def is_float_exact(self) -> bool:
        """Whether ``duration`` and every entry of ``W``, ``A``, ``b`` is a binary64 double,
        so that the float views are the exact parameters.

        Guarantee: exact.
        """
        return _is_double(self.duration) and self.parameters_float_exact

    # --- laminar structure -------------------------------------------------------------------

    @cached_property
    def _laminar(self) -> tuple[np.ndarray, tuple[flint.fmpq, ...]] | None:
        a = self.A[0]
        nonzero = [k for k, q in enumerate(a) if q != 0]
        if not nonzero:
            return None
        k = nonzero[0]
        scales = []
        for row in self.A:
            c = row[k] / a[k]
            if c <= 0 or any(row[j] != c * a[j] for j in range(len(a))):
                return None
            scales.append(c)
        for w in self.W.T:
            if sum((u * v for u, v in zip(a, w, strict=True)), flint.fmpq(0)) != 0:
                return None
        return _frozen(a.copy()), tuple(scales)

    def laminar_normal(self) -> np.ndarray | None:
        """The shared normal ``a`` if the piece is laminar with a shared normal, else None.

        Laminar with a shared normal (theorems.md §2): every ``a_i = c_i a`` with a rational
        ``c_i > 0`` and every ``w_j ⊥ a``. The returned ``a`` is the first row of ``A``
        (``c_1 = 1``); when all rows are equal this is the theorem's common normal. Then
        ``a·x`` is invariant and, for ReLU,
        ``Φ_τ(x) = x + τ Σ_i c_i w_i (a·x + b_i/c_i)_+`` exactly.

        Returns
        -------
        numpy.ndarray or None
            Read-only ``dtype=object`` vector of :class:`flint.fmpq` of length d, nonzero.

        Guarantee: exact.
        """
        lam = self._laminar
        return None if lam is None else lam[0]

    def laminar_scales(self) -> tuple[flint.fmpq, ...] | None:
        """The factors ``c_i > 0`` with ``a_i = c_i a`` (``a`` = :meth:`laminar_normal`), or
        None if the piece is not laminar with a shared normal.

        Guarantee: exact.
        """
        lam = self._laminar
        return None if lam is None else lam[1]

    def is_laminar(self) -> bool:
        """Whether the piece is laminar with a shared normal (see :meth:`laminar_normal`).

        Guarantee: exact.
        """
        return self._laminar is not None

    def has_invariant_normals(self) -> bool:
        """Whether ``A W = 0``: every ``a_i ⊥`` every ``w_j``.

        This is more general than :meth:`is_laminar` (the normals need not be parallel). Every
        ``a_i·x`` is then constant along the flow of the piece, hence so is the field, and
        ``Φ_τ(x) = x + τ W σ(A x + b)`` exactly, for every activation.

        Guarantee: exact.
        """
        return all(
            sum((u * v for u, v in zip(a, w, strict=True)), flint.fmpq(0)) == 0
            for a in self.A
            for w in self.W.T
        )

    # --- JSON --------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """``{"duration", "W", "A", "b"}`` with every number an exact canonical string
        (:func:`~certified.arith.exact.fmpq_to_str`: ``"p/q"`` in lowest terms or ``"p"``).

        Guarantee: exact.
        """
        return {
            "duration": fmpq_to_str(self.duration),
            "W": _strings(self.W),
            "A": _strings(self.A),
            "b": _strings(self.b),
        }


_PIECE_KEYS = ("duration", "W", "A", "b")


@dataclass(frozen=True)
class Schedule:
    """A piecewise-constant control of the neural ODE ``ẋ = W(t) σ(A(t) x + b(t))`` in R^d.

    Parameters
    ----------
    dimension : int
        ``d >= 1``.
    activation : Activation or its name (``"relu"``, ``"leaky_relu"``, ``"tanh"``,
        ``"sigmoid"``)
    pieces : sequence of Piece
        At least one; each of dimension ``d``. Widths may differ.
    slope : number, optional
        Negative-side slope of ``leaky_relu``, exact, in (0, 1); default
        :data:`DEFAULT_LEAKY_SLOPE` (1/100). Must be omitted for other activations.

    Raises
    ------
    ShapeError
        ``d < 1``, no pieces, or a piece of another dimension.
    SchemaError
        An unknown activation, ``slope`` with an activation other than ``leaky_relu``, or a
        piece that is not a :class:`Piece`.
    InputError
        ``slope`` outside (0, 1).

    Equality and hashing are exact and structural (see the module docstring).

    Guarantee: exact.
    """

    dimension: int
    activation: Activation
    pieces: tuple[Piece, ...]
    slope: flint.fmpq | None = None

    def __post_init__(self) -> None:
        d = self.dimension
        if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)):
            raise SchemaError(f"dimension: expected an integer, got {d!r}")
        if d < 1:
            raise ShapeError(f"dimension: {d} is less than 1; the dimension d must be >= 1")
        object.__setattr__(self, "dimension", int(d))
        activation = Activation.parse(self.activation)
        object.__setattr__(self, "activation", activation)
        if isinstance(self.pieces, (str, bytes, dict)) or not hasattr(self.pieces, "__len__"):
            raise SchemaError(f"pieces: expected a sequence of Piece, got {self.pieces!r}")
        pieces = tuple(self.pieces)
        if not pieces:
            raise ShapeError("pieces: empty; a schedule needs at least one piece")
        for j, piece in enumerate(pieces):
            if not isinstance(piece, Piece):
                raise SchemaError(
                    f"pieces[{j}]: expected a Piece, got {type(piece).__name__}; read files "
                    "with Schedule.from_json"
                )
            if piece.dimension != d:
                raise ShapeError(
                    f"pieces[{j}].W: has {piece.dimension} rows but the dimension is {d}; "
                    "give W one row per coordinate"
                )
        object.__setattr__(self, "pieces", pieces)
        if activation is Activation.LEAKY_RELU:
            slope = DEFAULT_LEAKY_SLOPE if self.slope is None else to_fmpq(self.slope, "slope")
            if not 0 < slope < 1:
                raise InputError(
                    f"slope: {fmpq_to_str(slope)} is not in the open interval (0, 1); "
                    "give a leaky_relu slope strictly between 0 and 1"
                )
            object.__setattr__(self, "slope", slope)
        elif self.slope is not None:
            raise SchemaError(
                f"slope: only allowed with activation leaky_relu, not {activation.value}; remove it"
            )

    # --- derived quantities --------------------------------------------------------------------

    @property
    def total_time(self) -> flint.fmpq:
        """``T``, the sum of the durations.

        Guarantee: exact.
        """
        return sum((p.duration for p in self.pieces), flint.fmpq(0))

    @property
    def widths(self) -> tuple[int, ...]:
        """The width ``p`` of each piece."""
        return tuple(p.width for p in self.pieces)

    @property
    def width(self) -> int:
        """The largest width of a piece."""
        return max(self.widths)

    def merged(self) -> Schedule:
        """The same control with consecutive pieces of identical ``(W, A, b)`` merged into one
        piece (durations added). Returns ``self`` when nothing merges.

        Guarantee: exact (same field at every time, same total time).
        """
        out: list[Piece] = []
        for piece in self.pieces:
            if out and out[-1].has_same_parameters(piece):
                last = out[-1]
                out[-1] = Piece(last.duration + piece.duration, last.W, last.A, last.b)
            else:
                out.append(piece)
        if len(out) == len(self.pieces):
            return self
        return Schedule(self.dimension, self.activation, tuple(out), self.slope)

    @property
    def switches(self) -> int:
        """``L``, the number of switches: pieces of :meth:`merged` minus one.

        Guarantee: exact.
        """
        return len(self.merged().pieces) - 1

    def is_laminar(self) -> bool:
        """Whether every piece is laminar with a shared normal (:meth:`Piece.is_laminar`).

        Guarantee: exact.
        """
        return all(p.is_laminar() for p in self.pieces)

    @property
    def is_float_exact(self) -> bool:
        """Whether every number of the schedule (durations, parameters, slope) is a double.

        Guarantee: exact.
        """
        return (self.slope is None or _is_double(self.slope)) and all(
            p.is_float_exact for p in self.pieces
        )

    # --- JSON --------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """The schedule file object: ``{"dimension", "activation", ["slope",] "pieces"}``.

        Canonical form: ``dimension`` a JSON integer, every other number an exact string
        (``"p/q"`` in lowest terms or ``"p"``), ``slope`` present exactly for ``leaky_relu``,
        keys in this order. ``Schedule.from_json(s.to_json()) == s``.

        Guarantee: exact.
        """
        out: dict[str, Any] = {"dimension": self.dimension, "activation": self.activation.value}
        if self.slope is not None:
            out["slope"] = fmpq_to_str(self.slope)
        out["pieces"] = [p.to_json() for p in self.pieces]
        return out

    @classmethod
    def from_json(cls, source: Any) -> Schedule:
        """Read a schedule from a parsed JSON object or from a file.

        Parameters
        ----------
        source : dict, str or os.PathLike
            A dict is the parsed object; a str or path names a JSON file (read strictly by
            :func:`certified.io.read_json`, its structure checked against the shipped JSON
            Schema ``schedule`` by :func:`certified.io.validate_json`).

            ``{"dimension": d, "activation": name, "pieces": [{"duration": t, "W": d×p,
            "A": p×d, "b": p}, ...]}`` plus ``"slope"`` for ``leaky_relu`` (optional).
            Numbers are JSON numbers (an integer is that integer, any other number the
            binary64 double) or strings read exactly (``"0.1"`` is 1/10, ``"1/3"``, ...).

        Raises
        ------
        InputFileError
            The file cannot be read or is not strict JSON.
        SchemaError
            A missing or unknown key, a wrong JSON type, an unknown activation.
        ShapeError
            ``d < 1``, no pieces, ragged or mis-shaped ``W``, ``A``, ``b``.
        NonFiniteError, NumberFormatError, InputError
            A bad number, a duration <= 0, a slope outside (0, 1).

        Every message names the field (``pieces[2].W[0][1]: ...``), preceded by the file name
        when reading a file.

        Guarantee: exact.
        """
        if isinstance(source, (str, os.PathLike)):
            obj = read_json(source)
            with prefixed_errors(source):
                validate_json(obj, "schedule", bound_error=ShapeError)
                return cls._from_object(obj)
        return cls._from_object(source)

    @classmethod
    def _from_object(cls, obj: Any) -> Schedule:
        check_keys(obj, "", ("dimension", "activation", "pieces"), ("slope",))
        d = obj["dimension"]
        if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)):
            raise SchemaError(f"dimension: expected an integer, got {d!r}")
        if d < 1:
            raise ShapeError(f"dimension: {d} is less than 1; the dimension d must be >= 1")
        d = int(d)
        activation = Activation.parse(obj["activation"])
        if "slope" in obj and activation is not Activation.LEAKY_RELU:
            raise SchemaError(
                f"slope: only allowed with activation leaky_relu, not {activation.value}; remove it"
            )
        slope = to_fmpq(obj["slope"], "slope") if "slope" in obj else None
        items = obj["pieces"]
        if not isinstance(items, list):
            raise SchemaError(f"pieces: expected a list of pieces, got {type(items).__name__}")
        if not items:
            raise ShapeError("pieces: empty; a schedule needs at least one piece")
        pieces = []
        for j, item in enumerate(items):
            label = f"pieces[{j}]"
            check_keys(item, label, _PIECE_KEYS)
            duration = to_fmpq(item["duration"], f"{label}.duration")
            W = exact_matrix(
                item["W"],
                f"{label}.W",
                rows=d,
                row_what=f"rows (one per coordinate, dimension {d})",
                col_what="entries (one per neuron)",
            )
            pieces.append(Piece(duration, W, item["A"], item["b"], label))
        return cls(d, activation, tuple(pieces), slope)
