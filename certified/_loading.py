"""Signals while the ``certified`` command is still importing (nothing has begun): one line and
the documented exit code, not the interpreter's traceback (issue 11's interrupt trials: on a
loaded machine the imports take seconds). Installed as early as the package can: by
``certified/__init__.py`` when the process is the command, and again by ``certified.cli``."""

from __future__ import annotations

import os
import signal


def while_loading(signum, frame):
    word, code = ("interrupted", 130) if signum == signal.SIGINT else ("terminated", 143)
    os.write(2, f"certified: {word} (no partial or temporary file is left)\n".encode())
    os._exit(code)


def install() -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(sig) is not signal.SIG_IGN:  # (nohup, background jobs)
            signal.signal(sig, while_loading)


def keep_freed_memory() -> None:
    """Speed only, process-wide (so the command line calls it, not the library): glibc keeps
    up to 512 MB freed and mmaps only above 32 MB (the checker's float64 replays allocate
    temporaries of a few MB: 178,000 page faults in issue 18's 100-point tanh replay, 4,000
    so, 10-20 % of its time). Elsewhere (no glibc): nothing."""
    import contextlib
    import ctypes

    with contextlib.suppress(OSError, TypeError, AttributeError):
        libc = ctypes.CDLL(None)
        libc.mallopt(-3, 32 << 20), libc.mallopt(-1, 512 << 20)  # M_MMAP_, M_TRIM_THRESHOLD
