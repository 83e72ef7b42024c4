"""What a long run shows: a progress bar with ETA on a terminal, a summary at the end (counts
per verdict, slowest instances, UNDECIDED reasons), and plots written beside the table.
"""

from __future__ import annotations

import io
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, TextIO

__all__ = ["ProgressBar", "plot_table", "summary_lines"]


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s" if m else f"{s}s"


class ProgressBar:
    """``bar(done, total)`` redraws ``certified sweep [####....] 120/2500 4.8% ETA 3m12s`` on
    standard error when it is a terminal and ``CI`` is not set; otherwise it writes nothing.

    Guarantee: none (display only)."""

    def __init__(self, stream: TextIO | None = None, width: int = 30) -> None:
        self.stream = sys.stderr if stream is None else stream
        isatty = getattr(self.stream, "isatty", None)
        ci = os.environ.get("CI", "").lower() in ("1", "true", "yes")
        self.enabled = bool(isatty()) and not ci if callable(isatty) else False
        self.width = width
        self.t0 = time.perf_counter()
        self.first: int | None = None

    def __call__(self, done: int, total: int) -> None:
        if self.first is None:  # the first call gives the instances already done (resume)
            self.first, self.t0 = done, time.perf_counter()
        if not self.enabled:
            return
        elapsed = time.perf_counter() - self.t0
        rate = (done - self.first) / elapsed if elapsed > 0 else 0.0
        eta = _duration((total - done) / rate) if rate > 0 else "?"
        filled = self.width * done // max(total, 1)
        bar = "#" * filled + "." * (self.width - filled)
        line = f"\rcertified sweep [{bar}] {done}/{total} {100 * done / max(total, 1):.1f}%"
        end = "\n" if done >= total else ""
        print(f"{line} {rate:.1f}/s ETA {eta} ", end=end, file=self.stream, flush=True)


def summary_lines(table: Any, seconds: float, slowest: int = 5) -> list[str]:
    """The end-of-run summary: counts per verdict, the slowest instances, UNDECIDED reasons,
    failed tasks.

    Guarantee: none (a report of the table)."""
    counts = Counter(table["verdict"]) if len(table) else Counter()
    attrs = table.attrs
    lines = [
        f"{len(table)} instances in {seconds:.1f} s ({attrs.get('computed', 0)} run now, "
        f"{attrs.get('skipped', 0)} already done): "
        + (", ".join(f"{v} {counts[v]}" for v in sorted(counts)) or "no rows")
    ]
    if len(table):
        top = table.nlargest(min(slowest, len(table)), "seconds")
        lines.append("slowest: " + "; ".join(
            f"#{r.index} {r.instance} {r.seconds:.3f} s" for r in top.itertuples()
        ))  # fmt: skip
        undecided = table[table["verdict"] == "UNDECIDED"]
        for reason, n in Counter(undecided["reason"]).most_common(5):
            lines.append(f"UNDECIDED x{n}: {reason}")
    failed = attrs.get("failed") or []
    if failed:
        lines.append(f"FAILED: {len(failed)} instances (no row; re-run to retry): {failed[0][1]}")
    return lines


def _figure_bytes(fig: Any) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    return buffer.getvalue()


def _family_axes(table: Any, ax: Any) -> str | None:
    family = table["family"].iloc[0]
    if family == "interpolate" and {"N", "p", "switches"} <= set(table.columns):
        for p, group in table.groupby("p"):
            mean = group.groupby("N")["switches"].mean()
            ax.plot(mean.index, mean.values, "o-", label=f"p = {p}")
        ax.set(xlabel="N (pairs)", ylabel="switches L", title="interpolation: switches vs N")
        ax.legend()
        return "switches_vs_N.png"
    if family == "lipschitz" and {"n", "ratio_upper"} <= set(table.columns):
        ok = table.dropna(subset=["ratio_upper"])
        ax.scatter(ok["n"], ok["ratio_upper"], s=8, alpha=0.5)
        ax.set(xlabel="n (tokens)", ylabel="certified upper bound / hypothesis bound",
               title=f"attention {table['statement'].iloc[0]}: Lipschitz ratio vs n")  # fmt: skip
        return "lipschitz_ratio_vs_n.png"
    if family == "wasserstein" and {"n", "relative_gap"} <= set(table.columns):
        ax.scatter(table["n"], table["relative_gap"], s=8)
        ax.set(xlabel="n (atoms of mu)", ylabel="relative gap", yscale="log",
               title="Wasserstein: certified relative gap vs n")  # fmt: skip
        return "wasserstein_gap_vs_n.png"
    return None


def plot_table(table: Any, out: Path) -> list[Path]:
    """Plots of a sweep's table in ``out/plots/``: the family's figure (switches against N
    per p; certified Lipschitz ratio against n; Wasserstein gap against n) and the time per
    instance. Nothing (an empty list) without matplotlib or rows.

    Guarantee: none (figures)."""
    try:  # the object-oriented API: no pyplot state, no backend switch in a notebook
        from matplotlib.figure import Figure
    except ImportError:
        return []
    if not len(table):
        return []
    from certified.certificates import write_atomic

    (out / "plots").mkdir(exist_ok=True)
    written = []
    fig = Figure(figsize=(5, 3.5))
    name = _family_axes(table, fig.subplots())
    if name is not None:
        written.append(write_atomic(out / "plots" / name, _figure_bytes(fig)))
    fig = Figure(figsize=(5, 3.5))
    ax = fig.subplots()
    for verdict, group in table.groupby("verdict"):
        ax.hist(group["seconds"], bins=30, alpha=0.6, label=str(verdict))
    ax.set(xlabel="seconds per instance", ylabel="instances", title="time per instance")
    ax.legend()
    written.append(write_atomic(out / "plots" / "seconds.png", _figure_bytes(fig)))
    return written
