"""``certified demo``: the main job on embedded defaults.

For now (foundation release) the demo exercises the rigorous arithmetic: it computes
enclosures with the vectorised interval layer and re-checks each one independently in 256-bit
ball arithmetic (python-flint), by containment. Later releases add one theorem instance per
family (flows, interpolation, attention), certified and re-checked.
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
    return checks


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
    fd, tmp = tempfile.mkstemp(dir=out_dir, prefix=".demo_summary.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(payload, fh, indent=2)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target
