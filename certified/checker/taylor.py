"""Expression fields and the validated Taylor-Lohner step, in arb ball arithmetic.

Public (producers import it: one parser of the field format, one reference of the method; the
checker imports nothing from them). A *field* is an expression graph (proofs/format.md
section 7): ``{"dimension": d, "parameters": [names], "nodes": [[op, ...], ...], "outputs":
[d node indices]}``; node ``i`` refers only to nodes ``< i``. Its flow is enclosed step by step
(proofs/checker_soundness.md#taylor-lohner, proofs/bounds.md#taylor-ad, #lohner):

* Taylor coefficients of the solution by automatic differentiation of the graph (series
  recurrences per operation), over *duals* ``[v, dv/dy_1, ..., dv/dy_g]`` so that the same code
  gives the coefficients of the variational equation (seeds = the rows of ``dx_0/dy``);
* an a priori box ``B`` (a hint) with ``X + [0, h] f(B) inside B`` (Picard) contains the
  trajectories of the step, so ``Phi_h(x) in sum_{k<K} x_k(x) h^k + x_K(B) h^K``, and likewise
  ``DPhi_h(X) in sum_{k<m} V_k(X) h^k + V_m(B, V_B) h^m`` with ``V_B = I + [-e, e]``,
  ``e = exp(L h) - 1``, ``L >= |Df(B)|_inf``;
* the set is ``x^ + C r`` (Lohner): ``x^' = mid(y)``, ``C'`` = orthonormalised ``mid(J C)``,
  ``r' = (C'^-1 J C) r + C'^-1 (y - x^')``, so errors propagate through the flow's own
  derivative and boxes do not wrap.
"""

from __future__ import annotations

from typing import Any

from flint import arb, arb_mat, fmpq

from ._parse import Rejected, array, exact, show, small_integer

__all__ = [
    "MAX_NODES",
    "OPERATIONS",
    "ExpressionField",
    "LohnerSet",
    "Rejected",
    "ReplayError",
    "field_jets",
    "lohner_step",
    "parse_field",
    "replay_flow",
]

MAX_NODES = 100_000
UNARY = ("neg", "sqr", "sqrt", "exp", "log", "tanh", "sigmoid", "sin", "cos")
OPERATIONS = ("x", "p", "c", *UNARY, "add", "sub", "mul", "div", "sum", "logsumexp")
_ZERO = arb(0)


class ReplayError(Exception):
    """A step cannot be validated (Picard inclusion, domain, singular matrix)."""


class ExpressionField:
    """A validated expression graph (see the module docstring). ``const[i]``: node i does not
    depend on the state; ``cost``: arb operations of one coefficient order, for budgets."""

    __slots__ = ("const", "cost", "dimension", "names", "nodes", "outputs")

    def __init__(self, dimension, names, nodes, outputs):
        self.dimension, self.names, self.nodes, self.outputs = dimension, names, nodes, outputs
        self.const: list[bool] = []
        for op, *args in nodes:
            self.const.append(op in ("p", "c") or (op != "x" and all(self.const[a] for a in args)))
        self.cost = 4 + sum(2 + len(n) for n in nodes)


def parse_field(value: Any, where: str = "field") -> ExpressionField:
    """The field a JSON value denotes; Rejected (naming the node) when it is not valid."""
    if not isinstance(value, dict) or set(value) != {"dimension", "parameters", "nodes", "outputs"}:
        raise Rejected(
            f"{where}: expected exactly the fields dimension, parameters, nodes, outputs"
        )
    d = small_integer(value["dimension"], f"{where}.dimension", 1, 10_000)
    names = array(value["parameters"], f"{where}.parameters", minimum=0)
    for i, name in enumerate(names):
        if not isinstance(name, str) or not 0 < len(name) <= 64 or names.index(name) != i:
            raise Rejected(f"{where}.parameters[{i}]: expected a new name of 1 to 64 characters")
    raw = array(value["nodes"], f"{where}.nodes")
    if len(raw) > MAX_NODES:
        raise Rejected(f"resource limit: {where}.nodes has more than {MAX_NODES} nodes")
    nodes: list[tuple] = []
    for i, node in enumerate(raw):
        at = f"{where}.nodes[{i}]"
        if not isinstance(node, list) or not node or node[0] not in OPERATIONS:
            got = show(node[0] if isinstance(node, list) and node else node)
            raise Rejected(f"{at}: unknown operation {got}; known: {', '.join(OPERATIONS)}")
        op, args = node[0], node[1:]
        arity = (
            1
            if op in UNARY or op in ("x", "p", "c")
            else 2
            if op in ("add", "sub", "mul", "div")
            else 0
        )
        if (arity and len(args) != arity) or (not arity and not args):
            need = f"{arity} argument" + "s" * (arity != 1) if arity else "at least 1 argument"
            raise Rejected(f"{at}: {op} takes {need}, got {len(args)}")
        if op == "c":
            nodes.append(("c", exact(args[0], f"{at}[1]")))
            continue
        top = d if op == "x" else len(names) if op == "p" else i
        for a in args:
            if isinstance(a, bool) or not isinstance(a, int) or not 0 <= a < top:
                what = "a coordinate" if op == "x" else "a parameter" if op == "p" else "a node"
                raise Rejected(f"{at}: argument {show(a)} is not {what} index below {top}")
        nodes.append((op, *args))
    outputs = array(value["outputs"], f"{where}.outputs", d)
    for j, o in enumerate(outputs):
        if isinstance(o, bool) or not isinstance(o, int) or not 0 <= o < len(nodes):
            raise Rejected(f"{where}.outputs[{j}]: {show(o)} is not a node index")
    return ExpressionField(d, list(names), nodes, list(outputs))


# --- duals: [v, dv/dy_1, ..., dv/dy_g] ------------------------------------------------------


def _add(a, b):
    return [x + y for x, y in zip(a, b, strict=True)]


def _sub(a, b):
    return [x - y for x, y in zip(a, b, strict=True)]


def _scale(a, s):
    return [x * s for x in a]


_WIDE = [False]  # set by field_jets(wide=True): products of wide balls by their endpoints


def _times(x: arb, y: arb) -> arb:
    """x * y; over wide balls the exact range of the product of the two intervals (a ball
    product adds r_x r_y and more: the Picard test over an a priori box needs the range)."""
    if not _WIDE[0] or x.rad() == 0 or y.rad() == 0:
        return x * y
    a, b, c, e = x.lower(), x.upper(), y.lower(), y.upper()
    p = (a * c, a * e, b * c, b * e)
    return arb(min(q.lower() for q in p)).union(arb(max(q.upper() for q in p)))


def _mul(a, b):
    a0, b0 = a[0], b[0]
    return [
        _times(a0, b0),
        *(_times(a0, y) + _times(x, b0) for x, y in zip(a[1:], b[1:], strict=True)),
    ]


def _div(a, b):
    q = a[0] / b[0]
    return [q, *((x - q * y) / b[0] for x, y in zip(a[1:], b[1:], strict=True))]


def _conv(a, b, k, lo=0):
    """sum_{j=lo..k} a_j b_{k-j} (duals)."""
    s = _mul(a[lo], b[k - lo])
    for j in range(lo + 1, k + 1):
        s = _add(s, _mul(a[j], b[k - j]))
    return s


def _wconv(a, b, k):
    """(1/k) sum_{j=1..k} j a_j b_{k-j}: the coefficient k of c with c' = a' b."""
    s = _scale(_mul(a[1], b[k - 1]), 1)
    for j in range(2, k + 1):
        s = _add(s, _scale(_mul(a[j], b[k - j]), j))
    return _scale(s, fmpq(1, k))


def _monotone(f, x: arb, increasing: bool = True) -> arb:
    """f over the ball x by its endpoints (arb's derivative-based enclosure of a wide ball is
    far looser: exp([0.5, 1.5]) comes back as [+/- 4.49])."""
    if x.rad() == 0:
        return f(x)
    lo, hi = f(arb(x.lower())), f(arb(x.upper()))
    return arb(lo.lower()).union(arb(hi.upper())) if increasing else hi.union(lo)


def _sigmoid(x: arb) -> arb:
    return 1 / (1 + (-x).exp())


def _sin_range(v: arb) -> arb:
    """sin over the ball v: the hull of the end values and of every extremum
    pi/2 + k pi inside (both signs when it cannot be told whether one is)."""
    if v.rad() == 0:
        return v.sin()
    if v.rad() >= 4:
        return arb(0, 1)
    lo, hi = arb(v.lower()), arb(v.upper())
    out = lo.sin().union(hi.sin())
    t0, t1 = (lo - arb.pi() / 2) / arb.pi(), (hi - arb.pi() / 2) / arb.pi()
    for k in range(int(t0.lower().floor().unique_fmpz()), int(t1.upper().ceil().unique_fmpz()) + 1):
        if not (arb(k) < t0 or arb(k) > t1):  # k in [t0, t1], or cannot be excluded
            out = out.union(arb(1 if k % 2 == 0 else -1))
    return out


def _elementary(op, a0):
    """Value and derivative factor of op at the dual a0 (order 0)."""
    v = a0[0]
    if op == "exp":
        y = _monotone(arb.exp, v)
        return [y, *(g * y for g in a0[1:])]
    if op in ("tanh", "sigmoid"):
        y = _monotone(arb.tanh if op == "tanh" else _sigmoid, v)
        dy = 1 - y * y if op == "tanh" else y * (1 - y)
        return [y, *(g * dy for g in a0[1:])]
    if op == "log":
        y = _monotone(arb.log, v)
        return [y, *(g / v for g in a0[1:])]
    if op == "sqrt":
        y = _monotone(arb.sqrt, v)
        return [y, *(g / (2 * y) for g in a0[1:])]
    s, c = _sin_range(v), _sin_range(v + arb.pi() / 2)
    return [s, *(g * c for g in a0[1:])], [c, *(-g * s for g in a0[1:])]


def field_jets(field: ExpressionField, params, x0, seeds, order: int, wide: bool = False):
    """Taylor coefficients x_0..x_order of the solution through x0 (balls: the coefficient
    maps are evaluated over the whole ball), as duals: with ``seeds`` (d rows of g balls) the
    dual parts of x_k are ``D x_k(x0) seeds``; ``seeds=None`` gives plain values.

    Guarantee: ``x_k`` encloses the k-th Taylor coefficient at t = 0 of every solution with
    x(0) in x0 (and its dual part the product of its derivative with the seeds).
    Raises ReplayError when an operation leaves its domain (sqrt/log of a ball meeting
    (-inf, 0], division by a ball containing 0).
    """
    _WIDE[0] = wide
    try:
        return _jets(field, params, x0, seeds, order)
    finally:
        _WIDE[0] = False


def _jets(field, params, x0, seeds, order):
    g = 0 if seeds is None else len(seeds[0])
    zero = [_ZERO] * (g + 1)
    X = [[[x0[i], *(seeds[i] if g else ())] for i in range(field.dimension)]]
    S: list[list] = [[] for _ in field.nodes]
    Z: list[Any] = [None] * len(field.nodes)  # auxiliary series (tanh, sin/cos, softmax)
    const = field.const
    for k in range(order):
        for i, (op, *a) in enumerate(field.nodes):
            if const[i] and k:
                continue
            S[i].append(_coefficient(field, op, a, i, k, S, Z, X, params, zero))
            if not S[i][k][0].is_finite():
                raise ReplayError(f"node {i} ({op}) leaves its domain or overflows")

        def coef(n, k=k):
            return S[n][k] if k < len(S[n]) else zero

        X.append([_scale(coef(o), fmpq(1, k + 1)) for o in field.outputs])
    return X


def _coefficient(field, op, a, i, k, S, Z, X, params, zero):
    """Coefficient k (a dual) of node i, from the coefficients < k of every node and <= k of
    its arguments (proofs/bounds.md#taylor-ad lists the recurrences)."""

    def s(n, j=k):
        return S[n][j] if j < len(S[n]) else zero

    if op == "x":
        return X[k][a[0]]
    if op in ("p", "c"):
        return [params[a[0]] if op == "p" else arb(a[0]), *zero[1:]]
    if op in ("add", "sub"):
        return (_add if op == "add" else _sub)(s(a[0]), s(a[1]))
    if op == "neg":
        return _scale(s(a[0]), -1)
    if op == "sum":
        out = s(a[0])
        for n in a[1:]:
            out = _add(out, s(n))
        return out
    if op == "mul":
        if field.const[a[0]] or field.const[a[1]]:
            c, v = (a[0], a[1]) if field.const[a[0]] else (a[1], a[0])
            return _mul(S[c][0], s(v))
        return _conv(S[a[0]], S[a[1]], k)
    if op == "div":
        if 0 in s(a[1], 0)[0]:
            raise ReplayError(f"node {i} (div): the divisor's ball contains 0")
        num = s(a[0])
        for j in range(1, k + 1):
            num = _sub(num, _mul(s(a[1], j), S[i][k - j]))
        return _div(num, s(a[1], 0))
    if op == "logsumexp":
        return _logsumexp(a, i, k, s, S, Z, zero)
    A = S[a[0]]
    if op == "sqr":
        out = None
        for j in range((k + 1) // 2):
            t = _mul(A[j], A[k - j])
            out = t if out is None else _add(out, t)
        out = _scale(out, 2) if out is not None else None
        if k % 2 == 0:
            t = _mul(A[k // 2], A[k // 2])
            out = t if out is None else _add(out, t)
        return out
    if k == 0 and op in ("log", "sqrt") and not A[0][0] > 0:
        raise ReplayError(f"node {i} ({op}): its argument's ball is not > 0")
    if op in ("sin", "cos"):
        if k == 0:
            Z[i] = tuple([y] for y in _elementary(op, A[0]))
        else:  # (sin a)' = a' cos a, (cos a)' = -a' sin a
            sk, ck = _wconv(A, Z[i][1], k), _scale(_wconv(A, Z[i][0], k), -1)
            Z[i][0].append(sk)
            Z[i][1].append(ck)
        return Z[i][op == "cos"][k]
    if k == 0:
        y = _elementary(op, A[0])
        if op in ("tanh", "sigmoid"):  # y' = a' z with z = 1 - y^2, resp. y - y^2
            yy = _mul(y, y)
            Z[i] = [_sub([arb(1), *zero[1:]], yy) if op == "tanh" else _sub(y, yy)]
        return y
    if op == "exp":  # y' = a' y
        return _wconv(A, S[i], k)
    if op in ("tanh", "sigmoid"):
        y = _wconv(A, Z[i], k)
        C = [*S[i], y]
        cc = _conv(C, C, k)
        Z[i].append(_scale(cc, -1) if op == "tanh" else _sub(y, cc))
        return y
    if op == "log":  # a y' = a'
        corr = zero
        for j in range(1, k):
            corr = _add(corr, _scale(_mul(S[i][j], A[k - j]), j))
        return _div(_sub(A[k], _scale(corr, fmpq(1, k))), A[0])
    # sqrt: 2 y_0 y_k = a_k - sum_{j=1..k-1} y_j y_{k-j}
    corr = zero
    for j in range(1, k):
        corr = _add(corr, _mul(S[i][j], S[i][k - j]))
    return _div(_sub(A[k], corr), _scale(S[i][0], 2))


def _logsumexp(a, i, k, s, S, Z, zero):
    """L = log sum_j exp(a_j), with the softmax weights w_j = exp(a_j - L) as auxiliary
    series: L' = sum_j w_j a_j', w_j' = (a_j' - L') w_j."""
    if k == 0:
        vals = [s(n, 0) for n in a]
        top = max((v[0].mid() for v in vals), key=lambda m: m)  # an exact shift, any works
        total = _ZERO
        for v in vals:
            total += _monotone(arb.exp, v[0] - top)
        L = top + _monotone(arb.log, total)
        w = [_monotone(arb.exp, v[0] - L) for v in vals]
        dL = [
            sum((wj * v[g] for wj, v in zip(w, vals, strict=True)), _ZERO)
            for g in range(1, len(zero))
        ]
        Z[i] = [
            [[wj, *(wj * (v[g] - dL[g - 1]) for g in range(1, len(zero)))]]
            for wj, v in zip(w, vals, strict=True)
        ]
        return [L, *dL]
    series = [[s(n, j) for j in range(k + 1)] for n in a]
    L = zero
    for A, W in zip(series, Z[i], strict=True):
        L = _add(L, _wconv(A, W, k))
    Ls = [*S[i], L]
    for A, W in zip(series, Z[i], strict=True):
        W.append(_wconv([_sub(A[j], Ls[j]) for j in range(k + 1)], W, k))
    return L


# --- the Lohner step --------------------------------------------------------------------------


class LohnerSet:
    """The set ``centre + C r``: centre (d exact balls), C (d x d arb_mat with exact entries),
    r (d x 1 arb_mat; its balls are the box of coefficients)."""

    __slots__ = ("C", "centre", "r")

    def __init__(self, centre: list[arb], C: arb_mat, r: arb_mat) -> None:
        self.centre, self.C, self.r = centre, C, r

    @classmethod
    def box(cls, lo: list[fmpq], hi: list[fmpq]) -> LohnerSet:
        """The box [lo, hi] (a point when lo == hi) as centre + I r, exactly."""
        d = len(lo)
        centre = [arb((a + b) / 2) for a, b in zip(lo, hi, strict=True)]
        rad = [arb((b - a) / 2) for a, b in zip(lo, hi, strict=True)]
        if any(c.rad() != 0 or r.rad() != 0 for c, r in zip(centre, rad, strict=True)):
            # a non-dyadic end: the centre is a ball; widen r by its radius, centre exact
            centre, rad = (
                [arb(c.mid()) for c in centre],
                [arb(abs(c - c.mid()).upper()) + r for c, r in zip(centre, rad, strict=True)],
            )
            rad = [arb(q.upper()) for q in rad]
        r = arb_mat([[arb(0, q)] for q in rad]) if d else arb_mat(0, 1)
        return cls(centre, arb_mat([[int(i == j) for j in range(d)] for i in range(d)]), r)

    def hull(self, with_centre: bool = False) -> list[arb]:
        """Balls enclosing every point of the set (and the centre, if asked: the mean value
        form of a step runs over segments from the centre, proofs/bounds.md#lohner)."""
        r = self.r
        if with_centre:
            r = arb_mat([[r[i, 0].union(_ZERO)] for i in range(r.nrows())])
        Cr = self.C * r
        return [self.centre[i] + Cr[i, 0] for i in range(len(self.centre))]


def _poly(coefs: list[arb], h: arb) -> arb:
    out = coefs[-1]
    for c in reversed(coefs[:-1]):
        out = out * h + c
    return out


def _orthonormal(M: arb_mat, order: list[int]) -> arb_mat | None:
    """Exact midpoints of Gram-Schmidt applied to the columns of M in the given order."""
    d = M.nrows()
    Q: list[list[arb]] = [[] for _ in range(d)]
    for c in order:
        v = [M[r, c] for r in range(d)]
        for q in Q:
            if q:
                dot = sum((a * b for a, b in zip(q, v, strict=True)), _ZERO)
                v = [x - dot * y for x, y in zip(v, q, strict=True)]
        n = sum((x * x for x in v), _ZERO).sqrt()
        if not n > 0:
            return None
        Q[c] = [x / n for x in v]
    return arb_mat([[Q[c][r] for c in range(d)] for r in range(d)]).mid()


def lohner_step(field, params, S: LohnerSet, h: fmpq, box, K: int, m: int) -> LohnerSet:
    """One validated step of length h from the set S with the a priori box ``box`` (d pairs
    (lo, hi) of exact numbers); Taylor order K for the solution, m for the variational
    equation. Raises ReplayError when the Picard inclusion or a domain condition fails.

    Guarantee: the returned set contains Phi_h(x) for every x in S.
    """
    d, hb = field.dimension, arb(h)
    B = [arb(lo).union(arb(hi)) for lo, hi in box]
    ident = [[arb(int(i == j)) for j in range(d)] for i in range(d)]
    df = field_jets(field, params, B, ident, 1, wide=True)[1]  # f(B) and Df(B)
    X = S.hull(with_centre=True)
    for j in range(d):  # Picard: X + [0, h] f(B) inside B
        lo = X[j].lower() + hb * min(_ZERO, df[j][0].lower())
        hi = X[j].upper() + hb * max(_ZERO, df[j][0].upper())
        if not (lo.lower() >= arb(box[j][0]) and hi.upper() <= arb(box[j][1])):
            raise ReplayError(f"the Picard inclusion fails in coordinate {j}")
    L = max(sum((abs(g) for g in df[i][1:]), _ZERO).upper() for i in range(d))
    e = arb((arb(L) * hb).exp().upper()) - 1
    VB = [[ident[i][j] + arb(0, e.upper()) for j in range(d)] for i in range(d)]
    rem = field_jets(field, params, B, None, K)[K]
    at = field_jets(field, params, S.centre, None, K - 1)
    # the increment y - x^ = sum_{k>=1} x_k h^k: rounding errors scale with it, not with x^
    inc = [hb * _poly([at[k][i][0] for k in range(1, K)] + [rem[i][0]], hb) for i in range(d)]
    vrem = field_jets(field, params, B, VB, m, wide=True)[m]
    vx = field_jets(field, params, X, ident, m - 1, wide=True)
    J = arb_mat(
        [
            [_poly([vx[k][i][1 + j] for k in range(m)] + [vrem[i][1 + j]], hb) for j in range(d)]
            for i in range(d)
        ]
    )
    A = J * S.C
    centre = [arb((c + v.mid()).mid()) for c, v in zip(S.centre, inc, strict=True)]
    z = arb_mat([[(S.centre[i] - centre[i]) + inc[i]] for i in range(d)])
    size = [
        sum((A[r, c] * A[r, c] for r in range(d)), _ZERO).mid() * S.r[c, 0].rad() for c in range(d)
    ]
    order = sorted(range(d), key=lambda c: -size[c])  # QR-Lohner: longest edge first
    C = _orthonormal(A.mid(), order)
    try:
        Ci = C.inv() if C is not None else None
    except ZeroDivisionError:
        Ci = None
    if Ci is None:
        raise ReplayError("the new basis C is singular")
    r = (Ci * A) * S.r + Ci * z
    return LohnerSet(centre, C, r)


def replay_flow(field, pieces, starts, steps, boxes, K: int, m: int, times) -> list:
    """The enclosures, at each of ``times`` (exact, each the end of a step), of the flow of
    ``field`` with ``pieces`` ((duration, parameter balls) pairs) from the boxes ``starts``
    (per set, d pairs (lo, hi) of fmpq), replaying ``steps`` (per piece, the step lengths,
    summing exactly to its duration) with the a priori ``boxes`` (per piece, per step, per set,
    d pairs). Runs at the caller's ``flint.ctx.prec``.

    Returns ``out[k][i]``: d balls enclosing Phi_{times[k]}(x) for every x in start box i.
    Raises ReplayError naming the piece, step and set that fails.

    Guarantee: encloses (proofs/checker_soundness.md#taylor-lohner).
    """
    sets = [LohnerSet.box([a for a, _ in s], [b for _, b in s]) for s in starts]
    out, t, pending = [], fmpq(0), list(times)
    for j, (duration, params) in enumerate(pieces):
        if sum(steps[j], fmpq(0)) != duration:
            raise ReplayError(f"piece {j}: the steps do not sum to its duration {duration}")
        for s, h in enumerate(steps[j]):
            if not h > 0:
                raise ReplayError(f"piece {j}, step {s}: the step is not positive")
            for i, S in enumerate(sets):
                try:
                    sets[i] = lohner_step(field, params, S, h, boxes[j][s][i], K, m)
                except ReplayError as exc:
                    raise ReplayError(f"piece {j}, step {s}, set {i}: {exc}") from None
            t += h
            while pending and pending[0] == t:
                out.append([S.hull() for S in sets])
                pending.pop(0)
            if pending and pending[0] < t:
                raise ReplayError(f"time {pending[0]} is not the end of a step")
    if pending:
        raise ReplayError(f"time {pending[0]} is after the last step")
    return out
