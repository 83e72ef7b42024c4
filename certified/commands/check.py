"""``certified check FILE...``: the trusted checker's command line, behind a fail-closed
backstop.

Each file is checked in a child process of its own (``os.fork``) under a wall-clock limit and
an address-space limit (``--time-limit``, ``--memory-limit``; defaults below). A child that
exceeds either is killed and the file is REJECTED with "resource limit: ...", and the other
files are still checked: no file can hang the command or drive the machine out of memory.
The backstop can only turn a verdict into a rejection, never into an acceptance, so it adds
nothing to the trusted base: the verdicts themselves are those of ``certified.checker``.
Where ``os.fork`` does not exist (Windows), or with ``--no-limits``, files are checked in this
process, as ``python -m certified.checker`` does.

Only ``certified.checker`` is imported (no producer, no numpy): the same lines and exit codes
as ``python -m certified.checker``.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import sys
import time

__all__ = ["DEFAULT_MEMORY_MB", "DEFAULT_TIME_LIMIT", "add_arguments", "limited_check", "run"]

DEFAULT_TIME_LIMIT = 600.0  # seconds of wall-clock time per file
DEFAULT_MEMORY_MB = 1792  # MiB of address space a file's check may add (RLIMIT_AS of the child):
# with the ~45 MiB the command maps, every check stays under 2 GB (issue 11; format.md section 1)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the arguments of ``certified check``."""
    parser.add_argument("files", nargs="+", metavar="FILE", help="certificate files")
    parser.add_argument(
        "--time-limit",
        type=float,
        default=DEFAULT_TIME_LIMIT,
        metavar="SECONDS",
        help=f"wall-clock limit per file (default {DEFAULT_TIME_LIMIT:g}); a file over it is "
        "REJECTED with 'resource limit'",
    )
    parser.add_argument(
        "--memory-limit",
        type=int,
        default=DEFAULT_MEMORY_MB,
        metavar="MB",
        help=f"address space a file's check may add, in MiB (default {DEFAULT_MEMORY_MB}); a "
        "file over it is REJECTED with 'resource limit'",
    )
    parser.add_argument(
        "--no-limits",
        action="store_true",
        help="check in this process, without the time and memory backstop",
    )


def run(args: argparse.Namespace) -> int:
    """Check each file; 0 all verified, 1 some rejected, 2 some file unreadable or bad usage."""
    from certified.checker import check_paths

    if not args.time_limit > 0 or args.time_limit != args.time_limit:
        print("certified check: --time-limit: expected a positive number", file=sys.stderr)
        return 2
    if args.memory_limit < 64:
        print("certified check: --memory-limit: expected at least 64 (MiB)", file=sys.stderr)
        return 2
    if args.no_limits or not hasattr(os, "fork"):
        return check_paths(args.files, sys.stdout)

    def check(path: str):
        return limited_check(path, args.time_limit, args.memory_limit)

    return check_paths(args.files, sys.stdout, check)


def _address_space() -> int:
    """Bytes of address space this process already maps (Linux ``/proc/self/status``; 0
    elsewhere): a forked child inherits them, so the limit counts from there."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _child(path: str, memory_mb: int, write_fd: int) -> None:
    """In the forked child: limit the address space, check, send the verdict, exit."""
    code = 0
    try:
        import resource

        limit = _address_space() + memory_mb * 2**20  # what the check may add
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
        from certified.checker import check_file

        try:
            v = check_file(path)
            msg = {"verified": v.verified, "kind": v.kind, "reason": v.reason}
        except OSError as exc:
            msg = {"oserror": exc.errno or 0, "strerror": exc.strerror or type(exc).__name__}
        data = json.dumps(msg).encode()
        view = memoryview(data)
        while view:
            view = view[os.write(write_fd, view) :]
    except BaseException:  # the parent reports a dead child as a rejection
        code = 70
    finally:
        os._exit(code)


def limited_check(path: str, time_limit: float, memory_mb: int):
    """The checker's verdict on ``path``, computed in a forked child limited to ``time_limit``
    seconds of wall-clock time and ``memory_mb`` MiB of address space; a child over a limit, or
    dying for any reason, gives a rejection whose reason starts with "resource limit". Raises
    OSError when the file cannot be read (as ``certified.checker.check_file``).
    Guarantee: verified only if ``certified.checker.check_file(path)`` is (the backstop only
    ever rejects)."""
    from certified.checker import Verdict

    read_fd, write_fd = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child, which never returns
        os.close(read_fd)
        _child(path, memory_mb, write_fd)
    os.close(write_fd)
    chunks, deadline, finished = [], time.monotonic() + time_limit, False
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([read_fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                continue
            chunk = os.read(read_fd, 1 << 16)
            if not chunk:
                finished = True
                break
            chunks.append(chunk)
    finally:  # over time, or interrupted (Ctrl-C): the child goes too
        os.close(read_fd)
        if not finished:
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    if not finished:
        return Verdict(False, None, f"resource limit: more than {time_limit:g} s (--time-limit)")
    try:
        msg = json.loads(b"".join(chunks)) if chunks else None
    except ValueError:
        msg = None
    if not isinstance(msg, dict) or os.waitstatus_to_exitcode(status) != 0:
        return Verdict(
            False,
            None,
            f"resource limit: the check stopped (memory over {memory_mb} MiB, --memory-limit, "
            "or killed)",
        )
    if "oserror" in msg:
        raise OSError(msg["oserror"], msg["strerror"])
    reason = msg["reason"]
    if not msg["verified"] and "MemoryError" in reason:
        reason = f"resource limit: memory over {memory_mb} MiB (--memory-limit): {reason}"
    return Verdict(bool(msg["verified"]), msg["kind"], reason)
