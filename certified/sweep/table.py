"""The results table of a sweep on disk: Parquet part files, one per finished Dask task,
written atomically by the client; the table is their union, one row per key.

``DIR/parts/part-<hash of the batch's keys>.parquet`` appear as tasks finish (a reader sees a
complete part or none), ``DIR/results.parquet`` is the union written at the end. Reading
keeps the first row of each key and only rows whose certificate (when they name one) is on
disk with the SHA-256 the row records: a row is never counted without its certificate, and an
instance whose row is dropped is simply run again.
"""

from __future__ import annotations

import hashlib
import io
from pathlib import Path
from typing import Any

import pandas as pd

from certified.certificates import write_atomic

__all__ = ["PARTS", "RESULTS", "drop_rows", "read_parts", "write_part", "write_table"]

PARTS = "parts"
RESULTS = "results.parquet"


def _parquet_bytes(frame: pd.DataFrame) -> bytes:
    buffer = io.BytesIO()
    frame.to_parquet(buffer, engine="pyarrow", index=False)
    return buffer.getvalue()


def write_part(out: Path, rows: list[dict[str, Any]]) -> Path:
    """Write the rows of one finished task as a new part file, atomically.

    Guarantee: none (writing); the part holds exactly ``rows`` or does not exist."""
    keys = "".join(sorted(r["key"] for r in rows))
    name = f"part-{hashlib.sha256(keys.encode('ascii')).hexdigest()[:20]}.parquet"
    return write_atomic(out / PARTS / name, _parquet_bytes(pd.DataFrame(rows)))


def _certificate_ok(out: Path, name: Any, sha: Any, cache: dict[str, bool]) -> bool:
    if name is None or (isinstance(name, float) and pd.isna(name)):
        return True
    if name not in cache:
        try:
            data = (out / name).read_bytes()
        except OSError:
            cache[name] = False
        else:
            cache[name] = hashlib.sha256(data).hexdigest() == sha
    return cache[name]


def _parts(out: Path) -> list[Path]:
    return sorted((out / PARTS).glob("part-*.parquet")) if (out / PARTS).is_dir() else []


def read_parts(out: Path, trusted: Any = ()) -> pd.DataFrame:
    """The union of the part files of ``out``: one row per key (the first part's, in file
    name order), rows whose certificate is missing or altered dropped.

    ``trusted``: names of parts whose certificates were written and hashed by this process's
    sweep just now (not read again).

    Guarantee: every row's certificate (if it names one) is on disk with the recorded SHA-256
    at the time of reading, or was written with it by the tasks of a ``trusted`` part."""
    parts = _parts(out)
    frames = [
        pd.read_parquet(p, engine="pyarrow").assign(_trusted=p.name in trusted) for p in parts
    ]
    frames = [f for f in frames if len(f)]
    if not frames:
        return pd.DataFrame({"key": pd.Series([], dtype=object)})
    table = pd.concat(frames, ignore_index=True).drop_duplicates("key", keep="first")
    cache: dict[str, bool] = {}
    ok = [
        t or _certificate_ok(out, c, s, cache)
        for c, s, t in zip(
            table["certificate"], table["certificate_sha256"], table["_trusted"], strict=True
        )
    ]
    return table[ok].drop(columns="_trusted").reset_index(drop=True)


def drop_rows(out: Path, keys: set[str]) -> None:
    """Remove the rows of ``keys`` from the parts of ``out`` (each part rewritten atomically,
    or removed when no row is left): their instances are then run again.

    Guarantee: none (writing); a part holds its old rows or its old rows but ``keys``."""
    for part in _parts(out):
        frame = pd.read_parquet(part, engine="pyarrow")
        keep = ~frame["key"].isin(keys)
        if keep.all():
            continue
        if keep.any():
            write_atomic(part, _parquet_bytes(frame[keep]))
        else:
            part.unlink()


def write_table(out: Path, table: pd.DataFrame) -> Path:
    """Write the whole table as ``DIR/results.parquet``, atomically.

    Guarantee: none (writing)."""
    return write_atomic(out / RESULTS, _parquet_bytes(table))
