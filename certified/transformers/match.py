"""Theorem 1.1 of arXiv 2411.04551 (theorems.md §7) as a producer with a certified verdict:
N empirical measures on S^{d-1}, d >= 3, and N Dirac targets -> a schedule theta(t) whose
certified flow brings every measure within W_2 <= eps of its target.

Construction (proofs/transformers.md §6 and §6b). Measures of several atoms are clustered
first (:mod:`certified.transformers.match_cluster`: Lemma 3.2 when a measure is not in an open
hemisphere, self-attention V = cI, then the N clusters steered by gated pulls; one coupled flow
per measure; clusters too close to separate give UNDECIDED naming Prop 3.1). Measures of one
atom each are routed atom by atom: every piece is a sphere perceptron (V = 0,
sigmoid gates), so the flow moves each atom independently; the pieces are rounds of gated
pulls (:mod:`certified.transformers.steering`: the ball gate of Lemma B.2 with the corrected
sign and the corridor steering of Prop 4.1/4.2, every atom routed to its target and stopped
there by the choice of the pull's speed), all atoms points of the one-token field. The
schedule is certified (rule ``taylor-lohner``), and from the enclosures at T

.. math::

    W_2^2(\\mu^g(T), \\delta_{y_g}) = \\sum_i w_i |x_i(T) - y_g|^2
        \\le \\sum_i w_i \\max_{x \\in \\text{box}_i} |x - y_g|^2

(a coupling with a Dirac is unique), exactly in rationals. VERIFIED: every bound <= eps^2.
UNDECIDED: the construction's hypothesis fails (the reason names the lemma and the atom), the
flow is not certified, or a bound exceeds eps^2. Never REFUTED (the theorem is an existence
statement; one schedule failing refutes nothing).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import flint
import numpy as np

from certified.arith.exact import to_fmpq
from certified.errors import InputError, NoCertificateError, ShapeError
from certified.transformers.instance import TransformerInstance, parse_instance
from certified.transformers.match_cost import ReplayForecast, match_budget
from certified.verdict import Outcome

__all__ = [
    "MatchTargets",
    "MatchVerdict",
    "NoCertificateError",
    "match_certificate",
    "match_measures",
    "parse_targets",
    "read_measures",
    "read_targets",
    "w2_squared_upper",
]

_SPHERE_TOLERANCE = flint.fmpq(1, 10**12)


@dataclass(frozen=True, eq=False)
class MatchTargets:
    """N exact target points on S^{d-1} and the missing direction omega (exact or None).
    Guarantee: exact."""

    points: np.ndarray
    omega: tuple[flint.fmpq, ...] | None = None


@dataclass(frozen=True)
class MatchVerdict:
    """Outcome, reason, the produced pieces (instance JSON), the flows (``sources``: per flow
    its problem and start points, ``results``: one FlowEnclosure each: chunks of consecutive
    atoms of the one-token field, or one coupled flow per measure after clustering), the exact
    upper bounds on W_2^2 per measure, and the switches.

    Guarantee: VERIFIED means every bound is <= eps^2 and the flow is certified."""

    outcome: Outcome
    reason: str
    pieces: list
    switches: int
    w2_squared: list[flint.fmpq] | None = None
    sources: list = field(default_factory=list, repr=False)
    results: list = field(default_factory=list, repr=False)
    d: int = 3

    def final_boxes(self) -> tuple[np.ndarray, np.ndarray]:
        """The final boxes of all atoms (lo, hi as (M, d) float arrays)."""
        lo = np.concatenate([r.final.lo.reshape(-1, self.d) for r in self.results])
        hi = np.concatenate([r.final.hi.reshape(-1, self.d) for r in self.results])
        return lo, hi


def _on_sphere(row, where: str) -> None:
    norm2 = sum((q * q for q in row), flint.fmpq(0))
    if abs(norm2 - 1) > _SPHERE_TOLERANCE:
        raise InputError(
            f"{where}: |y|^2 = {float(norm2.p) / float(norm2.q):.17g} is off the unit sphere; "
            "normalise it"
        )


def parse_targets(obj: Any, instance: TransformerInstance) -> MatchTargets:
    """Targets ``{"targets": N x d, "omega": d (optional)}`` (or the bare N x d list) for the
    measures of ``instance``; InputError for: d < 3, a count other than N, points off the
    sphere, non-finite numbers, an omega that is an atom of some measure or a target, two equal
    measures sent to different targets (the theorem's hypotheses).

    Guarantee: exact.
    """
    from certified.io import check_keys, exact_matrix, exact_vector

    d, N = instance.d, len(instance.measures)
    if d < 3:
        raise InputError(f"tokens: Theorem 1.1 needs d >= 3, got d = {d}")
    if instance.geometry != "sphere":
        raise InputError('geometry: Theorem 1.1 is on the sphere (remove "geometry")')
    if isinstance(obj, Mapping):
        check_keys(obj, "targets file", ("targets",), ("omega",))
        raw, raw_omega = obj["targets"], obj.get("omega")
    else:
        raw, raw_omega = obj, None
    Y = exact_matrix(raw, "targets", cols=d, row_what="targets", col_what="coordinates")
    if Y.shape[0] != N:
        raise ShapeError(f"targets: {Y.shape[0]} targets for {N} measures; give one per measure")
    for g, row in enumerate(Y):
        _on_sphere(row, f"targets[{g}]")
    omega = None
    if raw_omega is not None:
        omega = tuple(exact_vector(raw_omega, "omega", length=d))
        _on_sphere(omega, "omega")
        for g, X in enumerate(instance.measures):
            for i, row in enumerate(X):
                if tuple(row) == omega:
                    raise InputError(
                        f"omega: is measures[{g}].tokens[{i}]; Theorem 1.1 needs a direction "
                        "outside every support (Lemma 3.2): give another omega or none"
                    )
        for g, row in enumerate(Y):
            if tuple(row) == omega:
                raise InputError(f"omega: is targets[{g}]; omega must avoid the targets too "
                                 "(Lemma 3.2 applied to the targets)")  # fmt: skip
    keys = [_measure_key(instance, g) for g in range(N)]
    for g in range(N):
        for h in range(g):
            if keys[g] == keys[h] and tuple(Y[g]) != tuple(Y[h]):
                raise InputError(
                    f"measures[{g}] and measures[{h}] are the same measure with different "
                    "targets; Theorem 1.1 needs distinct measures (no flow separates them)"
                )
    return MatchTargets(Y, omega)


def _measure_key(instance: TransformerInstance, g: int):
    X, m = instance.measures[g], instance.masses[g]
    n = X.shape[0]
    w = m if m is not None else [flint.fmpq(1, n)] * n
    acc: dict = {}
    for row, wi in zip(X, w, strict=True):
        acc[tuple(row)] = acc.get(tuple(row), flint.fmpq(0)) + wi
    return frozenset(acc.items())


def read_targets(path: Any, instance: TransformerInstance) -> MatchTargets:
    """Read and parse a targets file (errors prefixed with the file name). Guarantee: exact."""
    from certified.io import prefixed_errors, read_json

    obj = read_json(path)
    with prefixed_errors(path):
        return parse_targets(obj, instance)


def read_measures(path: Any) -> TransformerInstance:
    """The measures of an instance file for ``match``; its ``pieces`` (if any) are not used,
    the construction produces the schedule. Guarantee: exact."""
    from certified.io import prefixed_errors, read_json

    obj = read_json(path)
    with prefixed_errors(path):
        if not isinstance(obj, Mapping):
            raise InputError("expected a JSON object (a transformer instance)")
        return parse_instance({**obj, "pieces": [{"duration": 1}]})


def _float(a: np.ndarray) -> np.ndarray:
    return np.array([[float(q.p) / float(q.q) for q in row] for row in a], dtype=float)


def _pieces(rounds: list, d: int) -> list[dict]:
    """Instance JSON pieces (duration 1 each): one sigmoid neuron per gated pull."""
    out = []
    for moves in rounds:
        W = [[m.k * float(m.q[r]) for m in moves] for r in range(d)]
        U = [[m.beta * float(v) for v in m.q] for m in moves]
        b = [-m.beta * m.c for m in moves]
        out.append({"duration": 1, "W": W, "U": U, "b": b, "activation": "sigmoid"})
    return out


def _one_token_problem(pieces: list[dict], d: int):
    """The field of one token with V = 0 (heads = 0: the sphere neural ODE
    x' = P_x^perp W sigmoid(U x + b)), hidden width the widest piece (zero neurons pad the
    others), with the pieces' exact parameters (their doubles). Guarantee: exact."""
    from certified.fields.attention import attention_field

    width = max([1, *(len(p.get("b", ())) for p in pieces)])
    field = attention_field([1], d, heads=0, hidden=width, activation="sigmoid")
    zero = flint.fmpq(0)
    out = []
    for p in pieces:
        q = len(p.get("b", ()))
        W = [[to_fmpq(p["W"][r][k]) if k < q else zero for k in range(width)] for r in range(d)]
        U = [[to_fmpq(p["U"][k][c]) if k < q else zero for c in range(d)] for k in range(width)]
        b = [to_fmpq(p["b"][k]) if k < q else zero for k in range(width)]
        values = [v for row in W for v in row] + [v for row in U for v in row] + b
        out.append((to_fmpq(p["duration"]), values))
    return field.on(*out)


def w2_squared_upper(lo: np.ndarray, hi: np.ndarray, weights: list, y: Any) -> flint.fmpq:
    """Exact upper bound on sum_i w_i |x_i - y|^2 over x_i in the boxes [lo_i, hi_i] (rows of
    exact numbers or doubles). Guarantee: upper bound (exact rationals)."""
    total = flint.fmpq(0)
    for a, b, w in zip(lo, hi, weights, strict=True):
        s = flint.fmpq(0)
        for lo_c, hi_c, y_c in zip(a, b, y, strict=True):
            lo_q, hi_q = to_fmpq(lo_c), to_fmpq(hi_c)
            s += max((lo_q - y_c) ** 2, (hi_q - y_c) ** 2)
        total += w * s
    return total


def match_measures(
    instance: TransformerInstance,
    targets: MatchTargets,
    eps: Any,
    *,
    step_policy: Any = None,
    chunk: int = 16,
) -> MatchVerdict:
    """The construction and its certified verdict (module docstring): measures of one atom
    each are routed atom by atom (V = 0, flows of the one-token field in chunks of ``chunk``);
    otherwise the measures are clustered first
    (:mod:`certified.transformers.match_cluster`, one coupled flow per measure).

    Guarantee: as :class:`MatchVerdict`.
    """
    eps = to_fmpq(eps, "--eps")
    if not eps > 0:
        raise InputError(f"--eps: {eps} is not positive")
    d, Y = instance.d, targets.points
    Yf = _float(Y)
    Yf /= np.linalg.norm(Yf, axis=1, keepdims=True)
    eps_f = float(eps.p) / float(eps.q)
    coupled = max(instance.sizes) > 1
    if coupled:
        from certified.transformers.match_cluster import cluster_schedule, measure_instances

        cplan = cluster_schedule(instance, Yf, eps_f, targets.omega)
        pieces = cplan.pieces or [{"duration": 1}]
        if cplan.failure is not None:
            return MatchVerdict(Outcome.UNDECIDED, cplan.failure, pieces, len(pieces) - 1, d=d)
        if step_policy is None:  # steps the checker's replay accepts (match_cluster)
            from certified.flow import StepPolicy
            from certified.transformers.match_cluster import cluster_steps

            step_policy = StepPolicy(max_step=cluster_steps(max(instance.sizes))[0])
        insts = measure_instances(instance, pieces)
        flows = [(m.problem, m.state(), f"measures[{g}]", n)
                 for g, (m, n) in enumerate(zip(insts, instance.sizes, strict=True))]  # fmt: skip
        phases = list(cplan.phases)
    else:
        X = np.concatenate(instance.measures)
        Xf = _float(X)
        Xf /= np.linalg.norm(Xf, axis=1, keepdims=True)
        dest = np.arange(len(X))
        pieces, failure = _atom_schedule(Xf, dest, Yf, eps_f, d)
        if failure is not None:
            return MatchVerdict(Outcome.UNDECIDED, failure, pieces, len(pieces) - 1, d=d)
        one = _one_token_problem(pieces, d)
        flows = [(one, X[s : s + chunk], f"atoms {s}-{min(s + chunk, len(X)) - 1}",
                  len(X[s : s + chunk])) for s in range(0, len(X), chunk)]  # fmt: skip
        phases = [f"steering round {r + 1}" for r in range(len(pieces))]
    switches = len(pieces) - 1
    # the checker's charge of the certificate, forecast before any flow (match_cost)
    forecast = ReplayForecast(flows, phases, step_policy, match_budget(), coupled)
    refusal = forecast.before()
    if refusal is not None:
        return MatchVerdict(Outcome.UNDECIDED, refusal, pieces, switches, d=d)
    from certified.flow import SaveAt, enclose_flow

    sources, results = [], []
    for k, (problem, points, _, _) in enumerate(flows):
        sources.append((problem, points))
        results.append(enclose_flow(problem, points, save_at=SaveAt(problem.total_time),
                                    step_policy=step_policy))  # fmt: skip
        if results[-1].status.name != "SUCCESS":
            break
        refusal = forecast.after(k, results[-1])
        if refusal is not None:
            return MatchVerdict(Outcome.UNDECIDED, refusal, pieces, switches, d=d)
    if results[-1].status.name != "SUCCESS":
        return MatchVerdict(Outcome.UNDECIDED, f"the flow was not certified: "
                            f"{results[-1].message}", pieces, switches, d=d)  # fmt: skip
    verdict = MatchVerdict(Outcome.UNDECIDED, "", pieces, switches, None, sources, results, d)
    lo, hi = verdict.final_boxes()
    bounds = measure_bounds(instance, Y, lo, hi)
    worst = max(range(len(bounds)), key=lambda g: bounds[g])
    if bounds[worst] <= eps * eps:
        outcome, reason = Outcome.VERIFIED, f"every measure within W_2 <= {eps} of its target"
    else:
        outcome = Outcome.UNDECIDED
        reason = (f"measures[{worst}]: the certified W_2^2 bound {float(bounds[worst]):.3g} "
                  f"exceeds eps^2")  # fmt: skip
    return MatchVerdict(outcome, reason, pieces, switches, bounds, sources, results, d)


def _atom_schedule(Xf, dest, Yf, eps: float, d: int) -> tuple[list[dict], str | None]:
    """Pieces routing every atom by itself (V = 0), and the failure or None."""
    from certified.transformers.steering import plan_steering

    # every atom parked at an angle a tenth of eps (the bound then has room for the widths)
    plan = plan_steering(Xf, dest, Yf, radius=min(0.1 * eps, 0.1))
    pieces = _pieces(plan.rounds, d) or [{"duration": 1}]
    if plan.failure is not None:
        return pieces, f"Prop 4.2 (corridor steering): {plan.failure}"
    return pieces, None


def measure_bounds(instance: TransformerInstance, Y, lo, hi) -> list[flint.fmpq]:
    """W_2^2 upper bounds per measure from the final boxes of all atoms (rows, measure after
    measure). Guarantee: upper bounds."""
    out, start = [], 0
    for g, n in enumerate(instance.sizes):
        w = instance.masses[g] or [flint.fmpq(1, n)] * n
        out.append(w2_squared_upper(lo[start : start + n], hi[start : start + n], list(w), Y[g]))
        start += n
    return out


def switch_budget(d: int, N: int) -> int:
    """The reference count d*N of Theorem 1.1's O(dN) (constant 1). Guarantee: exact."""
    return d * N


def match_certificate(
    instance: TransformerInstance, targets: MatchTargets, eps: Any, verdict: MatchVerdict
) -> dict[str, Any] | None:
    """The ``transformer-match`` v1 certificate of a VERIFIED verdict (None for other
    verdicts); :class:`NoCertificateError` (with the reason) when a flow has no certificate the
    checker replays, or the bounds read from the certificate's own enclosures no longer decide.

    Guarantee: none (the checker decides)."""
    from certified.arith.exact import fmpq_to_str
    from certified.flow import flow_certificate_for

    if verdict.outcome is not Outcome.VERIFIED or not verdict.results:
        return None
    eps = to_fmpq(eps, "--eps")
    from certified.certificates.field_flow import FieldCertificateError

    flows = []
    coupled = max(instance.sizes) > 1
    for k, ((problem, points), res) in enumerate(zip(verdict.sources, verdict.results,
                                                     strict=True)):  # fmt: skip
        try:
            flow = flow_certificate_for(problem, points, res)
        except FieldCertificateError as e:  # over the replay limit, or a step it refuses
            # smaller chunks of one-token flows or smaller steps may help; a coupled flow over
            # the limit only grows with smaller steps
            cost = "over the checker's limit" in str(e)
            raise NoCertificateError(f"flow {k}: {e}", retry=not (coupled and cost)) from None
        if flow is None:
            raise NoCertificateError(f"flow {k}: no checker rule covers it", retry=False)
        flows.append(flow)
    d = instance.d
    # rows of d (one-token chunks) or of n_g * d (one coupled flow per measure): split into atoms
    pairs = [p for f in flows for row in f["claim"]["enclosures"][-1] for p in row]
    lo = [[to_fmpq(pairs[i + c][0]) for c in range(d)] for i in range(0, len(pairs), d)]
    hi = [[to_fmpq(pairs[i + c][1]) for c in range(d)] for i in range(0, len(pairs), d)]
    bounds = measure_bounds(instance, targets.points, lo, hi)
    for g, b in enumerate(bounds):
        if not b <= eps * eps:
            raise NoCertificateError(f"measures[{g}]: the W_2^2 bound {float(b):.3g} of the "
                                     "replayed enclosures exceeds eps^2", retry=True)  # fmt: skip
    weights = [[fmpq_to_str(w) for w in (m or [flint.fmpq(1, n)] * n)]
               for m, n in zip(instance.masses, instance.sizes, strict=True)]  # fmt: skip
    return {
        "kind": "transformer-match",
        "version": 1,
        "instance": {
            "flows": [f["instance"] for f in flows],
            "sizes": instance.sizes,
            "weights": weights,
            "targets": [[fmpq_to_str(q) for q in row] for row in targets.points],
            "dimension": d,
        },
        "claim": {
            "flows": [f["claim"] for f in flows],
            "verdict": "VERIFIED",
            "eps": fmpq_to_str(eps),
            "w2_squared": [fmpq_to_str(b) for b in bounds],
            "switches": verdict.switches,
        },
        "hints": {"flows": [f["hints"] for f in flows]},
    }
