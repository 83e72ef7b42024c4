"""``certified demo``: the main job on embedded defaults.

The demo exercises the rigorous arithmetic (enclosures re-checked independently in 256-bit
ball arithmetic, by containment), then runs each family's demo step from the command registry
(certified flows, separation, Wasserstein, attention Lipschitz, interpolation): one instance
each, certified, and its certificate re-checked by the independent checker.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from pathlib import Path

from certified.commands.records import DemoCheck
from certified.commands.registry import demo_steps, load
from certified.verdict import Outcome

__all__ = ["DemoCheck", "add_arguments", "arithmetic_checks", "run", "run_demo", "write_summary"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``certified demo``."""
    parser.add_argument("--out", type=Path, help="directory for the demo's output files")
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")


def run(args: argparse.Namespace) -> int:
    """Run ``certified demo``; 0 if every step passed, 1 otherwise (nothing written then)."""
    from certified import __version__
    from certified._progress import Progress
    from certified.certificates import command_json, print_json

    t0 = time.perf_counter()
    with Progress("demo").stage("building, certifying and re-checking each family"):
        checks = run_demo()
    all_ok = all(c.passed for c in checks)
    path = write_summary(checks, args.out) if args.out is not None and all_ok else None
    seconds = time.perf_counter() - t0
    verdict = Outcome.VERIFIED if all_ok else Outcome.REFUTED
    if args.json:
        checks_json = [
            {"name": c.name, "passed": c.passed, "max_width": repr(c.max_width)} for c in checks
        ]
        scope = "the demo's embedded instances (one of each theorem family)"
        print_json(command_json("demo", verdict, path, seconds, scope=scope, checks=checks_json))
    else:
        print(f"certified {__version__} demo: rigorous arithmetic, re-checked in 256-bit arb")
        for c in checks:
            mark = "ok  " if c.passed else "FAIL"
            print(f"  [{mark}] {c.name:40s} max width {c.max_width:.3e}  {c.detail}")
        print(f"{verdict}: {sum(c.passed for c in checks)}/{len(checks)} checks in {seconds:.2f} s")
        if path is not None:
            print(f"summary written to {path}")
    return 0 if all_ok else 1


def run_demo() -> list[DemoCheck]:
    """Run the demo steps of every registered command, in registry order.

    Guarantee: a passed step means its enclosures contain the 256-bit references, or the
    independent checker accepted its certificate.
    """
    checks: list[DemoCheck] = []
    for ref in demo_steps():
        out = load(ref)()
        checks.extend([out] if isinstance(out, DemoCheck) else out)
    return checks


def _arb_inside(ball, lo: float, hi: float) -> bool:
    from flint import arb

    if not ball.is_finite():
        return False
    return bool(ball.lower() >= arb(lo)) and bool(ball.upper() <= arb(hi))


def arithmetic_checks() -> list[DemoCheck]:
    """The demo's first steps: exact input, elementary functions, softmax and matrix products
    of the vectorised interval arithmetic, each re-checked in 256-bit arb or exactly.

    Guarantee: a passed step means every sampled enclosure contains the 256-bit reference.
    """
    import numpy as np
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
    """Write the demo's certificates and ``demo_summary.json`` into ``out_dir``.

    Every certificate is serialised and its exact bytes re-checked by the checker before any
    file is written; each file is then written atomically
    (:func:`certified.certificates.write_atomic`). If writing fails part-way, the files this
    call created are removed again, so a failure leaves no new file behind.

    Raises
    ------
    CertificateRejectedError
        A certificate's bytes were rejected (nothing written).
    OSError
        ``out_dir`` cannot be created or written.

    Guarantee: none (writing); every certificate written is accepted by the checker.
    """
    from certified.certificates import CertificateRejectedError, certificate_bytes, write_atomic

    files: list[tuple[Path, bytes]] = []
    for c in checks:
        for name, cert in c.certificates.items():
            data, verdict = certificate_bytes(cert)
            if not verdict.verified:
                raise CertificateRejectedError(out_dir / name, verdict)
            files.append((out_dir / name, data))
    payload = {
        "kind": "demo-summary",
        "version": 1,
        "checks": [
            {"name": c.name, "passed": c.passed, "max_width": repr(c.max_width), "detail": c.detail}
            for c in checks
        ],
    }
    target = out_dir / "demo_summary.json"
    files.append((target, json.dumps(payload, indent=2).encode("utf-8")))
    made_dir = not out_dir.exists()
    out_dir.mkdir(parents=True, exist_ok=True)
    created: list[Path] = []
    try:
        for path, data in files:
            existed = path.exists()
            write_atomic(path, data)
            if not existed:
                created.append(path)
    except BaseException:
        for path in created:
            path.unlink(missing_ok=True)
        if made_dir:
            with contextlib.suppress(OSError):
                out_dir.rmdir()  # only if empty
        raise
    return target
