"""The command registry (``registry``) and the records families return to ``certified demo``
and ``certified bench`` (``records``). Standard library only."""

from certified.commands.records import Benchmark, DemoCheck, best_seconds, compare
from certified.commands.registry import (
    COMMANDS,
    CommandRecord,
    bench_suites,
    command,
    demo_steps,
    load,
)

__all__ = [
    "COMMANDS",
    "Benchmark",
    "CommandRecord",
    "DemoCheck",
    "bench_suites",
    "best_seconds",
    "command",
    "compare",
    "demo_steps",
    "load",
]
