"""Certificates of kind ``interpolation`` (v1, proofs/interpolation.md), producer side (the
``certified interpolate`` command is ``certified/interpolation/command.py``).

The certificate holds the data (``X``, ``Y``), the schedule (the schedule file format), the
claim (``result`` "exact" or "max-error", ``max_error_squared`` = max_n |Φ_T(x_n) − y_n|^2
exactly, switch counts, variant) and, as hints, the phases: consecutive pieces sharing a
normal, which the checker replays as ``x + G(a·x)`` (certified/checker/_interpolation_rule.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from certified.certificates import exact_number
from certified.errors import InputError
from certified.interpolation.construct import Interpolation
from certified.interpolation.verify import InterpolationVerdict, verify_interpolation
from certified.models import Schedule

__all__ = ["interpolation_certificate"]


def _numbers(a: np.ndarray) -> list:
    return np.vectorize(exact_number, otypes=[object])(a).tolist()


def _schedule_json(schedule: Schedule) -> dict[str, Any]:
    return {
        "dimension": schedule.dimension,
        "activation": schedule.activation.value,
        "pieces": [
            {
                "duration": exact_number(p.duration),
                "W": _numbers(p.W),
                "A": _numbers(p.A),
                "b": _numbers(p.b),
            }
            for p in schedule.pieces
        ],
    }


def interpolation_certificate(
    interp: Interpolation,
    schedule: Schedule | None = None,
    verdict: InterpolationVerdict | None = None,
) -> dict[str, Any]:
    """The ``interpolation`` certificate of a construction (or of ``schedule``, e.g. its
    :func:`export_float64`, with the construction's phases).

    Raises
    ------
    InputError
        The schedule is not laminar ReLU (no exact replay: use ``certified flow``).

    Guarantee: none (producer); ``certified check`` decides.
    """
    schedule = interp.schedule if schedule is None else schedule
    if verdict is None:
        verdict = verify_interpolation(interp.X, interp.Y, schedule)
    if verdict.max_error_squared is None or schedule.activation.value != "relu":
        raise InputError(
            "schedule: not laminar ReLU, so no exact interpolation certificate; certify its "
            "flow with `certified flow` instead"
        )
    phases = []
    for phase in interp.hints["phases"]:
        lo, hi = phase["pieces"]
        phases.append({"pieces": [lo, hi], "normal": _numbers(schedule.pieces[lo].A[0])})
    return {
        "kind": "interpolation",
        "version": 1,
        "instance": {
            "X": _numbers(interp.X),
            "Y": _numbers(interp.Y),
            "schedule": _schedule_json(schedule),
        },
        "claim": {
            "result": "exact" if verdict.exact else "max-error",
            "max_error_squared": exact_number(verdict.max_error_squared),
            "switches": schedule.switches,
            "formula_switches": interp.formula_switches,
            "variant": interp.variant,
        },
        "hints": {"phases": phases},
    }
