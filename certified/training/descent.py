"""Certified gradient descent (issue 21 item 2): every step is certified to decrease J.

From theta_k, the step ``theta_{k+1} = theta_k - lr * mid(grad J(theta_k))`` (rounded to
doubles: any exact point will do, the decrease is what is certified) is kept only when the
upper bound of ``J(theta_{k+1})`` is below the lower bound of ``J(theta_k)``; otherwise the
descent stops with the reason. The trace ``(theta_k, [J_k], [|grad J_k|])`` is a ``training``
certificate (proofs/training.md#descent).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import flint

from certified.arith.exact import fmpq_to_float, to_fmpq
from certified.errors import InputError

__all__ = ["DescentTrace", "certified_descent"]


@dataclass(frozen=True)
class DescentTrace:
    """The certified iterates (``results[k]``: J and grad J at theta_k), the learning rate and
    why the descent stopped ("steps": all steps were certified).

    Guarantee: J(theta_{k+1}) < J(theta_k) for every k (each a certified decrease)."""

    lr: flint.fmpq
    results: tuple
    stopped: str

    @property
    def steps(self) -> int:
        return len(self.results) - 1


def _step(result, lr: flint.fmpq):
    problem = result.problem
    pieces = []
    for piece, grad in zip(problem.pieces, result.gradient, strict=True):
        values = [
            to_fmpq(fmpq_to_float(v - lr * (lo + hi) / 2, "nearest"))
            for v, (lo, hi) in zip(piece.values, grad, strict=True)
        ]
        pieces.append((piece.duration, values))
    return problem.field.on(*pieces)


def certified_descent(
    model: Any,
    points: Any,
    targets: Any,
    *,
    lr: Any,
    steps: int,
    eps: Any = 0,
    prec: int = 53,
    order: int | None = None,
    method: str = "replay",
) -> DescentTrace:
    """Gradient descent with a certified decrease of J at every step (at most ``steps``);
    ``method`` as for :func:`~certified.training.gradient.certified_gradient`.

    Raises InputError for lr <= 0, steps < 1, and the errors of
    :func:`~certified.training.gradient.certified_gradient`.

    Guarantee: ``results[k+1].loss[1] < results[k].loss[0]`` for every k, each result an
    enclosure of J and grad J at its iterate."""
    from certified.models import Schedule
    from certified.training.gradient import certified_gradient

    if isinstance(model, Schedule) and model.activation.is_piecewise_linear:
        raise InputError(
            f"activation: certified descent of {model.activation.value} schedules is not "
            "implemented (only single gradients: certified gradient); use tanh or sigmoid"
        )
    lr = to_fmpq(lr, "--lr")
    if not lr > 0:
        raise InputError(f"--lr: {lr} is not positive; the learning rate must be > 0")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise InputError(f"--steps: expected an integer >= 1, got {steps!r}")
    results = [
        certified_gradient(
            model,
            points,
            targets,
            eps=eps,
            prec=prec,
            order=order,
            for_certificate=True,
            method=method,
        )
    ]
    stopped = "steps"
    for k in range(steps):
        current = results[-1]
        candidate = certified_gradient(
            _step(current, lr), points, targets, eps=eps, prec=prec, order=order, method=method
        )
        if not candidate.loss[1] < current.loss[0]:
            stopped = (
                f"step {k + 1}: the decrease is not certified (J(theta+) <= "
                f"{float(candidate.loss[1]):.17g}, J(theta) >= {float(current.loss[0]):.17g}); "
                "a smaller --lr, or a stationary point"
            )
            break
        results.append(candidate)
    return DescentTrace(lr, tuple(results), stopped)
