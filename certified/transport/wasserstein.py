r"""Certified Wasserstein distances between discrete measures.

.. math::

    W_q(μ, ν)^q = \min_{π ∈ Π(a, b)} Σ_{ij} π_{ij} |x_i - y_j|^q
                = \max_{φ_i + ψ_j ≤ c_{ij}} Σ_i a_i φ_i + Σ_j b_j ψ_j .

An untrusted float solver (POT's network simplex, or the assignment solver of
:mod:`certified.transport._assignment` for uniform measures of equal size) proposes a coupling
and dual potentials. The coupling is made to have exactly the marginals ``a, b`` (rational
arithmetic) and priced with rigorous upper bounds on the costs: ``W_q^q ≤ Σ π_ij c_ij``. The
potentials are made feasible by the c-transform ``φ_i = pred(min_j (c_lo_ij − ψ_j))`` with
rigorous lower bounds ``c_lo`` on the costs and are summed exactly: ``W_q^q ≥ Σ a φ + Σ b ψ``
(proofs/bounds.md#w-dual). Weak duality makes both bounds valid whatever the solver returned;
its accuracy only decides the gap.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import flint
import numpy as np

from certified.arith.ball import endpoints, precision
from certified.arith.exact import to_fmpq
from certified.errors import DomainError, InputError, MissingDependencyError, ShapeError
from certified.transport._assignment import solve_assignment
from certified.transport._costs import CostBounds
from certified.transport.measure import Measure, as_measure

__all__ = ["WassersteinEnclosure", "wasserstein", "MAX_Q_TERMS"]

SOLVERS = ("auto", "pot", "assignment")
MAX_Q_TERMS = 1000
"""Largest numerator and denominator of an exponent q (certificates compare exact powers)."""
POT_HINT = "install the optional dependency POT: pip install 'certified[ot]'"


@dataclass(frozen=True, eq=False)
class WassersteinEnclosure:
    """Two-sided enclosure of ``W_q(μ, ν)`` with its evidence.

    ``lower_q <= W_q^q <= upper_q`` and ``lower <= W_q <= upper`` (exact ``fmpq``). The
    evidence: a coupling with exactly the marginals of ``mu`` and ``nu`` (``rows``, ``cols``,
    ``masses``; see :attr:`coupling`) whose cost is at most ``upper_q``, and potentials
    ``phi``, ``psi`` (exact dyadics, held as float64 in ``phi_float`` / ``psi_float``) with
    ``phi_i + psi_j <= |x_i - y_j|^q`` for all ``i, j`` and ``Σ a φ + Σ b ψ = lower_q``.
    ``method`` names the producer; ``message`` reports solver warnings (else empty).

    Guarantee: encloses ``W_q(μ, ν)`` and ``W_q(μ, ν)^q`` (rigorous).
    """

    mu: Measure
    nu: Measure
    q: flint.fmpq
    lower: flint.fmpq
    upper: flint.fmpq
    lower_q: flint.fmpq
    upper_q: flint.fmpq
    rows: np.ndarray
    cols: np.ndarray
    masses: np.ndarray
    phi_float: np.ndarray
    psi_float: np.ndarray
    method: str
    message: str = ""

    @property
    def coupling(self) -> list[tuple[int, int, flint.fmpq]]:
        """Sparse coupling: ``(i, j, exact mass)`` triples, sorted, distinct pairs.

        Guarantee: exact (marginals exactly the weights of ``mu`` and ``nu``)."""
        return list(zip(self.rows.tolist(), self.cols.tolist(), self.masses.tolist(), strict=True))

    @property
    def phi(self) -> np.ndarray:
        """Exact potentials on the atoms of ``mu`` (``fmpq`` object array).

        Guarantee: exact; ``phi_i + psi_j <= c_ij`` for all i, j."""
        return _exact_array(self.phi_float)

    @property
    def psi(self) -> np.ndarray:
        """Exact potentials on the atoms of ``nu`` (``fmpq`` object array).

        Guarantee: exact; ``phi_i + psi_j <= c_ij`` for all i, j."""
        return _exact_array(self.psi_float)

    @property
    def gap(self) -> flint.fmpq:
        """``upper - lower`` (on ``W_q``). Guarantee: exact."""
        return self.upper - self.lower

    @property
    def relative_gap(self) -> float:
        """``(upper - lower) / upper`` as a float (0 when ``upper = 0``). Guarantee: none
        (a rounded figure of merit)."""
        return 0.0 if self.upper == 0 else float(self.gap / self.upper)

    def __repr__(self) -> str:
        return (
            f"WassersteinEnclosure(q={self.q}, W_q in [{float(self.lower):.17g}, "
            f"{float(self.upper):.17g}], relative gap {self.relative_gap:.2e}, {self.method})"
        )


def _exact_array(x: np.ndarray) -> np.ndarray:
    out = np.empty(len(x), dtype=object)
    out[:] = [flint.fmpq(*v.as_integer_ratio()) for v in x.tolist()]
    return out


def exact_float_sum(x: np.ndarray) -> flint.fmpq:
    """The exact sum of float64 values. Guarantee: exact."""
    x = np.asarray(x, dtype=np.float64)
    x = x[x != 0]
    if x.size == 0:
        return flint.fmpq(0)
    m, e = np.frexp(x)
    mant = np.ldexp(m, 53).astype(np.int64).tolist()  # x = mant * 2^(e - 53), exactly
    e = e - 53
    emin = int(e.min())
    total = sum(a << b for a, b in zip(mant, (e - emin).tolist(), strict=True))
    scale = flint.fmpz(2) ** abs(emin)
    return flint.fmpq(total) * scale if emin >= 0 else flint.fmpq(total, scale)


def weighted_exact_sum(
    weights: np.ndarray, values: np.ndarray, uniform: bool = False
) -> flint.fmpq:
    """``Σ_k weights[k] * values[k]`` exactly (weights ``fmpq``, values float64, grouped by
    equal weights; ``uniform``: all weights are equal). Guarantee: exact."""
    if uniform:
        return weights[0] * exact_float_sum(values)
    groups: dict[flint.fmpq, list[int]] = {}
    for k, w in enumerate(weights.tolist()):
        if w != 0:
            groups.setdefault(w, []).append(k)
    total = flint.fmpq(0)
    for w, idx in groups.items():
        total += w * exact_float_sum(values[idx] if len(idx) < len(values) else values)
    return total


def _forest_coupling(rows, cols, a, b):
    """The exact flows on the support when it is a forest (a basic solution, as the network
    simplex returns): leaves are peeled off one by one, each edge carrying what its leaf still
    needs. None when the support has a cycle or a flow comes out negative or unbalanced."""
    n = len(a)
    edges = list(zip(rows.tolist(), (cols + n).tolist(), strict=True))
    if len(edges) > n + len(b) - 1:
        return None
    need = list(a) + list(b)
    incident: list[set[int]] = [set() for _ in need]
    for k, (i, j) in enumerate(edges):
        incident[i].add(k)
        incident[j].add(k)
    flow: list[flint.fmpq | None] = [None] * len(edges)
    stack = [v for v in range(len(need)) if len(incident[v]) == 1]
    while stack:
        v = stack.pop()
        if len(incident[v]) != 1:
            continue
        k = incident[v].pop()
        flow[k] = need[v]
        need[v] = flint.fmpq(0)
        w = edges[k][0] + edges[k][1] - v
        incident[w].discard(k)
        need[w] -= flow[k]
        if len(incident[w]) == 1:
            stack.append(w)
    if any(f is None or f < 0 for f in flow) or any(x != 0 for x in need):
        return None  # a cycle (edges left over), a negative flow, or an unbalanced component
    masses = np.empty(len(edges), dtype=object)
    masses[:] = flow
    return masses


def exact_coupling(rows, cols, vals, a, b):
    """A coupling with exactly the marginals ``a``, ``b`` close to the float coupling given.

    If the support is a forest, the flows it determines (exact leaf elimination) are used when
    they are non-negative. Otherwise entries are read exactly and clipped at 0; rows, then
    columns, whose sums exceed their
    marginal are reduced entry by entry; the remaining deficits (equal in total, since both
    marginals sum to 1) are transported by the north-west corner rule. All in exact rational
    arithmetic; at most ``len(vals) + n + m`` entries.

    Guarantee: exact (non-negative, marginals exactly ``a`` and ``b``).
    """
    order = np.lexsort((cols, rows))
    rows, cols, vals = rows[order], cols[order], vals[order]
    forest = _forest_coupling(rows, cols, a, b)
    if forest is not None:
        keep = np.array([w > 0 for w in forest], dtype=bool)
        return rows[keep].astype(np.int64), cols[keep].astype(np.int64), forest[keep]
    P: dict[tuple[int, int], flint.fmpq] = {}
    for i, j, v in zip(rows.tolist(), cols.tolist(), vals.tolist(), strict=True):
        if v > 0:
            P[(i, j)] = flint.fmpq(*v.as_integer_ratio())
    for axis, marg in ((0, a), (1, b)):
        sums: dict[int, flint.fmpq] = {}
        keys: dict[int, list] = {}
        for key, v in P.items():
            sums[key[axis]] = sums.get(key[axis], flint.fmpq(0)) + v
            keys.setdefault(key[axis], []).append(key)
        for k, s in sums.items():
            excess = s - marg[k]
            for key in keys[k]:
                if excess <= 0:
                    break
                take = min(P[key], excess)
                P[key] -= take
                excess -= take
    row_def = list(a)
    col_def = list(b)
    for (i, j), v in P.items():
        row_def[i] -= v
        col_def[j] -= v
    i = j = 0
    n, m = len(a), len(b)
    while True:
        while i < n and row_def[i] <= 0:
            i += 1
        while j < m and col_def[j] <= 0:
            j += 1
        if i == n or j == m:
            break
        t = min(row_def[i], col_def[j])
        P[(i, j)] = P.get((i, j), flint.fmpq(0)) + t
        row_def[i] -= t
        col_def[j] -= t
    items = sorted((k, v) for k, v in P.items() if v > 0)
    r = np.array([k[0] for k, _ in items], dtype=np.int64)
    c = np.array([k[1] for k, _ in items], dtype=np.int64)
    masses = np.empty(len(items), dtype=object)
    masses[:] = [v for _, v in items]
    return r, c, masses


def pot_iterations(n: int, m: int) -> int:
    """``numItermax`` passed to POT: its default (10^5) stops the network simplex long before
    the optimum for n = m = 1000; 20 n m pivots is ample in practice. A stopped solve still
    yields valid (looser) bounds and a ``message``. Guarantee: none (tuning)."""
    return int(min(2**31 - 1, max(10**5, 20 * n * m)))


def _pot_emd(a: np.ndarray, b: np.ndarray, M: np.ndarray):
    try:
        import ot
    except ImportError:
        raise MissingDependencyError(
            "solver: general (non-uniform or unequal-size) measures need a linear-programming "
            f"solver; {POT_HINT}"
        ) from None
    n_iter = pot_iterations(*M.shape)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        G, log = ot.emd(a, b, M, numItermax=n_iter, log=True)
    message = "; ".join(str(w.message) for w in caught)
    if log.get("warning"):
        message = f"POT: {log['warning']}" + (f"; {message}" if message else "")
    return np.asarray(G), np.asarray(log["u"]), np.asarray(log["v"]), message


def _dyadic(x: flint.fmpq, up: bool, bits: int = 96) -> flint.fmpq:
    """A dyadic with about ``bits`` significant bits, ``>= x`` (up) or ``<= x``. Exact."""
    e = bits - (int(x.p).bit_length() - int(x.q).bit_length())
    num, den = (int(x.p) << e, int(x.q)) if e >= 0 else (int(x.p), int(x.q) << -e)
    k = -((-num) // den) if up else num // den
    return flint.fmpq(k) / flint.fmpq(2) ** e if e >= 0 else flint.fmpq(k) * flint.fmpq(2) ** -e


def _root_bounds(lower_q, upper_q, q) -> tuple[flint.fmpq, flint.fmpq]:
    """Exact rationals ``lower <= lower_q^{1/q}`` and ``upper >= upper_q^{1/q}``, each checked
    by an exact comparison of integer powers (proofs/wasserstein.md, claim)."""
    p, r = int(q.p), int(q.q)
    lower, upper = flint.fmpq(0), flint.fmpq(0)
    with precision(192):
        inv = flint.arb(flint.fmpq(r, p))
        if lower_q > 0:
            lo = _dyadic(endpoints((flint.arb(lower_q).log() * inv).exp())[0], up=False)
            lower = lo if lo > 0 and lo**p <= lower_q**r else flint.fmpq(0)
        if upper_q > 0:
            hi = _dyadic(endpoints((flint.arb(upper_q).log() * inv).exp())[1], up=True)
            upper = hi if hi**p >= upper_q**r else max(flint.fmpq(1), upper_q)
    return lower, upper


def _check_q(q: Any) -> flint.fmpq:
    qq = to_fmpq(q, "q")
    if qq < 1:
        raise DomainError(f"q: {q!r} < 1; W_q is defined here for q >= 1 (a metric)")
    if qq.p > MAX_Q_TERMS or qq.q > MAX_Q_TERMS:
        raise DomainError(
            f"q: {qq} has a numerator or denominator above {MAX_Q_TERMS}; round q to a simpler "
            "rational"
        )
    return qq


def wasserstein(mu: Any, nu: Any, q: Any = 2, *, solver: str = "auto") -> WassersteinEnclosure:
    """Certified two-sided enclosure of the Wasserstein distance ``W_q(μ, ν)``.

    Parameters
    ----------
    mu, nu : Measure or array_like (n, d)
        Discrete probability measures (an array is the uniform measure on its rows), in the
        same dimension.
    q : int, str, fmpq, ... (exact)
        Exponent ``q >= 1``, an exact rational (``2``, ``1``, ``"3/2"``); the cost is
        ``|x - y|^q`` with the Euclidean norm.
    solver : {"auto", "pot", "assignment"}
        The untrusted producer: ``"assignment"`` (built in, uniform measures of equal size
        only), ``"pot"`` (POT's exact network simplex, optional dependency: ``certified[ot]``),
        ``"auto"`` (POT when installed, else the assignment solver for uniform measures of
        equal size). The solver affects the gap, never validity.

    Returns
    -------
    WassersteinEnclosure

    Raises
    ------
    ShapeError
        Measures in different dimensions.
    DomainError
        ``q < 1`` or ``q`` not a simple rational.
    MissingDependencyError
        General measures without POT installed.
    InputError
        An unknown solver, or invalid measures (see :class:`Measure`).

    Guarantee: ``lower <= W_q <= upper`` and ``lower_q <= W_q^q <= upper_q`` (rigorous, for
    the exact points and weights).
    """
    mu, nu = as_measure(mu, "mu"), as_measure(nu, "nu")
    if mu.d != nu.d:
        raise ShapeError(f"nu: points in dimension {nu.d}, mu's are in dimension {mu.d}")
    qq = _check_q(q)
    if solver not in SOLVERS:
        raise InputError(f"solver: {solver!r} is not one of {', '.join(SOLVERS)}")
    permutation_case = mu.uniform and nu.uniform and mu.n == nu.n
    if solver == "assignment" and not permutation_case:
        raise InputError(
            "solver: 'assignment' needs uniform measures with equal numbers of atoms; "
            "use solver='pot'"
        )
    if solver == "auto":
        try:
            import ot  # noqa: F401

            solver = "pot"
        except ImportError:
            solver = "assignment" if permutation_case else "pot"
    costs = CostBounds(mu, nu, qq)
    M = costs.float_costs()
    message = ""
    if solver == "assignment":
        perm, _, psi = solve_assignment(M)
        rows, cols = np.arange(mu.n), perm
        masses = None
    else:
        G, _, psi, message = _pot_emd(mu.weights_float, nu.weights_float, M)
        rows, cols = np.nonzero(G > 0)
        masses = None
        is_perm = (
            permutation_case
            and len(rows) == mu.n
            and len(set(rows.tolist())) == len(set(cols.tolist())) == mu.n
        )
        if not is_perm:
            rows, cols, masses = exact_coupling(rows, cols, G[rows, cols], mu.weights, nu.weights)
    kind = "coupling" if masses is not None else "permutation"
    if masses is None:  # a permutation of uniform atoms: every mass is exactly 1/n
        order = np.argsort(rows, kind="stable")
        rows, cols = rows[order].astype(np.int64), cols[order].astype(np.int64)
        masses = np.empty(len(rows), dtype=object)
        masses[:] = [mu.weights[0]] * len(rows)
    psi = np.ascontiguousarray(psi, dtype=np.float64)
    if psi.shape != (nu.n,) or not np.all(np.isfinite(psi)):
        psi = np.zeros(nu.n)  # a useless dual is replaced by 0: phi is then min_j c_lo_ij
    # proof: proofs/bounds.md#w-dual (c-transform with lower-rounded costs, one pred per row)
    phi = np.nextafter(costs.row_min_minus(psi), -np.inf)
    if not np.all(np.isfinite(phi)):
        psi = np.zeros(nu.n)
        phi = np.nextafter(costs.row_min_minus(psi), -np.inf)
    lower_q = weighted_exact_sum(mu.weights, phi, mu.uniform)
    lower_q += weighted_exact_sum(nu.weights, psi, nu.uniform)
    c_hi = costs.upper_pairs(rows, cols)
    upper_q = weighted_exact_sum(masses, c_hi, kind == "permutation")
    lower, upper = _root_bounds(lower_q, upper_q, qq)
    return WassersteinEnclosure(
        mu, nu, qq, lower, upper, lower_q, upper_q, rows, cols, masses, phi, psi,
        f"{kind}/{solver}", message,
    )  # fmt: skip
