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

__all__ = ["PARTS", "RESULTS", "read_parts", "write_part", "write_table"]

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


def read_parts(out: Path) -> pd.DataFrame:
    """The union of the part files of ``out``: one row per key (the first part's, in file
    name order), rows whose certificate is missing or altered dropped.

    Guarantee: every row's certificate (if it names one) is on disk with the recorded SHA-256
    at the time of reading."""
    parts = sorted((out / PARTS).glob("part-*.parquet")) if (out / PARTS).is_dir() else []
    frames = [pd.read_parquet(p, engine="pyarrow") for p in parts]
    frames = [f for f in frames if len(f)]
    if not frames:
        return pd.DataFrame({"key": pd.Series([], dtype=object)})
    table = pd.concat(frames, ignore_index=True).drop_duplicates("key", keep="first")
    cache: dict[str, bool] = {}
    ok = [
        _certificate_ok(out, c, s, cache)
        for c, s in zip(table["certificate"], table["certificate_sha256"], strict=True)
    ]
    return table[ok].reset_index(drop=True)


def write_table(out: Path, table: pd.DataFrame) -> Path:
    """Write the whole table as ``DIR/results.parquet``, atomically.

    Guarantee: none (writing)."""
    return write_atomic(out / RESULTS, _parquet_bytes(table))
