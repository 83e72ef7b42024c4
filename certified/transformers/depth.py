"""Depth to ODE: a certified bound on the gap between T residual attention layers
``x_i <- x_i + h Gamma[mu](x_i)`` (h = tau / T on each piece of duration tau) and the flow of
the same parameters, for T = 1, 2, 4, ..., without subtracting two enclosures.

Lady Windermere's fan with the exact trajectory as the reference (proofs/transformers_depth.md):
the engine's tube (boxes containing x(t) over each step) gives the local error
``|x(t_{k+1}) - x(t_k) - h f(x(t_k))|_inf <= h^2 max_c |x_2|`` (``x_2 = f'f / 2``, the second
Taylor coefficient, enclosed over the tube boxes), and the Jacobian of f over the hull of the
k-th layer's output (enclosed by interval Euler steps) and the tube box at t_k bounds the
propagation ``|e_{k+1}| <= g_k |e_k| + h^2 M_k``, ``g_k >= ‖I + hJ‖_inf``. The enclosures of
the layers serve only as a priori sets: the bound is the recursion, ``O(1/T)`` by construction;
the table reports it with its fitted rate.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import flint
import numpy as np

from certified.errors import InputError

__all__ = ["DepthRow", "DepthTable", "depth_gap_table", "read_model", "run_depth_limit"]


def _up(x: float) -> float:
    return math.nextafter(x, math.inf)


@dataclass(frozen=True)
class DepthRow:
    """``layers`` layers per piece: ``bound`` (a float, upper bound on the sup-norm gap over
    every token coordinate, or None when not certified) and the largest width of the
    enclosures of the layers' outputs (the a priori sets of the fan, not the bound).

    Guarantee: |depth-T output - flow at the schedule's end|_inf <= bound.
    """

    layers: int
    bound: float | None
    iterate_width: float


@dataclass(frozen=True)
class DepthTable:
    """The rows, the least-squares slope of log(bound) against log(T) over the certified rows
    with T >= 4 (``rate``; -1 for O(1/T)) and ``constant = max T * bound`` over them.

    Guarantee: each row's bound is certified; rate and constant are exact functions of them
    (rate: a float fit, no guarantee).
    """

    rows: tuple[DepthRow, ...]
    rate: float | None
    constant: float | None
    tube_steps: int
    max_width: float


def read_model(model_path: Any, tokens_path: Any):
    """A :class:`~certified.transformers.TransformerInstance` from a model file (the instance
    format of ``certified transformer flow`` without tokens) and a tokens file (.csv, .json,
    .npz as ``certified flow --points``). Guarantee: exact."""
    from certified.io import prefixed_errors, read_json, read_points
    from certified.transformers.instance import parse_instance

    obj = read_json(model_path)
    X = read_points(tokens_path)
    with prefixed_errors(model_path):
        if not isinstance(obj, dict):
            raise InputError("expected a JSON object (a transformer model)")
        if "tokens" in obj or "measures" in obj:
            raise InputError("tokens: give them with --tokens, not in the model file")
        return parse_instance({**obj, "tokens": X.tolist()})


def _piece_of(times: Sequence[flint.fmpq], t: flint.fmpq) -> int:
    for j in range(len(times) - 1):
        if t < times[j + 1]:
            return j
    return len(times) - 2


def _norms(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Per box of an interval matrix (N, D, D): upper bounds on the inf-norm ``max_r sum_c
    |J_rc|``, on the log-norm ``max_r (J_rr + sum_{c != r} |J_rc|)`` and on ``max_r (-J_rr)^+``
    (fsum is correctly rounded; one step up makes it an upper bound): shape (N, 3)."""
    a = np.maximum(np.abs(lo), np.abs(hi))
    out = np.full((a.shape[0], 3), math.inf)
    for i, box in enumerate(a):
        if not np.all(np.isfinite(box)):
            continue
        diag_hi, diag_lo = np.diagonal(hi[i]), np.diagonal(lo[i])
        off = box.copy()
        np.fill_diagonal(off, 0.0)
        out[i, 0] = max(_up(math.fsum(row)) for row in box)
        out[i, 1] = max(_up(math.fsum([*row, u])) for row, u in zip(off, diag_hi, strict=True))
        out[i, 2] = max(0.0, float(np.max(-diag_lo)))
    return out


def depth_gap_table(instance, max_depth: int = 1024, max_step: Any = None) -> DepthTable:
    """The certified gaps for T = 1, 2, 4, ..., max_depth (module docstring).

    Raises
    ------
    InputError
        max_depth not a power of 2 in [1, 2^16]; the flow of the instance could not be
        certified (the message of the engine).

    Guarantee: every row's bound is an upper bound on the sup-norm distance between the
    depth-T output and the exact flow at the schedule's end.
    """
    from certified.flow import SaveAt, StepPolicy, enclose_flow

    if (
        not isinstance(max_depth, int)
        or max_depth < 1
        or max_depth > 2**16
        or max_depth & (max_depth - 1)
    ):
        raise InputError(f"--max-depth: expected a power of 2 in [1, 65536], got {max_depth!r}")
    problem = instance.problem
    total = problem.total_time
    # a fine tube keeps the local-error bound M close to sup |x''| / 2 (tightness only)
    policy = StepPolicy(max_step=max_step if max_step is not None else total / 64)
    res = enclose_flow(problem, instance.state(), save_at=SaveAt(total, steps=True),
                       step_policy=policy)  # fmt: skip
    if res.status.name != "SUCCESS":
        raise InputError(f"the flow of the model could not be certified: {res.message}")
    tube = res.hints["tube"]  # (S, 1, D): tube[s] contains x(t) for t in spans[s]
    spans = [(_q(a), _q(b)) for a, b in res.hints["tube_times"]]
    ends = [flint.fmpq(0)]
    for p in problem.pieces:
        ends.append(ends[-1] + p.duration)
    lo, hi = tube.lo[:, 0, :], tube.hi[:, 0, :]
    piece_of_step = [_piece_of(ends, (a + b) / 2) for a, b in spans]
    M = _local_error_bounds(problem, lo, hi, piece_of_step)
    rows = []
    T = 1
    while T <= max_depth:
        rows.append(DepthRow(T, *_fan(problem, instance.state(), T, ends, spans, piece_of_step,
                                      M, lo, hi)))  # fmt: skip
        T *= 2
    fit = [(r.layers, r.bound) for r in rows if r.bound is not None and r.layers >= 4]
    rate = constant = None
    if len(fit) >= 2:
        x = np.log([t for t, _ in fit])
        y = np.log([b for _, b in fit])
        rate = float(np.polyfit(x, y, 1)[0])
        constant = max(_up(t * b) for t, b in fit)
    width = float(np.max(res.final.hi - res.final.lo))
    return DepthTable(tuple(rows), rate, constant, len(spans), width)


def _local_error_bounds(problem, lo, hi, piece_of_step) -> np.ndarray:
    """Upper bounds, per tube box, on ``max_c |x_2,c|`` (x_2 = f'f / 2 over the box)."""
    from certified.arith import Interval

    M = np.full(lo.shape[0], math.inf)
    for j, piece in enumerate(problem.pieces):
        idx = [s for s in range(lo.shape[0]) if piece_of_step[s] == j]
        if idx:
            x2 = problem.field.taylor_coefficients(Interval(lo[idx], hi[idx]), 2, piece.values)[2]
            M[idx] = np.max(np.maximum(np.abs(x2.lo), np.abs(x2.hi)), axis=1)
    return M


def _q(s: str) -> flint.fmpq:
    from certified.arith.exact import to_fmpq

    return to_fmpq(s, "time")


def _growth(norms: np.ndarray, hf: float, hlo: float) -> float:
    """Upper bound on ``‖I + hJ‖_inf`` over the box's J: ``1 + h mu_inf(J)`` when
    ``1 + h J_rr >= 0`` for every r (h max(-J_rr) <= 1), else ``1 + h ‖J‖_inf``."""
    norm, mu, neg = norms
    out = _up(1 + _up(hf * norm))
    if _up(hf * neg) <= 1:
        hmu = _up((hf if mu >= 0 else hlo) * mu)
        out = min(out, max(0.0, _up(1 + hmu)))
    return out


def _fan(problem, x0, T, ends, spans, piece_of_step, M, lo, hi):
    """``(bound, iterate width)``: the recursion ``E_{k+1} = g_k E_k + h^2 M_k`` over every
    layer, rounded up, with g_k bounding ``‖I + hJ‖_inf`` over the Jacobians of f on the hull
    of the enclosure of the k-th layer's output and the tube box at t_k (both contain their
    point, the hull the segment between them; proofs/transformers_depth.md). (None, width)
    when the field overflows on a hull."""
    from certified.arith import Interval
    from certified.arith.exact import fmpq_to_float
    from certified.errors import CertifiedError

    # proof: proofs/transformers_depth.md (the lemma and the growth factor)
    field = problem.field
    X = Interval.from_exact(x0)  # (1, D): the exact layer output, enclosed
    E = 0.0
    S = len(spans)
    for j, piece in enumerate(problem.pieces):
        h = piece.duration / T
        hf, hlo = fmpq_to_float(h, "up"), fmpq_to_float(h, "down")
        H = Interval(np.array([[hlo]]), np.array([[hf]]))
        mine = [s for s in range(S) if piece_of_step[s] == j]
        hull_lo, hull_hi, Mk = [], [], []
        for k in range(T):
            a = ends[j] + k * h
            b = a + h
            at_a = next(v for v in mine if spans[v][0] <= a <= spans[v][1])
            meet = [v for v in mine if spans[v][0] <= b and spans[v][1] >= a]
            Mk.append(max(M[v] for v in meet))
            hull_lo.append(np.minimum(X.lo[0], lo[at_a]))
            hull_hi.append(np.maximum(X.hi[0], hi[at_a]))
            if k + 1 < T or j + 1 < len(problem.pieces):
                F = field.taylor_coefficients(X, 1, piece.values)[1]
                X = X + H * F
        try:
            J = field.jacobian(Interval(np.array(hull_lo), np.array(hull_hi)), piece.values)
            norms = _norms(J.lo, J.hi)
        except CertifiedError:
            return None, float(np.max(X.hi - X.lo))
        for k in range(T):
            g = _growth(norms[k], hf, hlo) if E > 0 else 0.0
            if not math.isfinite(g):
                return None, float(np.max(X.hi - X.lo))
            E = _up(_up(E * g) + _up(_up(hf * hf) * Mk[k]))
    return E, float(np.max(X.hi - X.lo))


def run_depth_limit(args) -> int:
    """``certified transformer depth-limit``: prints the table (or one JSON object).
    Guarantee: as :func:`depth_gap_table`."""
    import sys
    import time

    from certified._progress import Progress
    from certified.certificates import command_json, print_json
    from certified.flow.command import decimal_upper
    from certified.verdict import Outcome

    t0 = time.perf_counter()
    if args.model is None or args.tokens is None:
        raise InputError("depth-limit: --model M.json and --tokens X.csv are required")
    if args.out is not None:
        raise InputError("--out: depth-limit writes no certificate (its table is the output)")
    progress = Progress("transformer depth-limit")
    with progress.stage(f"reading {args.model} and {args.tokens}"):
        instance = read_model(args.model, args.tokens)
    with progress.stage(f"certifying the flow and the fan (n = {sum(instance.sizes)})"):
        table = depth_gap_table(instance, args.max_depth)
    ok = table.rows[-1].bound is not None
    outcome = Outcome.VERIFIED if ok else Outcome.UNDECIDED
    message = (
        ""
        if ok
        else (
            f"T = {table.rows[-1].layers}: the Euler iterates are not certified to stay within the "
            "widened tube; the gap bound needs a larger depth or a shorter time"
        )
    )
    rows = [{"layers": r.layers, "gap_upper": None if r.bound is None else decimal_upper(r.bound),
             "iterate_width": r.iterate_width} for r in table.rows]  # fmt: skip
    seconds = time.perf_counter() - t0
    if args.json:
        print_json(command_json(
            "transformer depth-limit", outcome, None, seconds,
            scope=f"the tokens of {args.tokens} under the model {args.model}",
            table=rows, rate=table.rate,
            constant=None if table.constant is None else decimal_upper(table.constant),
            tube_steps=table.tube_steps, message=message))  # fmt: skip
    else:
        print(f"{outcome}: |depth-T output - flow|_inf <= bound (sup over tokens, coordinates)")
        for r in rows:
            print(f"  T = {r['layers']:5d}   gap <= {r['gap_upper']}")
        if table.rate is not None:
            print(f"  fitted rate {table.rate:.3f} (O(1/T) is -1); T * gap <= {table.constant:.6g}")
    if not ok:
        print(f"certified transformer depth-limit: {message}", file=sys.stderr)
        return 1
    return 0
