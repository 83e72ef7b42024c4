r"""The Transformer PDE with Gaussian data (theorems.md §9; proofs/transformers_gaussian.md).

For ``mu_0 = N(m_0, Sigma_0)`` and softmax attention with heads ``(Q_h, K_h, V_h)`` (score of key
y at query x: ``<Q_h y, K_h x>``, so ``A_h = Q_hᵀ K_h``), every token moves by the affine field
``x' = sum_h V_h (m + Sigma A_h x)``, the law stays Gaussian, and

.. math::

    \dot m = \sum_h V_h (m + \Sigma A_h m), \qquad \dot\Sigma = M\Sigma + \Sigma M^\top,
    \qquad M = \sum_h V_h \Sigma A_h

(proved in ``proofs/gaussian_pde.py``). The state ``(m, Sigma)`` (Sigma by its upper triangle,
``d + d(d+1)/2`` numbers) is an expression field of the generic engine: its flow is certified by
rule ``taylor-lohner``. The ODE can blow up in finite time; where ``Sigma^{-1}`` evolves
linearly (every ``V_h = v_h I``, or everything diagonal) the blow-up time is decided exactly and
enclosed (proofs/transformers_gaussian.md §3), and a run past it is refused.

Parameter file (``certified transformer gaussian-pde --params P``)::

    {"mean": d, "cov": d x d (symmetric positive definite, decided exactly),
     one head "Q": k x d, "K": k x d, "V": d x d  (or "A": d x d instead of Q, K),
     or "heads": [{"Q", "K", "V"} | {"A", "V"}, ...],
     or "pieces": [{"duration": t, ...one head or "heads"...}, ...],
     "target": {"mean": d, "cov": d x d}  (optional: W2 distances to it)}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import flint
import numpy as np

from certified.arith.exact import to_fmpq
from certified.errors import DomainError, InputError, ShapeError
from certified.io import check_keys, exact_matrix, exact_vector

__all__ = [
    "BlowUpError",
    "BlowUpTime",
    "GaussianHead",
    "GaussianPDE",
    "GaussianPiece",
    "blowup_time",
    "check_no_blowup",
    "gaussian_field",
    "gaussian_pde_flow",
    "moments_at",
    "parse_params",
    "read_params",
    "require_spd",
]

_HEAD_KEYS = ("Q", "K", "V", "A")


class BlowUpError(DomainError):
    """The requested time is at or past a certified blow-up of the moment ODE."""


@dataclass(frozen=True, eq=False)
class GaussianHead:
    """One head: ``V`` (d x d) and ``A = Qᵀ K`` (d x d), exact object arrays."""

    V: np.ndarray
    A: np.ndarray


@dataclass(frozen=True, eq=False)
class GaussianPiece:
    duration: flint.fmpq
    heads: tuple[GaussianHead, ...]


@dataclass(frozen=True, eq=False)
class GaussianPDE:
    """Initial Gaussian, schedule of heads, optional target Gaussian. Guarantee: exact."""

    mean: np.ndarray
    cov: np.ndarray
    pieces: tuple[GaussianPiece, ...]
    target: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def d(self) -> int:
        return int(self.mean.shape[0])

    @property
    def heads(self) -> int:
        return max(len(p.heads) for p in self.pieces)

    @property
    def total_time(self) -> flint.fmpq:
        return sum((p.duration for p in self.pieces), flint.fmpq(0))

    def truncated(self, T: Any) -> GaussianPDE:
        """The schedule cut at time T (0 < T <= total time). Guarantee: exact."""
        T = to_fmpq(T, "--time")
        if not T > 0:
            raise InputError(f"--time: {T} is not positive; the final time must be > 0")
        if T > self.total_time:
            raise InputError(
                f"--time: {T} is after the end {self.total_time} of the pieces; give a time "
                "within the schedule"
            )
        out, t = [], flint.fmpq(0)
        for p in self.pieces:
            if t >= T:
                break
            out.append(GaussianPiece(min(p.duration, T - t), p.heads))
            t += p.duration
        return GaussianPDE(self.mean, self.cov, tuple(out), self.target)

    def state(self) -> np.ndarray:
        """The exact initial state ``(m, upper triangle of Sigma)`` as one row."""
        return np.array([[*self.mean, *upper(self.cov)]], dtype=object)

    @cached_property
    def problem(self):
        """The moment ODE with the schedule's pieces (a PiecewiseField). Guarantee: exact."""
        f = gaussian_field(self.d, self.heads)
        return f.on(*[(p.duration, self.values(p)) for p in self.pieces])

    def values(self, piece: GaussianPiece) -> list[flint.fmpq]:
        """Parameter values of a piece, padded with zero heads (order of the field's names)."""
        zero = np.full((self.d, self.d), flint.fmpq(0), dtype=object)
        out: list[flint.fmpq] = []
        for h in range(self.heads):
            head = piece.heads[h] if h < len(piece.heads) else GaussianHead(zero, zero)
            out += [*head.V.ravel(), *head.A.ravel()]
        return out


def upper(S: np.ndarray) -> list[Any]:
    """The upper triangle of S, row by row (the state's Sigma part)."""
    d = S.shape[0]
    return [S[i, j] for i in range(d) for j in range(i, d)]


def unpack(row: Sequence[Any], d: int) -> tuple[list[Any], list[list[Any]]]:
    """``(m, Sigma)`` from a state row (any element type). Guarantee: exact."""
    m = list(row[:d])
    S = [[None] * d for _ in range(d)]
    k = d
    for i in range(d):
        for j in range(i, d):
            S[i][j] = S[j][i] = row[k]
            k += 1
    return m, S


def gaussian_field(d: int, heads: int = 1):
    """The moment ODE of the module docstring as an expression field on R^{d + d(d+1)/2};
    parameters ``V{h}[r][c]`` and ``A{h}[r][c]`` per head.

    Guarantee: exact (the graph is the formula).
    """
    from certified.fields.expr import GraphBuilder, total
    from certified.fields.field import VectorField

    # proof: proofs/transformers_gaussian.md#reduction (proofs/gaussian_pde.py: tilt, continuity)
    names: list[str] = []
    for h in range(heads):
        names += [f"V{h}[{r}][{c}]" for r in range(d) for c in range(d)]
        names += [f"A{h}[{r}][{c}]" for r in range(d) for c in range(d)]
    b = GraphBuilder(d + d * (d + 1) // 2, names)
    P = b.param
    m, S = unpack(b.x, d)
    M_terms: list[list[list[Any]]] = [[[] for _ in range(d)] for _ in range(d)]
    m_terms: list[list[Any]] = [[] for _ in range(d)]
    for h in range(heads):
        SA = [[total([S[i][k] * P(f"A{h}[{k}][{j}]") for k in range(d)]) for j in range(d)]
              for i in range(d)]  # fmt: skip
        for i in range(d):
            m_terms[i] += [P(f"V{h}[{i}][{k}]") * m[k] for k in range(d)]
            for j in range(d):
                M_terms[i][j] += [P(f"V{h}[{i}][{k}]") * SA[k][j] for k in range(d)]
    M = [[total(M_terms[i][j]) for j in range(d)] for i in range(d)]
    out = [total(m_terms[i] + [M[i][j] * m[j] for j in range(d)]) for i in range(d)]
    MS = [[total([M[i][k] * S[k][j] for k in range(d)]) for j in range(d)] for i in range(d)]
    out += [MS[i][j] + MS[j][i] for i in range(d) for j in range(i, d)]
    return VectorField(b.graph(out), name=f"gaussian-transformer-pde-d{d}")


# --- input ------------------------------------------------------------------------------------


def require_spd(S: np.ndarray, name: str) -> flint.fmpq_mat:
    """Decide exactly that S is symmetric positive definite (LDLᵀ pivots of the rational
    matrix all > 0, Sylvester's criterion); DomainError naming the entry or the pivot.

    Guarantee: exact.
    """
    d = S.shape[0]
    for i in range(d):
        for j in range(i):
            if S[i, j] != S[j, i]:
                raise DomainError(f"{name}: not symmetric ({name}[{i}][{j}] != {name}[{j}][{i}])")
    W = [[flint.fmpq(S[i, j]) for j in range(d)] for i in range(d)]
    for k in range(d):
        if not W[k][k] > 0:
            raise DomainError(
                f"{name}: not positive definite (leading minor {k + 1} is not > 0); a covariance "
                "must be symmetric positive definite"
            )
        for i in range(k + 1, d):
            f = W[i][k] / W[k][k]
            for j in range(k + 1, d):
                W[i][j] -= f * W[k][j]
    return flint.fmpq_mat(d, d, [flint.fmpq(x) for x in S.ravel()])


def _head(obj: Any, where: str, d: int) -> GaussianHead:
    check_keys(obj, where, ("V",), ("Q", "K", "A"))
    V = exact_matrix(obj["V"], f"{where}.V", rows=d, cols=d, col_what=f"entries (V is {d} x {d})")
    if "A" in obj:
        if "Q" in obj or "K" in obj:
            raise InputError(f"{where}: give either 'A' or 'Q' and 'K', not both")
        A = exact_matrix(obj["A"], f"{where}.A", rows=d, cols=d,
                         col_what=f"entries (A is {d} x {d})")  # fmt: skip
        return GaussianHead(V, A)
    if "Q" not in obj or "K" not in obj:
        raise InputError(f"{where}: give 'Q' and 'K' (k x {d} each) or 'A' ({d} x {d})")
    Q = exact_matrix(obj["Q"], f"{where}.Q", cols=d, col_what=f"entries (Q is k x {d})")
    K = exact_matrix(obj["K"], f"{where}.K", rows=Q.shape[0], cols=d,
                     col_what=f"entries (K is k x {d}, as Q)")  # fmt: skip
    return GaussianHead(V, Q.T.dot(K))  # A = Qᵀ K: the score of key y at query x is <Qy, Kx>


def _heads(obj: Any, where: str, d: int) -> tuple[GaussianHead, ...]:
    if "heads" in obj:
        if any(k in obj for k in _HEAD_KEYS):
            raise InputError(f"{where}: give either 'heads' or one head (Q, K, V), not both")
        items = obj["heads"]
        if not isinstance(items, list) or not items:
            raise ShapeError(f"{where}heads: expected a non-empty list of {{'Q', 'K', 'V'}}")
        return tuple(_head(h, f"{where}heads[{i}]", d) for i, h in enumerate(items))
    head = {k: obj[k] for k in _HEAD_KEYS if k in obj}
    return (_head(head, where.rstrip(".") or "params", d),)


def parse_params(obj: Any, *, time: Any = None) -> GaussianPDE:
    """A :class:`GaussianPDE` from the JSON value of a parameter file (module docstring);
    ``time`` is the duration of a schedule without pieces (required then), or cuts one.

    Raises
    ------
    InputError (ShapeError, SchemaError, ...), DomainError
        Shapes, unknown keys, non-finite numbers, a covariance that is not symmetric positive
        definite (decided exactly).

    Guarantee: exact.
    """
    check_keys(obj, "", ("mean", "cov"), (*_HEAD_KEYS, "heads", "pieces", "target"))
    mean = exact_vector(obj["mean"], "mean", what="coordinates")
    d = len(mean)
    cov = exact_matrix(obj["cov"], "cov", rows=d, cols=d, col_what=f"entries (cov is {d} x {d})")
    require_spd(cov, "cov")
    target = None
    if "target" in obj:
        check_keys(obj["target"], "target", ("mean", "cov"))
        tm = exact_vector(obj["target"]["mean"], "target.mean", length=d, what="coordinates")
        tS = exact_matrix(obj["target"]["cov"], "target.cov", rows=d, cols=d,
                          col_what=f"entries (target.cov is {d} x {d})")  # fmt: skip
        require_spd(tS, "target.cov")
        target = (tm, tS)
    if "pieces" in obj:
        if "heads" in obj or any(k in obj for k in _HEAD_KEYS):
            raise InputError("give either 'pieces' or the heads at the top level, not both")
        items = obj["pieces"]
        if not isinstance(items, list) or not items:
            raise ShapeError("pieces: expected a non-empty list of {duration, Q, K, V | heads}")
        pieces = []
        for j, p in enumerate(items):
            at = f"pieces[{j}]"
            check_keys(p, at, ("duration",), (*_HEAD_KEYS, "heads"))
            t = to_fmpq(p["duration"], f"{at}.duration")
            if not t > 0:
                raise InputError(f"{at}.duration: {t} is not positive; durations must be > 0")
            pieces.append(GaussianPiece(t, _heads(p, f"{at}.", d)))
        pde = GaussianPDE(mean, cov, tuple(pieces), target)
        return pde if time is None else pde.truncated(time)
    if time is None:
        raise InputError("--time: a parameter file without pieces needs the final time T > 0")
    T = to_fmpq(time, "--time")
    if not T > 0:
        raise InputError(f"--time: {T} is not positive; the final time must be > 0")
    return GaussianPDE(mean, cov, (GaussianPiece(T, _heads(obj, "", d)),), target)


def read_params(path: Any, *, time: Any = None) -> GaussianPDE:
    """Read and parse a parameter file (errors prefixed with the file name). Guarantee: exact."""
    from certified.io import prefixed_errors, read_json

    obj = read_json(path)
    with prefixed_errors(path):
        if not isinstance(obj, Mapping):
            raise InputError("expected a JSON object (Gaussian PDE parameters)")
        return parse_params(obj, time=time)


# --- closed-form blow-up ----------------------------------------------------------------------


@dataclass(frozen=True)
class BlowUpTime:
    """Where ``Sigma^{-1}`` evolves linearly (``family``): ``blows_up`` within the schedule
    (decided exactly) and then ``lower <= t* <= upper``.

    Guarantee: if ``blows_up``, the moment ODE's solution exists on [0, t*) and Sigma(t) is
    unbounded as t -> t*, with t* in [lower, upper]; if not, Sigma(t) exists and stays
    positive definite on the whole schedule.
    """

    family: str
    blows_up: bool
    lower: flint.fmpq | None = None
    upper: flint.fmpq | None = None


def _family(pde: GaussianPDE) -> str | None:
    def scalar(M):
        return all(M[i, j] == (M[0, 0] if i == j else 0) for i in range(M.shape[0])
                   for j in range(M.shape[1]))  # fmt: skip

    def diagonal(M):
        return all(M[i, j] == 0 for i in range(M.shape[0]) for j in range(M.shape[1]) if i != j)

    heads = [h for p in pde.pieces for h in p.heads]
    if all(scalar(h.V) for h in heads):
        return "V = vI"
    if diagonal(pde.cov) and all(diagonal(h.V) and diagonal(h.A) for h in heads):
        return "diagonal"
    return None


def _inverse_rate(piece: GaussianPiece, family: str, d: int) -> flint.fmpq_mat:
    """``L = d/dt Sigma^{-1}`` on the piece (constant; proofs/transformers_gaussian.md §3)."""
    # proof: proofs/transformers_gaussian.md#blow-up (and proofs/gaussian_pde.py: scalar_v,
    # diagonal)
    L = flint.fmpq_mat(d, d)
    for h in piece.heads:
        A = flint.fmpq_mat(d, d, [flint.fmpq(x) for x in h.A.ravel()])
        if family == "V = vI":
            L -= flint.fmpq(h.V[0, 0]) * (A + A.transpose())
        else:
            V = flint.fmpq_mat(d, d, [flint.fmpq(x) for x in h.V.ravel()])
            L -= 2 * V * A
    return L


def _is_pd(P: flint.fmpq_mat) -> bool:
    d = P.nrows()
    try:
        require_spd(np.array([[P[i, j] for j in range(d)] for i in range(d)], dtype=object), "P")
    except DomainError:
        return False
    return True


def _lambda_max(Y: flint.fmpq_mat, prec: int) -> tuple[flint.fmpq, flint.fmpq]:
    """Enclosure of the largest eigenvalue of Y (real spectrum) by Arb's certified eig."""
    from certified.transformers.gaussian_moments import real_eigenvalues

    lo, hi = zip(*real_eigenvalues(Y, prec), strict=True)
    return max(lo), max(hi)


def blowup_time(pde: GaussianPDE, prec: int = 128) -> BlowUpTime | None:
    """The exact blow-up decision and an enclosure of the blow-up time within the schedule,
    or None when no closed form applies (general V: the flow engine decides, never wrongly).

    Guarantee: see :class:`BlowUpTime`.
    """
    family = _family(pde)
    if family is None:
        return None
    d = pde.d
    P = require_spd(pde.cov, "cov").inv()
    t = flint.fmpq(0)
    for piece in pde.pieces:
        L = _inverse_rate(piece, family, d)
        P_end = P + piece.duration * L
        # proof: proofs/transformers_gaussian.md#blow-up
        if _is_pd(P_end):  # PD at both ends of the segment, hence on it (convexity)
            P, t = P_end, t + piece.duration
            continue
        # P + tau L stops being PD at tau* = 1 / lambda_max(-L P^{-1}) in (0, duration]
        lo, hi = _lambda_max(-L * P.inv(), prec)
        lower = t + (1 / hi if hi > 0 else flint.fmpq(0))
        upper = t + min(piece.duration, 1 / lo) if lo > 0 else t + piece.duration
        return BlowUpTime(family, True, max(lower, t), upper)
    return BlowUpTime(family, False)


def check_no_blowup(pde: GaussianPDE) -> BlowUpTime | None:
    """Raise :class:`BlowUpError` with the certified interval when the schedule reaches a
    closed-form blow-up; return the closed-form decision (or None). Guarantee: exact."""
    from decimal import ROUND_CEILING, ROUND_FLOOR, Context, Decimal

    from certified.arith.exact import approx_str

    def dec(q, rounding) -> str:  # outward: the printed interval still contains t*
        return str(Context(prec=15, rounding=rounding).divide(Decimal(int(q.p)), Decimal(int(q.q))))

    b = blowup_time(pde)
    if b is not None and b.blows_up:
        raise BlowUpError(
            f"--time: the moment ODE blows up ({b.family}) at t* in [{dec(b.lower, ROUND_FLOOR)}, "
            f"{dec(b.upper, ROUND_CEILING)}] <= {approx_str(pde.total_time, 12)}: Sigma(t) is "
            "unbounded there; ask for a time before t*"
        )
    return b


# --- the certified flow -----------------------------------------------------------------------


def gaussian_pde_flow(
    pde: GaussianPDE, *, ts: Sequence[Any] = (), prec: int | None = None, step_policy=None
):
    """Certified enclosures of ``(m(t), Sigma(t))`` at the schedule's end and at ``ts`` by
    rule taylor-lohner (:func:`certified.flow.enclose_flow`); refuses a schedule that reaches a
    closed-form blow-up (:class:`BlowUpError`, with the interval of t*).

    Guarantee: if the status is SUCCESS, ``enclosures[k, 0]`` contains the exact state
    ``(m, upper triangle of Sigma)`` at ``times[k]``.
    """
    from certified.flow import SaveAt, StepPolicy, enclose_flow

    check_no_blowup(pde)
    if step_policy is None and prec in (None, 53):
        # tightness and cost only (bench: d = 8, T = 1 in ~1 s of CPU, width ~5e-13; the
        # variational order 4 keeps the width under 1e-12 where order 3 gave 2.5e-11)
        step_policy = StepPolicy(order=20, jacobian_order=4)
    save = SaveAt(pde.total_time, ts)
    return enclose_flow(pde.problem, pde.state(), save_at=save, step_policy=step_policy,
                        prec=prec)  # fmt: skip


def moments_at(pde: GaussianPDE, result, k: int = -1):
    """The :class:`~certified.transformers.gaussian_moments.GaussianEnclosure` of time index
    k of a successful result (exact endpoints). Guarantee: as the result's."""
    from certified.arith.exact import to_fmpq as q
    from certified.transformers.gaussian_moments import GaussianEnclosure

    if result.bounds is not None:
        ends = [(lo, hi) for lo, hi in result.bounds[k, 0]]
    else:
        lo, hi = result.enclosures.lo[k, 0], result.enclosures.hi[k, 0]
        ends = [(q(float(a)), q(float(b))) for a, b in zip(lo, hi, strict=True)]
    m, S = unpack(ends, pde.d)
    return GaussianEnclosure(tuple(m), tuple(tuple(r) for r in S))
