"""Dense linear assignment by shortest augmenting paths (the untrusted producer for uniform
measures of equal size when POT is not installed).

Algorithm: D. F. Crouse, *On implementing 2D rectangular assignment algorithms*, IEEE Trans.
Aerospace and Electronic Systems 52(4) (2016), Algorithm 4 (the Jonker-Volgenant shortest
augmenting path, as in SciPy's ``linear_sum_assignment``), with dual variables kept so that
``u_i + v_j <= C_ij`` (up to float rounding) and equality on the assignment. Nothing here is
rigorous: the caller certifies the permutation (upper bound) and repairs the duals (lower
bound) in rigorous arithmetic.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["solve_assignment"]


@njit(cache=True)
def _lsap(C):  # pragma: no cover - compiled
    n = C.shape[0]
    u = np.zeros(n)
    v = np.zeros(n)
    # start from the column reduction v_j = min_i C_ij (dual feasible), as Jonker-Volgenant do
    for j in range(n):
        v[j] = C[:, j].min()
    shortest = np.empty(n)
    path = np.full(n, -1)
    col4row = np.full(n, -1)
    row4col = np.full(n, -1)
    SR = np.zeros(n, dtype=np.bool_)
    SC = np.zeros(n, dtype=np.bool_)
    remaining = np.empty(n, dtype=np.int64)
    for cur_row in range(n):
        min_val = 0.0
        num_remaining = n
        for it in range(n):
            remaining[it] = n - it - 1
        SR[:] = False
        SC[:] = False
        shortest[:] = np.inf
        sink = -1
        i = cur_row
        while sink == -1:
            index = -1
            lowest = np.inf
            SR[i] = True
            ui = u[i]
            for it in range(num_remaining):
                j = remaining[it]
                r = min_val + C[i, j] - ui - v[j]
                if r < shortest[j]:
                    path[j] = i
                    shortest[j] = r
                if shortest[j] < lowest or (shortest[j] == lowest and row4col[j] == -1):
                    lowest = shortest[j]
                    index = it
            min_val = lowest
            if index == -1 or min_val == np.inf:
                return col4row, u, v, False
            j = remaining[index]
            if row4col[j] == -1:
                sink = j
            else:
                i = row4col[j]
            SC[j] = True
            num_remaining -= 1
            remaining[index] = remaining[num_remaining]
        u[cur_row] += min_val
        for i in range(n):
            if SR[i] and i != cur_row:
                u[i] += min_val - shortest[col4row[i]]
        for j in range(n):
            if SC[j]:
                v[j] -= min_val - shortest[j]
        j = sink
        while True:
            i = path[j]
            row4col[j] = i
            k = col4row[i]
            col4row[i] = j
            j = k
            if i == cur_row:
                break
    return col4row, u, v, True


def solve_assignment(C: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Minimum-cost permutation of a square float64 cost matrix, with dual potentials.

    Returns
    -------
    perm : numpy.ndarray of int64
        ``perm[i]`` is the column assigned to row ``i``.
    u, v : numpy.ndarray of float64
        Approximate optimal duals (``u_i + v_j <= C_ij``, equality on the assignment, up to
        rounding).

    Guarantee: none (heuristic; certified by the caller).
    """
    C = np.ascontiguousarray(C, dtype=np.float64)
    perm, u, v, ok = _lsap(C)
    if not ok or np.any(perm < 0):  # pragma: no cover - finite costs always have a solution
        raise RuntimeError("assignment solver failed on a finite cost matrix; please report")
    return perm, u, v
