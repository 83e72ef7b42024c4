"""Public hypothesis strategies: datasets, near-degenerate datasets, schedules, measures,
attention inputs, expression fields, layer-stack models and token sets.

These strategies generate the inputs the theorems of ``certified`` are about, for property tests
in your own test suite. They need ``hypothesis`` (a test dependency, ``pip install
certified[test]``); it is imported when a strategy is first built, so ``import
certified.strategies`` itself is cheap.

Usage with ``@given``::

    from hypothesis import given
    from certified.strategies import datasets, schedules

    @given(datasets(n=(1, 40), d=(2, 6)))
    def test_my_construction_interpolates(data):
        X, Y = data                      # float64 arrays, rows pairwise distinct
        ...                              # e.g. construct_interpolation(X, Y, width=3)

    @given(schedules(d=3, activation="relu", laminar=True))
    def test_laminar_flow(schedule):
        ...

Every number a strategy draws is a binary64 double (so ``float -> exact rational`` conversion is
exact) or an exact rational string, so a failing example is reproducible bit for bit; pin it
with ``@example`` once found. Sizes are ``int`` or inclusive ``(low, high)`` ranges.

Guarantee: none (test data generators). The documented invariants (pairwise distinct rows,
finite doubles, exact weights summing to 1) hold by construction and are tested.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = [
    "ATTENTION_RADII",
    "LAYOUTS",
    "attention_inputs",
    "datasets",
    "doubles",
    "expression_fields",
    "measures",
    "near_degenerate_datasets",
    "schedules",
    "stack_models",
    "token_sets",
]

LAYOUTS = ("random", "collinear", "lattice", "repeated", "last_bit", "mixed")
"""Layouts :func:`datasets` draws from (``layout="any"`` picks one of them)."""

_TINY_EXP = -997  # 2**-997 ~ 7.5e-301 (just below 1e-300)
_HUGE_EXP = 996  # 2**996 ~ 6.7e299 (mantissa in [1, 2): values up to ~1.3e300)


def _st() -> Any:
    try:
        from hypothesis import strategies as st
    except ImportError as exc:  # pragma: no cover - hypothesis is a test extra
        from certified.errors import MissingDependencyError

        raise MissingDependencyError(
            "certified.strategies needs hypothesis; install it with pip install certified[test]"
        ) from exc
    return st


def _range(value: Any, field: str, low: int) -> tuple[int, int]:
    from certified.errors import InputError

    if isinstance(value, (tuple, list)) and len(value) == 2:
        lo, hi = value
    else:
        lo = hi = value
    if (
        isinstance(lo, bool)
        or isinstance(hi, bool)
        or not all(isinstance(v, (int, np.integer)) for v in (lo, hi))
    ):
        raise InputError(f"{field}: expected an int or a (low, high) pair of ints, got {value!r}")
    if not low <= lo <= hi:
        raise InputError(f"{field}: {value!r} is not a range with {low} <= low <= high")
    return int(lo), int(hi)


def doubles(min_exp: int = _TINY_EXP, max_exp: int = _HUGE_EXP, zero: bool = True) -> Any:
    """Finite doubles ``± m 2^e`` with ``e`` uniform in ``[min_exp, max_exp]`` (magnitudes from
    about ``2^min_exp`` to ``2^(max_exp+1)``; the defaults span 1e-300 .. 1e300), optionally 0.

    Examples
    --------
    >>> from certified.strategies import doubles
    >>> s = doubles(-10, 10)  # magnitudes between 2^-10 and 2^11

    Guarantee: none (generator); every value is a finite double.
    """
    st = _st()
    mantissa = st.integers(2**52, 2**53 - 1)
    signed = st.builds(
        lambda s, m, e: s * math.ldexp(m, e - 52),
        st.sampled_from((-1.0, 1.0)),
        mantissa,
        st.integers(min_exp, max_exp),
    )
    return st.one_of(st.just(0.0), signed) if zero else signed


def _distinct_rows(rows: list[list[float]]) -> bool:
    return len({tuple(r) for r in rows}) == len(rows)


def _scale_exponents(draw: Any, st: Any, extreme: bool) -> int:
    lo, hi = (_TINY_EXP + 60, _HUGE_EXP - 60) if extreme else (-20, 20)
    return draw(st.integers(lo, hi))


def _layout_rows(draw: Any, st: Any, layout: str, n: int, d: int, extreme: bool) -> list[list]:
    """n pairwise distinct rows in R^d of the given layout (floats, exact doubles)."""
    if layout == "random":
        coord = doubles() if extreme else doubles(-30, 30)
        row = st.lists(coord, min_size=d, max_size=d)
        return draw(st.lists(row, min_size=n, max_size=n, unique_by=tuple))
    if layout == "mixed":
        # every row at its own scale: a mix of magnitudes 1e-300 .. 1e300 in one dataset
        out: list[list[float]] = []
        seen: set[tuple[float, ...]] = set()
        while len(out) < n:
            e = _scale_exponents(draw, st, extreme)
            r = [math.ldexp(draw(st.integers(-(2**20), 2**20)), e) for _ in range(d)]
            if tuple(r) not in seen:
                seen.add(tuple(r))
                out.append(r)
        return out
    scale = _scale_exponents(draw, st, extreme)
    if layout == "collinear":
        # x_k = p + t_k v with small integers: exactly collinear after the power-of-two scaling
        p = [draw(st.integers(-50, 50)) for _ in range(d)]
        v = [draw(st.integers(-5, 5)) for _ in range(d)]
        if not any(v):
            v[0] = 1
        ts = draw(st.lists(st.integers(-10 * n, 10 * n), min_size=n, max_size=n, unique=True))
        return [[math.ldexp(p[k] + t * v[k], scale) for k in range(d)] for t in ts]
    if layout == "lattice":
        side = max(2, math.ceil(n ** (1 / d)) + 1)
        cells = draw(
            st.lists(
                st.tuples(*[st.integers(0, side) for _ in range(d)]),
                min_size=n,
                max_size=n,
                unique=True,
            )
        )
        return [[math.ldexp(c, scale) for c in cell] for cell in cells]
    if layout == "repeated":
        # few distinct values per coordinate: many points share coordinates
        values = draw(st.lists(doubles(-8, 8), min_size=2, max_size=3, unique=True))
        k = len(values)
        if k**d < n:  # not enough combinations: widen the value set deterministically
            values = [float(v) for v in range(math.ceil(n ** (1 / d)) + 1)]
        row = st.lists(st.sampled_from(values), min_size=d, max_size=d)
        return draw(st.lists(row, min_size=n, max_size=n, unique_by=tuple))
    if layout == "last_bit":
        # points that differ from a base point by a few ulps (never 0) in one coordinate
        base = draw(st.lists(doubles(-4, 4, zero=False), min_size=d, max_size=d))
        codes = draw(st.lists(st.integers(0, 8 * n * d), min_size=n, max_size=n, unique=True))
        out = []
        for code in codes:
            r = list(base)
            k, steps = code % d, code // d - 4 * n
            steps += steps >= 0  # never 0: distinct (k, steps) give distinct rows
            for _ in range(abs(steps)):
                r[k] = math.nextafter(r[k], math.inf if steps > 0 else -math.inf)
            out.append(r)
        return out
    raise ValueError(f"layout: unknown layout {layout!r}; use one of {LAYOUTS} or 'any'")


def datasets(
    n: Any = (1, 30),
    d: Any = (2, 6),
    *,
    layout: str = "any",
    extreme: bool = False,
    same_layout: bool = False,
) -> Any:
    """Interpolation datasets ``(X, Y)``: float64 arrays of shape (N, d) whose rows are pairwise
    distinct within X and within Y (an x may equal a y).

    Parameters
    ----------
    n, d : int or (low, high)
        Number of points N >= 1 and dimension d >= 1.
    layout : {"any", "random", "collinear", "lattice", "repeated", "last_bit", "mixed"}
        How the points lie: i.i.d. doubles; exactly collinear; integer lattice points; few
        distinct values per coordinate (repeated coordinates); neighbours differing in the last
        bit of one coordinate; each point at its own scale. ``"any"`` draws the layout (and
        draws X's and Y's layouts independently unless ``same_layout``).
    extreme : bool
        Magnitudes over the whole range 1e-300 .. 1e300 (``"random"``: per coordinate;
        ``"mixed"``: per point; the others: one power-of-two scale per dataset). Default:
        magnitudes within about 2^±30.
    same_layout : bool
        Use one layout for X and Y.

    Examples
    --------
    >>> from hypothesis import given
    >>> from certified.strategies import datasets
    >>> @given(datasets(n=(1, 50), d=(2, 4), extreme=True))
    ... def test_distinct(data):
    ...     X, Y = data
    ...     assert len({tuple(r) for r in X}) == len(X)

    Guarantee: none (generator); rows of X (and of Y) are pairwise distinct finite doubles.
    """
    st = _st()
    n_lo, n_hi = _range(n, "n", 1)
    d_lo, d_hi = _range(d, "d", 1)
    if layout != "any" and layout not in LAYOUTS:
        raise ValueError(f"layout: unknown layout {layout!r}; use one of {LAYOUTS} or 'any'")

    @st.composite
    def build(draw: Any) -> tuple[np.ndarray, np.ndarray]:
        N = draw(st.integers(n_lo, n_hi))
        D = draw(st.integers(d_lo, d_hi))
        lx = layout if layout != "any" else draw(st.sampled_from(LAYOUTS))
        ly = lx if layout != "any" or same_layout else draw(st.sampled_from(LAYOUTS))
        X = _layout_rows(draw, st, lx, N, D, extreme)
        Y = _layout_rows(draw, st, ly, N, D, extreme)
        if draw(st.booleans()):  # shuffle the pairing
            perm = draw(st.permutations(range(N)))
            Y = [Y[k] for k in perm]
        return np.array(X, dtype=np.float64), np.array(Y, dtype=np.float64)

    return build()


def near_degenerate_datasets(n: Any = (2, 20), d: Any = (2, 5)) -> Any:
    """Datasets ``(X, Y)`` that stress general-position choices: points whose projections
    nearly coincide, targets nearly parallel to a coordinate axis or to each other, points one
    ulp apart, nearly collinear points, and x's equal to other points' y's.

    The rows of X (and of Y) are pairwise distinct doubles; everything else is as bad as the
    generator can make it.

    Examples
    --------
    >>> from certified.strategies import near_degenerate_datasets
    >>> s = near_degenerate_datasets(n=(2, 10), d=2)

    Guarantee: none (generator); rows of X (and of Y) are pairwise distinct finite doubles.
    """
    st = _st()
    n_lo, n_hi = _range(n, "n", 2)
    d_lo, d_hi = _range(d, "d", 1)

    @st.composite
    def build(draw: Any) -> tuple[np.ndarray, np.ndarray]:
        N = draw(st.integers(n_lo, n_hi))
        D = draw(st.integers(d_lo, d_hi))
        kind = draw(st.sampled_from(("ulp_cloud", "near_collinear", "axis", "swap", "huge_gap")))
        base = np.array(draw(st.lists(doubles(-3, 3), min_size=D, max_size=D)))
        X: list[tuple[float, ...]] = []
        Y: list[tuple[float, ...]] = []
        k = 0
        while len(X) < N:
            k += 1
            if kind == "ulp_cloud":  # everything within a few ulps of one point
                x = [float(v) for v in base]
                for _ in range(k):
                    x[0] = math.nextafter(x[0], math.inf)
                if D > 1 and k % 2:
                    x[1] = math.nextafter(x[1], -math.inf)
                y = [v * 2 for v in x]
            elif kind == "near_collinear":  # on a line up to one ulp
                x = [float(base[j] + k * (j + 1)) for j in range(D)]
                if k % 2:
                    x[-1] = math.nextafter(x[-1], math.inf)
                y = [float(k)] + [1.0] * (D - 1)
            elif kind == "axis":  # y_n - y_m all parallel to e_0, x's on a vertical line
                # (in dimension 1 there is no vertical line: the x's are the integers k)
                x = [float(base[0])] + [float(k)] * (D - 1) if D > 1 else [float(k)]
                y = [float(k)] + [0.0] * (D - 1)
            elif kind == "swap":  # targets are the other points (a permutation of X)
                x = [float(k)] + [float(base[j]) for j in range(1, D)]
                y = None
            else:  # huge_gap: 1e-300 apart and 1e300 apart in the same dataset
                e = -990 if k % 2 else 990
                x = [math.ldexp(k, e)] + [float(base[j]) for j in range(1, D)]
                y = [math.ldexp(k, -e)] + [0.0] * (D - 1)
            tx = tuple(x)
            if tx in X:
                continue
            X.append(tx)
            Y.append(tuple(y) if y is not None else tx)
        if kind == "swap":
            Y = X[1:] + X[:1]
        if len(set(Y)) != len(Y):  # pragma: no cover - by construction the y's are distinct
            Y = [(float(i),) + y[1:] for i, y in enumerate(Y)]
        return np.array(X, dtype=np.float64), np.array(Y, dtype=np.float64)

    return build()


def schedules(
    d: Any = (1, 4),
    activation: str = "relu",
    *,
    pieces: Any = (1, 4),
    width: Any = (1, 4),
    laminar: bool = False,
    max_abs: int = 4,
    denominator_exp: int = 3,
) -> Any:
    """:class:`~certified.models.Schedule` s with dyadic parameters (every number is
    ``k / 2^denominator_exp`` with ``|k| <= max_abs 2^denominator_exp``, so doubles, exactly).

    Parameters
    ----------
    d, pieces, width : int or (low, high)
        Dimension, number of pieces, width of each piece.
    activation : {"relu", "leaky_relu", "tanh", "sigmoid"}
        ``leaky_relu`` schedules get a dyadic slope ``k / 2^denominator_exp`` in (0, 1).
    laminar : bool
        Every piece laminar with a shared normal (``a_i = a``, every ``w_i ⊥ a``: the exact
        pieces of the interpolation constructions). Needs ``d >= 2`` (in d = 1 a laminar piece
        is the zero field); with ``d = 1`` the pieces are the zero field.
    max_abs, denominator_exp : int
        Bound and dyadic denominator of the entries.

    Examples
    --------
    >>> from certified.strategies import schedules
    >>> s = schedules(d=3, activation="relu", laminar=True)

    Guarantee: none (generator); every schedule is valid (positive durations, shapes agree).
    """
    st = _st()
    from certified.models import Piece, Schedule

    d_lo, d_hi = _range(d, "d", 1)
    k_lo, k_hi = _range(pieces, "pieces", 1)
    p_lo, p_hi = _range(width, "width", 1)
    den = 2**denominator_exp
    entry = st.integers(-max_abs * den, max_abs * den).map(lambda k: k / den)
    duration = st.integers(1, max_abs * den).map(lambda k: k / den)

    @st.composite
    def build(draw: Any) -> Any:
        D = draw(st.integers(d_lo, d_hi))
        out = []
        for j in range(draw(st.integers(k_lo, k_hi))):
            P = draw(st.integers(p_lo, p_hi))
            if laminar:
                a = [draw(entry) for _ in range(D)]
                if not any(a):
                    a[0] = 1.0
                A = [list(a) for _ in range(P)]
                cols = []
                for _ in range(P):
                    # w = a_k e_l - a_l e_k for a pair (k, l) with a_k != 0: orthogonal to a
                    k = next(i for i, v in enumerate(a) if v)
                    lane = draw(st.integers(0, D - 1))
                    w = [0.0] * D
                    if lane != k:
                        c = draw(entry)
                        w[lane], w[k] = c * a[k], -c * a[lane]
                    cols.append(w)
                W = [[cols[i][r] for i in range(P)] for r in range(D)]
            else:
                W = [[draw(entry) for _ in range(P)] for _ in range(D)]
                A = [[draw(entry) for _ in range(D)] for _ in range(P)]
            b = [draw(entry) for _ in range(P)]
            out.append(Piece(draw(duration), W, A, b, f"pieces[{j}]"))
        slope = None
        if activation == "leaky_relu":  # a dyadic slope in (0, 1): the schedule stays doubles
            slope = draw(st.integers(1, den - 1)) / den if den > 1 else 0.5
        return Schedule(D, activation, tuple(out), slope)

    return build()


def measures(n: Any = (1, 12), d: Any = (1, 4), *, extreme: bool = False) -> Any:
    """:class:`~certified.transport.Measure` s with positive exact rational weights summing to
    exactly 1 (atoms may repeat).

    Examples
    --------
    >>> from certified.strategies import measures
    >>> s = measures(n=(1, 5), d=2)

    Guarantee: none (generator); weights are positive exact rationals with sum exactly 1.
    """
    st = _st()
    from certified.transport import Measure

    n_lo, n_hi = _range(n, "n", 1)
    d_lo, d_hi = _range(d, "d", 1)
    coord = doubles() if extreme else doubles(-20, 20)

    @st.composite
    def build(draw: Any) -> Any:
        N = draw(st.integers(n_lo, n_hi))
        D = draw(st.integers(d_lo, d_hi))
        pts = [[draw(coord) for _ in range(D)] for _ in range(N)]
        raw = [draw(st.integers(1, 1000)) for _ in range(N)]
        total = sum(raw)
        return Measure(pts, [f"{r}/{total}" for r in raw])

    return build()


ATTENTION_RADII = ("1/2", "1", "2")
"""Radii R that :func:`attention_inputs` draws from."""


def attention_inputs(
    n: Any = (1, 5), d: Any = (1, 3), k: Any = (1, 3), *, measures: bool = False
) -> Any:
    """Attention instances in the input-file format, with exactly the sizes drawn from the
    given ranges: ``{"Q": k×d, "K": k×d, "V": d×d, "R": r, "X": n×d}``, or with
    ``measures=True`` two measures ``"mu"``, ``"nu"`` of n atoms each (``{"points",
    "weights"}``) instead of ``"X"``.

    Every number is an exact string: entries of Q, K, V are ``p/q`` with ``q <= 8`` and
    ``|p/q| <= 2``; R is one of :data:`ATTENTION_RADII`; a token or an atom is ``(R / 2^m) e``
    with ``e`` in the same grid with ``|e_j| <= 1`` and ``2^m >= sqrt(d)``, hence inside the
    closed ball of radius R; weights are ``w_j / sum(w)`` with integers ``w_j`` in [1, 8].
    Unlike :func:`certified.attention.strategies.attention_instances` (sizes up to a maximum,
    entries through a filter), every draw is a plain bounded integer, so a byte stream drives
    it without rejections (``certified sweep`` draws its attention instances from this).

    Examples
    --------
    >>> from certified.strategies import attention_inputs
    >>> s = attention_inputs(n=4, d=2, k=2)                 # H1 / H2: a point cloud X
    >>> s3 = attention_inputs(n=(2, 6), d=3, measures=True)  # H3: two measures

    Guarantee: none (generator); every instance is valid for
    :func:`certified.attention.parse_attention_instance` (tokens and atoms in the closed ball
    of radius R, weights positive exact rationals summing to exactly 1).
    """
    st = _st()
    from fractions import Fraction

    n_lo, n_hi = _range(n, "n", 1)
    d_lo, d_hi = _range(d, "d", 1)
    k_lo, k_hi = _range(k, "k", 1)

    # built once: st.integers(...) inside the draw loop costs a strategy-cache lookup per entry
    small = st.integers(1, 8)
    numerators = {(b, q): st.integers(-b * q, b * q) for b in (1, 2) for q in range(1, 9)}
    sizes = [st.integers(lo, hi) for lo, hi in ((n_lo, n_hi), (d_lo, d_hi), (k_lo, k_hi))]

    @st.composite
    def build(draw: Any) -> dict[str, Any]:
        N, D, K = (draw(s) for s in sizes)

        def entry(bound: int) -> Fraction:
            q = draw(small)
            return Fraction(draw(numerators[bound, q]), q)

        def matrix(rows: int, bound: int, scale: Fraction = Fraction(1)) -> list[list[str]]:
            return [[str(entry(bound) * scale) for _ in range(D)] for _ in range(rows)]

        R = Fraction(draw(st.sampled_from(ATTENTION_RADII)))
        shrink = 1
        while shrink * shrink < D:  # |e|_2 <= sqrt(D) <= 2^m: the token is in the ball
            shrink *= 2
        obj: dict[str, Any] = {
            "Q": matrix(K, 2),
            "K": matrix(K, 2),
            "V": matrix(D, 2),
            "R": str(R),
        }
        if not measures:
            obj["X"] = matrix(N, 1, R / shrink)
            return obj
        for name in ("mu", "nu"):
            points = matrix(N, 1, R / shrink)
            raw = [draw(small) for _ in range(N)]
            obj[name] = {"points": points, "weights": [str(Fraction(w, sum(raw))) for w in raw]}
        return obj

    return build()


# one-argument recipes and how the builder applies them (domains kept safe: log of 2 + sin,
# sqrt of 1 + u^2, division by 1 + u^2, exp of a bounded tanh)
_UNARY_RECIPES = {
    "neg": lambda F, u: -u,
    "sqr": lambda F, u: u**2,
    "tanh": lambda F, u: F.tanh(u),
    "sigmoid": lambda F, u: F.sigmoid(u),
    "sin": lambda F, u: F.sin(u),
    "cos": lambda F, u: F.cos(u),
    "exp_tanh": lambda F, u: F.exp(F.tanh(u)),
    "log_2_sin": lambda F, u: F.log(2 + F.sin(u)),
    "sqrt_1_sqr": lambda F, u: F.sqrt(1 + u**2),
}
_BINARY_RECIPES = {
    "add": lambda F, u, v: u + v,
    "sub": lambda F, u, v: u - v,
    "mul": lambda F, u, v: u * v,
    "div_1_sqr": lambda F, u, v: u / (1 + v**2),
    "logsumexp": lambda F, u, v: F.logsumexp([u, v, 0]),
}


def expression_fields(
    d: Any = (1, 3), *, depth: int = 4, parameters: Any = (0, 2), pieces: Any = (1, 2)
) -> Any:
    """Smooth :class:`~certified.fields.PiecewiseField` s built from random expression graphs
    over every operation of the graph language (safe domains by construction), with tame flows
    (components scaled by 1/8 to 1/2, durations 1/4 to 1/2 per piece, parameters in [-1, 1]).

    Examples
    --------
    >>> from certified.strategies import expression_fields
    >>> s = expression_fields(d=2, depth=3)

    Guarantee: none (generator); every field is valid (it passes the checker's parser).
    """  # fmt: skip
    st = _st()
    import certified.fields as F  # noqa: N812 (the module plays the role of a namespace)

    d_lo, d_hi = _range(d, "d", 1)
    p_lo, p_hi = _range(parameters, "parameters", 0)
    k_lo, k_hi = _range(pieces, "pieces", 1)

    def recipes(dim: int, n_par: int) -> Any:
        leaves = st.one_of(
            st.tuples(st.just("x"), st.integers(0, dim - 1)),
            st.tuples(st.just("c"), st.integers(-8, 8).map(lambda k: f"{k}/4")),
            *([st.tuples(st.just("p"), st.integers(0, n_par - 1))] if n_par else []),
        )
        return st.recursive(
            leaves,
            lambda inner: st.one_of(
                st.tuples(st.sampled_from(sorted(_UNARY_RECIPES)), inner),
                st.tuples(st.sampled_from(sorted(_BINARY_RECIPES)), inner, inner),
            ),
            max_leaves=2**depth,
        )

    def build(r: Any, x: Any, p: Any, b: Any) -> Any:
        if r[0] == "x":
            return x[r[1]]
        if r[0] == "p":
            return p[r[1]]
        if r[0] == "c":
            return b.const(r[1])
        args = [build(a, x, p, b) for a in r[1:]]
        table = _UNARY_RECIPES if len(args) == 1 else _BINARY_RECIPES
        return table[r[0]](F, *args)

    @st.composite
    def draw_field(draw: Any) -> Any:
        dim, n_par = draw(st.integers(d_lo, d_hi)), draw(st.integers(p_lo, p_hi))
        rs = [draw(recipes(dim, n_par)) for _ in range(dim)]
        scales = [draw(st.sampled_from(["1/8", "1/4", "1/2"])) for _ in range(dim)]
        names = [f"q{j}" for j in range(n_par)]
        b = F.GraphBuilder(dim, names)
        p = [b.param(n) for n in names]
        outputs = [b.const(s) * build(r, b.x, p, b) for r, s in zip(rs, scales, strict=True)]
        field = F.VectorField(b.graph(outputs))
        n_pieces = draw(st.integers(k_lo, k_hi))
        return field.on(*[
            (draw(st.sampled_from(["1/4", "1/3", "1/2"])),
             [draw(st.integers(-4, 4).map(lambda k: f"{k}/4")) for _ in names])
            for _ in range(n_pieces)
        ])  # fmt: skip

    return draw_field()


def stack_models(d: int, n: int, max_layers: int = 4, scale: float = 1.0) -> Any:
    """Layer-stack model files (decoded JSON, the format of ``certified transformer stack
    --model``) on R^d for n tokens: 1..max_layers layers of every kind (attention with 1-2
    heads, causal or explicit masks; MLPs with relu / tanh / gelu; layer norms with eps > 0),
    weights of about ``scale``. The strategy
    lives in :mod:`certified.transformers.stack_strategies` (imported on first use).
    Guarantee: none."""
    from certified.transformers.stack_strategies import stack_models as impl

    return impl(d=d, n=n, max_layers=max_layers, scale=scale)


def token_sets(n: int, d: int, scale: float = 2.0) -> Any:
    """``n x d`` token coordinates (dyadic doubles in [-scale, scale]) for
    :func:`stack_models`. Guarantee: none."""
    from certified.transformers.stack_strategies import token_sets as impl

    return impl(n=n, d=d, scale=scale)
