"""Expression fields and their Taylor coefficients by automatic differentiation, in arb.

Public: producers import it (the one parser of the field format, proofs/format.md section 7). A
field is ``{"dimension": d, "parameters": [names], "nodes": [[op, *args], ...], "outputs":
[d nodes]}``, node i referring only to nodes < i. ``field_jets`` computes the Taylor coefficients
of the solution through a ball by the series recurrence of each operation
(proofs/bounds.md#taylor-ad) over *duals* ``[v, dv/dy_1, ..., dv/dy_g]``: seeded with the rows
of dx_0/dy, the dual parts are the coefficients of the variational equation. The step using them
is ``lohner.py``."""

from __future__ import annotations

from typing import Any

from flint import arb, fmpq

from ._parse import Rejected, array, exact, fields, show, small_integer

__all__ = ["MAX_NODES", "OPERATIONS", "ExpressionField", "Rejected", "ReplayError",
           "field_jets", "parse_field"]  # fmt: skip

MAX_NODES = 100_000
UNARY = ("neg", "sqr", "sqrt", "exp", "log", "tanh", "sigmoid", "sin", "cos")
BINARY = ("add", "sub", "mul", "div")
OPERATIONS = ("x", "p", "c", *UNARY, *BINARY, "sum", "logsumexp")
_ZERO = arb(0)


class ReplayError(Exception):
    """A step cannot be validated (Picard inclusion, domain, singular matrix)."""


class ExpressionField:
    """A validated graph; ``const[i]``: node i is independent of the state; ``cost``: arb
    operations per coefficient order."""

    __slots__ = ("const", "cost", "dimension", "names", "nodes", "outputs")

    def __init__(self, dimension, names, nodes, outputs):
        self.dimension, self.names, self.nodes, self.outputs = dimension, names, nodes, outputs
        self.const: list[bool] = []
        for op, *args in nodes:
            self.const.append(op in ("p", "c") or (op != "x" and all(self.const[a] for a in args)))
        self.cost = 4 + sum(2 + len(n) for n in nodes)


def parse_field(value: Any, where: str = "field") -> ExpressionField:
    """The field a JSON value denotes; Rejected (naming the node) when it is not valid."""
    fields(value, where, ("dimension", "parameters", "nodes", "outputs"))
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
        arity = 2 if op in BINARY else 0 if op in ("sum", "logsumexp") else 1
        if (arity and len(args) != arity) or not args:
            need = f"{arity} argument" + "s" * (arity > 1) if arity else "at least 1 argument"
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


_WIDE = [False]  # set by field_jets(wide=True): products of wide balls by their endpoints


def _times(x: arb, y: arb) -> arb:
    """x y; of two wide balls the interval product (the ball product adds r_x r_y and more)."""
    if not _WIDE[0] or x.rad() == 0 or y.rad() == 0:
        return x * y
    p = [a * b for a in (x.lower(), x.upper()) for b in (y.lower(), y.upper())]
    return arb(min(q.lower() for q in p)).union(arb(max(q.upper() for q in p)))


def _add(a, b):
    return [x + y for x, y in zip(a, b, strict=True)]


def _sub(a, b):
    return [x - y for x, y in zip(a, b, strict=True)]


def _scale(a, s):
    return [x * s for x in a]


def _mul(a, b):
    a0, b0 = a[0], b[0]
    rest = (_times(a0, y) + _times(x, b0) for x, y in zip(a[1:], b[1:], strict=True))
    return [_times(a0, b0), *rest]


def _div(a, b):
    q = a[0] / b[0]
    return [q, *((x - q * y) / b[0] for x, y in zip(a[1:], b[1:], strict=True))]


def _conv(a, b, k, lo=0, hi=None, w=False):
    """sum_{j=lo..hi} a_j b_{k-j} (hi = k), each term times j if w."""
    s = None
    for j in range(lo, k + 1 if hi is None else hi + 1):
        t = _scale(_mul(a[j], b[k - j]), j) if w else _mul(a[j], b[k - j])
        s = t if s is None else _add(s, t)
    return s


def _wconv(a, b, k):
    """(1/k) sum_{j=1..k} j a_j b_{k-j}: coefficient k of c with c' = a' b."""
    return _scale(_conv(a, b, k, 1, w=True), fmpq(1, k))


def _monotone(f, x: arb) -> arb:
    """f increasing over the ball x, by its endpoints (arb's enclosure is far looser)."""
    if x.rad() == 0:
        return f(x)
    return arb(f(arb(x.lower())).lower()).union(arb(f(arb(x.upper())).upper()))


def _sin_range(v: arb) -> arb:
    """sin over the ball v: the end values and every extremum pi/2 + k pi that may lie in it."""
    if v.rad() == 0 or v.rad() >= 4:
        return v.sin() if v.rad() == 0 else arb(0, 1)
    lo, hi = arb(v.lower()), arb(v.upper())
    out = lo.sin().union(hi.sin())
    t0, t1 = (lo - arb.pi() / 2) / arb.pi(), (hi - arb.pi() / 2) / arb.pi()
    for k in range(int(t0.lower().floor().unique_fmpz()), int(t1.upper().ceil().unique_fmpz()) + 1):
        if not (arb(k) < t0 or arb(k) > t1):
            out = out.union(arb(1 if k % 2 == 0 else -1))
    return out


_F = {"exp": arb.exp, "log": arb.log, "sqrt": arb.sqrt, "tanh": arb.tanh,
      "sigmoid": lambda u: 1 / (1 + (-u).exp())}  # fmt: skip


def _elementary(op, a0):
    """The dual op(a0) at order 0 (sin, cos: the pair (sin, cos))."""
    v, g = a0[0], a0[1:]
    if op in ("sin", "cos"):
        s, c = _sin_range(v), _sin_range(v + arb.pi() / 2)
        return [s, *(q * c for q in g)], [c, *(-q * s for q in g)]
    y = _monotone(_F[op], v)
    dy = {"exp": y, "log": 1 / v, "sqrt": 1 / (2 * y), "tanh": 1 - y * y, "sigmoid": y * (1 - y)}
    return [y, *(q * dy[op] for q in g)]


def field_jets(field: ExpressionField, params, x0, seeds, order: int, wide: bool = False):
    """Taylor coefficients x_0..x_order of the solutions through the ball x0 as duals (dual
    parts ``D x_k(x0) seeds``, seeds: d rows of g balls); ``wide``: interval products (boxes).
    Raises ReplayError when an operation leaves its domain or overflows.
    Guarantee: x_k encloses the k-th Taylor coefficient at t = 0 of every solution with x(0)
    in x0 (and its dual part that coefficient's derivative times the seeds)."""
    _WIDE[0] = wide
    try:
        g = 0 if seeds is None else len(seeds[0])
        zero = [_ZERO] * (g + 1)
        X = [[[x0[i], *(seeds[i] if g else ())] for i in range(field.dimension)]]
        S: list[list] = [[] for _ in field.nodes]
        Z: list[Any] = [None] * len(field.nodes)  # auxiliary series (tanh, sin/cos, softmax)
        for k in range(order):
            for i, (op, *a) in enumerate(field.nodes):
                if not (field.const[i] and k):
                    S[i].append(_coefficient(field, op, a, i, k, S, Z, X, params, zero))
                    if not S[i][k][0].is_finite():
                        raise ReplayError(f"node {i} ({op}) leaves its domain or overflows")
            X.append([_scale(S[o][k] if k < len(S[o]) else zero, fmpq(1, k + 1))
                      for o in field.outputs])  # fmt: skip
        return X
    finally:
        _WIDE[0] = False


def _coefficient(field, op, a, i, k, S, Z, X, params, zero):
    """Coefficient k (a dual) of node i from the coefficients < k of every node and <= k of
    its arguments (the recurrences of proofs/bounds.md#taylor-ad)."""

    def s(n, j=k):
        return S[n][j] if j < len(S[n]) else zero

    if op == "x":
        return X[k][a[0]]
    if op in ("p", "c"):
        return [params[a[0]] if op == "p" else arb(a[0]), *zero[1:]]
    if op in ("add", "sub", "neg", "sum"):
        out = _scale(s(a[0]), -1) if op == "neg" else s(a[0])
        for n in a[1:]:
            out = (_sub if op == "sub" else _add)(out, s(n))
        return out
    if op == "mul":
        if field.const[a[0]] or field.const[a[1]]:
            c, v = (a[0], a[1]) if field.const[a[0]] else (a[1], a[0])
            return _mul(S[c][0], s(v))
        return _conv(S[a[0]], S[a[1]], k)
    if op == "div":  # y_k = (a_k - sum_{j=1..k} b_j y_{k-j}) / b_0
        if 0 in s(a[1], 0)[0]:
            raise ReplayError(f"node {i} (div): the divisor's ball contains 0")
        B = [s(a[1], j) for j in range(k + 1)]
        return _div(s(a[0]) if k == 0 else _sub(s(a[0]), _conv(B, S[i], k, 1)), B[0])
    if op == "logsumexp":
        return _logsumexp(a, i, k, s, S, Z, zero)
    A = S[a[0]]
    if op == "sqr":  # 2 sum_{j < k-j} a_j a_{k-j} + [k even] a_{k/2}^2
        twice = _scale(_conv(A, A, k, 0, (k - 1) // 2), 2) if k else None
        mid = _mul(A[k // 2], A[k // 2]) if k % 2 == 0 else None
        return mid if twice is None else twice if mid is None else _add(twice, mid)
    if k == 0 and op in ("log", "sqrt") and not A[0][0] > 0:
        raise ReplayError(f"node {i} ({op}): its argument's ball is not > 0")
    if op in ("sin", "cos"):  # (sin a)' = a' cos a, (cos a)' = -a' sin a
        if k == 0:
            Z[i] = tuple([y] for y in _elementary(op, A[0]))
        else:
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
    if op == "log":  # a_0 y_k = a_k - (1/k) sum_{j=1..k-1} j y_j a_{k-j}
        corr = _scale(_conv(S[i], A, k, 1, k - 1, True), fmpq(1, k)) if k > 1 else zero
        return _div(_sub(A[k], corr), A[0])
    # sqrt: 2 y_0 y_k = a_k - sum_{j=1..k-1} y_j y_{k-j}
    corr = _conv(S[i], S[i] + [zero], k, 1, k - 1) if k > 1 else zero
    return _div(_sub(A[k], corr), _scale(S[i][0], 2))


def _logsumexp(a, i, k, s, S, Z, zero):
    """L = log sum_t exp(a_t) with the softmax weights w_t = exp(a_t - L) as auxiliary series:
    L' = sum_t w_t a_t', w_t' = (a_t' - L') w_t."""
    if k == 0:
        vals = [s(n, 0) for n in a]
        top = max((v[0].mid() for v in vals), key=lambda m: m)  # any exact shift works
        L = top + _monotone(arb.log, sum((_monotone(arb.exp, v[0] - top) for v in vals), _ZERO))
        w = [_monotone(arb.exp, v[0] - L) for v in vals]
        pairs = list(zip(w, vals, strict=True))
        dL = [sum((wt * v[g] for wt, v in pairs), _ZERO) for g in range(1, len(zero))]
        Z[i] = [[[wt, *(wt * (v[g] - dL[g - 1]) for g in range(1, len(zero)))]]
                for wt, v in pairs]  # fmt: skip
        return [L, *dL]
    series = [[s(n, j) for j in range(k + 1)] for n in a]
    L = zero
    for A, W in zip(series, Z[i], strict=True):
        L = _add(L, _wconv(A, W, k))
    Ls = [*S[i], L]
    for A, W in zip(series, Z[i], strict=True):
        W.append(_wconv([_sub(A[j], Ls[j]) for j in range(k + 1)], W, k))
    return L
