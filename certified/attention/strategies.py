"""Public hypothesis strategies for attention instances (requires ``hypothesis``, a test
dependency; import this module explicitly).

``attention_instances(...)`` draws exact single-head instances ``{"Q", "K", "V", "R", "X"}`` in
the input-file format (entries as exact strings ``"p/q"``; tokens inside the closed ball of
radius R), ready for :func:`certified.attention.parse_attention_instance`.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

__all__ = ["attention_instances", "exact_entries"]


def exact_entries(bound: int = 2, denominator: int = 8) -> st.SearchStrategy[str]:
    """Exact rationals p/q with |p/q| <= bound and q <= denominator, as strings."""
    return st.builds(
        lambda p, q: f"{p}/{q}" if q > 1 else str(p),
        st.integers(-bound * denominator, bound * denominator),
        st.integers(1, denominator),
    ).filter(lambda s: abs(eval_fraction(s)) <= bound)


def eval_fraction(s: str) -> float:
    p, _, q = s.partition("/")
    return int(p) / int(q or 1)


@st.composite
def attention_instances(
    draw: Any, max_d: int = 3, max_k: int = 3, max_n: int = 5, qtk_zero: bool = False
) -> dict[str, Any]:
    """An exact attention instance; ``qtk_zero=True`` builds Q, K with KᵀQ = 0 (H1's
    counterexample family) from rows (q, −q) sharing one key row.

    Guarantee: none (test data generator); instances are valid inputs by construction.
    """
    d = draw(st.integers(1, max_d))
    n = draw(st.integers(1, max_n))
    entry = exact_entries()
    row = lambda: [draw(entry) for _ in range(d)]  # noqa: E731
    if qtk_zero:
        q, key = row(), row()
        Q = [q, [s[1:] if s.startswith("-") else "-" + s if s != "0" else s for s in q]]
        K = [key, list(key)]
    else:
        k = draw(st.integers(1, max_k))
        Q, K = [row() for _ in range(k)], [row() for _ in range(k)]
    V = [row() for _ in range(d)]
    R = draw(st.sampled_from(["1/4", "1/2", "1", "2"]))
    r = eval_fraction(R)
    X = []
    for _ in range(n):
        x = [eval_fraction(s) for s in row()]
        scale = max(1.0, sum(v * v for v in x) ** 0.5 / r) * 8
        # rescale by a power of two above the norm ratio: exact and inside the ball
        m = 1
        while m < 2 * scale:
            m *= 2
        X.append([f"{round(v * 4096)}/{4096 * m // 8}" if v else "0" for v in x])
    return {"Q": Q, "K": K, "V": V, "R": R, "X": X}
