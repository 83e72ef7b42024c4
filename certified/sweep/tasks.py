"""The work of one Dask task: a batch of instances, each run by its family adapter, its
certificate re-checked by the checker and written (atomically) before its row exists.

Runs on the workers; standard library, numpy and the package (no Dask, pandas or pyarrow).
The order inside a row's life is the invariant of ``proofs/sweep.md``: the certificate bytes
are checked, written and hashed first, then the row naming them is returned to the client,
which alone writes rows. A task that dies midway leaves at most certificates without rows
(rewritten with the same bytes when the instance is run again), never a row without its
certificate.

With a time budget, a batch runs in a forked child process (:func:`run_budgeted`): a Dask task
runs in a worker thread, where no signal can interrupt it and from where nothing can stop a
long call inside python-flint, but a process can be killed. The child arms a real-time alarm
(default action: terminate) for each instance and streams each row to the task through a pipe;
an instance that overruns kills the child, gets an UNDECIDED row ("time budget of X s
exceeded", no certificate: one the child may have written is removed), and a new child runs
the rest of the batch.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import select
import signal
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from certified.errors import CertifiedError
from certified.verdict import Outcome

__all__ = [
    "budget_exceeded",
    "budget_reason",
    "certificate_name",
    "run_batch",
    "run_budgeted",
    "run_instance",
]

# python-flint's working precision is process-global: on a worker with several threads, two
# instances must not run at once (each sets and restores the precision it needs)
_ONE_AT_A_TIME = threading.Lock()


def certificate_name(key: str) -> str:
    """The file name of an instance's certificate in ``DIR/certificates/``.

    Guarantee: exact (a function of the key)."""
    return f"{key}.json"


def run_instance(
    core: dict[str, Any], key: str, params: dict[str, Any], path: str | None, cert_dir: str
) -> dict[str, Any]:
    """Run one instance and write its certificate; return its row (a dict of columns).

    A ``CertifiedError`` raised by the family (an instance it refuses, e.g. coincident random
    points) gives an UNDECIDED row with the message; any other exception propagates (the task
    fails, Dask retries it, and a failing instance gets no row).

    Guarantee: a row naming a certificate is written after the certificate, whose bytes the
    checker accepted and whose SHA-256 is the row's ``certificate_sha256``.
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
            write_atomic(os.path.join(cert_dir, name), data)
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
    ``time_budget`` (seconds per instance), in a child process (:func:`run_budgeted`).

    Guarantee: as :func:`run_instance`, for each item; one batch at a time per process.
    """
    with _ONE_AT_A_TIME:
        if time_budget is not None:
            return run_budgeted(core, items, cert_dir, time_budget)
        return [run_instance(core, key, params, path, cert_dir) for key, params, path in items]


def budget_reason(budget: float) -> str:
    """The reason of the row of an instance that exceeded its time budget.

    Guarantee: exact."""
    return f"time budget of {budget:g} s exceeded"


def budget_exceeded(reason: Any) -> bool:
    """Whether a row's reason says that its instance exceeded its time budget.

    Guarantee: exact."""
    return (
        isinstance(reason, str)
        and reason.startswith("time budget of ")
        and reason.endswith(" s exceeded")
    )


# --- a batch in a forked child under a per-instance time budget ----------------------------------

_HEADER = 8  # bytes of a message's length (big-endian)


def _send(fd: int, message: Any) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(len(data).to_bytes(_HEADER, "big") + data)
    while view:
        view = view[os.write(fd, view) :]


def _read(fd: int, n: int, deadline: float) -> bytes | None:
    """``n`` bytes from ``fd``; None at end of file; TimeoutError past ``deadline``."""
    buf = bytearray()
    while len(buf) < n:
        wait = deadline - time.monotonic()
        if wait <= 0 or not select.select([fd], [], [], wait)[0]:
            raise TimeoutError
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _receive(fd: int, deadline: float) -> Any:
    """The next message from the child, or None at end of file (the child is gone)."""
    header = _read(fd, _HEADER, deadline)
    if header is None:
        return None
    data = _read(fd, int.from_bytes(header, "big"), deadline)
    return None if data is None else pickle.loads(data)  # our own child's bytes


def _child(fd: int, core: dict, items: list, cert_dir: str, budget: float) -> None:
    """The forked child: run the items in order under an alarm each; never returns."""
    code = 0
    try:
        # SIGALRM's default action terminates the process: no Python code needs to run, so
        # the alarm stops a long computation inside a C library as surely as a Python loop
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        for key, params, path in items:
            signal.setitimer(signal.ITIMER_REAL, budget)
            row = run_instance(core, key, params, path, cert_dir)
            signal.setitimer(signal.ITIMER_REAL, 0)
            _send(fd, ("row", row))
    except BaseException:  # reported to the parent, which raises it
        code = 1
        try:
            _send(fd, ("error", traceback.format_exc()))
        except BaseException:  # the parent is gone: nothing to tell
            pass
    finally:
        os._exit(code)


def _fork(core: dict, items: list, cert_dir: str, budget: float) -> tuple[int, int]:
    import gc
    import warnings

    read_fd, write_fd = os.pipe()
    # objects of the parent are never collected in the child (no finalizer of the worker's
    # runs there, and fewer pages are copied): the fork pattern of the gc module's docs
    gc.freeze()
    try:
        with warnings.catch_warnings():  # Python >= 3.12 warns about fork with threads
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
    except BaseException:
        gc.unfreeze()
        os.close(read_fd)
        os.close(write_fd)
        raise
    if pid == 0:  # pragma: no cover - the child (coverage does not follow a fork)
        os.close(read_fd)
        _child(write_fd, core, items, cert_dir, budget)
    gc.unfreeze()
    os.close(write_fd)
    return pid, read_fd


def _remove_certificate(cert_dir: str, key: str) -> None:
    """Remove what an instance killed by its budget may have left: its certificate (no row
    names it) and a temporary file of the atomic writer."""
    name = certificate_name(key)
    for path in [Path(cert_dir) / name, *Path(cert_dir).glob(f".{name}.*.tmp")]:
        try:
            path.unlink()
        except FileNotFoundError:
            pass


def run_budgeted(
    core: dict[str, Any],
    items: list[tuple[str, dict[str, Any], str | None]],
    cert_dir: str,
    budget: float,
) -> list[dict[str, Any]]:
    """Run a batch with at most ``budget`` seconds (wall clock) per instance, each in a forked
    child process (one child for consecutive instances, a new one after an overrun).

    An instance that exceeds the budget gets an UNDECIDED row whose reason is
    :func:`budget_reason` and no certificate; the others' rows are those of
    :func:`run_instance`. An exception in the child (not a refused instance) or a child that
    dies otherwise raises RuntimeError here: the task fails, as without a budget.

    Guarantee: as :func:`run_instance`, for each item that finished within the budget.
    """
    grace = max(1.0, 0.1 * budget)  # the child's own alarm normally fires first
    rows: list[dict[str, Any]] = []
    while len(rows) < len(items):
        todo = items[len(rows) :]
        pid, fd = _fork(core, todo, cert_dir, budget)
        done, status = 0, None
        try:
            while done < len(todo):
                t0 = time.perf_counter()
                try:
                    message = _receive(fd, time.monotonic() + budget + grace)
                except TimeoutError:
                    os.kill(pid, signal.SIGKILL)
                    status = "timeout"
                    message = None
                if message is None:
                    break
                kind, payload = message
                if kind == "error":
                    raise RuntimeError(f"sweep instance failed in its child process:\n{payload}")
                rows.append(payload)
                done += 1
        finally:
            os.close(fd)
            _, wait_status = os.waitpid(pid, 0)
        if done == len(todo):
            break
        signalled = os.WTERMSIG(wait_status) if os.WIFSIGNALED(wait_status) else None
        # its own alarm, or our SIGKILL after the grace period: anything else is a crash
        if signalled not in (signal.SIGALRM, signal.SIGKILL if status == "timeout" else None):
            raise RuntimeError(
                f"the child process running sweep instance {todo[done][0]} died "
                f"(wait status {wait_status}) before its time budget ran out"
            )
        key, params, _ = todo[done]
        _remove_certificate(cert_dir, key)
        rows.append({
            "key": key,
            "verdict": Outcome.UNDECIDED.value,
            "reason": budget_reason(budget),
            "seconds": time.perf_counter() - t0,
            "certificate": None,
            "certificate_sha256": None,
            **params,
        })  # fmt: skip
    return rows
