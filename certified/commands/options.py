"""Command-line options shared by several commands (declared once). Standard library only:
the commands import this before any family."""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["add_measure_pair_arguments"]


def add_measure_pair_arguments(parser: argparse.ArgumentParser) -> None:
    """``--mu F --nu F [--normalize]``: two measure files (``{"points", "weights"}``), read by
    ``certified.io.read_measure`` (``normalize``: weights divided exactly by their sum)."""
    parser.add_argument("--mu", type=Path, required=True, help='measure JSON {"points", "weights"}')
    parser.add_argument("--nu", type=Path, required=True, help="second measure, same dimension")
    parser.add_argument(
        "--normalize",
        action="store_true",
        help="divide each measure's weights exactly by their sum (for weights that sum to 1 "
        "only up to rounding); the certificate is about the rescaled measures",
    )
