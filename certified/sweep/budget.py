"""Per-instance time budgets (``options.time_budget``): instances run in a forked child process
that a real-time alarm kills when one of them overruns.

A Dask task runs in a worker thread, where no signal can interrupt it and from where nothing
can stop a long call inside python-flint; a process can be killed. So each worker process
forks one child on its first budgeted task and hands it the batches of its budgeted tasks
through a pipe. The child arms ``setitimer(ITIMER_REAL, budget)`` before each instance
(``SIGALRM``'s default action terminates the process: no Python code needs to run, so a long
computation inside a C library is stopped as surely as a Python loop) and disarms it after;
it sends each row with its certificate's accepted bytes, which the task writes (so a killed
child leaves no file). An instance that overruns kills the child: its row is UNDECIDED,
"time budget of X s exceeded", with no certificate, and a new child, forked from the worker,
runs the rest of the batch. As a backstop the task kills the child itself (``SIGKILL``) when
no row came within the budget plus a grace period.

The child lives as long as the worker (it reads its next batch from the pipe and exits at end
of file, when the worker is gone): a task pays a fork only after an overrun, not on every
batch. It is a snapshot of the worker at the fork: code patched in the worker afterwards is
not seen by it (:func:`shutdown` ends it; tests use that).

POSIX only (``os.fork``); the spec refuses a budget elsewhere.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from certified.verdict import Outcome

__all__ = ["budget_exceeded", "budget_reason", "run_budgeted", "shutdown"]

_HEADER = 8  # bytes of a message's length (big-endian)


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


def _send(fd: int, message: Any) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(len(data).to_bytes(_HEADER, "big") + data)
    while view:
        view = view[os.write(fd, view) :]


def _read(fd: int, n: int, deadline: float | None) -> bytes | None:
    """``n`` bytes from ``fd``; None at end of file; TimeoutError past ``deadline``."""
    buf = bytearray()
    while len(buf) < n:
        if deadline is not None:
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([fd], [], [], wait)[0]:
                raise TimeoutError
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _receive(fd: int, deadline: float | None) -> Any:
    """The next message on ``fd``, or None at end of file (the other side is gone)."""
    header = _read(fd, _HEADER, deadline)
    if header is None:
        return None
    data = _read(fd, int.from_bytes(header, "big"), deadline)
    return None if data is None else pickle.loads(data)  # our own process's bytes


def _serve(inbox: int, outbox: int) -> None:
    """The child: run batches from ``inbox`` until end of file; never returns."""
    from certified.sweep.tasks import run_instance

    code = 0
    try:
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        while (message := _receive(inbox, None)) is not None:
            _, core, items, cert_dir, budget = message
            for key, params, path in items:
                files: list[tuple[str, bytes]] = []
                keep = lambda p, d, files=files: files.append((p, d))  # noqa: E731
                signal.setitimer(signal.ITIMER_REAL, budget)
                row = run_instance(core, key, params, path, cert_dir, keep)
                signal.setitimer(signal.ITIMER_REAL, 0)
                _send(outbox, ("row", row, files))
            _send(outbox, ("done",))
    except BaseException:  # reported to the task, which raises it
        code = 1
        try:
            _send(outbox, ("error", traceback.format_exc()))
        except BaseException:  # the worker is gone: nothing to tell
            pass
    finally:
        os._exit(code)


@dataclass
class _Child:
    pid: int
    inbox: int  # the child reads batches here (our write end)
    outbox: int  # the child writes rows here (our read end)

    def end(self, kill: bool = False) -> int:
        """Close our ends, kill if asked, reap; the wait status."""
        for fd in (self.inbox, self.outbox):
            try:
                os.close(fd)
            except OSError:
                pass
        if kill:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return os.waitpid(self.pid, 0)[1]


_CHILD: list[_Child] = []  # the worker's child, if alive
_LOCK = threading.Lock()


def _fork() -> _Child:
    import gc
    import warnings

    batch_r, batch_w = os.pipe()  # batches: the worker writes, the child reads
    row_r, row_w = os.pipe()  # rows: the child writes, the worker reads
    # the worker's objects are never collected in the child (no finalizer of the worker's
    # runs there, fewer pages are copied): the fork pattern of the gc module's documentation
    gc.freeze()
    try:
        with warnings.catch_warnings():  # Python >= 3.12 warns about fork with threads
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
    except BaseException:
        gc.unfreeze()
        for fd in (batch_r, batch_w, row_r, row_w):
            os.close(fd)
        raise
    if pid == 0:  # pragma: no cover - the child (coverage does not follow a fork)
        os.close(batch_w)
        os.close(row_r)
        from certified.sweep import tasks

        tasks._WRITER.clear()  # the worker's writing thread does not exist here
        _serve(batch_r, row_w)
    gc.unfreeze()
    os.close(batch_r)
    os.close(row_w)
    return _Child(pid, batch_w, row_r)


def shutdown() -> None:
    """End the worker's child process, if any (a later budgeted batch forks a new one).

    Guarantee: none (process control)."""
    with _LOCK:
        while _CHILD:
            _CHILD.pop().end(kill=True)


def run_budgeted(
    core: dict[str, Any],
    items: list[tuple[str, dict[str, Any], str | None]],
    cert_dir: str,
    budget: float,
    write: Any,
) -> list[dict[str, Any]]:
    """Run a batch with at most ``budget`` seconds (wall clock) per instance in the worker's
    child process; ``write(path, data)`` writes each accepted certificate (the caller waits
    for the writes before the rows leave the task).

    An instance that exceeds the budget gets an UNDECIDED row whose reason is
    :func:`budget_reason` and no certificate (a file of its key left by an earlier,
    interrupted run is removed); the others' rows are those of
    :func:`certified.sweep.tasks.run_instance`. An exception in the child (not a refused
    instance) or a child that dies otherwise raises RuntimeError here: the task fails, as
    without a budget.

    Guarantee: as :func:`certified.sweep.tasks.run_instance`, for each item that finished
    within the budget.
    """
    grace = max(1.0, 0.1 * budget)  # the child's own alarm normally fires first
    rows: list[dict[str, Any]] = []
    with _LOCK:
        while len(rows) < len(items):
            rows += _run_in_child(core, items[len(rows) :], cert_dir, budget, grace, write)
    return rows


def _run_in_child(core, todo, cert_dir, budget, grace, write) -> list[dict[str, Any]]:
    """Rows of ``todo`` until the child finishes it or dies (then the last row is the
    overrun's)."""
    for attempt in (0, 1):
        if not _CHILD:
            _CHILD.append(_fork())
        try:
            _send(_CHILD[0].inbox, ("batch", core, todo, cert_dir, budget))
            break
        except BrokenPipeError:  # the child died between batches: fork another, once
            _CHILD.pop().end(kill=True)
            if attempt:
                raise RuntimeError("the budget's child process dies before its batch") from None
    child = _CHILD[0]
    rows: list[dict[str, Any]] = []
    killed = finished = False
    try:
        while True:
            t0 = time.perf_counter()
            try:
                message = _receive(child.outbox, time.monotonic() + budget + grace)
            except TimeoutError:
                killed, message = True, None
            if message is None or message[0] == "error":
                break
            if message[0] == "done":
                finished = True
                return rows
            _, row, files = message
            for path, data in files:
                write(path, data)
            rows.append(row)
    finally:
        if not finished:  # dead, or this task interrupted mid-batch: never reuse this child
            _CHILD.remove(child)
            status = child.end(kill=True)
    if message is not None:
        raise RuntimeError(f"sweep instance failed in its child process:\n{message[1]}")
    signalled = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
    # its own alarm, or our SIGKILL after the grace period: anything else is a crash
    if signalled not in (signal.SIGALRM, signal.SIGKILL if killed else None):
        raise RuntimeError(
            f"the child process running sweep instance {todo[len(rows)][0]} died "
            f"(wait status {status}) before its time budget ran out"
        )
    key, params, _ = todo[len(rows)]
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


def _remove_certificate(cert_dir: str, key: str) -> None:
    """Remove a certificate of an overrun instance left by an earlier, interrupted run (its
    row now says UNDECIDED, and no row names the file), and a temporary file of the atomic
    writer."""
    from certified.sweep.tasks import certificate_name

    name = certificate_name(key)
    for path in [Path(cert_dir) / name, *Path(cert_dir).glob(f".{name}.*.tmp")]:
        try:
            path.unlink()
        except FileNotFoundError:
            pass


if hasattr(os, "register_at_fork"):  # a process forked from the worker does not own its child
    os.register_at_fork(after_in_child=_CHILD.clear)
