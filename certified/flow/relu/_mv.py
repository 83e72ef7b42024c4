"""Boxes of ReLU flows in mean-value form (rule relu-vectorised, ``hints.form`` "mean-value").

A box is carried as a zonotope ``c + G xi + [-e, e]`` (proofs/bounds.md#relu-mv): the centre by
the point steps of the vectorised engine, ``G`` by the flow of the midpoint slopes, each
neuron's slope being exactly 1 or alpha where its sign is decided over the whole set during the
step, and an interval (narrower as the centre is farther from the plane) where it is not, whose
effect is one more generator along ``w_i``.
The checker's replay (``certified.checker.flow.replay_relu_vectorised``) is the only
implementation of that arithmetic: this module only chooses where steps end (untrusted). It
starts from the centre's own steps, then cuts every step on which some neuron was undecided
into ``parts`` equal steps (the slope interval then acts for a shorter time), ``refine``
times; a region step that the replay does not certify is halved, then made a window, and a
box whose steps keep failing (``repairs`` times) takes window steps only, which always hold.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import flint
import numpy as np

from certified.errors import InputError

__all__ = [
    "MeanValueBoxes",
    "certificate_of_result",
    "mean_value_boxes",
    "mean_value_certificate",
    "mean_value_result",
]


@dataclass
class MeanValueBoxes:
    """The hints of a mean-value certificate and the replay's enclosures of the boxes."""

    hints: dict  # {"method", "form", "pieces", "steps"}
    lo: np.ndarray  # (n, d) doubles, enclosures of the images of the boxes
    hi: np.ndarray
    steps: int  # steps taken, all sets and pieces
    undecided: int  # set-steps with an undecided neuron, after refinement
    per_box: np.ndarray  # (n,) the same per box


def _tokens(text: str, hint: dict, tau: flint.fmpq) -> list[list]:
    k = hint["tick"]
    left = int((tau * flint.fmpq(2) ** k).floor() if k >= 0 else (tau / 2 ** (-k)).floor())
    out = []
    for m in re.finditer(r"R|([rw])([0-9]+)", text):
        kind, t = ("r", min(hint["step"], left)) if m[0] == "R" else (m[1], int(m[2]))
        out.append([kind, t])
        left -= t
    return out


def _text(toks: list[list], hint: dict) -> str:
    return "".join("R" if k == "r" and t == hint["step"] else f"{k}{t}" for k, t in toks)


def mean_value_boxes(schedule, lo: np.ndarray, hi: np.ndarray, *, refine: int = 2,
                     parts: int = 8, repairs: int = 24) -> MeanValueBoxes:  # fmt: skip
    """Enclosures of the images of the double boxes ``[lo, hi]`` (n x d) in mean-value form,
    with the hints that let the checker replay them.

    Raises
    ------
    InputError
        The replay is over the checker's resource limit, or a step could not be repaired.

    Guarantee: ``Phi_T(box n)`` lies in ``[lo[n], hi[n]]`` (the checker's own replay).
    """
    from certified.checker import Rejected
    from certified.checker.flow import Piece, replay_relu_vectorised
    from certified.flow.api import enclose_flow

    lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
    n, d = lo.shape
    centres = 0.5 * (lo + hi)
    plan = enclose_flow(schedule, centres, method="vectorised").hints["plan"]
    js = schedule.to_json()
    pieces = [Piece(p, f"pieces[{j}]", d) for j, p in enumerate(js["pieces"])]
    al = flint.fmpq(0) if schedule.activation.value == "relu" else schedule.slope
    taus = [p.duration for p in schedule.pieces]
    toks = [
        [_tokens(part, h, t) for part, h, t in zip(s.split("/"), plan["pieces"], taus, strict=True)]
        for s in plan["steps"]
    ]

    def exact(v: float) -> flint.fmpq:
        return flint.fmpq(*v.as_integer_ratio())

    pairs = zip(lo.tolist(), hi.tolist(), strict=True)
    sets = [[(exact(a), exact(b)) for a, b in zip(x, y, strict=True)] for x, y in pairs]
    base = {"method": "relu-vectorised", "form": "mean-value", "pieces": plan["pieces"]}
    out_lo, out_hi = np.empty((n, d)), np.empty((n, d))
    todo, tries, passes, per = list(range(n)), [0] * n, [0] * n, np.zeros(n, dtype=np.int64)
    for _ in range(repairs + refine + 3):
        steps = ["/".join(_text(t, h) for t, h in zip(toks[q], plan["pieces"], strict=True))
                 for q in todo]  # fmt: skip
        trace: list = []
        try:
            a, b, failed = replay_relu_vectorised(
                pieces, [sets[q] for q in todo], {**base, "steps": steps}, al, True, trace
            )
        except Rejected as exc:
            raise InputError(f"no certificate: the checker would refuse it ({exc})") from None
        out_lo[todo], out_hi[todo] = a, b
        again = set()
        for i, (j, s) in failed.items():  # repairs: halve a region step, then a window
            q = todo[i]
            tries[q] += 1
            kind, t = toks[q][j][s]
            toks[q][j][s : s + 1] = (
                [["r", t // 2], ["r", t - t // 2]] if tries[q] <= 3 and t >= 2 else [["w", t]]
            )
            again.add(q)
        per[todo] = 0
        for j, log in enumerate(trace):  # refinement: cut steps with undecided neurons
            cuts: dict = {}
            for s, sel, count in log:
                for i in sel[count > 0].tolist():
                    q = todo[i]
                    per[q] += 1
                    if passes[q] < refine and q not in again and s < len(toks[q][j]):
                        cuts.setdefault(q, []).append(s)
            for q, ss in cuts.items():
                for s in sorted(ss, reverse=True):
                    kind, t = toks[q][j][s]
                    m = min(parts, t)
                    if kind == "r" and m > 1:
                        toks[q][j][s : s + 1] = [["r", t // m + (r < t % m)] for r in range(m)]
                again.add(q)
        for q in again:
            passes[q] += 1
        todo = sorted(again)
        if not todo:
            break
        for q in todo:  # a box whose region steps keep failing: windows only (never fail)
            if tries[q] > repairs:
                toks[q] = [[["w", t] for _, t in part] for part in toks[q]]
                tries[q] = -(10**9)
    if todo:  # not reached: window steps always hold
        raise InputError(f"no certificate: {len(todo)} boxes still fail after {repairs} repairs")
    steps = ["/".join(_text(t, h) for t, h in zip(tq, plan["pieces"], strict=True)) for tq in toks]
    total = sum(len(t) for tq in toks for t in tq)
    return MeanValueBoxes({**base, "steps": steps}, out_lo, out_hi, total, int(per.sum()), per)


def mean_value_result(schedule, X0, max_splits: int = 0, **options):
    """The images of the boxes ``X0`` (an :class:`~certified.arith.Interval` of doubles,
    (n, d)) in mean-value form as a :class:`~certified.flow.result.FlowEnclosure`, or None when
    a parameter is not a double. With ``max_splits``, boxes that straddled planes are bisected
    (:func:`certified.flow.relu._split.split_relu_boxes`) and each box's enclosure is the hull
    of its leaves'. The enclosures are the checker's replays widened by 2^-30 of their width
    (BLAS may sum in another order on another machine); ``hints["plan"]`` holds the
    certificate's hints (``form``, ``pieces``, ``steps`` per leaf, ``partition``).

    Guarantee: ``enclosures[0, n]`` contains ``Phi_T(x)`` for every x in box n."""
    from certified.arith import Interval
    from certified.arith.exact import fmpq_to_str
    from certified.certificates.flow import exact_number
    from certified.flow.relu._split import split_relu_boxes
    from certified.flow.result import FlowEnclosure, FlowStatus

    if not all(p.parameters_float_exact for p in schedule.pieces):
        return None
    lo, hi = np.asarray(X0.lo, dtype=float), np.asarray(X0.hi, dtype=float)
    sp = split_relu_boxes(schedule, lo, hi, max_splits, **options)
    pad = (sp.enc_hi - sp.enc_lo) * 2.0**-30 + (np.abs(sp.enc_lo) + np.abs(sp.enc_hi)) * 2.0**-50
    enc = Interval(sp.enc_lo - pad, sp.enc_hi + pad)  # nearest doubles of exact bounds: outward
    plan = {k: v for k, v in sp.hints.items() if k != "method"}
    plan["steps"] = sp.steps
    if sp.splits:
        trees = [[exact_number(v) if isinstance(v, float) else v for v in t] for t in sp.trees]
        plan["partition"] = trees
    hints = {"method": "relu-vectorised", "plan": plan, "splits": sp.splits}
    hints["leaves"] = len(sp.steps)
    times = (fmpq_to_str(schedule.total_time),)
    return FlowEnclosure(times, enc.reshape(1, *lo.shape), FlowStatus.SUCCESS, hints=hints)


def certificate_of_result(schedule, X0, result) -> dict:
    """The certificate of a :func:`mean_value_result` (no new replay: the writer's check
    decides). Guarantee: none."""
    from certified.certificates import flow_certificate

    boxes = np.stack([np.asarray(X0.lo, dtype=float), np.asarray(X0.hi, dtype=float)], axis=-1)
    enc = np.stack([result.final.lo, result.final.hi], axis=-1)
    hints = {"method": "relu-vectorised", **result.hints["plan"]}
    return flow_certificate(
        schedule, None, enclosures=enc, method="relu-vectorised", extra_hints=hints, boxes=boxes
    )


def mean_value_certificate(schedule, lo: np.ndarray, hi: np.ndarray, **options) -> dict:
    """A certificate of rule relu-vectorised (mean-value form) for the double boxes [lo, hi]:
    the claims are the checker's own replay (:func:`mean_value_result`, same options).

    Guarantee: none (the checker decides)."""
    from certified.arith import Interval

    X0 = Interval(np.asarray(lo, dtype=float), np.asarray(hi, dtype=float))
    result = mean_value_result(schedule, X0, **options)
    if result is None:
        raise InputError("schedule: the mean-value form needs parameters that are doubles")
    return certificate_of_result(schedule, X0, result)
