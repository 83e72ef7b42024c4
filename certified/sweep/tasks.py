"""The work of one Dask task: a batch of instances, each run by its family adapter, its
certificate re-checked by the checker and written (atomically) before its row exists.

Runs on the workers; standard library, numpy and the package (no Dask, pandas or pyarrow).
The order inside a row's life is the invariant of ``proofs/sweep.md``: the certificate bytes
are checked, written and hashed first, then the row naming them is returned to the client,
which alone writes rows. A task that dies midway leaves at most certificates without rows
(rewritten with the same bytes when the instance is run again), never a row without its
certificate.

Certificates are written by a background thread (the atomic writer, with its ``fsync``): the
next instance runs while the disk flushes, and the task waits for every write before it
returns its rows. With a time budget the instances run in a child process
(:mod:`certified.sweep.budget`).
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from typing import Any

from certified.errors import CertifiedError
from certified.verdict import Outcome

__all__ = ["certificate_name", "run_batch", "run_instance"]

# python-flint's working precision is process-global: on a worker with several threads, two
# instances must not run at once (each sets and restores the precision it needs)
_ONE_AT_A_TIME = threading.Lock()


def certificate_name(key: str) -> str:
    """The file name of an instance's certificate in ``DIR/certificates/``.

    Guarantee: exact (a function of the key)."""
    return f"{key}.json"


def run_instance(
    core: dict[str, Any],
    key: str,
    params: dict[str, Any],
    path: str | None,
    cert_dir: str,
    write: Any = None,
) -> dict[str, Any]:
    """Run one instance and write its certificate; return its row (a dict of columns).

    A ``CertifiedError`` raised by the family (an instance it refuses, e.g. coincident random
    points) gives an UNDECIDED row with the message; any other exception propagates (the task
    fails, Dask retries it, and a failing instance gets no row).

    ``write``: if given, ``write(path, data)`` is called instead of writing the accepted
    certificate bytes (atomically, with ``fsync``) here and now: :func:`run_batch` hands them
    to a background thread (the ``fsync`` off the critical path: the next instance runs
    meanwhile), a budgeted child sends them to its parent; the caller must see them written
    before the row leaves the process.

    Guarantee: a row naming a certificate is written after the certificate (with ``write``:
    once the caller wrote it), whose bytes the checker accepted and whose SHA-256 is the
    row's ``certificate_sha256``.
    """
    from certified.certificates import certificate_bytes, write_atomic
    from certified.sweep.families import adapter

    fam = adapter(core["family"])
    t0 = time.perf_counter()
    try:
        result = fam.run(params, path, core["statement"], core["options"])
        verdict, reason, columns, cert = (
            result.verdict,
            result.reason,
            result.columns,
            result.certificate,
        )
    except CertifiedError as exc:
        verdict, reason, columns, cert = Outcome.UNDECIDED, f"input: {exc}", {}, None
    name = sha = None
    if cert is not None:
        data, check = certificate_bytes(cert)
        if check.verified:
            name = certificate_name(key)
            (write or write_atomic)(os.path.join(cert_dir, name), data)
            sha = hashlib.sha256(data).hexdigest()
        else:
            verdict = Outcome.UNDECIDED
            reason = f"the checker did not accept the certificate: {check.reason}"
    seconds = time.perf_counter() - t0
    row = {
        "key": key,
        "verdict": Outcome(verdict).value,
        "reason": reason,
        "seconds": seconds,
        "certificate": None if name is None else f"certificates/{name}",
        "certificate_sha256": sha,
    }
    clash = (set(params) | set(columns)) & set(row)
    if clash:  # pragma: no cover - adapters name their columns apart from these
        raise RuntimeError(f"sweep adapter {core['family']}: column {sorted(clash)[0]} reused")
    return {**row, **params, **columns}


def run_batch(
    core: dict[str, Any],
    items: list[tuple[str, dict[str, Any], str | None]],
    cert_dir: str,
    time_budget: float | None = None,
) -> list[dict[str, Any]]:
    """Run a batch of instances ``(key, params, path)`` in order (one Dask task); with a
    ``time_budget`` (seconds per instance), in a child process
    (:func:`certified.sweep.budget.run_budgeted`).

    Guarantee: as :func:`run_instance`, for each item; one batch at a time per process.
    """
    with _ONE_AT_A_TIME:
        writes: list = []
        if time_budget is not None:
            from certified.sweep.budget import run_budgeted

            try:
                return run_budgeted(core, items, cert_dir, time_budget, _background(writes))
            finally:
                _wait(writes)
        try:
            rows = [
                run_instance(core, key, params, path, cert_dir, _background(writes))
                for key, params, path in items
            ]
        finally:
            _wait(writes)
        return rows


def _background(writes: list) -> Any:
    """``write(path, data)``: the atomic writer on the process's writing thread (one thread:
    writes stay in order), its future appended to ``writes``."""
    from certified.certificates import write_atomic

    return lambda path, data: writes.append(_writer().submit(write_atomic, path, data))


def _wait(writes: list) -> None:
    for future in writes:  # every certificate on disk before any row leaves the task
        future.result()


_WRITER: list[Any] = []


def _writer() -> Any:
    """The process's certificate-writing thread."""
    if not _WRITER:
        from concurrent.futures import ThreadPoolExecutor

        _WRITER.append(ThreadPoolExecutor(1, thread_name_prefix="certified-sweep-writer"))
    return _WRITER[0]
