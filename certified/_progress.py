"""Progress of long CLI runs: stage messages on a terminal, nothing otherwise.

design.md (command line): "Long runs show progress on a terminal and stay quiet otherwise."
Messages go to standard error, and only when it is a terminal, so that ``--json`` output,
pipes, files and CI logs are unchanged.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from typing import TextIO

__all__ = ["Progress"]


class Progress:
    """``with Progress("interpolate").stage("constructing"): ...`` prints
    ``certified interpolate: constructing ... 10.1 s`` on a terminal (standard error).

    Guarantee: none (display only); never writes when the stream is not a terminal.
    """

    def __init__(self, command: str, stream: TextIO | None = None) -> None:
        self.stream = sys.stderr if stream is None else stream
        isatty = getattr(self.stream, "isatty", None)
        self.enabled = bool(isatty()) if callable(isatty) else False
        self.command = command

    @contextlib.contextmanager
    def stage(self, what: str) -> Iterator[None]:
        """Show ``what`` while the block runs, then its duration (also if it raises)."""
        if self.enabled:
            print(f"certified {self.command}: {what} ...", end="", file=self.stream, flush=True)
        t0 = time.perf_counter()
        try:
            yield
        finally:
            if self.enabled:
                print(f" {time.perf_counter() - t0:.1f} s", file=self.stream, flush=True)
