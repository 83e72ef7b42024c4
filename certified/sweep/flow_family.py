"""The ``flow`` sweep adapter: one schedule's flow over a large ensemble of initial points,
split into chunks of rows of one points file, one task and one certificate per chunk.

The schedule is part of the spec's options, read and stored in its canonical form
(``Schedule.to_json``), so every key depends on the schedule's content. A chunk instance is
``{"points": name, "points_sha256": digest, "start": a, "stop": b}``: rows ``a:b`` of the
points of the file, a ``.npz`` (array ``X`` of binary64 values, read exactly and sliced
without reading the other rows' values into exact numbers), a ``.csv`` (one point per line,
optional header) or a ``.json`` ``{"X": n×d}``: the last two read exactly, whole, by
:func:`certified.io.read_points` (once per worker process and file). Enclosures are gathered
in order with :func:`gather_enclosures`, from the certificates (the checked claims), not
from the table.
"""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from certified.errors import InputError
from certified.sweep.families import Result, SweepFamily, _prec
from certified.sweep.spec import SpecError
from certified.verdict import Outcome

__all__ = ["FLOW", "chunk_instances", "gather_enclosures"]

MAX_CHUNK = 1_000_000
POINT_FILES = (".npz", ".csv", ".json")


def _schedule(value: Any, base: Any) -> dict[str, Any]:
    from certified.models import Schedule

    if isinstance(value, str):
        return Schedule.from_json(os.path.join(base, os.path.expanduser(value))).to_json()
    if isinstance(value, dict):
        return Schedule.from_json(value).to_json()
    raise InputError('give a schedule file name (or the schedule object): schedule = "s.json"')


def _optional_prec(value: Any) -> int | None:
    return None if value is None else _prec(value)


def _load_x(path: str, field: str) -> np.ndarray:
    try:
        with np.load(path, allow_pickle=False) as npz:
            if "X" not in npz.files:
                raise SpecError(f"{field}: {path} holds no array X")
            X = npz["X"]
    except (OSError, ValueError) as exc:
        raise SpecError(f"{field}: {path}: not a readable .npz file ({exc})") from None
    if X.ndim != 2 or X.dtype != np.float64 or X.shape[0] == 0:
        raise SpecError(f"{field}: {path}: X must be a non-empty (n, d) float64 array")
    if not np.isfinite(X).all():
        row = int(np.flatnonzero(~np.isfinite(X).all(axis=1))[0])
        raise SpecError(f"{field}: {path}: X[{row}] is not finite")
    return X


def _suffix(name: str) -> str:
    return Path(name).suffix.lower()


@lru_cache(maxsize=2)
def _exact_points(path: str, digest: str) -> Any:
    """The exact points of a ``.csv`` / ``.json`` file (fmpq array), read once per process
    and file content (``digest``, checked: a file changed since the spec was expanded is an
    error, not another instance under the same key)."""
    from certified.io import read_points

    data = Path(path).read_bytes()
    if hashlib.sha256(data).hexdigest() != digest:
        raise RuntimeError(f"{path}: changed since the sweep's instances were made; re-run")
    return read_points(path)


def chunk_instances(gen: dict[str, Any], field: str, base: Any) -> list[tuple[dict, str]]:
    """The chunk instances of a ``kind = "chunks"`` generator: ``points`` (a ``.npz`` file with
    a float64 array ``X``, a ``.csv`` file of one point per line or a ``.json`` file ``{"X":
    n×d}``, relative to the spec) and ``size`` (rows per chunk).

    Raises
    ------
    SpecError
        Also for a points file that :func:`certified.io.read_points` refuses (the message
        names the file and the field).

    Guarantee: exact (the chunks cover the rows once each, in order)."""
    points, size = gen.get("points"), gen.get("size")
    if not isinstance(points, str) or _suffix(points) not in POINT_FILES:
        raise SpecError(
            f"{field}.points: {points!r}; give a points file: .npz (array X), .csv (one point "
            'per line) or .json ({"X": n x d}), e.g. "x.npz"'
        )
    if type(size) is not int or not 1 <= size <= MAX_CHUNK:
        raise SpecError(f"{field}.size: {size!r} is not an integer in [1, {MAX_CHUNK}]")
    path = os.path.join(base, os.path.expanduser(points))
    if _suffix(points) == ".npz":
        X = _load_x(path, f"{field}.points")
    else:
        from certified.io import read_points

        try:
            X = read_points(path)
        except InputError as exc:
            raise SpecError(f"{field}.points: {exc}") from None
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    name, full = os.path.relpath(path, base), os.path.abspath(path)
    return [
        ({"points": name, "points_sha256": digest, "start": a, "stop": min(a + size, len(X))},
         full)
        for a in range(0, len(X), size)
    ]  # fmt: skip


def _run_flow(params, path, statement, options) -> Result:
    from certified.flow.api import enclose_flow, flow_certificate_for
    from certified.models import Schedule

    schedule = Schedule.from_json(options["schedule"])
    if _suffix(path) == ".npz":
        with np.load(path, allow_pickle=False) as npz:
            X = np.array(npz["X"][params["start"] : params["stop"]], dtype=np.float64)
    else:
        X = _exact_points(path, params["points_sha256"])[params["start"] : params["stop"]]
    if X.shape[1] != schedule.dimension:
        raise InputError(f"X: {X.shape[1]} coordinates, the schedule's dimension is "
                         f"{schedule.dimension}")  # fmt: skip
    if schedule.activation.is_piecewise_linear:
        result = enclose_flow(schedule, X, prec=options["prec"] or 128, method="regions")
    else:
        result = enclose_flow(schedule, X, prec=options["prec"])
    ok = result.status.value == "success"
    columns = {
        "points_in_chunk": int(X.shape[0]),
        "status": result.status.value,
        "max_width": float(result.max_width()) if ok else None,
    }
    cert = flow_certificate_for(schedule, X, result) if ok else None
    if cert is None:
        reason = result.message if not ok else "no checker rule covers this schedule"
        return Result(Outcome.UNDECIDED, None, reason, columns)
    return Result(Outcome.VERIFIED, cert, "", columns)


def gather_enclosures(table: Any, out: Any) -> list[Any]:
    """The claims of the chunks' certificates, in chunk order (``table`` sorted by index): the
    enclosures (or exact images) of every point, as the checker verified them. A chunk
    without a certificate gives None.

    Guarantee: each claim is read from a certificate the checker accepted when written, whose
    SHA-256 the table records (rows with altered certificates are dropped on reading)."""
    from certified.io import read_json

    claims = []
    for row in table.sort_values("index").itertuples():
        cert = None if row.certificate is None else read_json(Path(out) / row.certificate)
        claims.append(None if cert is None else cert["claim"])
    return claims


FLOW = SweepFamily(
    name="flow",
    statements=(),
    params={},
    defaults={},
    options={"schedule": (None, _schedule), "prec": (None, _optional_prec)},
    run=_run_flow,
    reads_files=False,
    chunks=True,
    base_options=("schedule",),
    example="""\
# certified sweep spec: the flow of one schedule over an ensemble of initial points, split
# into chunks of rows of a .npz file (array X, float64), one certificate per chunk.
version = 1
family = "flow"

[options]                # part of every chunk's key
schedule = "schedule.json"   # the schedule file (relative to this spec); its content is keyed
# prec = 128             # working precision (ReLU region engine: 128 by default)

[[generate]]
kind = "chunks"
points = "points.npz"    # array X: (n, d) float64; or a .csv (one point per line), or a
                         # .json {"X": n x d} (read exactly, whole, once per worker)
size = 1000              # points per chunk (one Dask task, one certificate)
""",
)
