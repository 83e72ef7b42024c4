"""``python -m certified.checker FILE...`` (also ``certified check FILE...``).

Output (proofs/format.md section 5): exactly one ASCII line per file, in argument order,

    VERIFIED <kind> <file>
    REJECTED <file>: <reason>

Exit status: 0 if every file is verified, 1 if some file is rejected, 2 on a usage error or
if some file cannot be read (I/O errors take precedence over rejections).
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from . import Verdict, check_file

_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F)}


def one_line(text: str) -> str:
    """``text`` as printable ASCII on one line (escapes for control and non-ASCII chars)."""
    return text.encode("ascii", "backslashreplace").decode("ascii").translate(_CONTROL)


def verdict_line(name: str, verdict: Verdict) -> str:
    """The output line of one file."""
    if verdict.verified:
        return f"VERIFIED {verdict.kind} {one_line(name)}"
    return f"REJECTED {one_line(name)}: {one_line(verdict.reason)}"


def check_paths(paths: list[str], out: TextIO) -> int:
    """Check each file, print its line on ``out``, return the exit status. On a terminal,
    standard error shows which file is being checked (large files take seconds)."""
    status = 0
    tty = sys.stderr.isatty()
    for path in paths:
        if tty:
            print(f"checking {one_line(path)} ...", file=sys.stderr, flush=True)
        try:
            verdict = check_file(path)
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            print(f"REJECTED {one_line(path)}: I/O error: {one_line(reason)}", file=out, flush=True)
            status = 2
            continue
        print(verdict_line(path, verdict), file=out, flush=True)
        if not verdict.verified:
            status = max(status, 1)
    return status


def main(argv: list[str] | None = None, out: TextIO | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m certified.checker",
        description="Re-check certificate files (format: proofs/format.md). Prints one line "
        "per file; exit 0 all verified, 1 some rejected, 2 usage or I/O error.",
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="certificate files")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help exits 0, usage errors exit 2
        return 0 if exc.code == 0 else 2
    return check_paths(args.files, sys.stdout if out is None else out)
