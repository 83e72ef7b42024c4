"""Running a sweep on Dask: an embedded ``LocalCluster`` by default, any scheduler by address.

The client submits one task per batch of instances (``Client.map`` with ``retries``: a task
whose worker died is run again elsewhere), collects them with ``as_completed`` and writes each
finished batch's rows as a Parquet part (:mod:`certified.sweep.table`). Instances whose key is
already in the table are skipped, so an interrupted sweep resumes where it stopped.

Order of the checks, so that bad input writes nothing: the spec, its generators and the
output directory are validated, then the scheduler is reached, and only then is anything
written.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from certified.errors import InputError
from certified.sweep.spec import Instance, SpecError, SweepSpec, canonical_json, load_spec

__all__ = ["LOCAL_CONFIG", "SchedulerError", "local_cluster", "sweep"]

SPEC_FILE = "spec.json"


class SchedulerError(InputError):
    """The Dask scheduler cannot be reached (address, port, timeout)."""


MAX_BATCH = 128  # instances per task: a killed worker loses at most this much work
MIN_BATCH = 4


def _batches(todo: list[Instance], batch: int | None, workers: int) -> list[list[Instance]]:
    """Consecutive batches: ``batch`` instances each, or by default guided self-scheduling
    (Polychronopoulos and Kuck, 1987): a quarter of the remaining work per worker, at most
    MAX_BATCH and at least MIN_BATCH instances, so that tasks are few and large first (little
    overhead) and small last (the workers finish together). Dask hands them out in order."""
    out, i = [], 0
    while i < len(todo):
        size = batch or min(MAX_BATCH, max(MIN_BATCH, -(-(len(todo) - i) // (4 * workers))))
        out.append(todo[i : i + size])
        i += size
    return out


def _check_out(out: Path, spec: SweepSpec) -> None:
    if out.exists() and not out.is_dir():
        raise InputError(f"--out: {out} exists and is not a directory")
    marker = out / SPEC_FILE
    if marker.exists():
        try:
            previous = canonical_json(json.loads(marker.read_text()))
        except (OSError, ValueError):
            raise InputError(f"--out: {marker} is unreadable; use a new directory") from None
        if previous != canonical_json(spec.core):
            raise InputError(
                f"--out: {out} holds a sweep of another family, statement or options; "
                "use a new directory"
            )
    elif out.is_dir() and any(out.iterdir()):
        raise InputError(f"--out: {out} is not empty and holds no sweep; use a new directory")
    parent = out.absolute()
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK):
        raise InputError(f"--out: {parent} is not a writable directory")


def _reach(scheduler: str) -> None:
    """Refuse a malformed or unreachable scheduler address quickly, before a Dask client
    is made (whose own failures take its whole timeout and leave noise on stderr)."""
    from distributed.comm import parse_address, parse_host_port

    def refuse(why: str) -> SchedulerError:
        return SchedulerError(
            f"--scheduler: cannot reach the Dask scheduler at {scheduler!r} ({why}); "
            "check the address (tcp://host:port) and that the scheduler runs"
        )

    if not isinstance(scheduler, str) or not scheduler:
        raise refuse("not an address")
    try:
        protocol, location = parse_address(scheduler)
        if protocol in ("tcp", "tls"):
            host, port = parse_host_port(location)
            socket.create_connection((host, port), timeout=3).close()
    except ValueError as exc:
        raise refuse(str(exc)) from None
    except OSError as exc:
        raise refuse(exc.strerror or type(exc).__name__) from None


@contextlib.contextmanager
def _client(scheduler: str | None, workers: int, client: Any) -> Iterator[Any]:
    if client is not None:
        yield client
        return
    from dask.distributed import Client

    if scheduler is not None:
        _reach(scheduler)
        try:
            c = Client(scheduler, timeout="10s", set_as_default=False)
        except (OSError, TimeoutError, ValueError) as exc:
            raise SchedulerError(
                f"--scheduler: cannot reach the Dask scheduler at {scheduler!r} ({exc}); "
                "check the address (tcp://host:port) and that the scheduler runs"
            ) from None
        with c:
            yield c
        return
    with local_cluster(workers) as cluster, Client(cluster, set_as_default=False) as c:
        yield c


# the embedded cluster's housekeeping, made rarer: on a small machine the scheduler, the
# nannies (in this process) and the workers' samplers compete with the workers for the cores
# (measured idle, 2 workers: this process 5.2 % of a core -> 0.85 %, the workers 4 % -> 0.7 %)
LOCAL_CONFIG = {
    "distributed.admin.tick.interval": "1s",  # 20 ms: an event-loop latency probe per server
    "distributed.worker.profile.enabled": False,  # a stack sample every 10 ms per worker
    "distributed.worker.memory.monitor-interval": "1s",  # 100 ms: a psutil read per worker
    "distributed.admin.system-monitor.interval": "2s",  # 500 ms, in every server
}


@contextlib.contextmanager
def local_cluster(workers: int, **kwargs: Any) -> Iterator[Any]:
    """An embedded Dask ``LocalCluster`` of ``workers`` processes with one thread each and
    :data:`LOCAL_CONFIG` (the workers inherit it).

    Guarantee: none (execution)."""
    import dask
    from dask.distributed import LocalCluster

    with (
        dask.config.set(LOCAL_CONFIG),
        LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",
            silence_logs=kwargs.pop("silence_logs", logging.ERROR),
            **kwargs,
        ) as cluster,
    ):
        yield cluster


def _prepare(spec: Any, out: Any) -> tuple[SweepSpec, list[Instance], Path]:
    spec = spec if isinstance(spec, SweepSpec) else load_spec(spec)
    instances = spec.instances()
    if out is None and spec.out is not None:  # the spec's out: relative to the spec file
        out = spec.base / spec.out
    if out is None:
        raise SpecError('out: give an output directory (--out DIR, or out = "DIR" in the spec)')
    out = Path(out)
    _check_out(out, spec)
    return spec, instances, out


def _start(out: Path, spec: SweepSpec) -> None:
    from certified.io import write_json_atomic

    (out / "certificates").mkdir(parents=True, exist_ok=True)
    (out / "parts").mkdir(exist_ok=True)
    if not (out / SPEC_FILE).exists():
        write_json_atomic(out / SPEC_FILE, spec.core, indent=2)


def _rows(batch: list[Instance], spec: SweepSpec, rows: list[dict]) -> list[dict]:
    by_key = {i.key: i for i in batch}
    out = []
    for row in rows:
        inst = by_key[row["key"]]
        meta = {"index": inst.index, "family": spec.family, "statement": spec.statement}
        out.append({**meta, "instance": canonical_json(inst.params), **row})
    return out


def sweep(
    spec: Any,
    out: str | os.PathLike[str] | None = None,
    *,
    scheduler: str | None = None,
    workers: int = 2,
    client: Any = None,
    progress: Any = None,
    on_batch: Callable[[int, int], None] | None = None,
    redo_exceeded: bool = False,
) -> Any:
    """Run a sweep and return its table (a pandas DataFrame, one row per instance).

    Parameters
    ----------
    spec : path, dict or SweepSpec
        The sweep specification (``proofs/sweep.md``).
    out : path, optional
        Output directory (default: the spec's ``out``): ``certificates/``, ``parts/``,
        ``results.parquet``, ``spec.json``. Re-running into it resumes.
    scheduler : str, optional
        Address of a running Dask scheduler; default: an embedded ``LocalCluster`` of
        ``workers`` processes with one thread each.
    client : dask.distributed.Client, optional
        An existing client (tests, notebooks); ``scheduler`` and ``workers`` are then unused.
    progress : callable, optional
        ``progress(done, total)`` once before the first task (``done``: instances found done)
        and after each finished task (the CLI's progress bar).
    on_batch : callable, optional
        ``on_batch(done, total)`` after each part is written (fault tests hook in here).
    redo_exceeded : bool
        Run again the instances whose row says that they exceeded their time budget
        (``options.time_budget``); by default a row is final, whatever its verdict.

    Returns
    -------
    pandas.DataFrame
        Sorted by ``index``; ``attrs["computed"]`` instances run by this call,
        ``attrs["skipped"]`` found done, ``attrs["failed"]`` (key, error) of failed tasks.

    Raises
    ------
    SpecError, InputError, SchedulerError
        Before any work starts and before anything is written.

    Guarantee: every row naming a certificate names a file the checker accepted, written
    before the row; every key appears at most once.
    """
    from certified.sweep.table import drop_rows, read_parts, write_part, write_table

    if type(workers) is not int or not 1 <= workers <= 1024:
        raise InputError(f"--workers: {workers!r} is not an integer in [1, 1024]")
    spec, instances, out = _prepare(spec, out)
    wanted = {i.key: i.index for i in instances}
    previous = read_parts(out)
    previous = previous[previous["key"].isin(wanted)]
    redo: set[str] = set()
    if redo_exceeded and len(previous):
        from certified.sweep.budget import budget_exceeded

        redo = set(previous["key"][previous["reason"].map(budget_exceeded)])
    done = set(previous["key"]) - redo
    todo = [i for i in instances if i.key not in done]
    with _client(scheduler, workers, client) as c:
        _start(out, spec)
        if redo:
            drop_rows(out, redo)
        n_workers = max(1, len(c.scheduler_info().get("workers", {})) or workers)
        batches = _batches(todo, spec.batch, n_workers)
        failed, parts = _submit(c, spec, batches, out, len(instances) - len(todo),
                                len(instances), progress, on_batch, write_part)  # fmt: skip
    # this run's parts need no second pass over their certificates: the tasks wrote and
    # hashed them just now
    table = read_parts(out, known=parts)
    table = table[table["key"].isin(wanted)].copy()
    table["index"] = table["key"].map(wanted)  # a grown spec may have moved an instance
    table = table.sort_values("index").reset_index(drop=True)
    write_table(out, table)
    table.attrs.update(
        out=str(out), computed=len(todo), skipped=len(instances) - len(todo), failed=failed
    )
    return table


def _submit(c, spec, batches, out, done, total, progress, on_batch, write_part):
    from dask.distributed import as_completed

    from certified.sweep.tasks import run_batch

    core = spec.core
    cert_dir = str((out / "certificates").resolve())
    items = [[(i.key, i.params, i.path) for i in b] for b in batches]
    keys = [f"certified-sweep-{b[0].key[:16]}-{len(b)}-{time.time_ns()}" for b in batches]
    n = len(items)
    futures = c.map(run_batch, [core] * n, items, [cert_dir] * n, [spec.time_budget] * n,
                    key=keys, retries=spec.retries, pure=False)  # fmt: skip
    batch_of = {f.key: b for f, b in zip(futures, batches, strict=True)}
    failed: list[tuple[str, str]] = []
    parts: dict[str, Any] = {}
    if progress is not None:
        progress(done, total)
    try:
        for future in as_completed(futures, loop=c.loop):
            batch = batch_of[future.key]
            if future.status != "finished":
                failed += [(i.key, repr(future.exception())) for i in batch]
                continue
            path, table = write_part(out, _rows(batch, spec, future.result()))
            parts[path.name] = table
            done += len(batch)
            if progress is not None:
                progress(done, total)
            if on_batch is not None:
                on_batch(done, total)
    finally:
        c.cancel(futures)
    return failed, parts
