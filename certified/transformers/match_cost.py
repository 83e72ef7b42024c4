"""The checker's replay charge of a ``transformer-match`` certificate, forecast before its flows
are computed (issue 18 item 1: the producer predicts a replay's cost before it computes, and
when a certificate is out of reach it says so at once, with what to do).

The checker replays every flow of a match file under one shared budget (rule
transformer-match, ``MAX_MATCH_OPS`` = 4 ``MAX_TAYLOR_OPS``), charging each flow
:func:`certified.checker.lohner.replay_cost` of its field, its sets, its steps and its mean
variational order before the replay. The producer knows the fields and the pieces as soon as
the schedule is built, the steps only after the certified flow. Three forecasts, each as soon
as it can be made (proofs/transformers.md §6c):

1. *fewest steps* (no computation): piece by piece the fewest steps the step policy allows
   (``ceil(duration / max_step)``; one a piece without a largest step) at the policy's order
   K and variational order m (the engine's largest);
2. *predicted steps* (:meth:`ReplayForecast.refine`, float64 only: the engine's step control
   without enclosures, :func:`certified.flow.taylor.float64.predict_steps`) of the first flow;
   the other flows' fewest-steps forecasts are scaled by its ratio. Made only when the first
   forecast is within a factor 2 of the budget (coupled flows) or always (chunks of atoms):
   :meth:`ReplayForecast.before`;
3. *charged*: after each certified flow, its exact charge
   (:func:`certified.certificates.field_flow.replay_charge`, the checker's formula on the
   result's hints) replaces its forecast and rescales those of the flows still to come.

Guarantee: none (a forecast: it decides only whether to compute, never a verdict).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

__all__ = ["ReplayForecast", "match_budget", "piece_steps"]


def match_budget() -> int:
    """The replay budget of one transformer-match file: the checker's ``MAX_MATCH_OPS``
    (4 ``MAX_TAYLOR_OPS``). Guarantee: exact."""
    from certified.checker import MAX_MATCH_OPS

    return MAX_MATCH_OPS


def piece_steps(problem: Any, policy: Any) -> list[int]:
    """The fewest steps of each piece under ``policy`` (``ceil(duration / max_step)``; 1 a piece
    without a largest step). Guarantee: a lower bound on the engine's steps."""
    h = getattr(policy, "max_step", None)
    return [max(1, math.ceil(p.duration / h)) if h else 1 for p in problem.pieces]


def _cumulative(problem: Any, n: int, hints: dict) -> list[int]:
    """The checker's charge of the pieces up to each piece, for steps and orders ``hints``."""
    from certified.certificates.field_flow import replay_charge

    expr, out = problem.field.expression, []
    if "jacobian_orders" not in hints:  # one mean order: the charge is linear in the steps
        total = replay_charge(expr, n, hints)
        steps = list(accumulate(len(s) for s in hints["steps"]))
        return [total * s // max(1, steps[-1]) for s in steps]
    for j in range(len(hints["steps"])):
        part = {**hints, "steps": hints["steps"][: j + 1]}
        if "jacobian_orders" in hints:
            part["jacobian_orders"] = hints["jacobian_orders"][: j + 1]
        out.append(replay_charge(expr, n, part))
    return out


def _units(x: float) -> str:
    return f"{x:.2g}"


@dataclass
class ReplayForecast:
    """The running forecast of a match file's replay charge: ``flows`` (per flow: its problem,
    its start points, its name, e.g. ``measures[3]``, and its atoms), ``phases`` (a name per
    piece of the shared schedule), the step ``policy``, the ``budget`` and whether the flows are
    ``coupled`` (one flow per measure) or chunks of atoms of the one-token field.

    Guarantee: none (a forecast)."""

    flows: list
    phases: list[str]
    policy: Any
    budget: int
    coupled: bool
    fewest: list[list[int]] = field(init=False)  # per flow: cumulative charge per piece
    lowest: list[list[int]] = field(init=False)  # the same at variational order 1: a bound
    better: dict = field(init=False, default_factory=dict)  # flow -> predicted cumulative
    charged: list[int] = field(init=False, default_factory=list)  # flows computed so far

    def __post_init__(self) -> None:
        from certified.flow import StepPolicy

        self.policy = self.policy or StepPolicy()
        p = self.policy
        self.fewest, self.lowest = [], []
        for problem, points, *_ in self.flows:
            steps = [[None] * s for s in piece_steps(problem, p)]
            hints = {"steps": steps, "order": p.order, "jacobian_order": p.jacobian_order}
            self.fewest.append(_cumulative(problem, len(points), hints))
            self.lowest.append(_cumulative(problem, len(points), {**hints, "jacobian_order": 1}))

    def _ratio(self) -> float:
        """Charged (or predicted) over the fewest-steps forecast, on the flows that have one."""
        known = {k: c for k, c in enumerate(self.charged)}
        known |= {k: c[-1] for k, c in self.better.items() if k not in known}
        low = sum(self.fewest[k][-1] for k in known)
        return sum(known.values()) / low if known else 1.0

    def cumulative(self, k: int) -> list[float]:
        """Flow k's forecast charge up to each piece (its exact total once charged)."""
        if k in self.better:
            cum = [float(c) for c in self.better[k]]
        else:
            r = self._ratio()
            cum = [c * r for c in self.fewest[k]]
        if k < len(self.charged):
            cum[-1] = float(self.charged[k])
        return cum

    def total(self) -> float:
        """The forecast charge of the whole file."""
        return sum(self.cumulative(k)[-1] for k in range(len(self.flows)))

    def refine(self, k: int = 0) -> None:
        """Forecast 2 for flow k: the steps and variational orders of the engine's step control
        predicted in float64 (no enclosures; about a fortieth of the flow's work)."""
        import numpy as np

        from certified.flow.taylor.float64 import predict_steps

        problem, points, *_ = self.flows[k]
        p, T = self.policy, problem.total_time
        h = p.max_step
        saves = [h * i for i in range(1, math.ceil(T / h) + 1)] if h else [T]
        x0 = np.array([[float(q) for q in row] for row in points], dtype=float)
        hints = predict_steps(problem, x0, saves, order=p.order, jacobian_order=p.jacobian_order,
                              tol=p.tolerance, share=0.01)  # fmt: skip
        self.better[k] = _cumulative(problem, len(points), hints)

    def before(self) -> str | None:
        """Before any flow: None when the certificate looks within reach, else the reason and
        what to do. Refused at once when the fewest steps at variational order 1 (a lower bound
        on the checker's charge at 53 bits: the engine's steps are at most max_step, its
        orders at least 1) pass the budget, or the fewest-steps forecast passes three times
        it (0.55-1.6 times the charge on the coupled flows measured, proofs/transformers.md
        §6c); that forecast under half the budget lets coupled flows go; in between, and
        always for chunks of atoms (no largest step: one step a piece), the first flow's
        predicted steps decide."""
        if (refused := self.refusal("a lower bound from the fewest steps", lower=True)) is not None:
            return refused
        total = self.total()
        if total > 3 * self.budget:
            return self.refusal("the fewest steps")
        if total > self.budget / 2 or not self.coupled:
            self.refine(0)
            return self.refusal("the first flow's steps predicted in float64")
        return None

    def refusal(self, stage: str, lower: bool = False) -> str | None:
        """Before any flow: None when the forecast (``lower``: the lower bound) fits the
        budget, else the reason (where the running total passes the budget: flow, phase,
        piece) and what to do."""
        n = len(self.flows)
        cums = self.lowest if lower else [self.cumulative(k) for k in range(n)]
        total = sum(c[-1] for c in cums)
        if total <= self.budget:
            return None
        run, where = 0.0, ""
        for (*_, name, _), cum in zip(self.flows, cums, strict=True):
            j = next((j for j, c in enumerate(cum) if run + c > self.budget), None)
            if j is not None:
                where = (f"{name}'s flow passes it in the phase '{self.phases[j]}' (piece "
                         f"{j + 1} of {len(cum)}: {_units(run + cum[j])} so far)")  # fmt: skip
                break
            run += cum[-1]
        h = self.policy.max_step
        how = (f"steps of at most {h}" if h else "one step a piece at least") + (
            f", order {self.policy.order}, variational order "
            f"{1 if lower else self.policy.jacobian_order}"
        )
        verb = "needs at least" if lower else "is forecast at"
        return (f"out of the checker's reach: the replay of the {n} flows {verb} "
                f"{_units(total)} units ({stage}: {how}), over the budget "
                f"{_units(self.budget)} of one transformer-match file; {where}; no flow was "
                f"computed. {self._advice()}")  # fmt: skip

    def after(self, k: int, result: Any) -> str | None:
        """After flow k (its certified result): its exact charge; None when the forecast still
        fits the budget, else the reason and what to do."""
        from certified.certificates.field_flow import replay_charge

        problem, points, name, _ = self.flows[k]
        if len(self.charged) == k:
            self.charged.append(replay_charge(problem.field.expression, len(points), result.hints))
        if self.total() <= self.budget:
            return None
        stop = f"flow {k + 2}" if k + 1 < len(self.flows) else "the certificate (its replays)"
        return (f"out of the checker's reach: after {name}'s flow (charged "
                f"{_units(sum(self.charged))} so far) the replay of the {len(self.flows)} "
                f"flows is forecast at {_units(self.total())} units, over the budget "
                f"{_units(self.budget)} of one transformer-match file; stopped before {stop}. "
                f"{self._advice()}")  # fmt: skip

    def _advice(self) -> str:
        """What to do: fewer measures a file, fewer atoms a measure (a coupled flow's cost grows
        like n^3 in its n atoms: graph nodes ~ n^2 d, variational duals ~ n d), smaller chunks."""
        per = max(self.cumulative(k)[-1] for k in range(len(self.flows)))
        atoms, N = max(a for *_, a in self.flows), len(self.flows)
        eps = "; a larger --eps only changes the caps of the last pulls"
        if not self.coupled:
            fit = max(1, int(self.budget // per))
            return (
                f"Split the atoms over several files (about {fit * atoms} a file)"
                if per <= self.budget
                else "Certify fewer atoms a flow (smaller chunks)"
            ) + "."
        two = max(1, int(atoms * (self.budget / (2 * per)) ** (1 / 3)))  # N = 1: no steering
        every = max(1, int(atoms * (self.budget / (N * per)) ** (1 / 3)))
        if 2 * per <= self.budget:
            return (
                f"Split the measures over several files (about {int(self.budget // per)} "
                f"measures of {atoms} atoms a file), or give measures of at most about "
                f"{every} atoms (the cost grows like n^3 in a measure's n atoms){eps}."
            )
        return (
            f"Two measures' flows (a file needs two: the steering of one measure alone "
            f"fails) are forecast at {2 * per / self.budget:.2g} times the "
            f"budget: give measures of fewer atoms (the cost grows like n^3 in a measure's "
            f"n atoms: about {two} atoms for two measures a file, {every} for all {N} "
            f"measures in one file){eps}."
        )
