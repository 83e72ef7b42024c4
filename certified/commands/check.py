"""``certified check FILE...``: the trusted checker's own command line, nothing else.

Only ``certified.checker`` is imported (no producer, no numpy): the same lines and exit codes
as ``python -m certified.checker``.
"""

from __future__ import annotations

import argparse
import sys

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the arguments of ``certified check``."""
    parser.add_argument("files", nargs="+", metavar="FILE", help="certificate files")


def run(args: argparse.Namespace) -> int:
    """Check each file; 0 all verified, 1 some rejected, 2 some file unreadable."""
    from certified.checker import check_paths

    return check_paths(args.files, sys.stdout)
