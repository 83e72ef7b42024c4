"""Enclosures without a certificate, in a file: ``.csv`` (lo/hi columns), ``.npz`` or ``.json``.

For users who want bounds now and a certificate later (``certified flow --enclosures FILE``,
or :func:`write_enclosures` from Python). Every number written is a bound in the direction it
claims, however it is read:

* ``.npz``: float64 arrays ``lo``, ``hi`` of shape (times, N, d), and ``times`` (exact strings);
  the doubles are the bounds (exact values rounded outward to doubles);
* ``.csv``: a header ``t,set,lo_0,hi_0,...``, one row per (time, set); decimals of 17
  significant digits rounded outward (down for ``lo``, up for ``hi``), so that reading them
  exactly or as the nearest double (rounding is monotone) still gives bounds;
* ``.json``: ``{"times": [...], "lo": [...], "hi": [...]}`` with the same outward decimals as
  strings (read exactly by the package's readers).

Files are written atomically (:func:`certified.certificates.writer.write_atomic`): the file
holds the complete enclosures or is unchanged.
"""

from __future__ import annotations

import io
import json
import os
from decimal import ROUND_CEILING, ROUND_FLOOR, Context, Decimal
from pathlib import Path
from typing import Any

import numpy as np

from certified.errors import InputError

__all__ = ["ENCLOSURE_SUFFIXES", "write_enclosures"]

ENCLOSURE_SUFFIXES = (".csv", ".npz", ".json")

_DOWN = Context(prec=17, rounding=ROUND_FLOOR)
_UP = Context(prec=17, rounding=ROUND_CEILING)


def check_enclosures_path(path: str | os.PathLike[str]) -> Path:
    """``path`` if its suffix is one of :data:`ENCLOSURE_SUFFIXES`, else an InputError (before
    any work)."""
    p = Path(path)
    if p.suffix.lower() not in ENCLOSURE_SUFFIXES:
        raise InputError(
            f"--enclosures: {os.fspath(p)!r} must end in .csv, .npz or .json (the format "
            "follows the suffix)"
        )
    return p


def _outward(values: Any, rounding: str) -> np.ndarray:
    """Exact numbers (fmpq, int, float or exact strings) rounded outward to doubles."""
    from certified.arith.exact import fmpq_array_to_float

    return fmpq_array_to_float(values, rounding, "enclosure")


def _decimal(x: float, ctx: Context) -> str:
    return str(ctx.plus(Decimal(x)))


def write_enclosures(path: str | os.PathLike[str], times: list[str], lo: Any, hi: Any) -> Path:
    """Write enclosures ``[lo, hi]`` (shape (times, N, d); exact numbers or doubles) at the
    exact ``times`` to ``path`` (.csv, .npz or .json, by suffix), atomically.

    Raises
    ------
    InputError
        Unknown suffix, or shapes that do not match the times.
    OutputFileError, OSError
        The directory is missing, the disk is full, ... (nothing is written).

    Guarantee: every number written bounds the given one in its direction (lower bounds down,
    upper bounds up), read exactly or as the nearest double.
    """
    from certified.certificates.writer import write_atomic

    target = check_enclosures_path(path)
    lo, hi = _outward(lo, "down"), _outward(hi, "up")
    if lo.ndim != 3 or lo.shape != hi.shape or lo.shape[0] != len(times):
        raise InputError(
            f"enclosures: expected lo, hi of shape (times, N, d) with {len(times)} times, got "
            f"{lo.shape} and {hi.shape}"
        )
    suffix = target.suffix.lower()
    if suffix == ".npz":
        buf = io.BytesIO()
        np.savez(buf, lo=lo, hi=hi, times=np.array([str(t) for t in times]))
        data = buf.getvalue()
    elif suffix == ".json":
        doc = {
            "times": [str(t) for t in times],
            "lo": [[[_decimal(x, _DOWN) for x in row] for row in block] for block in lo.tolist()],
            "hi": [[[_decimal(x, _UP) for x in row] for row in block] for block in hi.tolist()],
        }
        data = (json.dumps(doc, separators=(",", ":")) + "\n").encode()
    else:
        d = lo.shape[2]
        lines = ["t,set," + ",".join(f"lo_{q},hi_{q}" for q in range(d))]
        for k, t in enumerate(times):
            for i in range(lo.shape[1]):
                cells = []
                for q in range(d):
                    cells += [_decimal(lo[k, i, q], _DOWN), _decimal(hi[k, i, q], _UP)]
                lines.append(f"{t},{i}," + ",".join(cells))
        data = ("\n".join(lines) + "\n").encode()
    return write_atomic(target, data)
