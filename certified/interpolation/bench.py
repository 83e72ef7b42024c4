"""``certified bench interpolation``: exact construction and verification at N = 100,000,
d = 16, p = 16 (target 60 s), the checker on the written certificate file in its own process
(target 30 s), and the certified error of the float64 export against a float64 evaluation of
the same flow (target ratio 5)."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

# millions of fmpq objects: the cyclic collector's passes are pure overhead here (the checker
# pauses it the same way while checking; one helper, kept inside the independent checker)
from certified.checker import gc_paused

__all__ = ["bench_interpolation"]


def _timed(f):
    t = time.perf_counter()
    out = f()
    return out, time.perf_counter() - t


def _best(f, repeats: int) -> float:
    f()
    return min(_timed(f)[1] for _ in range(repeats))


def bench_interpolation(quick: bool = False) -> list:
    """Run the suite; figures are wall-clock seconds of one run on this machine.

    Guarantee: none (timings); the verdicts inside are the library's.
    """
    from certified.certificates import dumps_certificate, write_atomic
    from certified.commands.records import Benchmark
    from certified.interpolation import (
        construct_interpolation,
        export_float64,
        verify_interpolation,
    )
    from certified.interpolation.certificate import interpolation_certificate
    from certified.interpolation.fast import (
        certified_error_float64,
        float64_images,
        float_phases,
    )

    N, d, p = (2_000 if quick else 100_000), 16, 16
    rng = np.random.default_rng(240109902)
    X, Y = rng.random((N, d)), rng.random((N, d))
    out = []
    with gc_paused():
        interp, t_construct = _timed(lambda: construct_interpolation(X, Y, p))
        verdict, t_verify = _timed(lambda: verify_interpolation(X, Y, interp.schedule))
        spans = [tuple(h["pieces"]) for h in interp.hints["phases"]]
        # float64 evaluation of the same flow (parameters rounded to nearest), phase by phase
        nearest = [(a, tau, W, brk) for a, tau, W, brk in _nearest_phases(interp.schedule, spans)]
        t_float = _best(lambda: float64_images(nearest, X), 3)
        out.append(
            Benchmark(
                f"construct + exact verify, N={N} d={d} p={p}",
                t_construct + t_verify,
                "float64 flow",
                t_float,
                (t_construct + t_verify) / t_float,
                None,
                {
                    "target_seconds": 60,
                    "construct_seconds": round(t_construct, 3),
                    "verify_seconds": round(t_verify, 3),
                    "exact": verdict.exact,
                    "switches": verdict.switches,
                    "formula_switches": interp.formula_switches,
                },
            )
        )
        cert, t_cert = _timed(lambda: interpolation_certificate(interp, verdict=verdict))
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "interpolation.json"
            t = time.perf_counter()
            # the atomic writer without its in-memory re-check: the checker's own run on this
            # file is what is timed below (a scratch file, deleted with the directory)
            write_atomic(path, dumps_certificate(cert).encode("utf-8"))
            t_write = time.perf_counter() - t
            size = path.stat().st_size
            # the checker as a user runs it: a fresh process reading the file
            run, t_check = _timed(
                lambda: subprocess.run(
                    [sys.executable, "-m", "certified.checker", str(path)],
                    capture_output=True,
                    text=True,
                    check=False,
                )
            )
        out.append(
            Benchmark(
                "checker re-verifies the certificate file (python -m certified.checker)",
                t_check,
                "float64 flow",
                t_float,
                t_check / t_float,
                None,
                {
                    "target_seconds": 30,
                    "verified": run.returncode == 0,
                    "checker_output": run.stdout.strip()[:200],
                    "certificate_bytes": size,
                    "certificate_seconds": round(t_cert, 3),
                    "write_seconds": round(t_write, 3),
                },
            )
        )
        sched, _ = export_float64(interp, method="float64")
        phases = float_phases(sched, spans)
        t_cert = _best(lambda: certified_error_float64(phases, X, Y), 3)
        t_eval = _best(lambda: float64_images(phases, X), 3)
        bound = certified_error_float64(phases, X, Y)
        err = float(np.max(np.linalg.norm(float64_images(phases, X) - Y, axis=1)))
        out.append(
            Benchmark(
                "certified error of the float64 export",
                t_cert,
                "float64 flow",
                t_eval,
                t_cert / t_eval,
                5.0,
                {"certified_max_error": f"{bound:.3e}", "float64_max_error": f"{err:.3e}"},
            )
        )
    return out


def _nearest_phases(schedule, spans):
    """Phases of the exact schedule with every parameter rounded to the nearest double."""
    out = []
    for lo, hi in spans:
        pieces = schedule.pieces[lo:hi]
        tau = np.concatenate([np.full(q.width, q.duration_float) for q in pieces])
        W = np.concatenate([q.W_float.T for q in pieces])
        brk = -np.concatenate([q.b_float for q in pieces])
        order = np.argsort(brk, kind="stable")
        out.append((pieces[0].A_float[0], tau[order], W[order], brk[order]))
    return out
