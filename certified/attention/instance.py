"""Attention instance files (design.md, "Input files"): ``{"Q": k×d, "K": k×d, "V": d×d,
"R": r}`` plus ``"X": n×d`` (a point cloud in the closed ball of radius R) or ``"mu"`` and
``"nu"`` (two discrete measures ``{"points": n×d, "weights": n}``, weights optional).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import flint
import numpy as np

from certified.arith.exact import fmpq_to_str, to_fmpq
from certified.attention.model import Attention
from certified.errors import DomainError, InputError, ShapeError
from certified.io import (
    check_keys,
    exact_matrix,
    exact_weights,
    normalized_from_sum,
    prefixed_errors,
    read_json,
    validate_json,
)

__all__ = ["AttentionInstance", "read_attention_instance"]


def _ball_check(points: np.ndarray, R: flint.fmpq, field: str) -> None:
    for i, x in enumerate(points):
        if sum((v * v for v in x), flint.fmpq(0)) > R * R:
            raise DomainError(
                f"{field}[{i}]: lies outside the ball of radius R = {fmpq_to_str(R)}; "
                "scale the points or increase R"
            )


def _measure(
    obj: Any, name: str, d: int, R: flint.fmpq, normalize: bool
) -> tuple[np.ndarray, np.ndarray, flint.fmpq | None]:
    """Points, weights (``normalize``: divided exactly by their sum) and that sum (or None)."""
    check_keys(obj, name, ["points"], ["weights", "normalized_from_sum"])
    pts = exact_matrix(
        obj["points"], f"{name}.points", cols=d, row_what="points", col_what="coordinates"
    )
    n = pts.shape[0]
    _ball_check(pts, R, f"{name}.points")
    if "weights" not in obj:
        w = np.empty(n, dtype=object)
        w[:] = [flint.fmpq(1, n)] * n
        return pts, w, normalized_from_sum(obj, name, None)  # a record needs weights
    w, total = exact_weights(obj["weights"], f"{name}.weights", n, normalize=normalize)
    return pts, w, normalized_from_sum(obj, name, total)


@dataclass(frozen=True, eq=False)
class AttentionInstance:
    """A single-head attention instance of theorems.md section 5 with exact data.

    Attributes
    ----------
    Q, K : (k, d) object arrays of fmpq; V : (d, d); R : fmpq > 0
    X : (n, d) object array or None
    mu, nu : (points, weights) pairs or None
    normalized_from : dict
        ``{"mu": S}`` / ``{"nu": S}``: the exact sum the given weights were divided by
        (``normalize``, ``--normalize``); recorded in certificates as ``"normalized_from_sum"``.

    Guarantee: exact (validated: shapes, R > 0, points in the closed ball of radius R,
    weights >= 0 summing to 1).
    """

    Q: np.ndarray
    K: np.ndarray
    V: np.ndarray
    R: flint.fmpq
    X: np.ndarray | None = None
    mu: tuple[np.ndarray, np.ndarray] | None = None
    nu: tuple[np.ndarray, np.ndarray] | None = None
    normalized_from: dict[str, flint.fmpq] = field(default_factory=dict)

    @property
    def layer(self) -> Attention:
        return Attention.single(self.Q, self.K, self.V)

    @property
    def d(self) -> int:
        return int(self.Q.shape[1])

    @property
    def k(self) -> int:
        return int(self.Q.shape[0])

    def to_json(self) -> dict[str, Any]:
        """The instance in the input-file format with exact strings (for certificates)."""
        from certified.certificates import exact_number

        mat = lambda a: [[exact_number(v) for v in row] for row in a]  # noqa: E731
        out: dict[str, Any] = {"Q": mat(self.Q), "K": mat(self.K), "V": mat(self.V)}
        out["R"] = exact_number(self.R)
        if self.X is not None:
            out["X"] = mat(self.X)
        for name in ("mu", "nu"):
            m = getattr(self, name)
            if m is not None:
                out[name] = {"points": mat(m[0]), "weights": [exact_number(w) for w in m[1]]}
                if name in self.normalized_from:
                    out[name]["normalized_from_sum"] = exact_number(self.normalized_from[name])
        return out


def parse_attention_instance(
    obj: Any, *, require: str | None = None, normalize: bool = False
) -> AttentionInstance:
    """Validate an attention instance given as a parsed JSON object (see the module docstring).

    Parameters
    ----------
    require : {"X", "measures", None}
        Which data the caller needs.
    normalize : bool
        Divide the weights of ``mu`` and ``nu`` exactly by their sums (``--normalize``)
        instead of refusing weights that do not sum to exactly 1.

    Raises
    ------
    SchemaError, ShapeError, NonFiniteError, NumberFormatError, InputError, DomainError

    Guarantee: exact.
    """
    check_keys(obj, "", ["Q", "K", "V", "R"], ["X", "mu", "nu"])
    Q = exact_matrix(obj["Q"], "Q", col_what="columns")
    k, d = Q.shape
    K = exact_matrix(obj["K"], "K", rows=k, cols=d, col_what="columns")
    V = exact_matrix(obj["V"], "V", rows=d, cols=d, col_what="columns")
    R = to_fmpq(obj["R"], "R")
    if R <= 0:
        raise DomainError(f"R: {fmpq_to_str(R)} is not > 0; give a positive radius")
    X = None
    if "X" in obj:
        X = exact_matrix(obj["X"], "X", cols=d, row_what="points", col_what="coordinates")
        _ball_check(X, R, "X")
    if ("mu" in obj) != ("nu" in obj):
        raise InputError("mu, nu: give both measures or neither")
    measures = {s: _measure(obj[s], s, d, R, normalize) for s in ("mu", "nu") if s in obj}
    mu, nu = ((m[0], m[1]) if m else None for m in map(measures.get, ("mu", "nu")))
    sums = {s: m[2] for s, m in measures.items() if m[2] is not None}
    if require == "X" and X is None:
        raise InputError('X: this hypothesis needs a point cloud "X": n×d in the instance')
    if require == "measures" and mu is None:
        raise InputError('mu, nu: this hypothesis needs two measures "mu" and "nu"')
    if mu is not None and require == "measures" and mu[0].shape[0] != nu[0].shape[0]:
        raise ShapeError(
            f"mu, nu: have {mu[0].shape[0]} and {nu[0].shape[0]} atoms; version 1 compares "
            "measures with the same number of atoms"
        )
    return AttentionInstance(Q, K, V, R, X, mu, nu, sums)


def read_attention_instance(
    path: str | os.PathLike[str], *, require: str | None = None, normalize: bool = False
) -> AttentionInstance:
    """Read an attention instance JSON file (errors are prefixed with the file name): its
    structure is checked against the shipped JSON Schema ``attention-instance`` first.

    Guarantee: exact (as :func:`parse_attention_instance`).
    """
    obj = read_json(path)
    with prefixed_errors(os.fspath(path)):
        validate_json(obj, "attention-instance")
        return parse_attention_instance(obj, require=require, normalize=normalize)
