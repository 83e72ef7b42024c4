"""``certified bench flow``: the tanh ensemble and the expression fields of the flow-engine
issue (validated Taylor with QR-Lohner sets, compiled float64 kernels; CAPD's figures quoted
for comparison) and the ReLU ensembles (vectorised engine; region engine with certificates),
each against a float64 computation of the same thing measured in the same run.
"""

from __future__ import annotations

import time

import numpy as np

from certified.commands.records import Benchmark, best_seconds, compare, rk4

__all__ = ["bench_flow"]


def _tanh_rk4(Ws, As, bs, tau, X0, steps):
    """Float64 classical RK4 for x' = W tanh(A x + b), vectorised over points (baseline)."""
    x = X0.copy()
    for W, A, b in zip(Ws, As, bs, strict=True):

        def f(y, A=A, W=W, b=b):
            return np.tanh(y @ A.T + b) @ W.T

        x = rk4(f, x, tau / steps, steps)
    return x


# CAPD 6.1 (order 20), measured on this machine by the flow-engine issue (issue 10): not rerun here
CAPD = {
    "lorenz T=1": (7.9e-3, 6.6e-12),
    "lorenz T=10": (75e-3, 2.2e-7),
    "vanderpol T=7": (8.8e-3, 3.5e-13),
}


def _rounding_prediction(problem, X0, res) -> dict:
    """The width a float64 estimate predicts for an enclosure that propagates rounding
    through the flow's own derivative: max over points of |DPhi_T(x)|_inf (central differences
    of the float64 Taylor flow on the certified run's steps) x unit roundoff x steps x
    max(1, |Phi_T(x)|); and the certified max width's ratio to it (tightness; issue 18)."""
    from certified.flow.taylor.float64 import float_taylor_flow

    X0 = np.asarray(X0, dtype=float)
    steps, K = res.hints["steps"], res.hints["order"]
    d = X0.shape[1]
    eps = 1e-6 * np.maximum(1.0, np.abs(X0))
    cols = []
    for q in range(d):
        e = np.zeros(d)
        e[q] = 1.0
        plus = float_taylor_flow(problem, X0 + eps[:, q : q + 1] * e, steps, K)
        minus = float_taylor_flow(problem, X0 - eps[:, q : q + 1] * e, steps, K)
        cols.append((plus - minus) / (2 * eps[:, q : q + 1]))
    D = np.stack(cols, axis=2)  # (n, d, d)
    norm = np.max(np.sum(np.abs(D), axis=2), axis=1)
    x = float_taylor_flow(problem, X0, steps, K)
    count = sum(len(s) for s in steps)
    predicted = float(np.max(norm * 2.0**-53 * count * np.maximum(1.0, np.abs(x).max(axis=1))))
    return {"predicted_width": predicted, "width_ratio_to_prediction": res.max_width() / predicted}


def _same_steps(problem, X0, res):
    """The float64 baseline of a certified run: its Taylor steps without enclosures."""
    from certified.flow.taylor.float64 import float_taylor_flow

    return lambda: float_taylor_flow(problem, X0, res.hints["steps"], res.hints["order"])


def bench_flow(quick: bool = False) -> list[Benchmark]:
    """The tanh ensemble (d = 3, p = 8, four pieces of 1/4, N = 1000), the expression fields of
    the flow-engine issue against CAPD's figures (Lorenz, Van der Pol; 1,000 Lorenz points; a
    Lorenz box; 128 bits), then the ReLU ensembles."""
    out = [_bench_tanh(quick)]
    out.extend(_bench_fields(quick))
    out.extend(_bench_relu(quick))
    return out


def _bench_tanh(quick: bool) -> Benchmark:
    from certified.fields import neural_field
    from certified.flow.api import enclose_flow
    from certified.models import Schedule

    rng = np.random.default_rng(7)
    Ws, As, bs = [], [], []
    for _ in range(4):
        Ws.append(rng.standard_normal((3, 8)) / np.sqrt(8))
        As.append(rng.standard_normal((8, 3)))
        bs.append(rng.standard_normal(8))
    X0 = rng.uniform(-1, 1, (1000, 3))
    if quick:
        X0 = X0[:100]
    schedule = Schedule.from_json(
        {
            "dimension": 3,
            "activation": "tanh",
            "pieces": [
                {"duration": "1/4", "W": W.tolist(), "A": A.tolist(), "b": b.tolist()}
                for W, A, b in zip(Ws, As, bs, strict=True)
            ],
        }
    )
    reps = 1 if quick else 3
    result = {}

    def certified_run():
        result["r"] = enclose_flow(schedule, X0)

    b = compare(
        f"tanh ensemble N={len(X0)}, d=3, p=8, 4 pieces (certified, Taylor-Lohner, 53 bits)",
        certified_run,
        "float64 RK4, 256 steps/piece",
        lambda: _tanh_rk4(Ws, As, bs, 0.25, X0, 256),
        reps,
    )
    res = result["r"]
    same = _same_steps(neural_field(schedule), X0, res)
    same_seconds = best_seconds(same, reps)
    x = _tanh_rk4(Ws, As, bs, 0.25, X0, 256)
    extra = dict(b.extra)
    extra.update(
        certified_points=len(X0) if res.status.value == "success" else 0,
        max_width=res.max_width(),
        steps=sum(len(s) for s in res.hints.get("steps", [])),
        float_max_deviation=float(np.max(np.abs(x - res.final.mid()))),
        same_taylor_steps_float64_seconds=same_seconds,
        ratio_to_same_taylor_steps=b.seconds / same_seconds,
        ratio_to_same_taylor_steps_target=3.0,
        **_rounding_prediction(neural_field(schedule), X0, res),
    )
    return Benchmark(b.name, b.seconds, b.baseline, b.baseline_seconds, b.ratio, None, extra)


def _bench_fields(quick: bool) -> list[Benchmark]:
    from certified.fields import lorenz, vanderpol
    from certified.flow.api import enclose_flow
    from certified.flow.options import SaveAt

    out = []
    reps = 1 if quick else 5
    cases = [
        ("lorenz T=1", lorenz(), [15.0, 15.0, 36.0], 1),
        ("vanderpol T=7", vanderpol(), [1.4, 2.4], 7),
    ]
    if not quick:
        cases.insert(1, ("lorenz T=10", lorenz(), [15.0, 15.0, 36.0], 10))
    for name, field, x0, T in cases:
        X = np.array([x0])
        result = {}

        def run(field=field, X=X, T=T, result=result):
            result["r"] = enclose_flow(field, X, save_at=SaveAt(t1=T))

        run()
        res = result["r"]
        seconds, (capd_s, capd_w) = best_seconds(run, reps), CAPD[name]
        base = best_seconds(_same_steps(field.for_time(T), X, res), reps)
        out.append(
            Benchmark(
                f"{name} from {tuple(x0)} (certified, 53 bits)",
                seconds,
                "float64, same Taylor steps",
                base,
                seconds / base,
                None,
                {
                    "max_width": res.max_width(),
                    "steps": sum(len(s) for s in res.hints["steps"]),
                    "capd_seconds": capd_s,
                    "capd_width": capd_w,
                    "ratio_to_capd": seconds / capd_s,
                    "width_ratio_to_capd": res.max_width() / capd_w,
                    **_rounding_prediction(field.for_time(T), X, res),
                },
            )
        )
    out.append(_bench_lorenz_points(quick))
    out.append(_bench_lorenz_box(quick))
    out.append(_bench_lorenz_128())
    return out


def _bench_lorenz_points(quick: bool) -> Benchmark:
    """1,000 Lorenz points to T = 1 (target <= 0.8 s)."""
    from certified.fields import lorenz
    from certified.flow.api import enclose_flow
    from certified.flow.options import SaveAt

    rng = np.random.default_rng(1)
    n = 100 if quick else 1000
    X = np.array([15.0, 15.0, 36.0]) + rng.uniform(-1, 1, (n, 3))
    result = {}

    def many():
        result["r"] = enclose_flow(lorenz(), X, save_at=SaveAt(t1=1))

    seconds = best_seconds(many, 1 if quick else 3)
    res = result["r"]
    base = best_seconds(_same_steps(lorenz().for_time(1), X, res), 3)
    extra = {"max_width": res.max_width(), "target_seconds": 0.8,
             "certified_points": n if res.status.value == "success" else 0,
             **_rounding_prediction(lorenz().for_time(1), X, res)}  # fmt: skip
    name = f"lorenz {n} points in (15, 15, 36) +- 1, T=1 (certified, 53 bits)"
    return Benchmark(name, seconds, "float64, same Taylor steps", base, seconds / base, None,
                     extra)  # fmt: skip


def _bench_lorenz_box(quick: bool) -> Benchmark:
    """A Lorenz box of radius 1e-4 about (15, 15, 36): the enclosure at T = 1 against the
    spread of 10,000 sampled images (overestimation target <= 2)."""
    from certified.arith import Interval
    from certified.fields import lorenz
    from certified.flow.api import enclose_flow
    from certified.flow.options import SaveAt
    from certified.flow.taylor.float64 import float_taylor_flow

    rng = np.random.default_rng(2)
    c = np.array([15.0, 15.0, 36.0])
    box = Interval((c - 1e-4)[None, :], (c + 1e-4)[None, :])
    t0 = time.perf_counter()
    rb = enclose_flow(lorenz(), box, save_at=SaveAt(t1=1))
    seconds = time.perf_counter() - t0
    samples = c + rng.uniform(-1e-4, 1e-4, (1000 if quick else 10_000, 3))
    corners = [[i, j, k] for i in (-1, 1) for j in (-1, 1) for k in (-1, 1)]
    samples[:8] = c + 1e-4 * np.array(corners)
    t1 = time.perf_counter()
    images = float_taylor_flow(lorenz().for_time(1), samples, rb.hints["steps"], 20)
    base = time.perf_counter() - t1
    spread = images.max(axis=0) - images.min(axis=0)
    width = rb.final.width_upper()[0]
    extra = {"max_width": float(width.max()), "sampled_spread": spread.tolist(),
             "overestimation": float(np.max(width / spread)),
             "overestimation_target": 2.0}  # fmt: skip
    name = "lorenz box radius 1e-4 about (15, 15, 36), T=1 (certified, 53 bits)"
    return Benchmark(name, seconds, f"float64 Taylor, {len(samples)} sampled points", base,
                     seconds / base, None, extra)  # fmt: skip


def _bench_lorenz_128() -> Benchmark:
    """Lorenz T = 1 from (15, 15, 36) in arb at 128 bits (target width <= 1e-20)."""
    from certified.fields import lorenz
    from certified.flow.api import enclose_flow
    from certified.flow.options import SaveAt

    x0 = np.array([[15.0, 15.0, 36.0]])
    t0 = time.perf_counter()
    r128 = enclose_flow(lorenz(), x0, save_at=SaveAt(t1=1), prec=128)
    seconds = time.perf_counter() - t0
    base = best_seconds(_same_steps(lorenz().for_time(1), x0, r128), 3)
    steps = sum(len(s) for s in r128.hints["steps"])
    extra = {"max_width": r128.max_width(), "target_width": 1e-20, "steps": steps,
             "order": r128.hints["order"]}  # fmt: skip
    name = "lorenz T=1 from (15, 15, 36) at 128 bits (certified, arb)"
    return Benchmark(name, seconds, "float64, same Taylor steps", base, seconds / base, None,
                     extra)  # fmt: skip


def _relu_rk4(Ws, As, bs, tau, X0, steps):
    """Float64 classical RK4 for x' = W relu(A x + b), vectorised over points (baseline)."""
    x = X0.copy()
    h = tau / steps
    for W, A, b in zip(Ws, As, bs, strict=True):
        At, Wt = A.T, W.T

        def f(y, At=At, Wt=Wt, b=b):
            return np.maximum(y @ At + b, 0.0) @ Wt

        x = rk4(f, x, h, steps)
    return x


def _bench_relu(quick: bool) -> list[Benchmark]:
    """ReLU ensemble of the flow issue: N = 10,000 points, d = p = 16, 64 random non-laminar
    pieces of 1/64 (rng 0: W ~ N(0, 1/p), A ~ N(0, 1), b ~ N(0, 1), X0 ~ U(-1, 1)), certified
    by the vectorised engine against float64 RK4 with 8 steps per piece (the same flow, not
    certified; its error is reported). Then the region engine (arb, 128 bits, certificates) on
    a smaller instance against the float64 version of the same algorithm."""
    from certified.flow.relu import relu_flow, relu_flow_float64
    from certified.flow.relu._vec import relu_flow_vectorised

    rng = np.random.default_rng(0)
    d = p = 16
    L = 4 if quick else 64
    N = 200 if quick else 10_000
    W = [rng.normal(size=(d, p)) / np.sqrt(p) for _ in range(L)]
    A = [rng.normal(size=(p, d)) for _ in range(L)]
    b = [rng.normal(size=p) for _ in range(L)]
    X0 = rng.uniform(-1, 1, size=(N, d))
    tau = f"1/{L}"
    result = {}

    def certified_run():
        result["r"] = relu_flow_vectorised(W, A, b, [tau] * L, X0)

    bench = compare(
        f"relu ensemble N={N}, d=16, p=16, {L} pieces (certified, vectorised, 53 bits)",
        certified_run,
        "float64 RK4, 8 steps/piece",
        lambda: _relu_rk4(W, A, b, 1.0 / L, X0, 8),
        1,
    )
    res = result["r"]
    x8 = _relu_rk4(W, A, b, 1.0 / L, X0, 8)
    mid = res.final.mid()
    extra = {
        "certified_points": N,
        "max_width": res.max_width(),
        "median_width": float(np.median(res.final.width_upper().max(axis=1))),
        "rk4_max_deviation_from_certified_midpoint": float(np.max(np.abs(x8 - mid))),
        "region_steps": res.hints["region_steps"],
        "window_steps": res.hints["window_steps"],
    }
    out = [Benchmark(bench.name, bench.seconds, bench.baseline, bench.baseline_seconds,
                     bench.ratio, None, extra)]  # fmt: skip
    out.extend(_bench_relu_certificate(W, A, b, X0, L, bench.seconds))
    # the region engine (certificates), smaller
    L2, N2 = (2, 10) if quick else (8, 100)
    X2 = X0[:N2]

    def regions_run():
        result["s"] = relu_flow(W[:L2], A[:L2], b[:L2], ["1/8"] * L2, X2)

    b2 = compare(
        f"relu N={N2}, d=16, p=16, {L2} pieces of 1/8 (certified, region engine, prec 128)",
        regions_run,
        "float64, same region algorithm",
        lambda: relu_flow_float64(W[:L2], A[:L2], b[:L2], [0.125] * L2, X2),
        1,
    )
    s = result["s"]
    extra2 = {
        "certified_points": N2 - len(s.hints.get("rejected", {})),
        "max_width": s.max_width(),
    }
    out.append(Benchmark(b2.name, b2.seconds, b2.baseline, b2.baseline_seconds, b2.ratio, None,
                         extra2))  # fmt: skip
    return out


def _run_seconds(args: list[str]):
    """``args`` run in a fresh process (the CLI as a user runs it): (completed run, seconds)."""
    import subprocess
    import sys

    t = time.perf_counter()
    run = subprocess.run([sys.executable, *args], capture_output=True, text=True, check=False)
    return run, time.perf_counter() - t


def _bench_relu_certificate(W, A, b, X0, L: int, vec_seconds: float) -> list[Benchmark]:
    """The judged figure of issue 15 item 1: ``certified flow`` writing a certificate of the
    whole ReLU ensemble (rule relu-vectorised: the vectorised engine, its enclosures widened by
    half as the claims, then the writer's check of the bytes: the one replay of the steps;
    rejected claims fall back to the replayed ones), then ``certified check`` on it,
    each in its own process, against the uncertified vectorised run measured in this run
    (target 3x each; the processes also pay the package's import, ~1-2 s)."""
    import json
    import tempfile
    from pathlib import Path

    d = W[0].shape[0]
    spec = {"dimension": d, "activation": "relu", "pieces": [
        {"duration": f"1/{L}", "W": w.tolist(), "A": a.tolist(), "b": c.tolist()}
        for w, a, c in zip(W, A, b, strict=True)]}  # fmt: skip
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        sched, cert = Path(tmp) / "schedule.json", Path(tmp) / "cert.json"
        sched.write_text(json.dumps(spec))
        for n in (len(X0),):
            pts = Path(tmp) / f"points{n}.json"
            pts.write_text(json.dumps({"X": X0[:n].tolist()}))
            flow = ["-m", "certified.cli", "flow", "--schedule", str(sched), "--points", str(pts)]
            run, t_write = _run_seconds([*flow, "--out", str(cert)])
            verdict = run.stdout.strip().splitlines()[-1:] or [run.stderr.strip()[-200:]]
            written = run.returncode == 0 and cert.exists()
            t_check, checked = None, None
            if written:
                check, t_check = _run_seconds(["-m", "certified.checker", str(cert)])
                checked = check.returncode == 0
            base = vec_seconds * n / len(X0)  # the vectorised run's time for n points
            extra = {"target_ratio_write": 3, "target_ratio_check": 3, "points": n,
                     "certificate_written": written, "verified_by_checker_process": checked,
                     "check_seconds": t_check,
                     "check_ratio": None if t_check is None else t_check / base,
                     "flow_output": verdict[0][:300]}  # fmt: skip
            name = f"certified flow + checker, relu N={n}, d=16, p=16, {L} pieces (own processes)"
            name += "" if written else ": NO certificate (time to the refusal)"
            base_name = (
                f"vectorised engine, uncertified ({'same run' if n == len(X0) else 'per point'})"
            )
            out.append(Benchmark(name, t_write, base_name, base, t_write / base, 3.0, extra))
            cert.unlink(missing_ok=True)
    return out
