"""Kind ``transformer-cluster`` v1 (proofs/transformers.md §4): the flow of an expression field
from n tokens of R^d (the state: their coordinates, token after token) is certified by the
generic rule ``taylor-lohner``; from the final enclosures, the squared diameter of the token
cloud max_{i<j} |x_i(T) - x_j(T)|^2 is bounded exactly. VERIFIED: an exact witness u with
<u, x_i(0)> > 0 for every token (the tokens lie in an open hemisphere) and the upper bound
<= eps^2. REFUTED: the lower bound > eps^2."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import accumulate
from typing import Any

import flint

from . import _parse
from ._field_rule import check_field_flow
from ._parse import Rejected, array, box_rows, exact, fields, matrix, small_integer, string, vector
from .lohner import MAX_TAYLOR_OPS

_ZERO = flint.fmpq(0)
# Replay budget shared by all the flows of a transformer-match file (format.md "Bounds of a
# check"): four flows at the limit of one (a flow per measure on the cluster route: 2 x 4 atoms
# in d = 3 cost 8.2e8, two flows of 4.1e8).
MAX_MATCH_OPS = 4 * MAX_TAYLOR_OPS


def _bits(rows: list) -> int:
    """A bound on the height of every sum of products of two differences of the exact numbers
    of ``rows`` of (lo, hi) pairs (``_parse.common_bits``), charged: one operation a number."""
    ends = [q for row in rows for pair in row for q in pair]
    _parse.charge(len(ends), _parse.top(), "the heights")
    return 2 * _parse.common_bits(ends) + len(ends).bit_length() + 2


def _diameter_sq(boxes: list, n: int, d: int) -> tuple[flint.fmpq, flint.fmpq]:
    """(lower, upper) on max_{i<j} |x_i - x_j|^2 for x_i in the box of token i (exact)."""
    tok = [boxes[i * d : (i + 1) * d] for i in range(n)]
    _parse.charge(6 * d * (n * (n - 1) // 2), _bits([boxes]), "the token cloud's diameter")
    lower = upper = _ZERO
    for i in range(n):
        for j in range(i + 1, n):
            up = gap = _ZERO
            for (a_lo, a_hi), (b_lo, b_hi) in zip(tok[i], tok[j], strict=True):
                up += max(a_hi - b_lo, b_hi - a_lo) ** 2
                gap += max(_ZERO, a_lo - b_hi, b_lo - a_hi) ** 2
            lower, upper = max(lower, gap), max(upper, up)
    return lower, upper


def check_transformer_cluster_v1(instance: Any, claim: Any, hints: Any) -> str:
    """Check a clustering verdict; return a summary (Rejected on any failure)."""
    fields(instance, "instance", ("flow", "tokens", "dimension"))
    fields(claim, "claim", ("flow", "verdict", "eps", "diameter_squared", "witness"))
    n = small_integer(instance["tokens"], "instance.tokens", 2, 10_000)
    d = small_integer(instance["dimension"], "instance.dimension", 1, 10_000)
    fields(hints, "hints", tuple(hints) if isinstance(hints, dict) else ())  # an object
    summary = check_field_flow(instance["flow"], claim["flow"], hints)
    flow = instance["flow"]
    if not isinstance(flow, dict) or "points" not in flow:
        raise Rejected("instance.flow: the tokens must be given as points")
    (start,) = matrix(flow["points"], "instance.flow.points", 1, n * d)
    encl = array(claim["flow"]["enclosures"], "claim.flow.enclosures")
    (final,) = box_rows(encl[-1], "claim.flow.enclosures[-1]", 1, n * d)
    eps = exact(claim["eps"], "claim.eps")
    if not eps > 0:
        raise Rejected("claim.eps: must be > 0")
    verdict = string(claim["verdict"], "claim.verdict", ("VERIFIED", "REFUTED"))
    lower, upper = _diameter_sq(final, n, d)
    bound = exact(claim["diameter_squared"], "claim.diameter_squared")
    if verdict == "VERIFIED":
        u = vector(claim["witness"], "claim.witness", d)
        bits = _parse.common_bits(u) + _parse.common_bits(start) + d.bit_length()
        _parse.charge(2 * n * d, bits, "claim.witness")  # n sums of d products
        for i in range(n):
            dot = sum((a * b for a, b in zip(u, start[i * d : (i + 1) * d], strict=True)), _ZERO)
            if not dot > 0:
                raise Rejected(f"claim.witness: <u, x_{i}> = {dot} is not > 0 (not a hemisphere)")
        if not (upper <= bound <= eps * eps):
            raise Rejected("claim.diameter_squared: not an upper bound <= eps^2 of the replay")
    else:
        if claim["witness"] is not None:
            raise Rejected("claim.witness: must be null for REFUTED")
        if not (eps * eps < bound <= lower):
            raise Rejected("claim.diameter_squared: not a lower bound > eps^2 of the replay")
    return f"{verdict} diameter^2 {'<=' if verdict == 'VERIFIED' else '>'} eps^2; {summary}"


def check_transformer_match_v1(instance: Any, claim: Any, hints: Any) -> str:
    """Kind ``transformer-match`` v1 (proofs/transformers.md §6): the flows of the atoms of N
    measures (points, measure after measure, in chunks of the one-token field or one coupled
    flow per whole measure; one schedule for all, one field per measure size and weights;
    rule ``taylor-lohner``) and, per measure g,
    W_2^2(mu^g(T), delta_{y_g}) <= sum_i w_i max_{x in box_i} |x - y_g|^2 <= claimed <= eps^2."""
    fields(instance, "instance", ("flows", "sizes", "weights", "targets", "dimension"))
    fields(claim, "claim", ("flows", "verdict", "eps", "w2_squared", "switches"))
    fields(hints, "hints", ("flows",))
    d = small_integer(instance["dimension"], "instance.dimension", 3, 10_000)
    sizes = [
        small_integer(n, "instance.sizes", 1, 100_000)
        for n in array(instance["sizes"], "instance.sizes")
    ]
    N, total = len(sizes), sum(sizes)
    targets = matrix(instance["targets"], "instance.targets", N, d)
    weights = array(instance["weights"], "instance.weights", N)
    flows = array(instance["flows"], "instance.flows")
    claims = array(claim["flows"], "claim.flows", len(flows))
    hint_list = array(hints["flows"], "hints.flows", len(flows))
    ws = [vector(weights[g], f"instance.weights[{g}]", n) for g, n in enumerate(sizes)]
    for g, w in enumerate(ws):  # before the replays (cheap; coprime giants rejected at once)
        if any(not v > 0 for v in w) or _parse.exact_sum(w, f"instance.weights[{g}]") != 1:
            raise Rejected(f"instance.weights[{g}]: must be positive and sum to 1")
    first = flows[0] if isinstance(flows[0], dict) else {}  # the claim: before the replays
    pieces = array(first.get("pieces"), "instance.flows[0].pieces")
    if small_integer(claim["switches"], "claim.switches", 0, 10**6) != len(pieces) - 1:
        raise Rejected("claim.switches: not the number of pieces minus one")
    string(claim["verdict"], "claim.verdict", ("VERIFIED",))
    eps = exact(claim["eps"], "claim.eps")
    bounds = vector(claim["w2_squared"], "claim.w2_squared", N)
    if not eps > 0 or any(not b <= eps * eps for b in bounds):
        raise Rejected("claim.eps: must be > 0 and bound every claim.w2_squared")
    final, summary, fields_of = [], "", {}
    # the flows share one replay budget, taken flow by flow before each replay (issue 11: a
    # file of many flows, each under MAX_TAYLOR_OPS, would otherwise replay for hours)
    budget = [MAX_MATCH_OPS]
    # first atom of measure g -> g (prefix sums: the sums of sizes[:g] were N^2 / 2 additions,
    # hours for the most measures a file holds, uncharged)
    bounds_at = {s: g for g, s in enumerate(accumulate(sizes[:-1], initial=0))}
    for k, (flow, fc, fh) in enumerate(zip(flows, claims, hint_list, strict=True)):
        if not isinstance(flow, dict) or "points" not in flow:
            raise Rejected(f"instance.flows[{k}]: the atoms must be given as points")
        if k and flow.get("pieces") != flows[0].get("pieces"):
            raise Rejected(f"instance.flows[{k}]: not the schedule of flows[0]")
        fields(fh, f"hints.flows[{k}]", tuple(fh) if isinstance(fh, dict) else ())
        summary = check_field_flow(flow, fc, fh, budget)
        encl = array(fc["enclosures"], f"claim.flows[{k}].enclosures")
        rows = box_rows(encl[-1], f"claim.flows[{k}].enclosures[-1]", None, None)
        width = len(rows[0]) if rows else d
        if any(len(row) != width for row in rows):
            raise Rejected(f"claim.flows[{k}].enclosures[-1]: rows of different lengths")
        key: Any = "atoms"  # one-token chunks: every flow carries the field of the first
        if width != d:  # one coupled flow of one whole measure (n_g * d coordinates)
            g = bounds_at.get(len(final))
            if len(rows) != 1 or g is None or width != sizes[g] * d:
                raise Rejected(f"instance.flows[{k}]: a coupled flow must be one whole measure")
            key = (sizes[g], repr(weights[g]))
        if fields_of.setdefault(key, flow.get("field")) != flow.get("field"):
            raise Rejected(f"instance.flows[{k}]: not the field of the flows before it")
        final += [row[i : i + d] for row in rows for i in range(0, width, d)]
    if len(final) != total:
        raise Rejected(f"instance.flows: {len(final)} atoms, the sizes say {total}")
    for g, up in enumerate(_w2_upper(final, ws, targets, d)):
        if not up <= bounds[g] <= eps * eps:
            raise Rejected(f"claim.w2_squared[{g}]: not an upper bound <= eps^2 of the replay")
    return f"VERIFIED W_2 <= eps for {N} measures ({len(flows)} flows); {summary}"


def _w2_upper(final: list, ws: list, targets: list, d: int) -> Iterator[flint.fmpq]:
    """Per measure g (atoms ``final``, measure after measure, of weights ``ws[g]``): an exact
    upper bound sum_i w_i max_{x in box_i} |x - y_g|^2, charged before it is computed."""
    start = 0
    for g, w in enumerate(ws):
        n, rows = len(w), [*final[start : start + len(w)], [(y, y) for y in targets[g]]]
        bits = _bits(rows) + _parse.common_bits(w) + n.bit_length()
        _parse.charge(6 * n * d, bits, f"measure {g}")  # a sum of n weights times sums of d
        up = _ZERO
        for i in range(n):
            up += w[i] * sum((max((lo - y) ** 2, (hi - y) ** 2)
                              for (lo, hi), y in zip(final[start + i], targets[g], strict=True)),
                             _ZERO)  # fmt: skip
        yield up
        start += n
