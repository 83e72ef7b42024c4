"""Certified counts of conservation laws of gradient flows (theorems.md §10; Marcotte, Gribonval,
Peyré 2023), in exact rational polynomial arithmetic (python-flint ``fmpq_mpoly``, ``fmpq_mat``).

A model ``g(theta, x) = f(phi(theta), x)`` with a polynomial factorisation
``phi: R^D -> R^d``: every loss gradient lies in ``span{grad phi_k(theta)}``. Two bounds on the
number of independent conserved functions near a rational point theta_0:

* **upper**: ``D - r_0``, r_0 the exact rank at theta_0 of the fields ``grad phi_k`` and of
  iterated Lie brackets ``[X, Y] = DY X - DX Y`` of them (any finite family: rank is lower
  semicontinuous, so every law near theta_0 is orthogonal to all of them there);
* **lower**: ``n_0``, the exact rank at theta_0 of the gradients of polynomial laws h, each
  proved by the identity ``<grad h, grad phi_k> == 0`` for every k (exact polynomials).

COMPLETE when ``r_0 + n_0 = D``; otherwise the gap is reported, never a count
(proofs/training.md#conservation).
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import flint

from certified.arith.exact import fmpq_to_str, to_fmpq
from certified.errors import InputError, ShapeError

__all__ = [
    "ARCHITECTURES",
    "ConservationCount",
    "architecture",
    "count_laws",
    "parse_polynomial",
    "polynomial_factorisation",
]

ARCHITECTURES = ("relu", "linear", "attention", "neural-ode")


@dataclass(frozen=True)
class Factorisation:
    """Variables (names), the polynomial map phi and known laws (polynomials) of a model."""

    names: tuple[str, ...]
    ctx: Any
    phi: tuple[Any, ...]
    laws: tuple[Any, ...]


def _ctx(names: Sequence[str]):
    return flint.fmpq_mpoly_ctx.get(tuple(names), "lex")


def _matrix(prefix: str, rows: int, cols: int) -> list[list[str]]:
    return [[f"{prefix}_{i}_{j}" for j in range(cols)] for i in range(rows)]


def _widths(widths: Sequence[int], name: str, count: int | None = None) -> list[int]:
    w = [int(v) for v in widths]
    if any(v < 1 for v in w) or (count is not None and len(w) != count) or len(w) < 2:
        need = f"{count} widths" if count else "at least 2 widths"
        raise ShapeError(f"--widths: {name} needs {need}, each >= 1; got {list(widths)}")
    return w


def _neurons(n: int, r: int, m: int, u: str, b: str, v: str) -> Factorisation:
    """Shallow ReLU n -> r -> m with biases: phi_j = v_j (u_j, b_j)^T per neuron; laws
    ``|u_j|^2 + b_j^2 - |v_j|^2``."""
    U, V = _matrix(u, r, n), _matrix(v, m, r)
    B = [f"{b}_{j}" for j in range(r)]
    names = [*(x for row in U for x in row), *B, *(x for row in V for x in row)]
    ctx = _ctx(names)
    g = dict(zip(names, ctx.gens(), strict=True))
    phi, laws = [], []
    for j in range(r):
        ins = [g[U[j][i]] for i in range(n)] + [g[B[j]]]
        outs = [g[V[k][j]] for k in range(m)]
        phi += [o * a for o in outs for a in ins]
        laws.append(
            sum((a * a for a in ins), ctx.constant(0)) - sum((o * o for o in outs), ctx.constant(0))
        )
    return Factorisation(tuple(names), ctx, tuple(phi), tuple(laws))


def _matmul(X, Y, ctx):
    return [[sum((X[i][k] * Y[k][j] for k in range(len(Y))), ctx.constant(0))
             for j in range(len(Y[0]))] for i in range(len(X))]  # fmt: skip


def _gram(X, ctx, left: bool):
    """X^T X (left) or X X^T, the upper triangle."""
    T = [list(c) for c in zip(*X, strict=True)]
    G = _matmul(T, X, ctx) if left else _matmul(X, T, ctx)
    return [[G[i][j] for j in range(i, len(G))] for i in range(len(G))]


def architecture(name: str, widths: Sequence[int]) -> Factorisation:
    """The factorisation of a named architecture: ``relu`` (n, r, m: shallow, with biases),
    ``linear`` (n, r_1, ..., m: phi = W_L ... W_1), ``attention`` (d, k: one head, phi =
    (Q K^T, V O^T)), ``neural-ode`` (d, p: one ReLU piece W relu(A x + b), phi_j =
    W_{:j} (A_j, b_j)). Guarantee: exact."""
    if name == "relu":
        n, r, m = _widths(widths, name, 3)
        return _neurons(n, r, m, "u", "b", "v")
    if name == "neural-ode":
        d, p = _widths(widths, name, 2)
        return _neurons(d, p, d, "A", "b", "W")
    if name == "attention":
        d, k = _widths(widths, name, 2)
        mats = {M: _matrix(M, d, k) for M in ("Q", "K", "V", "O")}
        names = [x for M in mats.values() for row in M for x in row]
        ctx = _ctx(names)
        g = dict(zip(names, ctx.gens(), strict=True))
        P = {M: [[g[x] for x in row] for row in rows] for M, rows in mats.items()}
        T = {M: [list(c) for c in zip(*P[M], strict=True)] for M in P}
        phi = [e for row in _matmul(P["Q"], T["K"], ctx) for e in row]
        phi += [e for row in _matmul(P["V"], T["O"], ctx) for e in row]
        laws = []
        for a, b in (("Q", "K"), ("V", "O")):
            Ga, Gb = _gram(P[a], ctx, True), _gram(P[b], ctx, True)
            laws += [
                x - y for ra, rb in zip(Ga, Gb, strict=True) for x, y in zip(ra, rb, strict=True)
            ]
        return Factorisation(tuple(names), ctx, tuple(phi), tuple(laws))
    if name == "linear":
        w = _widths(widths, name)
        mats = [_matrix(f"W{k + 1}", w[k + 1], w[k]) for k in range(len(w) - 1)]
        names = [x for M in mats for row in M for x in row]
        ctx = _ctx(names)
        g = dict(zip(names, ctx.gens(), strict=True))
        P = [[[g[x] for x in row] for row in M] for M in mats]
        prod = P[0]
        for M in P[1:]:
            prod = _matmul(M, prod, ctx)
        laws = []
        for k in range(len(P) - 1):  # W_{k+1}^T W_{k+1} - W_k W_k^T (hidden layer k + 1)
            Ga, Gb = _gram(P[k + 1], ctx, True), _gram(P[k], ctx, False)
            laws += [
                x - y for ra, rb in zip(Ga, Gb, strict=True) for x, y in zip(ra, rb, strict=True)
            ]
        return Factorisation(tuple(names), ctx, tuple(e for row in prod for e in row), tuple(laws))
    raise InputError(f"--architecture: {name!r} is not one of {', '.join(ARCHITECTURES)}")


def polynomial_factorisation(variables: Sequence[str], phi: Sequence[str]) -> Factorisation:
    """A factorisation given by polynomials ``phi`` (strings) in the named variables, with no
    known laws (give them to :func:`count_laws`). Guarantee: exact."""
    names = list(variables)
    bad = [v for v in names if not isinstance(v, str) or not re.fullmatch(r"[A-Za-z_]\w*", v)]
    if not names or bad or len(set(names)) != len(names) or len(names) > 200:
        raise InputError(f"variables: expected 1 to 200 distinct names, got {names!r:.80}")
    if not phi or len(phi) > 1000:
        raise InputError("phi: expected 1 to 1000 polynomials")
    ctx = _ctx(names)
    return Factorisation(tuple(names), ctx, tuple(parse_polynomial(f, ctx) for f in phi), ())


_TOKEN = re.compile(r"\s*(?:(\d+(?:/\d+)?)|([A-Za-z_][A-Za-z0-9_]*)|(\*\*|[-+*^()/]))")


def parse_polynomial(text: str, ctx) -> Any:
    """A polynomial with rational coefficients in the variables of ``ctx``: integers, ``p/q``,
    names, ``+ - * ^ **`` (non-negative integer exponents), parentheses; nothing is evaluated.
    Guarantee: exact."""
    if not isinstance(text, str) or len(text) > 10_000:
        raise InputError(f"law: expected a polynomial string, got {text!r:.60}")
    tokens, pos = [], 0
    while pos < len(text.rstrip()):
        m = _TOKEN.match(text, pos)
        if not m:
            raise InputError(f"law {text!r:.60}: cannot read from {text[pos : pos + 10]!r}")
        tokens.append(m.group(1) or m.group(2) or m.group(3))
        pos = m.end()
    names = ctx.names()
    gens = dict(zip(names, ctx.gens(), strict=True))
    at = [0]

    def peek():
        return tokens[at[0]] if at[0] < len(tokens) else None

    def take():
        at[0] += 1
        return tokens[at[0] - 1]

    def atom():
        t = take() if peek() is not None else None
        if t == "(":
            v = expr()
            if take() != ")":
                raise InputError(f"law {text!r:.60}: unbalanced parentheses")
            return v
        if t is not None and t[0].isdigit():
            return ctx.constant(to_fmpq(t, "law"))
        if t in gens:
            return gens[t]
        raise InputError(f"law {text!r:.60}: unknown name {t!r}; variables: {', '.join(names)}")

    def power():
        v = atom()
        if peek() in ("^", "**"):
            take()
            e = take() if peek() is not None else ""
            if not e.isdigit() or int(e) > 64:
                raise InputError(f"law {text!r:.60}: exponents are integers 0..64")
            v = v ** int(e)
        return v

    def unary():
        if peek() in ("-", "+"):
            return -unary() if take() == "-" else unary()
        return power()

    def term():
        v = unary()
        while peek() == "*":
            take()
            v = v * unary()
        return v

    def expr():
        v = term()
        while peek() in ("+", "-"):
            v = v + term() if take() == "+" else v - term()
        return v

    out = expr()
    if peek() is not None:
        raise InputError(f"law {text!r:.60}: unexpected {peek()!r}")
    return out


@dataclass(frozen=True)
class ConservationCount:
    """Certified bounds on the number of independent conserved functions near ``at``:
    ``lower <= count <= upper``; ``verdict`` "COMPLETE" (then ``laws`` is the count) or "GAP".

    Guarantee: the bounds hold (exact ranks, exact polynomial identities)."""

    architecture: str
    names: tuple[str, ...]
    at: tuple[flint.fmpq, ...]
    lower: int
    upper: int
    expressions: tuple[str, ...]
    brackets: int

    @property
    def verdict(self) -> str:
        return "COMPLETE" if self.lower == self.upper else "GAP"

    @property
    def laws(self) -> int | None:
        return self.lower if self.lower == self.upper else None


def _grad(h, n: int):
    return [h.derivative(i) for i in range(n)]


def _at(field, point) -> list[flint.fmpq]:
    return [c(*point) for c in field]


def _rank(rows: list[list[flint.fmpq]], n: int) -> int:
    return flint.fmpq_mat(len(rows), n, [v for r in rows for v in r]).rank() if rows else 0


def _bracket(X, Y, n: int):
    """[X, Y] = DY X - DX Y (component i: sum_j d_j Y_i X_j - d_j X_i Y_j)."""
    return [sum((Y[i].derivative(j) * X[j] - X[i].derivative(j) * Y[j] for j in range(n)),
                X[0] * 0) for i in range(n)]  # fmt: skip


def default_point(D: int) -> tuple[flint.fmpq, ...]:
    """A fixed rational point with small distinct entries (generic enough in practice; any
    point gives valid bounds, only their meeting depends on it). Guarantee: exact."""
    return tuple(
        flint.fmpq((7 * k + 3) % 11 - 5, 1 + (3 * k) % 4) or flint.fmpq(1, 7) for k in range(D)
    )


def count_laws(
    fact: Factorisation,
    at: Sequence[Any] | None = None,
    laws: Sequence[Any] | None = None,
    *,
    depth: int = 4,
    seconds: float = 30.0,
    name: str = "",
) -> ConservationCount:
    """Certified lower and upper bounds on the number of independent conservation laws near
    ``at`` (exact rationals; default :func:`default_point`). ``laws``: polynomials (strings or
    fmpq_mpoly) used for the lower bound instead of the architecture's known laws; each must
    satisfy ``<grad h, grad phi_k> == 0`` identically (else InputError naming it).

    Guarantee: ``lower <= number of independent conserved functions near at <= upper``
    (proofs/training.md#conservation)."""
    D = len(fact.names)
    if at is None:
        point = default_point(D)
    else:
        if len(at) != D:
            raise ShapeError(
                f"--at: expected {D} numbers (variables {', '.join(fact.names)}), got {len(at)}"
            )
        point = tuple(to_fmpq(v, f"--at[{k}]") for k, v in enumerate(at))
    hs = list(fact.laws) if laws is None else [
        parse_polynomial(h, fact.ctx) if isinstance(h, str) else h for h in laws]  # fmt: skip
    gens = [_grad(p, D) for p in fact.phi]
    law_grads = []
    for k, h in enumerate(hs):
        g = _grad(h, D)
        for j, X in enumerate(gens):
            if sum((a * b for a, b in zip(g, X, strict=True)), fact.ctx.constant(0)) != 0:
                raise InputError(
                    f"laws[{k}]: {h} is not conserved: <grad h, grad phi_{j}> is not 0 identically"
                )
        law_grads.append(g)
    law_rows = [_at(g, point) for g in law_grads]
    n0 = _rank(law_rows, D)
    # upper bound: right-nested brackets [X_i, [X_j, ...]] span the Lie algebra; keep a field
    # only when it raises the rank at the point (cost: tightness only)
    rows: list[list[flint.fmpq]] = []
    level = []
    for X in gens:
        v = _at(X, point)
        if _rank([*rows, v], D) > len(rows):
            rows.append(v)
            level.append(X)
    kept = list(level)
    start = time.perf_counter()
    for _ in range(depth - 1):
        if len(rows) + n0 >= D or not level or time.perf_counter() - start > seconds:
            break
        new = []
        for X in gens:
            for Y in level:
                Z = _bracket(X, Y, D)
                v = _at(Z, point)
                if _rank([*rows, v], D) > len(rows):
                    rows.append(v)
                    new.append(Z)
                if len(rows) + n0 >= D:
                    break
            if len(rows) + n0 >= D:
                break
        level = new
        kept += new
    for k, lr in enumerate(law_rows):  # guard: the theory says so; a failure is a bug
        for v in rows:
            if sum((a * b for a, b in zip(lr, v, strict=True)), flint.fmpq(0)) != 0:
                raise AssertionError(f"law {k} is not orthogonal to a bracket field at the point")
    r0 = len(rows)
    return ConservationCount(
        name, fact.names, point, n0, D - r0, tuple(str(h) for h in hs), len(kept)
    )


def at_strings(count: ConservationCount) -> list[str]:
    """The point as exact strings. Guarantee: exact."""
    return [fmpq_to_str(v) for v in count.at]
