"""``certified demo``: the main job on embedded defaults.

The demo exercises the rigorous arithmetic (enclosures re-checked independently in 256-bit
ball arithmetic, by containment) and certified flows (a tanh schedule and a laminar ReLU
schedule, whose certificates the independent checker re-verifies). Later releases add one
theorem instance per family (interpolation, attention), certified and re-checked.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["DemoCheck", "run_demo"]


@dataclass(frozen=True)
class DemoCheck:
    """One demo step: what was enclosed, whether the independent re-check passed, and the
    largest enclosure width."""

    name: str
    passed: bool
    max_width: float
    detail: str


def _arb_inside(ball, lo: float, hi: float) -> bool:
    from flint import arb

    if not ball.is_finite():
        return False
    return bool(ball.lower() >= arb(lo)) and bool(ball.upper() <= arb(hi))


def run_demo() -> list[DemoCheck]:
    """Run the demo steps and return their results.

    Guarantee: a passed step means every sampled enclosure contains the 256-bit reference.
    """
    from flint import arb, fmpq

    from certified.arith import Interval
    from certified.arith import interval as iv
    from certified.arith.ball import precision

    rng = np.random.default_rng(2024)
    checks: list[DemoCheck] = []

    # 1. exact decimal input: the tightest enclosure of 1/10, which the double 0.1 is not
    tenth = Interval.from_exact("1/10")
    q = fmpq(1, 10)
    ok = fmpq(*float(tenth.lo).as_integer_ratio()) < q < fmpq(*float(tenth.hi).as_integer_ratio())
    checks.append(
        DemoCheck(
            "exact input 1/10",
            ok,
            float(tenth.width_upper()),
            f"[{float(tenth.lo)!r}, {float(tenth.hi)!r}] contains 1/10 exactly",
        )
    )

    # 2. elementary functions on 100,000 points, re-checked in arb at 256 bits on a sample
    x = rng.uniform(-30.0, 30.0, 100_000)
    X = Interval(x)
    sample = rng.choice(x.size, 200, replace=False)
    for name, f, ref in [
        ("exp", iv.exp, lambda b: b.exp()),
        ("tanh", iv.tanh, lambda b: b.tanh()),
        ("sigmoid", iv.sigmoid, lambda b: 1 / (1 + (-b).exp())),
        ("softplus", iv.softplus, lambda b: (1 + b.exp()).log()),
    ]:
        Y = f(X)
        with precision(256):
            ok = all(_arb_inside(ref(arb(float(x[i]))), Y.lo[i], Y.hi[i]) for i in sample)
        rel = np.max(Y.width_upper() / np.maximum(np.abs(Y.mid()), 1e-300))
        checks.append(DemoCheck(f"{name} on 100,000 points", ok, float(rel), "relative width, max"))

    # 3. softmax of interval logits: enclosures re-checked at sampled points of the box
    L = Interval(rng.standard_normal((50, 8)) - 1e-6, None)
    L = Interval(L.lo, L.lo + 2e-6)
    S = iv.softmax(L, axis=1)
    ok = True
    with precision(256):
        for i in range(0, 50, 7):
            pts = [arb(float(v)) for v in L.mid()[i]]
            den = sum(p.exp() for p in pts)
            ok &= all(_arb_inside(pts[j].exp() / den, S.lo[i, j], S.hi[i, j]) for j in range(8))
    ok &= bool(np.all(S.lo.sum(axis=1) <= 1.0) and np.all(S.hi.sum(axis=1) >= 1.0))
    checks.append(
        DemoCheck("softmax of 50 interval logit vectors", ok, float(S.width_upper().max()), "")
    )

    # 4. interval matrix product, re-checked exactly (rationals) at the midpoints
    a = rng.standard_normal((64, 64))
    b = rng.standard_normal((64, 300))
    C = Interval(a) @ Interval(b - 1e-9, b + 1e-9)
    ok = True
    for i, j in [(0, 0), (5, 17), (63, 299), (31, 150)]:
        exact = sum(
            fmpq(*float(a[i, k]).as_integer_ratio()) * fmpq(*float(b[k, j]).as_integer_ratio())
            for k in range(64)
        )
        lo = fmpq(*float(C.lo[i, j]).as_integer_ratio())
        hi = fmpq(*float(C.hi[i, j]).as_integer_ratio())
        ok &= lo <= exact <= hi
    checks.append(DemoCheck("matrix product 64x64 @ 64x300", ok, float(C.width_upper().max()), ""))
    checks.extend(_flow_checks(rng))
    from certified.moments.command import demo_check as separation_demo_check

    checks.append(separation_demo_check())
    checks.append(_wasserstein_check())
    from certified.attention.command import demo_check as lipschitz_demo_check

    checks.append(lipschitz_demo_check())
    from certified.interpolation.certificate import demo_check as interpolation_demo_check

    checks.append(interpolation_demo_check())
    return checks


TANH_DEMO = {
    "dimension": 2,
    "activation": "tanh",
    "pieces": [
        {
            "duration": "1/2",
            "W": [[1, "-1/2"], ["1/3", 1]],
            "A": [[1, 0], [0, 1]],
            "b": [0, "1/10"],
        },
        {"duration": "1/4", "W": [[-1, 0], [0, 1]], "A": [[1, 1], [1, -1]], "b": ["1/5", 0]},
    ],
}
LAMINAR_DEMO = {
    "dimension": 2,
    "activation": "relu",
    "pieces": [
        {"duration": "1/2", "W": [[0, 0], [1, -2]], "A": [[1, 0], [1, 0]], "b": ["1/2", "-1/4"]},
        {"duration": "1/2", "W": [[3, -1], [0, 0]], "A": [[0, 1], [0, 1]], "b": [0, "1/3"]},
    ],
}
CERTIFICATES: dict[str, dict] = {}


def _flow_checks(rng: np.random.Generator) -> list[DemoCheck]:
    """Certified flows of a tanh and a laminar ReLU schedule; their certificates are re-checked
    by the independent checker (in memory; ``write_summary`` writes them with --out)."""
    from certified.checker import check_certificate
    from certified.flow.api import enclose_flow, flow_certificate_for
    from certified.models import Schedule

    exact_points = np.array([["1/3", "1/5"], ["-1", "2"], ["0", "0"]], dtype=object)
    out = []
    for name, file, spec, points in [
        ("tanh flow, 20 points", "tanh_flow.json", TANH_DEMO, rng.uniform(-1, 1, (20, 2))),
        ("laminar ReLU flow, exact", "laminar_flow.json", LAMINAR_DEMO, exact_points),
    ]:
        schedule = Schedule.from_json(spec)
        res = enclose_flow(schedule, points)
        cert = flow_certificate_for(schedule, points, res)
        verdict = check_certificate(cert) if cert is not None else None
        ok = verdict is not None and verdict.verified
        if ok:
            CERTIFICATES[file] = cert
        detail = verdict.reason if verdict is not None else res.message
        out.append(DemoCheck(f"{name} (certificate re-checked)", ok, res.max_width(), detail))
    return out


def write_summary(checks: list[DemoCheck], out_dir: Path) -> Path:
    """Write ``demo_summary.json`` atomically (a temporary file renamed into place)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / "demo_summary.json"
    payload = {
        "kind": "demo-summary",
        "version": 1,
        "checks": [
            {"name": c.name, "passed": c.passed, "max_width": repr(c.max_width), "detail": c.detail}
            for c in checks
        ],
    }
    from certified.certificates import write_certificate

    for name, cert in CERTIFICATES.items():
        write_certificate(out_dir / name, cert)
    fd, tmp = tempfile.mkstemp(dir=out_dir, prefix=".demo_summary.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(payload, fh, indent=2)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def _wasserstein_check() -> DemoCheck:
    """A certified W2 enclosure between two uniform clouds of 40 points in R^3, its certificate
    re-checked by the independent checker (written as ``wasserstein.json`` with --out)."""
    from certified.checker import check_certificate
    from certified.transport import Measure, wasserstein, wasserstein_certificate

    rng = np.random.default_rng(6)
    mu = Measure(rng.standard_normal((40, 3)))
    nu = Measure(rng.standard_normal((40, 3)) + 0.5)
    e = wasserstein(mu, nu, 2)
    cert = wasserstein_certificate(e)
    verdict = check_certificate(cert)
    if verdict.verified:
        CERTIFICATES["wasserstein.json"] = cert
    detail = f"W2 in [{float(e.lower):.15g}, {float(e.upper):.15g}]; {verdict.reason}"
    name = "W2, 40 + 40 atoms (certificate re-checked)"
    return DemoCheck(name, verdict.verified, float(e.gap), detail)
