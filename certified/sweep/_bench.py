"""``certified bench sweep``: scaling of a sweep from 1 to 2 local worker processes, and the
per-instance overhead of the sweep layer against calling the family directly in a loop.

The workload (issue 12): 2,000 small H2 instances (n in [1, 4] tokens, d = k = 2) and 500
interpolation instances (N in [4, 16] pairs in R^2, p in [1, 4]); ``--quick``: a tenth.
Every figure is the minimum over 2 runs (``--quick``: 1), the project's convention for a
shared machine. Each cluster is started and warmed up (one small sweep: the workers import
the families) before the clock starts, so the figures are the sweep's, not the cluster
start-up's. The direct loop does the same work in this process: the family's check, then
its certificate re-checked by the checker and written (``write_if_accepted``), one file per
instance.
"""

from __future__ import annotations

import logging
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


def _on_cluster(specs: list[dict], workers: int, scratch: Path, repeats: int) -> float:
    from dask.distributed import Client, LocalCluster

    from certified.sweep.run import sweep

    with (
        LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",
            silence_logs=logging.ERROR,
        ) as cluster,
        Client(cluster, set_as_default=False) as client,
    ):
        for k, raw in enumerate(specs):  # warm-up: every worker imports both families
            small = {**raw, "generate": [{**raw["generate"][0], "count": 4 * workers}]}
            sweep(small, scratch / f"warm-{workers}-{k}", client=client)
        best = float("inf")
        for r in range(repeats):  # the least perturbed run (the machine is shared)
            t0 = time.perf_counter()
            for k, raw in enumerate(specs):
                sweep(raw, scratch / f"run-{workers}-{k}-{r}", client=client)
            best = min(best, time.perf_counter() - t0)
        return best


def bench_sweep(quick: bool = False) -> list[Benchmark]:
    """Throughput on 2 worker processes against 1, and the sweep layer's overhead per instance
    against the direct loop (targets: ratio of seconds <= 1/1.8, i.e. throughput >= 1.8x;
    overhead <= 10 ms per instance).

    Guarantee: none (timings)."""
    specs = _specs(quick)
    scratch = Path(tempfile.mkdtemp(prefix="certified-bench-sweep-"))
    try:
        (scratch / "direct").mkdir()
        small = [{**r, "generate": [{**r["generate"][0], "count": 4}]} for r in specs]
        _direct(small, scratch / "direct")  # warm-up: imports, first calls
        repeats = 1 if quick else 2
        runs = [_direct(specs, scratch / "direct") for _ in range(repeats)]
        direct, n = min(t for t, _ in runs), runs[0][1]
        one = _on_cluster(specs, 1, scratch, repeats)
        two = _on_cluster(specs, 2, scratch, repeats)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    context = {"instances": n, "cpus": os.cpu_count(), "load_average_1min": round(load, 2)}
    return [
        Benchmark(
            "sweep: 2 worker processes vs 1",
            two,
            "1 worker",
            one,
            two / one,
            1 / 1.8,
            {"throughput_ratio": round(one / two, 3), **context},
        ),
        Benchmark(
            "sweep: 1 worker vs the direct loop",
            one,
            "direct loop",
            direct,
            one / direct,
            None,
            {
                "overhead_ms_per_instance": round(1e3 * (one - direct) / n, 3),
                "overhead_ms_per_dask_task": round(1e3 * (one - direct) / _tasks(specs, 1), 3),
                "dask_tasks": _tasks(specs, 1),
                "target_ms": 10,
            },
        ),
    ]
