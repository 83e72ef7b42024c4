"""One score convention everywhere (theorems.md §1.4, §9): the score of key y at query x is
⟨Qy, Kx⟩ = ⟨y, a⟩ with a = QᵀK x; the transformer ODE's B is QᵀK (score ⟨Bx, y⟩).

Each API is compared with the formula written out here, on a QᵀK that is not symmetric, and
swapping Q and K must change the answer (the other reading ⟨Qx, Ky⟩ would pass otherwise)."""

from __future__ import annotations

import flint
import mpmath
import numpy as np
from mpmath import mp

from certified.attention.maps import attention_map
from certified.attention.model import Attention
from certified.transformers import parse_instance

# QᵀK = [[0, 1], [0, 0]] (d = k = 2): far from symmetric
Q = [[1, 0], [0, 0]]
K = [[0, 1], [0, 0]]
V = [[1, 0], [0, 1]]
X = [["3/5", "4/5"], ["-4/5", "3/5"], ["1", "0"]]


def _reference(Q, K, X):
    """Σ_j softmax_j(⟨Q x_j, K x_i⟩) V x_j at 50 digits (V = I), from the definition."""
    with mp.workdps(50):
        Xm = [[mpmath.mpf(int(_q(v).p)) / int(_q(v).q) for v in row] for row in X]
        Qm, Km = mpmath.matrix(Q), mpmath.matrix(K)
        out = []
        for xi in Xm:
            kx = Km * mpmath.matrix(xi)
            s = [(Qm * mpmath.matrix(y)).T * kx for y in Xm]
            e = [mpmath.exp(v[0]) for v in s]
            z = sum(e)
            out.append([sum(e[j] * Xm[j][c] for j in range(len(Xm))) / z for c in range(2)])
        return out


def _q(v) -> flint.fmpq:
    p, _, q = str(v).partition("/")
    return flint.fmpq(int(p), int(q or 1))


def _contains(ball, value) -> bool:
    """value (50 digits) lies in the ball, up to the 1e-45 of its decimal rendering."""
    with mp.workdps(50):
        lo, hi = (mpmath.mpf(b.str(60, radius=False)) for b in (ball.lower(), ball.upper()))
        return lo - mpmath.mpf(10) ** -45 <= value <= hi + mpmath.mpf(10) ** -45


def test_attention_map_uses_q_on_the_key_and_k_on_the_query():
    ref, swapped = _reference(Q, K, X), _reference(K, Q, X)
    for q, k, want, other in ((Q, K, ref, swapped), (K, Q, swapped, ref)):
        out = attention_map(Attention.single(q, k, V, scaled=False), X, prec=200)
        for i in range(3):
            for c in range(2):
                ball = out[i, c]
                assert _contains(ball, want[i][c])
        # the two readings differ by far more than the balls' radii on this instance
        assert any(abs(want[i][c] - other[i][c]) > 1e-3 for i in range(3) for c in range(2))
        assert not all(_contains(out[i, c], other[i][c]) for i in range(3) for c in range(2))


def test_transformer_field_b_is_qt_k():
    """B = QᵀK, Euclidean softmax: x_i' = Σ_j softmax_j(⟨Qx_j, Kx_i⟩) x_j."""
    QtK = (np.array(Q).T @ np.array(K)).tolist()
    assert QtK != np.array(QtK).T.tolist()
    for B, (q, k) in ((QtK, (Q, K)), (np.array(QtK).T.tolist(), (K, Q))):
        inst = parse_instance(
            {"tokens": X, "geometry": "euclidean", "pieces": [{"duration": 1, "V": V, "B": B}]}
        )
        f = inst.problem.field.evaluate(inst.state().astype(float), inst.problem.pieces[0].values)
        ref = np.array(_reference(q, k, X), dtype=float).ravel()
        other = np.array(_reference(k, q, X), dtype=float).ravel()
        np.testing.assert_allclose(f[0], ref, rtol=0, atol=1e-13)
        assert np.max(np.abs(f[0] - other)) > 1e-3
