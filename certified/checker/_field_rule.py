"""Rule ``taylor-lohner`` of kind ``flow`` v1: the generic rule for expression fields.

The instance carries the field as data (an expression graph, ``taylor.parse_field``), its
piecewise-constant parameters and the initial points or boxes; the hints only the step
lengths and the a priori boxes. The checker recomputes every Taylor coefficient, remainder and
Lohner set itself (``taylor.replay_flow``, proofs/checker_soundness.md#taylor-lohner) and
compares the claimed enclosures with its own. Adding a field adds data, not code here."""

from __future__ import annotations

import contextlib
import itertools
import json
from typing import Any

import flint

from . import _parse
from ._parse import Rejected, array, box_rows, exact, exact_row, fields, positive, small_integer
from ._partition import partition_leaves
from .lohner import MAX_TAYLOR_OPS, SUPPORTED, replay_cost, replay_flow, supported
from .taylor import ReplayError, parse_field

ARITHMETIC = ("arb", "float64")  # hints.arithmetic: how the replay computes (default arb)
SETS = ("lohner", "doubleton", "zonotope", "quadratic")  # hints.sets: x + C r (default),
# x + M u + C r (#doubleton), x + M u + G e (#zonotope) or + Q(u, u)/2 (#quadratic; float64)
OPTIONAL = ("jacobian_orders", "arithmetic", "sets", "partition")
_REUSE: list = []  # while a writer reuses its replay: [{key: replay output}] (reusing_replays)


@contextlib.contextmanager
def reusing_replays():
    """Within the block, each replay of this rule is kept with the exact instance, hints and
    claim.times it replayed (canonical JSON), and a check of equal ones compares its claims
    with that output instead of replaying again: the writer's re-check of claims it took from
    the same replay (proofs/checker_soundness.md#replay-reuse). Yields the outputs (newest
    last; balls per time, set, coordinate). Outside the block nothing is kept."""
    memo: dict = {}
    _REUSE.append(memo)
    try:
        yield memo
    finally:
        _REUSE.remove(memo)


def check_field_flow(instance: Any, claim: Any, hints: Any, budget: list | None = None) -> str:
    """Check a flow certificate whose instance is an expression field; return a summary.
    ``budget``: a one-element list shared by the flows of one file (transformer-match), from
    which the replay's cost is taken before it runs (default: MAX_TAYLOR_OPS for this flow)."""
    start = "boxes" if isinstance(instance, dict) and "boxes" in instance else "points"
    fields(instance, "instance", ("field", "pieces", start, "time"))
    field = parse_field(instance["field"], "instance.field")
    d = field.dimension
    pieces = field_pieces(instance, len(field.names))
    if start == "points":
        points = _parse.matrix(instance["points"], "instance.points", None, d)
        starts = [[(x, x) for x in row] for row in points]
    else:
        starts = box_rows(instance["boxes"], "instance.boxes", None, d)
    n = len(starts)
    time = exact(instance["time"], "instance.time")
    if time != _parse.exact_sum([p[0] for p in pieces], "instance.pieces"):
        raise Rejected("instance.time: differs from the total duration of the pieces")
    fields(claim, "claim", ("times", "enclosures"))
    times = exact_row(array(claim["times"], "claim.times"), "claim.times")
    if any(b <= a for a, b in itertools.pairwise(times)) or times[-1] != time:
        raise Rejected("claim.times: must increase strictly and end at instance.time")
    raw_claimed = array(claim["enclosures"], "claim.enclosures", len(times))
    claimed = [box_rows(e, f"claim.enclosures[{k}]", n, d) for k, e in enumerate(raw_claimed)]
    prior, K, m, prec, steps, arithmetic = lohner_hints(
        hints, len(pieces), "taylor-lohner", OPTIONAL
    )
    owner, split = range(n), "partition" in hints
    sets = _parse.string(hints.get("sets", "lohner"), "hints.sets", SETS)
    if split and start != "boxes":
        raise Rejected("hints.partition: only with instance.boxes")
    if split:  # boxes split into sub-boxes (exact bisection trees): the leaves are replayed
        starts, owner = partition_leaves(hints["partition"], "hints.partition", starts)
        n = len(starts)
    total = sum(len(s) for s in steps)
    # each set and step converts every constant node to a ball (4 times, lohner.lohner_step)
    big = [_parse.words(c[1].height_bits()) for c in field.nodes if c[0] == "c"]
    _parse.charge(4 * n * total * sum(w for w in big if w > 8), 0, "instance.field")
    orders = [[m] * len(s) for s in steps]  # per step: the variational order (at most m)
    if "jacobian_orders" in hints:
        raw = array(hints["jacobian_orders"], "hints.jacobian_orders", len(pieces))
        for j, per_piece in enumerate(raw):
            at = f"hints.jacobian_orders[{j}]"
            orders[j] = [small_integer(q, f"{at}[{s}]", 1, m)
                         for s, q in enumerate(array(per_piece, at, len(steps[j])))]  # fmt: skip
    mean = sum(map(sum, orders)) / max(1, total)
    if arithmetic == "float64" and (prec != 53 or not supported(field)):
        raise Rejected("hints.arithmetic: float64 needs precision 53 and a field of the "
                       f"operations {', '.join(SUPPORTED)}")  # fmt: skip
    if sets in ("zonotope", "quadratic") and arithmetic != "float64":
        raise Rejected(f"hints.sets: {sets} sets are replayed in float64 intervals only "
                       "(hints.arithmetic float64)")  # fmt: skip
    # per step: order-K series over every node (twice), order-m duals (d+1 parts, three
    # times), the d x d Lohner algebra; precision scales the word operations
    budget = [MAX_TAYLOR_OPS] if budget is None else budget
    budget[0] -= replay_cost(field, n, total, K, mean, prec, arithmetic, sets)
    if budget[0] < 0:
        raise Rejected("resource limit: the replay needs more operations than its budget")
    boxes, apriori = a_priori_hints(hints, prior, arithmetic, steps, n, d)
    memo = _REUSE[-1] if _REUSE else None  # the replay is a function of these three only
    key = json.dumps([instance, hints, claim["times"]], sort_keys=True) if memo is not None else ""
    with flint.ctx.workprec(prec):
        balls = [(t, [flint.arb(v) for v in values]) for t, values in pieces]
        try:
            out = memo[key] if memo and key in memo else replay_flow(
                field, balls, starts, steps, boxes, K, m, times, orders, arithmetic, apriori, sets
            )  # fmt: skip
        except ReplayError as exc:
            raise Rejected(f"hints: {exc}") from None
        if memo is not None:
            memo[key] = out
        for k, i, q in itertools.product(range(len(out)), range(n), range(d)):
            (lo, hi), ball = claimed[k][owner[i]][q], out[k][i][q]
            if not (flint.arb(lo) <= ball.lower() and ball.upper() <= flint.arb(hi)):
                sub = f" (sub-box {i})" if split else ""
                raise Rejected(f"claim.enclosures[{k}][{owner[i]}][{q}]: misses the replayed "
                               f"enclosure{sub}")  # fmt: skip
    what = f"{len(pieces)} pieces, {total} steps, order {K}, {len(field.nodes)} nodes"
    scope = f"{owner[-1] + 1} boxes in {n} sub-boxes" if split else f"{n} {start}"
    return f"rule taylor-lohner: {scope}, {what}"


def field_pieces(instance: dict, n_names: int) -> list:
    """``instance.pieces``: (duration > 0, one exact value per parameter) each."""
    pieces = []
    for j, p in enumerate(array(instance["pieces"], "instance.pieces")):
        at = f"instance.pieces[{j}]"
        fields(p, at, ("duration", "parameters"))
        duration = positive(p["duration"], f"{at}.duration")
        values = exact_row(array(p["parameters"], f"{at}.parameters", n_names, 0), at)
        pieces.append((duration, values))
    return pieces


def lohner_hints(hints: Any, n_pieces: int, method: str, optional: tuple) -> tuple:
    """The hints of a Taylor-Lohner replay (rules taylor-lohner and taylor-lohner-c1): which
    a priori form ("apriori" or "boxes"), order K, variational order m, precision, the steps of
    each piece (exact sums of bounded height) and the arithmetic; ``optional`` names the other
    keys the rule allows (parsed by the rule)."""
    given = hints if isinstance(hints, dict) else {}  # not an object: fields() says so
    prior = "apriori" if "apriori" in given else "boxes"
    keys = ("method", "order", "jacobian_order", "precision", "steps", prior)
    fields(hints, "hints", keys + tuple(k for k in optional if k in given))
    _parse.string(hints["method"], "hints.method", (method,))
    K = small_integer(hints["order"], "hints.order", 2, 60)
    m = small_integer(hints["jacobian_order"], "hints.jacobian_order", 1, K)
    prec = small_integer(hints["precision"], "hints.precision", 53, 4096)
    raw_steps = array(hints["steps"], "hints.steps", n_pieces)
    steps = [_parse.vector(s, f"hints.steps[{j}]") for j, s in enumerate(raw_steps)]
    for j, s in enumerate(steps):  # the replay's sums of the steps: bounded heights
        _parse.exact_sum(s, f"hints.steps[{j}]")
    arithmetic = _parse.string(hints.get("arithmetic", "arb"), "hints.arithmetic", ARITHMETIC)
    return prior, K, m, prec, steps, arithmetic


def a_priori_hints(hints: dict, prior: str, arithmetic: str, steps: list, n: int, d: int):
    """(boxes, factors): the a priori boxes of every set and step (arb), or one factor per step
    (float64; None everywhere for "search": the replay picks them). Parsed after the budget."""
    if prior == "apriori":
        if arithmetic != "float64":
            raise Rejected("hints.apriori: only with hints.arithmetic float64 (else hints.boxes)")
        if hints["apriori"] == "search":  # the replay picks each factor (lohner64._step)
            return None, [[None] * len(s) for s in steps]
        raw = array(hints["apriori"], "hints.apriori", len(steps))
        apriori = [exact_row(array(r, f"hints.apriori[{j}]", len(steps[j])), "hints.apriori")
                   for j, r in enumerate(raw)]  # fmt: skip
        if not all(0 < a <= 64 for row in apriori for a in row):
            raise Rejected("hints.apriori: every factor must be in (0, 64]")
        return None, apriori
    boxes = []
    for j, per_piece in enumerate(array(hints["boxes"], "hints.boxes", len(steps))):
        per_step = array(per_piece, f"hints.boxes[{j}]", len(steps[j]))
        boxes.append([box_rows(b, f"hints.boxes[{j}][{s}]", n, d)
                      for s, b in enumerate(per_step)])  # fmt: skip
    return boxes, None
