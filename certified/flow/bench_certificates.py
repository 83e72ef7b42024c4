"""``certified bench certificates``: certificates at the sizes users work at (issue 18).

The instance of the issue: d = p = 8, eight pieces of duration 1/2, weights N(0, 1/p) and biases
N(0, 1) rounded to 3 decimals, points uniform in [-1, 1]^8; seed 0 and fresh seeds of the same
shape, at 100 and 1,000 points, for ReLU, leaky ReLU, tanh and sigmoid. Each row runs
``certified flow ... --out C --json`` and then ``certified check C``, each in its own process
(the package's import included, as a user pays it), and reports both times, the file size and
the certified max width, against a float64 RK4 of the same points (1/64 steps) in this process.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import numpy as np

from certified.commands.records import Benchmark, rk4

__all__ = ["bench_certificates", "instance"]

UNSCALED_WIDTH = 1e-9  # issue 18: tanh, weights N(0, 1), 100 points, T = 4, at 53 bits
TARGETS = {  # seconds (write, check) and bytes, 100 points (issue 18's table)
    "relu": (3.0, 3.0, None),
    "leaky_relu": (3.0, 3.0, None),
    "tanh": (5.0, 5.0, 2_000_000),
    "sigmoid": (5.0, 5.0, 2_000_000),
}


def instance(activation: str, seed: int, n: int, d: int = 8, pieces: int = 8,
             unscaled: bool = False) -> tuple:  # fmt: skip
    """(schedule JSON, points (n, d)) of issue 18's shape; ``unscaled``: weights N(0, 1)
    instead of N(0, 1/p) (the same draws, the same points)."""
    rng = np.random.default_rng(seed)
    spec = {"dimension": d, "activation": activation, "pieces": []}
    s = 1.0 if unscaled else np.sqrt(d)
    for _ in range(pieces):
        W = np.round(rng.standard_normal((d, d)) / s, 3)
        A = np.round(rng.standard_normal((d, d)) / s, 3)
        b = np.round(rng.standard_normal(d), 3)
        spec["pieces"].append({"duration": "1/2", "W": W.tolist(), "A": A.tolist(),
                               "b": b.tolist()})  # fmt: skip
    return spec, rng.uniform(-1.0, 1.0, (n, d))


def _rk4_seconds(spec: dict, X: np.ndarray) -> float:
    """A float64 RK4 of the schedule from X (steps of 1/64): the baseline of every row."""
    act = spec["activation"]
    sigma = {"relu": lambda z: np.maximum(z, 0), "tanh": np.tanh,
             "leaky_relu": lambda z: np.where(z > 0, z, z / 100),
             "sigmoid": lambda z: 1 / (1 + np.exp(-z))}[act]  # fmt: skip
    t = time.perf_counter()
    x = X.copy()
    for p in spec["pieces"]:
        W, A, b = np.array(p["W"]), np.array(p["A"]), np.array(p["b"])

        def f(y, W=W, A=A, b=b):
            return sigma(y @ A.T + b) @ W.T

        x = rk4(f, x, 1.0 / 64, 32)  # duration 1/2
    return time.perf_counter() - t


def _run(args: list[str]) -> tuple:
    import subprocess
    import sys

    t = time.perf_counter()
    run = subprocess.run([sys.executable, *args], capture_output=True, text=True, check=False)
    return run, time.perf_counter() - t


def _row(activation: str, seed: int, n: int, tmp: Path, unscaled: bool = False) -> Benchmark:
    spec, X = instance(activation, seed, n, unscaled=unscaled)
    sched, pts, cert = tmp / "schedule.json", tmp / "points.json", tmp / "cert.json"
    sched.write_text(json.dumps(spec))
    pts.write_text(json.dumps({"X": X.tolist()}))
    cert.unlink(missing_ok=True)
    flow = ["-m", "certified.cli", "flow", "--schedule", str(sched), "--points", str(pts)]
    run, t_write = _run([*flow, "--out", str(cert), "--json"])
    try:
        out = json.loads(run.stdout)
    except ValueError:
        out = {"verdict": "ERROR", "message": (run.stderr or run.stdout).strip()[-300:]}
    written = run.returncode == 0 and cert.exists()
    t_check = checked = size = None
    if written:
        size = cert.stat().st_size
        check, t_check = _run(["-m", "certified.checker", str(cert)])
        checked = check.returncode == 0
    base = min(_rk4_seconds(spec, X) for _ in range(3))
    tw, tc, tb = TARGETS[activation] if n <= 100 and not unscaled else (None, None, None)
    extra = {
        "points": n, "seed": seed, "verdict": out.get("verdict"),
        "message": (out.get("message") or "")[:300], "write_seconds": t_write,
        "check_seconds": t_check, "verified_by_checker_process": checked, "file_bytes": size,
        "max_width": out.get("max_width"), "target_write_seconds": tw,
        "target_check_seconds": tc, "target_file_bytes": tb,
        "target_max_width": UNSCALED_WIDTH if unscaled else None,
    }  # fmt: skip
    weights = ", weights N(0, 1) unscaled" if unscaled else ""
    name = (f"certificate {activation}, d = p = 8, 8 pieces{weights}, seed {seed}, N = {n} "
            "(own processes)")  # fmt: skip
    return Benchmark(name, t_write, "float64 RK4, steps 1/64", base, t_write / base, None, extra)


def bench_certificates(quick: bool = False) -> list[Benchmark]:
    """Write and check times (own processes), file size and max width of ``certified flow``
    certificates at issue 18's sizes, and the width of the unscaled tanh instance (N(0, 1)
    weights, 100 points: about a minute each way). Quick: seed 0 at 100 points only."""
    rows = []
    plan = [(0, 100)] if quick else [(0, 100), (1, 100), (2, 100), (0, 1000)]
    with tempfile.TemporaryDirectory() as name:
        for activation in TARGETS:
            for seed, n in plan:
                rows.append(_row(activation, seed, n, Path(name)))
        if not quick:
            rows.append(_row("tanh", 0, 100, Path(name), unscaled=True))
    return rows
