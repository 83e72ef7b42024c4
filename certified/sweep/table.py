"""The results table of a sweep on disk: Parquet part files, one per finished Dask task,
written atomically by the client; the table is their union, one row per key.

``DIR/parts/part-<hash of the batch's keys>.parquet`` appear as tasks finish (a reader sees a
complete part or none), ``DIR/results.parquet`` is the union written at the end. Reading
keeps the first row of each key and only rows whose certificate (when they name one) is on
disk with the SHA-256 the row records: a row is never counted without its certificate, and an
instance whose row is dropped is simply run again.

Rows become Arrow tables directly (column by column, no pandas on the way: the client writes
one part per task, and pandas' conversion cost more than the rest of its work); the parts'
tables are concatenated with type promotion and converted to pandas once.
"""

from __future__ import annotations

import hashlib
import io
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from certified.certificates import write_atomic

__all__ = [
    "PARTS",
    "RESULTS",
    "drop_rows",
    "read_parts",
    "rows_table",
    "write_part",
    "write_table",
]

PARTS = "parts"
RESULTS = "results.parquet"


def rows_table(rows: list[dict[str, Any]]) -> pa.Table:
    """The Arrow table of ``rows`` (dicts): the union of their columns in order of first
    appearance, a missing value null.

    Guarantee: none (data conversion); every value is kept."""
    names = list(dict.fromkeys(k for row in rows for k in row))
    try:
        return pa.table({k: pa.array([row.get(k) for row in rows]) for k in names})
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # pragma: no cover - mixed-type column
        return pa.Table.from_pandas(pd.DataFrame(rows, columns=names), preserve_index=False)


def _parquet_bytes(table: pa.Table) -> bytes:
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    return buffer.getvalue()


def write_part(out: Path, rows: list[dict[str, Any]]) -> tuple[Path, pa.Table]:
    """Write the rows of one finished task as a new part file, atomically; return its path
    and its table.

    Guarantee: none (writing); the part holds exactly ``rows`` or does not exist."""
    keys = "".join(sorted(r["key"] for r in rows))
    name = f"part-{hashlib.sha256(keys.encode('ascii')).hexdigest()[:20]}.parquet"
    table = rows_table(rows)
    return write_atomic(out / PARTS / name, _parquet_bytes(table)), table


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


def read_parts(out: Path, known: dict[str, pa.Table] | None = None) -> pd.DataFrame:
    """The union of the part files of ``out``: one row per key (the first part's, in file
    name order), rows whose certificate is missing or altered dropped.

    ``known``: part name -> table of the parts this process's sweep wrote just now (taken
    from memory; their certificates were written and hashed by the tasks and are not read
    again).

    Guarantee: every row's certificate (if it names one) is on disk with the recorded SHA-256
    at the time of reading, or was written with it by the tasks of a ``known`` part."""
    known = known or {}
    tables, trusted = [], []
    for part in _parts(out):
        table = known.get(part.name)
        tables.append(pq.read_table(part) if table is None else table)
        trusted.append(table is not None)
    keep = [(t, k) for t, k in zip(tables, trusted, strict=True) if t.num_rows]
    if not keep:
        return pd.DataFrame({"key": pd.Series([], dtype=object)})
    flags = pa.array([k for t, k in keep for _ in range(t.num_rows)], type=pa.bool_())
    merged = pa.concat_tables([t for t, _ in keep], promote_options="permissive")
    table = merged.append_column("_trusted", flags).to_pandas()
    table = table.drop_duplicates("key", keep="first")
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
        table = pq.read_table(part)
        keep = pa.array([k not in keys for k in table.column("key").to_pylist()])
        if keep.true_count == table.num_rows:
            continue
        if keep.true_count:
            write_atomic(part, _parquet_bytes(table.filter(keep)))
        else:
            part.unlink()


def write_table(out: Path, table: pd.DataFrame) -> Path:
    """Write the whole table as ``DIR/results.parquet``, atomically.

    Guarantee: none (writing)."""
    buffer = io.BytesIO()
    table.to_parquet(buffer, engine="pyarrow", index=False)
    return write_atomic(out / RESULTS, buffer.getvalue())
