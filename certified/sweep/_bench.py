"""``certified bench sweep``: scaling of a sweep from 1 to 2 local worker processes, the
per-instance overhead of the sweep layer against calling the family directly in a loop, and
the cost of a time budget.

The workload (issue 12): 2,000 small H2 instances (n in [1, 4] tokens, d = k = 2) and 500
interpolation instances (N in [4, 16] pairs in R^2, p in [1, 4]); ``--quick``: a tenth.
Every figure is the minimum over 2 runs (``--quick``: 1), the project's convention for a
shared machine. Each cluster is started and warmed up (one small sweep: the workers import
the families) before the clock starts, so the figures are the sweep's, not the cluster
start-up's. The direct loop does the same work in this process: the instance drawn and run
by the family, then its certificate re-checked by the checker and written
(``write_if_accepted``), one file per instance.

Beside the wall-clock figures (which other processes perturb), each run reports the CPU
seconds of the coordinator (this process: client, scheduler and nannies) and of the workers,
and the 1-minute load average: on a loaded machine the CPU split says what the sweep layer
costs, whatever the wall clock.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

from certified.commands.records import Benchmark

__all__ = ["bench_sweep"]


def _specs(quick: bool) -> list[dict]:
    h2, interp = (200, 50) if quick else (2000, 500)
    return [
        {
            "family": "lipschitz",
            "statement": "H2",
            "generate": [{"kind": "random", "seed": 12, "count": h2, "n": [1, 4], "d": 2, "k": 2}],
        },
        {
            "family": "interpolate",
            "generate": [
                {"kind": "random", "seed": 12, "count": interp, "N": [4, 16], "d": 2, "p": [1, 4]}
            ],
        },
    ]


def _load() -> float:
    return round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else float("nan")


def _direct(specs: list[dict], scratch: Path) -> tuple[float, int]:
    from certified.certificates import write_if_accepted
    from certified.sweep.spec import load_spec

    n, t0 = 0, time.perf_counter()
    for k, raw in enumerate(specs):
        spec = load_spec(raw)
        fam = spec.adapter()
        for inst in spec.instances():
            result = fam.run(inst.params, None, spec.statement, spec.options)
            if result.certificate is not None:
                write_if_accepted(scratch / f"{k}-{inst.index}.json", result.certificate)
            n += 1
    return time.perf_counter() - t0, n


def _tasks(specs: list[dict], workers: int) -> int:
    from certified.sweep.run import _batches
    from certified.sweep.spec import load_spec

    return sum(len(_batches(load_spec(r).instances(), None, workers)) for r in specs)


def _worker_cpu(client) -> float:
    return sum(client.run(time.process_time).values())


def _on_cluster(
    specs: list[dict], workers: int, scratch: Path, repeats: int, budget: float | None = None
) -> dict:
    """The best run's wall seconds, its CPU split and the load average at its end."""
    from dask.distributed import Client

    from certified.sweep.run import local_cluster, sweep

    if budget is not None:
        specs = [{**r, "options": {**r.get("options", {}), "time_budget": budget}} for r in specs]
    tag = f"{workers}-{budget}"
    with local_cluster(workers) as cluster, Client(cluster, set_as_default=False) as client:
        for k, raw in enumerate(specs):  # warm-up: every worker imports both families
            small = {**raw, "generate": [{**raw["generate"][0], "count": 4 * workers}]}
            sweep(small, scratch / f"warm-{tag}-{k}", client=client)
        best: dict = {"seconds": float("inf")}
        for r in range(repeats):  # the least perturbed run (the machine is shared)
            c0, w0, t0 = time.process_time(), _worker_cpu(client), time.perf_counter()
            for k, raw in enumerate(specs):
                sweep(raw, scratch / f"run-{tag}-{k}-{r}", client=client)
            seconds = time.perf_counter() - t0
            if seconds < best["seconds"]:
                best = {
                    "seconds": seconds,
                    "coordinator_cpu_seconds": round(time.process_time() - c0, 3),
                    "worker_cpu_seconds": round(_worker_cpu(client) - w0, 3),
                    "load_average_1min": _load(),
                }
        return best


def bench_sweep(quick: bool = False) -> list[Benchmark]:
    """Throughput on 2 worker processes against 1, the sweep layer's overhead per instance
    against the direct loop (targets: ratio of seconds <= 1/1.8, i.e. throughput >= 1.8x;
    overhead <= 10 ms per instance), and the cost of ``time_budget`` (a forked child per
    batch) on 1 worker.

    Guarantee: none (timings)."""
    specs = _specs(quick)
    scratch = Path(tempfile.mkdtemp(prefix="certified-bench-sweep-"))
    try:
        (scratch / "direct").mkdir()
        small = [{**r, "generate": [{**r["generate"][0], "count": 4}]} for r in specs]
        _direct(small, scratch / "direct")  # warm-up: imports, first calls
        repeats = 1 if quick else 2
        c0 = time.process_time()
        runs = [_direct(specs, scratch / "direct") for _ in range(repeats)]
        direct_cpu = (time.process_time() - c0) / repeats
        direct, n = min(t for t, _ in runs), runs[0][1]
        one = _on_cluster(specs, 1, scratch, repeats)
        two = _on_cluster(specs, 2, scratch, repeats)
        budget = _on_cluster(specs, 1, scratch, repeats, budget=600.0)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    context = {"instances": n, "cpus": os.cpu_count()}
    tasks_1, tasks_2 = _tasks(specs, 1), _tasks(specs, 2)
    return [
        Benchmark(
            "sweep: 2 worker processes vs 1",
            two["seconds"],
            "1 worker",
            one["seconds"],
            two["seconds"] / one["seconds"],
            1 / 1.8,
            {
                "throughput_ratio": round(one["seconds"] / two["seconds"], 3),
                **context,
                "dask_tasks": tasks_2,
                **{k: v for k, v in two.items() if k != "seconds"},
                "baseline_cpu": {k: v for k, v in one.items() if k != "seconds"},
            },
        ),
        Benchmark(
            "sweep: 1 worker vs the direct loop",
            one["seconds"],
            "direct loop",
            direct,
            one["seconds"] / direct,
            None,
            {
                "overhead_ms_per_instance": round(1e3 * (one["seconds"] - direct) / n, 3),
                "overhead_ms_per_dask_task": round(1e3 * (one["seconds"] - direct) / tasks_1, 3),
                "dask_tasks": tasks_1,
                "target_ms": 10,
                "direct_cpu_seconds": round(direct_cpu, 3),
                "load_average_1min": _load(),
            },
        ),
        Benchmark(
            "sweep: time_budget (a forked child per task) vs none, 1 worker",
            budget["seconds"],
            "1 worker, no budget",
            one["seconds"],
            budget["seconds"] / one["seconds"],
            None,
            {
                "overhead_ms_per_instance": round(
                    1e3 * (budget["seconds"] - one["seconds"]) / n, 3
                ),
                "overhead_ms_per_dask_task": round(
                    1e3 * (budget["seconds"] - one["seconds"]) / tasks_1, 3
                ),
                **{k: v for k, v in budget.items() if k != "seconds"},
            },
        ),
    ]
