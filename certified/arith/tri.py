"""Three-valued truth for comparisons of sets: ``TRUE``, ``FALSE`` or ``UNKNOWN``.

A comparison of two intervals is ``TRUE`` when it holds for every pair of points, ``FALSE``
when it fails for every pair, and ``UNKNOWN`` otherwise. Neither :class:`Tri` nor
:class:`TriArray` converts to ``bool``: ``if x < y:`` on intervals is a bug, so it raises.
"""

from __future__ import annotations

import enum

import numpy as np

__all__ = ["Tri", "TriArray"]


class Tri(enum.Enum):
    """A three-valued truth value. ``bool(Tri.X)`` raises ``TypeError``."""

    FALSE = 0
    TRUE = 1
    UNKNOWN = 2

    def __bool__(self) -> bool:
        raise TypeError(
            "a Tri has no truth value: test `t is Tri.TRUE` (certainly true) or "
            "`t is not Tri.FALSE` (possibly true) explicitly"
        )

    def __and__(self, other: Tri) -> Tri:
        if self is Tri.FALSE or other is Tri.FALSE:
            return Tri.FALSE
        if self is Tri.TRUE and other is Tri.TRUE:
            return Tri.TRUE
        return Tri.UNKNOWN

    def __or__(self, other: Tri) -> Tri:
        if self is Tri.TRUE or other is Tri.TRUE:
            return Tri.TRUE
        if self is Tri.FALSE and other is Tri.FALSE:
            return Tri.FALSE
        return Tri.UNKNOWN

    def __invert__(self) -> Tri:
        return {Tri.TRUE: Tri.FALSE, Tri.FALSE: Tri.TRUE}.get(self, Tri.UNKNOWN)


class TriArray:
    """An array of :class:`Tri` values (stored as int8 codes: 0 false, 1 true, 2 unknown)."""

    __slots__ = ("_codes",)
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, certainly_true: np.ndarray, certainly_false: np.ndarray) -> None:
        t = np.asarray(certainly_true, dtype=bool)
        f = np.asarray(certainly_false, dtype=bool)
        if np.any(t & f):
            raise ValueError("a comparison cannot be certainly true and certainly false")
        codes = np.full(np.broadcast_shapes(t.shape, f.shape), 2, dtype=np.int8)
        codes[np.broadcast_to(t, codes.shape)] = 1
        codes[np.broadcast_to(f, codes.shape)] = 0
        self._codes = codes

    @property
    def shape(self) -> tuple[int, ...]:
        return self._codes.shape

    @property
    def is_true(self) -> np.ndarray:
        """Boolean array: where the comparison certainly holds."""
        return self._codes == 1

    @property
    def is_false(self) -> np.ndarray:
        """Boolean array: where the comparison certainly fails."""
        return self._codes == 0

    @property
    def is_unknown(self) -> np.ndarray:
        """Boolean array: where the enclosures do not decide."""
        return self._codes == 2

    def all(self) -> Tri:
        """``TRUE`` if every entry is true, ``FALSE`` if some entry is false, else ``UNKNOWN``."""
        if np.any(self._codes == 0):
            return Tri.FALSE
        if np.all(self._codes == 1):
            return Tri.TRUE
        return Tri.UNKNOWN

    def any(self) -> Tri:
        """``TRUE`` if some entry is true, ``FALSE`` if every entry is false, else ``UNKNOWN``."""
        if np.any(self._codes == 1):
            return Tri.TRUE
        if np.all(self._codes == 0):
            return Tri.FALSE
        return Tri.UNKNOWN

    def __getitem__(self, idx) -> Tri | TriArray:
        c = self._codes[idx]
        if np.ndim(c) == 0:
            return Tri(int(c))
        out = TriArray.__new__(TriArray)
        out._codes = c
        return out

    def __bool__(self) -> bool:
        raise TypeError(
            "a TriArray has no truth value: use .all() / .any() (Tri) or the boolean arrays "
            ".is_true / .is_false / .is_unknown"
        )

    def __repr__(self) -> str:
        names = np.array(["F", "T", "?"])[self._codes]
        return f"TriArray({names.tolist()})"
