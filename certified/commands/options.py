"""Command-line options shared by several commands (declared once). Standard library only:
the commands import this before any family."""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["add_measure_pair_arguments", "add_normalize_argument"]


def add_normalize_argument(parser: argparse.ArgumentParser, of: str = "each measure") -> None:
    """``--normalize``: the weights of the measures read are divided exactly by their sum
    (``certified.io.read_measure_file``); the certificate holds the rescaled weights and
    records each original sum (``"normalized_from_sum"``)."""
    parser.add_argument(
        "--normalize",
        action="store_true",
        help=f"divide the weights of {of} exactly by their sum (for weights that sum to 1 only "
        "up to rounding); the certificate is about the rescaled measures and records the sums",
    )


def add_measure_pair_arguments(parser: argparse.ArgumentParser) -> None:
    """``--mu F --nu F [--normalize]``: two measure files (``{"points", "weights"}``), read by
    ``certified.io.read_measure`` (``normalize``: weights divided exactly by their sum)."""
    parser.add_argument("--mu", type=Path, required=True, help='measure JSON {"points", "weights"}')
    parser.add_argument("--nu", type=Path, required=True, help="second measure, same dimension")
    add_normalize_argument(parser)
