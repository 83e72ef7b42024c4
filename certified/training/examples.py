"""Small embedded training problems (demo, notebook, tests)."""

from __future__ import annotations

__all__ = ["small_problem"]


def small_problem(activation: str = "tanh"):
    """A two-piece schedule in R^2 of width 2 and two points with targets (exact decimals).

    Guarantee: exact (data)."""
    import numpy as np

    from certified.arith.exact import to_fmpq_array
    from certified.models import Schedule

    schedule = Schedule.from_json(
        {
            "dimension": 2,
            "activation": activation,
            "pieces": [
                {"duration": "1/2", "W": [["0.5", "-0.3"], ["0.2", "0.8"]],
                 "A": [["1", "0.4"], ["-0.6", "0.9"]], "b": ["0.1", "-0.2"]},
                {"duration": "1/2", "W": [["-0.4", "0.6"], ["0.7", "0.1"]],
                 "A": [["0.3", "-1"], ["0.8", "0.5"]], "b": ["-0.3", "0.2"]},
            ],
        }
    )  # fmt: skip
    X = to_fmpq_array(np.array([["0.5", "-0.25"], ["-0.75", "1"]], dtype=object), "X")
    Y = to_fmpq_array(np.array([["1", "0"], ["0", "1"]], dtype=object), "Y")
    return schedule, X, Y
