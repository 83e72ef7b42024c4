"""Example schedules of the flow family and its ``certified demo`` step.

Standard library only at module level (numpy and the engines are imported by the step).
"""

from __future__ import annotations

from certified.commands.records import DemoCheck

__all__ = ["LAMINAR_DEMO", "TANH_DEMO", "demo_checks"]

# x' = W tanh(A x + b), two pieces, T = 3/4
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
# laminar ReLU pieces (w_i orthogonal to a_i): exact maps, T = 1
LAMINAR_DEMO = {
    "dimension": 2,
    "activation": "relu",
    "pieces": [
        {"duration": "1/2", "W": [[0, 0], [1, -2]], "A": [[1, 0], [1, 0]], "b": ["1/2", "-1/4"]},
        {"duration": "1/2", "W": [[3, -1], [0, 0]], "A": [[0, 1], [0, 1]], "b": [0, "1/3"]},
    ],
}


def demo_checks() -> list[DemoCheck]:
    """``certified demo`` step: certified flows of :data:`TANH_DEMO` (20 random points) and
    :data:`LAMINAR_DEMO` (3 exact points); their certificates are re-checked by the independent
    checker in memory (``certified demo --out`` writes them).

    Guarantee: passed implies the checker accepted the flow certificate.
    """
    import numpy as np

    from certified.checker import check_certificate
    from certified.flow.api import enclose_flow, flow_certificate_for
    from certified.models import Schedule

    rng = np.random.default_rng(2024)
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
        detail = verdict.reason if verdict is not None else res.message
        certificates = {file: cert} if ok else {}
        name = f"{name} (certificate re-checked)"
        out.append(DemoCheck(name, ok, res.max_width(), detail, certificates))
    out.append(_lorenz_check())
    return out


def _lorenz_check() -> DemoCheck:
    """An expression field (Lorenz, sigma = 10, rho = 28, beta = 8/3) from two points to T = 1,
    certified by the generic rule of the checker (the field travels as data)."""
    import numpy as np

    from certified.checker import check_certificate
    from certified.fields import lorenz
    from certified.flow.api import enclose_flow, flow_certificate_for
    from certified.flow.options import SaveAt

    points = np.array([[15.0, 15.0, 36.0], [1.0, 2.0, 3.0]])
    res = enclose_flow(lorenz(), points, save_at=SaveAt(t1=1))
    cert = flow_certificate_for(lorenz(), points, res) if res.status.value == "success" else None
    verdict = check_certificate(cert) if cert is not None else None
    ok = verdict is not None and verdict.verified
    detail = verdict.reason if verdict is not None else res.message
    name = "Lorenz field, 2 points, T = 1 (certificate re-checked)"
    return DemoCheck(name, ok, res.max_width(), detail, {"lorenz_flow.json": cert} if ok else {})
