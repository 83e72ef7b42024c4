"""H1 / H2 over the whole domain (B_R)^n by adaptive subdivision (proofs/lipschitz.md §5).

Both hypotheses bound ``sup_{X ∈ (B_R)^n} ‖Df(X)‖₂`` (= Lip(f) there: the domain is convex).
The box ``[−R, R]^{nd}`` is split at midpoints, always the worst open cell first, along its
widest coordinate. A cell is dropped when it misses (B_R)^n or the fundamental domain of the
symmetries of ``‖Df‖₂`` (token permutations and ``X ↦ −X``; exact tests, bounds.md
#domain-symmetry); otherwise it is closed by the structural bound ``‖V‖(‖P‖ + ‖M₂‖ + ‖A‖c)``
(bounds.md #domain-structure; at the root it is below H2's right side for every instance), or
its ball Jacobian in the tight softmax form (#domain-jacobian) gets a certified spectral bound
(positive definiteness of ``b² I − JᵀJ``, #spectral-upper). Verdicts:

* VERIFIED: every kept leaf has a bound ``≤`` a certified lower bound on ``factor · RHS``: the
  hypothesis (``factor = 1``) holds for these Q, K, V, R, n. Certificate kind
  ``lipschitz-domain`` (the split sequence and the leaf bounds as hints).
* REFUTED: a certified ``‖Df(X)v‖/‖v‖`` at an exact X in (B_R)^n exceeds ``factor · RHS``
  (float searches propose X: projected ascent, then the centres of the cells met).
* UNDECIDED: budget (cells, seconds) exhausted; the message gives the best bounds.
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass
from functools import reduce
from typing import Any

import flint
import numpy as np

from certified.arith.ball import check_precision, endpoints, precision
from certified.arith.exact import approx_str, to_fmpq, to_fmpq_array
from certified.attention.domain_search import ascend_jacobian_norm
from certified.attention.family import float_jacobian, tightness_configuration
from certified.attention.instance import AttentionInstance
from certified.attention.lipschitz import (
    LipschitzVerdict,
    norm_hint,
    rhs_bounds,
    round_down,
    round_up,
)
from certified.attention.maps import attention_jacobian, to_numpy_mid
from certified.attention.norms import frobenius_upper, spectral_norm_lower
from certified.certificates import exact_number
from certified.errors import CertifiedError, InputError
from certified.verdict import Outcome

__all__ = ["DomainRun", "cell_jacobian", "decide_on_domain", "dropped", "DEFAULT_MAX_CELLS"]

DEFAULT_PREC = 64
DEFAULT_MAX_CELLS = 200_000
DEFAULT_SECONDS = 600.0
SLACK = flint.fmpq(1, 2**20)  # relative margin between a leaf's test and its written bound
MAX_MAGNITUDE = flint.fmpq(2**40)  # larger entries of Q, K, V or R: UNDECIDED at once
SEARCH_STARTS = 8  # starts of the float ascent for a counterexample (domain_search)


@dataclass
class DomainRun:
    """What a subdivision did: ``cells`` evaluated, ``kept`` / ``dropped`` leaves, ``open``
    cells left, ``seconds``, the worst float ‖Df‖₂ seen (``float_sup``) and the certified
    bound on the open cells (``open_upper``, Frobenius; None when none are open).

    Guarantee: none (a report of the run).
    """

    cells: int = 0
    kept: int = 0
    dropped: int = 0
    open: int = 0
    seconds: float = 0.0
    float_sup: float = 0.0
    open_upper: flint.fmpq | None = None


def dropped(lo: list, hi: list, R: flint.fmpq, n: int, d: int) -> bool:
    """Whether the exact box ``[lo, hi]`` (flat, token-major) misses (B_R)^n or the
    fundamental domain ``{x_{0,0} ≥ … ≥ x_{n−1,0}, x_{0,0} + x_{n−1,0} ≥ 0}``.

    Guarantee: exact; True ⇒ the box holds no point of (B_R)^n ∩ that set
    (bounds.md #domain-symmetry).
    """
    for i in range(n):
        near = [max(lo[i * d + b], -hi[i * d + b], 0) for b in range(d)]
        if sum((t * t for t in near), flint.fmpq(0)) > R * R:
            return True
    t = hi[0]
    for i in range(1, n):
        t = min(t, hi[i * d])
        if t < lo[i * d]:
            return True
    return hi[0] + hi[(n - 1) * d] < 0


def cell_parts(A: flint.arb_mat, X: list) -> tuple:
    """``u_i = Aᵀx_i``, ``D[t][j] = x_t − x_j``, the hulls H of the ``x_t − x_j`` (over j),
    the spreads s (per coordinate) and the softmax rows ``P_ij = 1/Σ_l e^{u_i·(x_l − x_j)}``
    over ball tokens X; the same operations in the same order as the checker's rule.

    Guarantee: each ball contains its quantity for every X in the balls (bounds.md
    #domain-jacobian).
    """
    n, d, zero = len(X), len(X[0]), flint.arb(0)
    U = [[sum((A[c, b] * X[i][c] for c in range(d)), zero) for b in range(d)] for i in range(n)]
    D = [
        [[X[t][b] - X[j][b] if t != j else zero for b in range(d)] for j in range(n)]
        for t in range(n)
    ]
    # hulls: x_l − m_i is a convex combination of the x_l − x_j; Popoviciu and Cauchy–Schwarz
    # bound Cov_i by the spreads of the coordinates (bounds.md #domain-jacobian, 5.)
    H = [[reduce(flint.arb.union, (D[t][j][b] for j in range(n))) for b in range(d)]
         for t in range(n)]  # fmt: skip
    s = [reduce(flint.arb.union, (D[j][t][a] for j in range(n) for t in range(n))).abs_upper()
         for a in range(d)]  # fmt: skip
    P = [[1 / sum((sum((U[i][b] * D[t][j][b] for b in range(d)), zero).exp()
                   for t in range(n) if t != j), flint.arb(1)) for j in range(n)]
         for i in range(n)]  # fmt: skip
    return U, D, H, s, P


def cell_jacobian(A: flint.arb_mat, V: flint.arb_mat, X: list) -> flint.arb_mat:
    """Ball Jacobian of f over ball tokens ``X`` (n lists of d arb) in the tight softmax form
    (``P_ij = 1/Σ_l e^{u_i·(x_l − x_j)}``, ``u_i = Aᵀx_i``; ``x_l − m_i = Σ_j P_ij (x_l − x_j)``;
    ``Cov_i = Σ_{j<l} P_ij P_il (x_j − x_l)(x_j − x_l)ᵀ``). Call at the working precision; the
    same operations in the same order as the checker's rule.

    Guarantee: encloses Df(X) for every X in the balls (bounds.md #domain-jacobian).
    """
    n, d, At, zero = len(X), len(X[0]), A.transpose(), flint.arb(0)
    U, D, H, s, Ps = cell_parts(A, X)
    q = [[s[a] * s[b] / 4 for b in range(d)] for a in range(d)]
    CB = [[(zero if a == b else -q[a][b]).union(q[a][b]) for b in range(d)] for a in range(d)]
    J = [[zero] * (n * d) for _ in range(n * d)]
    for i in range(n):
        P = Ps[i]
        cov = [[zero] * d for _ in range(d)]
        for j in range(n):
            for t in range(j + 1, n):
                w = P[j] * P[t]
                for a in range(d):
                    for b in range(d):
                        cov[a][b] += w * D[j][t][a] * D[j][t][b]
        cov = [[cov[a][b].intersection(CB[a][b]) for b in range(d)] for a in range(d)]
        C = V * flint.arb_mat(cov) * At  # the checker: the same product
        for t in range(n):
            y = [sum((P[j] * D[t][j][b] for j in range(n)), zero).intersection(H[t][b])
                 for b in range(d)]  # fmt: skip
            Vy = [sum((V[a, b] * y[b] for b in range(d)), zero) for a in range(d)]
            for a in range(d):
                for b in range(d):
                    v = P[t] * (V[a, b] + Vy[a] * U[i][b])
                    J[i * d + a][t * d + b] = v + C[a, b] if t == i else v
    return flint.arb_mat(J)


def structural_bound(A: flint.arb_mat, X: list, R: flint.fmpq, nA: Any, nV: Any) -> flint.arb:
    """A ball containing ``‖V‖(‖P‖₂ + ‖N‖₂ + ‖A‖ c)``, an upper bound on ‖Df‖₂ over the
    points of (B_R)^n in the ball tokens X (``nA >= ‖A‖₂``, ``nV >= ‖V‖₂`` balls of exact
    upper bounds; ``N_il = p_il e_l μ_i`` with ``p >= P``, ``e_l >= |x_l − m_i|``,
    ``μ_i >= |u_i|``, ``c >= ‖Cov_i‖₂``). The same operations as the checker's rule.

    Guarantee: ‖Df(X)‖₂ <= every point of the ball for X in (B_R)^n ∩ X (bounds.md
    #domain-structure).
    """
    U, _, H, s, P = cell_parts(A, X)
    n, R = len(X), flint.arb(R)
    top = lambda v: reduce(flint.arb.max, v)  # noqa: E731  arb_max encloses the maximum
    up = lambda v: flint.arb(sum(x.abs_upper() ** 2 for x in v)).sqrt()  # noqa: E731
    rho = [R.min(up(x)) for x in X]
    mu = [(nA * r).min(up(u)) for r, u in zip(rho, U, strict=True)]
    e = [(2 * R).min(up(h)) for h in H]
    one = flint.arb(1)  # 0 <= P_ij <= 1 (a non-finite ball: exp overflowed)
    p = [[one.min(x.abs_upper()) if x.is_finite() else one for x in row] for row in P]
    cols = top([sum(p[i][j] for i in range(n)) for j in range(n)])  # ‖P‖_∞ = 1 (row sums)
    c = (top(rho) ** 2).min(sum(x * x for x in s) / 4)  # >= tr Cov_i >= ‖Cov_i‖₂
    w = top(e).min(c.sqrt())  # Σ_l P_il |x_l − m_i| <= (tr Cov_i)^½ (Cauchy–Schwarz)
    rows = top([mu[i] * sum(p[i][t] * e[t] for t in range(n)).min(w) for i in range(n)])
    ncol = top([e[t] * sum(mu[i] * p[i][t] for i in range(n)) for t in range(n)])
    m2 = (rows * ncol).sqrt().min(top(mu) * (c * cols).sqrt())  # three bounds on ‖M₂‖₂
    m2 = m2.min((sum(x * x for x in mu) * c * top([top(r) for r in p])).sqrt())
    return nV * (cols.sqrt() + m2 + nA * c)


def _pd_gap(J: flint.arb_mat, s: flint.fmpq) -> bool:
    """``s² I − JᵀJ`` certified positive definite by ball elimination without pivoting (as
    the checker). Guarantee: True ⇒ ‖J′‖₂ < s for every J′ in the ball J."""
    S = J.transpose() * J
    m = S.nrows()
    G = [[(flint.arb(s * s) if i == j else flint.arb(0)) - S[i, j] for j in range(m)]
         for i in range(m)]  # fmt: skip
    for k in range(m):
        if not G[k][k] > 0:
            return False
        for i in range(k + 1, m):
            f = G[i][k] / G[k][k]
            for j in range(k + 1, m):
                G[i][j] -= f * G[k][j]
    return True


def _close(J: flint.arb_mat, target: flint.fmpq):
    """A certified leaf bound ``<= target`` for the ball matrix J, or None: the pair
    ``(bm, br)`` with ‖mid J‖₂ < bm, ‖rad J‖₂ < br (so ‖J′‖₂ < bm + br on the ball), else one
    number b from the Gram test of J (bounds.md #domain-jacobian, #spectral-upper)."""
    mid = flint.arb_mat([[x.mid() for x in r] for r in J.tolist()])
    rad = flint.arb_mat([[x.rad() for x in r] for r in J.tolist()])
    norms = [np.linalg.norm(to_numpy_mid(M), 2) * (1 + 2.0**-12) for M in (mid, rad)]
    bm, br = (round_up(to_fmpq(x), 32) for x in norms)
    if bm > 0 and br > 0 and bm + br <= target:
        if _pd_gap(mid, bm * (1 - SLACK)) and _pd_gap(rad, br * (1 - SLACK)):
            return (bm, br)
    return target if _pd_gap(J, target * (1 - SLACK)) else None


def _structure_leaf(A, balls: list, R: flint.fmpq, uppers: tuple | None, target: flint.fmpq):
    """``({"structure": b}, estimate)`` when the structural bound certifies ‖Df‖₂ < b <= target
    on the cell, else ``(None, estimate)`` (estimate: the bound as a float, inf if none)."""
    if uppers is None:
        return None, float("inf")
    S = structural_bound(A, balls, R, *uppers)
    if not S.is_finite():
        return None, float("inf")
    b = round_up(endpoints(S, "structural bound")[1] * (1 + SLACK), 32)
    return ({"structure": b} if b <= target else None), float(b)


def _norm2(M: np.ndarray) -> float:
    """Float spectral norm, 0 for non-finite input (heuristic use only)."""
    return float(np.linalg.norm(M, 2)) if np.all(np.isfinite(M)) else 0.0


def _float_norm_estimate(J: flint.arb_mat) -> float:
    mid = to_numpy_mid(J)
    rad = np.array([[float(J[i, j].rad()) for j in range(J.ncols())] for i in range(J.nrows())])
    if not (np.all(np.isfinite(mid)) and np.all(np.isfinite(rad))):
        return float("inf")
    return float(np.linalg.norm(mid, 2) + np.linalg.norm(rad, 2))


class _Tree:
    """Binary subdivision of ``[−R, R]^{nd}``: node -> split coordinate and children."""

    def __init__(self) -> None:
        self.split: dict[int, tuple[int, int, int]] = {}
        self.leaf: dict[int, Any] = {}  # None (dropped), a bound b, or a pair (bm, br)
        self.count = 1

    def children(self, node: int, coord: int) -> tuple[int, int]:
        left, right = self.count, self.count + 1
        self.count += 2
        self.split[node] = (coord, left, right)
        return left, right

    def preorder(self) -> tuple[list[int], list[flint.fmpq | None]]:
        tree, bounds, stack = [], [], [0]
        while stack:
            node = stack.pop()
            if node in self.split:
                coord, left, right = self.split[node]
                tree.append(coord)
                stack += [right, left]
            else:
                tree.append(-1)
                bounds.append(self.leaf[node])
        return tree, bounds


def _balls(lo: list, hi: list, n: int, d: int, R: flint.fmpq) -> list:
    """Balls of the box's coordinates, each cut to |x_ib| <= (R² − Σ_{c≠b} dist(0, [lo, hi]_ic)²)^½
    (bounds.md #domain-contraction; the checker does the same). Call at the working precision
    on a box that :func:`dropped` keeps."""
    out = []
    for i in range(n):
        near = [max(lo[i * d + b], -hi[i * d + b], 0) for b in range(d)]
        total = sum((t * t for t in near), flint.fmpq(0))
        row = []
        for b in range(d):
            r = flint.arb(R * R - total + near[b] * near[b]).sqrt()
            x = flint.arb(lo[i * d + b]).union(flint.arb(hi[i * d + b]))
            row.append(x.intersection((-r).union(r)))
        out.append(row)
    return out


def _centre_in_ball(lo: list, hi: list, n: int, d: int, R: float) -> np.ndarray:
    X = np.array([(float(a) + float(b)) / 2 for a, b in zip(lo, hi, strict=True)]).reshape(n, d)
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    return np.where(norms > R, X * (R / np.maximum(norms, 1e-300)), X)


def subdivide(
    A: flint.arb_mat,
    V: flint.arb_mat,
    R: flint.fmpq,
    n: int,
    target: flint.fmpq,
    *,
    prec: int,
    max_cells: int,
    seconds: float,
    float_AV: tuple[np.ndarray, np.ndarray],
    uppers: tuple | None = None,
) -> tuple[_Tree | None, DomainRun, np.ndarray | None]:
    """Adaptive subdivision until every kept leaf has a certified bound ``≤ target``;
    ``uppers`` (balls above ‖A‖₂ and ‖V‖₂ as the checker makes them, or None) enables the
    structural leaf bound (bounds.md #domain-structure), tried first on every cell.

    Returns the tree (None when cells are left open), the run report and the configuration
    with the largest float ‖Df‖₂ seen (a proposal for a refutation).

    Guarantee: a returned tree's kept leaves carry bounds ``b ≤ target`` with ``‖J‖₂ < b``
    certified over the leaf; its dropped leaves (bound None) pass :func:`dropped`.
    """
    d = A.nrows()
    nd, run, tree, t0 = n * d, DomainRun(), _Tree(), time.perf_counter()
    Af, Vf = float_AV
    best_X, heap = None, []
    with precision(prec):

        def visit(node: int, lo: list, hi: list) -> None:
            nonlocal best_X
            run.cells += 1
            if dropped(lo, hi, R, n, d):
                tree.leaf[node], run.dropped = None, run.dropped + 1
                return
            Xc = _centre_in_ball(lo, hi, n, d, float(R))
            value = _norm2(float_jacobian(Af, Vf, Xc))
            if value > run.float_sup:
                run.float_sup, best_X = value, Xc
            balls = _balls(lo, hi, n, d, R)
            leaf, est = _structure_leaf(A, balls, R, uppers, target)
            if leaf is not None:
                tree.leaf[node], run.kept = leaf, run.kept + 1
                return
            J = cell_jacobian(A, V, balls)
            if all(J[i, j].is_finite() for i in range(nd) for j in range(nd)):
                est = min(est, _float_norm_estimate(J))
            if est < float(target):
                leaf = _close(J, target)
                if leaf is not None:
                    tree.leaf[node], run.kept = leaf, run.kept + 1
                    return
            heapq.heappush(heap, (-est, node, lo, hi))

        visit(0, [-R] * nd, [R] * nd)
        while heap:
            if run.cells >= max_cells or time.perf_counter() - t0 > seconds:
                break
            _, node, lo, hi = heapq.heappop(heap)
            widths = [h - lo_ for lo_, h in zip(lo, hi, strict=True)]
            coord = max(range(nd), key=lambda c: (widths[c], -(c % d), -(c // d)))
            mid = (lo[coord] + hi[coord]) / 2
            left, right = tree.children(node, coord)
            visit(left, lo, hi[:coord] + [mid] + hi[coord + 1 :])
            visit(right, lo[:coord] + [mid] + lo[coord + 1 :], hi)
        run.open, run.seconds = len(heap), time.perf_counter() - t0
        if heap:
            run.open_upper = _open_upper(A, V, heap, n, d, R, prec)
            return None, run, best_X
    return tree, run, best_X


def _open_upper(A, V, heap: list, n: int, d: int, R: flint.fmpq, prec: int) -> flint.fmpq | None:
    """Certified (Frobenius) bound over the open cells; None if too many or not finite."""
    if len(heap) > 200:
        return None
    try:
        ups = [frobenius_upper(cell_jacobian(A, V, _balls(lo, hi, n, d, R)), prec)
               for _, _, lo, hi in heap]  # fmt: skip
    except CertifiedError:
        return None
    return max(ups)


def certified_point_lower(
    inst: AttentionInstance, X: Any, prec: int
) -> tuple[flint.fmpq, np.ndarray, np.ndarray]:
    """``‖Df(X)v‖/‖v‖`` at an exact X (shrunk into (B_R)^n if needed), v the float top right
    singular vector. Returns (lower bound, exact X, exact v).

    Guarantee: lower bound on ‖Df(X)‖₂ at the returned X, which lies in (B_R)^n.
    """
    X = np.asarray(X, dtype=float) * (1 - 2.0**-30)
    Xq = to_fmpq_array(X, "X")
    for i, x in enumerate(Xq):
        r2 = sum((t * t for t in x), flint.fmpq(0))
        if r2 > inst.R * inst.R:  # rounding pushed it out: scale the row down exactly
            Xq[i] = [t * inst.R / (to_fmpq(float(r2) ** 0.5) * (1 + SLACK)) for t in x]
    J = attention_jacobian(inst.layer, Xq, prec=prec)
    v = to_fmpq_array(np.linalg.svd(to_numpy_mid(J))[2][0], "v")
    return spectral_norm_lower(J, prec, v), Xq, v


def _validate(inst: AttentionInstance, hypothesis: str, n: Any, factor: Any) -> tuple:
    if hypothesis not in ("H1", "H2"):
        raise InputError(f"hypothesis: {hypothesis!r}; use H1 or H2")
    if n is None:
        if inst.X is None:
            raise InputError('n: give n or a point cloud "X" (its number of rows is n)')
        n = inst.X.shape[0]
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 64:
        raise InputError(f"n: {n!r}; give an integer 1 <= n <= 64")
    factor = to_fmpq(factor, "factor")
    if factor <= 0:
        raise InputError(f"factor: {factor} is not > 0")
    if inst.layer.residual or inst.layer.causal:
        raise InputError("layer: the statements are about the plain map (no residual, no mask)")
    return n, factor


def decide_on_domain(
    inst: AttentionInstance,
    hypothesis: str,
    n: int | None = None,
    *,
    factor: Any = 1,
    prec: int = DEFAULT_PREC,
    max_cells: int = DEFAULT_MAX_CELLS,
    seconds: float = DEFAULT_SECONDS,
    search: bool = True,
):
    """Decide ``sup_{(B_R)^n} ‖Df‖₂ ≤ factor · RHS`` (H1 or H2; factor 1: the hypothesis).

    Parameters
    ----------
    inst : AttentionInstance
    hypothesis : {"H1", "H2"}
    n : int, optional
        Number of tokens (default: the rows of ``inst.X``).
    factor : exact number > 0
        Scales the right-hand side (e.g. 1/10 for a deliberately false variant).
    prec, max_cells, seconds : working precision, budget of cells and of seconds.
    search : bool
        Run the float ascent for a counterexample before subdividing.

    Returns
    -------
    LipschitzVerdict
        With a ``lipschitz-domain`` certificate for VERIFIED and REFUTED; ``extra["run"]`` is
        the :class:`DomainRun`.

    Guarantee: VERIFIED ⇒ sup over (B_R)^n of ‖Df‖₂ ≤ lhs_upper ≤ factor·RHS; REFUTED ⇒ some
    X in (B_R)^n has ‖Df(X)‖₂ ≥ lhs_lower > factor·RHS (proofs/lipschitz.md §5).
    """
    prec = check_precision(prec)
    n, factor = _validate(inst, hypothesis, n, factor)
    entries = [*inst.Q.flat, *inst.K.flat, *inst.V.flat, inst.R]
    if any(abs(q) > MAX_MAGNITUDE for q in entries):  # the float heuristics would overflow
        return LipschitzVerdict(
            hypothesis, Outcome.UNDECIDED, None, None, None, None, "",
            message=f"entries of Q, K, V or R beyond 2^{MAX_MAGNITUDE.p.bit_length() - 1}: the "
            "subdivision's float heuristics do not handle them; rescale the instance",
        )  # fmt: skip
    hv, hm = norm_hint(inst.V, prec), norm_hint(inst.K.T @ inst.Q, prec)
    lo, hi = rhs_bounds(
        hypothesis, (hv["lower"], hv["upper"]), (hm["lower"], hm["upper"]), inst.R, n, inst.k, prec
    )
    rhs_lo, rhs_hi = round_down(lo * factor), round_up(hi * factor)
    ctx = _Context(inst, hypothesis, n, factor, prec, hv, hm, rhs_lo, rhs_hi)
    best_lower = flint.fmpq(0)
    # H2 with factor >= 1 has no counterexample (bounds.md #domain-structure): search later
    search = search and not (hypothesis == "H2" and factor >= 1)
    point = _proposal(inst, None, n, prec) if search else None
    if point is not None:
        best_lower = point[0]
        if point[0] > rhs_hi:
            return ctx.refuted(point, None)
    if not any(inst.V.flat):  # V = 0: f = 0 and Df = 0 <= factor·RHS (no certificate: lhs 0)
        zero = _Tree()
        zero.leaf[0] = flint.fmpq(0)
        return ctx.verified(zero, DomainRun(cells=1, kept=1))
    with precision(prec):
        A = flint.arb_mat((inst.K.T @ inst.Q).tolist()) * (1 / flint.arb(inst.k).sqrt())
        V = flint.arb_mat(inst.V.tolist())
        uppers = None  # the checker's balls from hints.upper (positive: its LDLᵀ test)
        if hm["upper"] > 0 and hv["upper"] > 0:
            uppers = (flint.arb(hm["upper"]) / flint.arb(inst.k).sqrt(), flint.arb(hv["upper"]))
    Af = inst.K.T.astype(float) @ inst.Q.astype(float) / np.sqrt(inst.k)
    with np.errstate(all="ignore"):  # float heuristics only: overflow means "no proposal"
        tree, run, best_X = subdivide(
            A, V, inst.R, n, rhs_lo, prec=prec, max_cells=max_cells, seconds=seconds,
            float_AV=(Af, inst.V.astype(float)), uppers=uppers,
        )  # fmt: skip
    if tree is not None:
        return ctx.verified(tree, run)

    point = _proposal(inst, best_X, n, prec) if best_X is not None else None
    if point is not None:
        if point[0] > rhs_hi:
            return ctx.refuted(point, run)
        best_lower = max(best_lower, point[0])
    return ctx.undecided(run, best_lower)


def _proposal(inst: AttentionInstance, X: np.ndarray | None, n: int, prec: int) -> tuple | None:
    """The certified lower bound at the end of a float ascent (domain_search) from X, or (X
    None) from the tightness configuration and SEARCH_STARTS − 1 random starts (seed 0); None
    when the float heuristics break down (non-finite values at extreme magnitudes)."""
    try:
        with np.errstate(all="ignore"):
            Af = inst.K.T.astype(float) @ inst.Q.astype(float) / np.sqrt(inst.k)
            starts = [0.95 * tightness_configuration(inst, n) if X is None else X]
            extra = SEARCH_STARTS - 1 if X is None else 0
            _, X = ascend_jacobian_norm(Af, inst.V.astype(float), float(inst.R), starts, extra)
            return certified_point_lower(inst, X, prec)
    except (CertifiedError, np.linalg.LinAlgError, ArithmeticError, ValueError):
        return None


def _total(bound: Any) -> flint.fmpq:
    if isinstance(bound, dict):
        return bound["structure"]
    return bound[0] + bound[1] if isinstance(bound, tuple) else bound


def _written(bound: Any) -> Any:
    if bound is None:
        return "drop"
    if isinstance(bound, dict):
        return {"structure": exact_number(bound["structure"])}
    if isinstance(bound, tuple):
        return [exact_number(x) for x in bound]
    return exact_number(bound)


class _Context:
    """The fixed data of one decision and the three ways to report it."""

    def __init__(self, inst, hypothesis, n, factor, prec, hv, hm, rhs_lo, rhs_hi) -> None:
        self.inst, self.hypothesis, self.n, self.factor, self.prec = (
            inst,
            hypothesis,
            n,
            factor,
            prec,
        )
        self.hv, self.hm, self.rhs_lo, self.rhs_hi = hv, hm, rhs_lo, rhs_hi
        scaled = "" if factor == 1 else f" (right-hand side times {factor})"
        self.name = f"{hypothesis}{scaled}"

    def _certificate(self, claim: dict, key: str, extra_hints: dict) -> dict[str, Any]:
        inst = self.inst
        num = lambda x: None if x is None else exact_number(x)  # noqa: E731
        mat = lambda a: [[exact_number(v) for v in row] for row in a]  # noqa: E731
        norms = {}
        for name, b in (("V", self.hv), ("KtQ", self.hm)):
            value = b[key]
            norms[name] = {key: num(value) if key == "upper" else [num(x) for x in value]}
        body = {
            "Q": mat(inst.Q), "K": mat(inst.K), "V": mat(inst.V), "R": num(inst.R), "n": self.n
        }  # fmt: skip
        c = {"hypothesis": self.hypothesis, "factor": num(self.factor)}
        for k, v in claim.items():
            if k == "verdict":
                c[k] = v
            else:
                c[k] = mat(v) if k == "X" else [num(x) for x in v] if k == "vector" else num(v)
        hints = {"precision": self.prec, "norms": norms, **extra_hints}
        return {"kind": "lipschitz-domain", "version": 1, "instance": body, "claim": c,
                "hints": hints}  # fmt: skip

    def verified(self, tree: _Tree, run: DomainRun):
        splits, bounds = tree.preorder()
        lhs = max((_total(b) for b in bounds if b is not None), default=flint.fmpq(0))
        claim = {"verdict": "VERIFIED", "lhs_upper": lhs, "rhs_lower": self.rhs_lo}
        hints: dict[str, Any] = {"tree": splits, "bounds": [_written(b) for b in bounds]}
        if any(isinstance(b, dict) for b in bounds):
            hints["upper"] = {"V": exact_number(self.hv["upper"]),
                              "KtQ": exact_number(self.hm["upper"])}  # fmt: skip
        return LipschitzVerdict(
            self.hypothesis, Outcome.VERIFIED, None, lhs, self.rhs_lo, self.rhs_hi,
            f"{self.name} holds for these Q, K, V, R and n = {self.n}: sup over (B_R)^n of "
            "‖Df‖₂ (= the Lipschitz constant there) <= lhs_upper <= rhs_lower <= RHS",
            certificate=self._certificate(claim, "vector", hints) if lhs > 0 else None,
            message=f"sup ‖Df‖₂ <= {approx_str(lhs)} <= {approx_str(self.rhs_lo)} over (B_R)^n "
            f"({run.kept} leaves kept, {run.dropped} dropped, {run.seconds:.3g} s)",
            extra={"run": run},
        )  # fmt: skip

    def refuted(self, point: tuple, run: DomainRun | None):
        low, X, v = point
        lhs = round_down(low)
        claim = {"verdict": "REFUTED", "lhs_lower": lhs, "rhs_upper": self.rhs_hi, "X": X,
                 "vector": v}  # fmt: skip
        return LipschitzVerdict(
            self.hypothesis, Outcome.REFUTED, lhs, None, self.rhs_lo, self.rhs_hi,
            f"{self.name} is false for these Q, K, V, R and n = {self.n}: the certified X in "
            "(B_R)^n has ‖Df(X)‖₂ >= lhs_lower > rhs_upper >= RHS",
            counterexample={"X": X},
            certificate=self._certificate(claim, "upper", {}),
            message=f"‖Df(X)‖₂ >= {approx_str(lhs)} > {approx_str(self.rhs_hi)} at a point of "
            "(B_R)^n",
            extra={"run": run},
        )  # fmt: skip

    def undecided(self, run: DomainRun, lower: flint.fmpq):
        up = "not certified" if run.open_upper is None else f"<= {approx_str(run.open_upper)}"
        return LipschitzVerdict(
            self.hypothesis, Outcome.UNDECIDED, lower, run.open_upper, self.rhs_lo, self.rhs_hi,
            "",
            message=f"budget exhausted after {run.cells} cells ({run.seconds:.3g} s): {run.open} "
            f"cells open ({up} on them), certified sup ‖Df‖₂ >= {approx_str(lower)}; right side "
            f"in [{approx_str(self.rhs_lo)}, {approx_str(self.rhs_hi)}]",
            extra={"run": run},
        )  # fmt: skip
