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
