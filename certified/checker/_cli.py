"""``python -m certified.checker FILE...`` (also ``certified check FILE...``).

Output (proofs/format.md section 5): one ASCII line per file, in argument order,
``VERIFIED <kind> <file>`` or ``REJECTED <file>: <reason>``. Exit status: 0 all verified, 1 some
rejected, 2 a usage error or an unreadable file (I/O errors take precedence)."""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from . import check_paths


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
