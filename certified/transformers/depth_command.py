"""``certified transformer depth-limit --model M.json --tokens X.csv [--json]``: the certified
gap between T residual attention layers and the time-1 flow, T = 1, 2, 4, ..., 1024
(certified.transformers.depth; proofs/transformers_depth.md).
"""

from __future__ import annotations

import argparse

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``certified transformer depth-limit`` (beside the shared ones)."""
    parser.add_argument(
        "--model",
        help='depth-limit: JSON {"pieces": [{"duration", "V", "B" | "heads", ...}], '
        '"geometry"?, "normalisation"?} (the instance format without tokens); stack: the '
        "stack model (proofs/stack.md)",
    )
    parser.add_argument("--tokens", help="depth-limit, stack: tokens, .csv (one per row) or .json")
    parser.add_argument(
        "--max-depth", type=int, default=1024, help="depth-limit: largest T (a power of 2)"
    )


def run(args: argparse.Namespace) -> int:
    """Run ``certified transformer depth-limit``; errors propagate to the CLI (exit 2)."""
    from certified.transformers.depth import run_depth_limit

    return run_depth_limit(args)
