"""``certified sweep check DIR``: every certificate of a sweep re-checked by the independent
checker, in parallel on the Dask cluster (the same verdicts as ``certified check
DIR/certificates/*``, one task per batch of files).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from certified.errors import InputError

__all__ = ["check_batch", "recheck"]


def check_batch(paths: list[str]) -> list[tuple[str, bool, str | None, str]]:
    """``(path, verified, kind, reason)`` of each file, by ``certified.checker.check_file``.

    Guarantee: the checker's verdicts."""
    from certified.checker import check_file

    out = []
    for path in paths:
        v = check_file(path)
        out.append((path, bool(v.verified), v.kind, v.reason))
    return out


def recheck(
    out: str | os.PathLike[str],
    *,
    scheduler: str | None = None,
    workers: int = 2,
    client: Any = None,
    batch: int = 64,
) -> Any:
    """Re-check every ``DIR/certificates/*.json`` on the cluster; a DataFrame with columns
    ``file``, ``verified``, ``kind``, ``reason``, sorted by file.

    Raises
    ------
    InputError, SchedulerError
        DIR has no ``certificates/`` directory; the scheduler is unreachable.

    Guarantee: ``verified`` is the checker's verdict on each file's bytes."""
    import pandas as pd
    from dask.distributed import as_completed

    from certified.sweep.run import _client

    directory = Path(out) / "certificates"
    if not directory.is_dir():
        raise InputError(f"{out}: holds no certificates/ directory (not a sweep's output)")
    files = sorted(str(p) for p in directory.glob("*.json"))
    if type(workers) is not int or not 1 <= workers <= 1024:
        raise InputError(f"--workers: {workers!r} is not an integer in [1, 1024]")
    rows: list[tuple[str, bool, str | None, str]] = []
    if files:
        with _client(scheduler, workers, client) as c:
            chunks = [files[i : i + batch] for i in range(0, len(files), batch)]
            futures = c.map(check_batch, chunks, retries=2, pure=False)
            for future in as_completed(futures, loop=c.loop):
                rows += future.result()
    table = pd.DataFrame(rows, columns=["file", "verified", "kind", "reason"])
    return table.sort_values("file").reset_index(drop=True)
