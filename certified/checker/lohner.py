"""The validated Taylor step with QR-Lohner sets, in arb (public: producers compute with it the
claims the checker replays). A set is ``x^ + C r`` (proofs/bounds.md#lohner). A step of length h
with a priori box B: Picard ``X + [0, h] f(B) inside B`` (#picard); ``y = Phi_h(x^)`` in the
order-K Taylor polynomial plus ``x_K(B) h^K`` (#taylor-step); ``J = DPhi_h(X)`` in the order-m
variational polynomial plus ``V_m(B, V_B) h^m``, ``V_B = I + [-e, e]``, ``e = exp(L h) - 1``,
``L >= |Df(B)|_inf`` (#variational); then ``x^' = mid(y)``, ``C'`` the orthonormalised
``mid(J C)`` and ``r' = (C'^-1 J C) r + C'^-1 (y - x^')``. A doubleton ``x^ + M u + C r``
(u in the initial box's fixed U) keeps ``M' = mid(J M)`` and adds ``(J M - M') U`` to
``y - x^'`` (#doubleton)."""

from __future__ import annotations

import flint
from flint import arb, arb_mat, fmpq

from .taylor import ReplayError, field_jets

__all__ = ["MAX_TAYLOR_OPS", "SUPPORTED", "LohnerSet", "lohner_step",
           "replay_cost", "replay_flow", "supported"]  # fmt: skip

MAX_TAYLOR_OPS = 6 * 10**8  # estimated cost of a replay, in units of ~0.1 us (about a minute)

_ZERO = arb(0)

# the operations with a float64 form (lohner64, jets64: numpy, imported when used)
SUPPORTED = ("x", "p", "c", "neg", "sqr", "sqrt", "exp", "log", "tanh", "sigmoid", "sin", "cos",
             "add", "sub", "mul", "div", "sum", "logsumexp")  # fmt: skip


def supported(field) -> bool:
    """Whether every node of the field has a float64 form (``arithmetic="float64"``)."""
    return all(node[0] in SUPPORTED for node in field.nodes)


class LohnerSet:
    """``centre + C r`` (``+ M u``, u in U, a doubleton): centre d exact balls, C (and M) d x d
    exact arb_mat, r (and U) d x 1 arb_mat."""

    __slots__ = ("C", "M", "U", "centre", "r")

    def __init__(self, centre: list[arb], C: arb_mat, r: arb_mat, M=None, U=None) -> None:
        self.centre, self.C, self.r, self.M, self.U = centre, C, r, M, U

    @classmethod
    def box(cls, lo: list[fmpq], hi: list[fmpq], doubleton: bool = False) -> LohnerSet:
        """The box [lo, hi] as centre + I r (an inexact centre's radius moves into r), or as
        the doubleton centre + I u + I 0."""
        d = len(lo)
        mids = [arb((a + b) / 2) for a, b in zip(lo, hi, strict=True)]
        rad = [arb((b - a) / 2) + (c - c.mid()) for a, b, c in zip(lo, hi, mids, strict=True)]
        r = arb_mat([[arb(0, abs(q).upper())] for q in rad])
        eye = arb_mat([[int(i == j) for j in range(d)] for i in range(d)])
        if doubleton:
            return cls([arb(c.mid()) for c in mids], eye, arb_mat(d, 1), eye, r)
        return cls([arb(c.mid()) for c in mids], eye, r)

    def hull(self, with_centre: bool = False) -> list[arb]:
        """Balls containing the set (and the centre if asked, proofs/bounds.md#lohner)."""
        r, U = self.r, self.U
        if with_centre:
            r = arb_mat([[r[i, 0].union(_ZERO)] for i in range(r.nrows())])
            U = U if U is None else arb_mat([[U[i, 0].union(_ZERO)] for i in range(U.nrows())])
        Cr = self.C * r if U is None else self.C * r + self.M * U
        return [self.centre[i] + Cr[i, 0] for i in range(len(self.centre))]


def _poly(coefs: list[arb], h: arb) -> arb:
    out = coefs[-1]
    for c in reversed(coefs[:-1]):
        out = out * h + c
    return out


def _orthonormal(M: arb_mat, order: list[int]) -> arb_mat:
    """Exact midpoints of Gram-Schmidt on the columns of M in the given order."""
    d, Q = M.nrows(), {}
    for c in order:
        v = [M[r, c] for r in range(d)]
        for q in Q.values():
            dot = sum((a * b for a, b in zip(q, v, strict=True)), _ZERO)
            v = [x - dot * y for x, y in zip(v, q, strict=True)]
        n = sum((x * x for x in v), _ZERO).sqrt()
        if not n > 0:
            raise ReplayError("the new basis C is singular")
        Q[c] = [x / n for x in v]
    return arb_mat([[Q[c][r] for c in range(d)] for r in range(d)]).mid()


def lohner_step(field, params, S: LohnerSet, h: fmpq, box, K: int, m: int) -> LohnerSet:
    """One step of length h from S with the a priori box ``box`` (d exact pairs); Taylor order
    K, variational order m. Raises ReplayError (Picard, domain, singular basis).
    Guarantee: the returned set contains Phi_h(x) for every x in S."""
    d, hb = field.dimension, arb(h)
    B = [arb(lo).union(arb(hi)) for lo, hi in box]
    ident = [[arb(int(i == j)) for j in range(d)] for i in range(d)]
    df = field_jets(field, params, B, ident, 1, wide=True)[1]  # f(B) and Df(B)
    X = S.hull(with_centre=True)
    for j in range(d):
        lo = X[j].lower() + hb * min(_ZERO, df[j][0].lower())
        hi = X[j].upper() + hb * max(_ZERO, df[j][0].upper())
        if not (lo.lower() >= arb(box[j][0]) and hi.upper() <= arb(box[j][1])):
            raise ReplayError(f"the Picard inclusion fails in coordinate {j}")
    L = max(sum((abs(g) for g in df[i][1:]), _ZERO).upper() for i in range(d))
    e = (arb((arb(L) * hb).exp().upper()) - 1).upper()
    VB = [[ident[i][j] + arb(0, e) for j in range(d)] for i in range(d)]
    rem = field_jets(field, params, B, None, K)[K]
    at = field_jets(field, params, S.centre, None, K - 1)
    # the increment y - x^ = sum_{k>=1} x_k h^k: rounding errors scale with it, not with x^
    inc = [hb * _poly([at[k][i][0] for k in range(1, K)] + [rem[i][0]], hb) for i in range(d)]
    sB, sX = VB, ident
    if S.M is not None:  # doubleton: seeds [I | M], [V_B | V_B M] also give J M directly
        VM = arb_mat(VB) * S.M
        sB = [VB[i] + [VM[i, j] for j in range(d)] for i in range(d)]
        sX = [ident[i] + [S.M[i, j] for j in range(d)] for i in range(d)]
    vrem = field_jets(field, params, B, sB, m, wide=True)[m]
    vx = field_jets(field, params, X, sX, m - 1, wide=True)
    J, AM = (arb_mat([[_poly([vx[k][i][1 + j] for k in range(m)] + [vrem[i][1 + j]], hb)
                       for j in range(o, o + d)] for i in range(d)]) if o >= 0 else None
             for o in (0, d if S.M is not None else -1))  # fmt: skip
    A = J * S.C
    centre = [arb((c + v.mid()).mid()) for c, v in zip(S.centre, inc, strict=True)]
    z = arb_mat([[(S.centre[i] - centre[i]) + inc[i]] for i in range(d)])
    M = None
    if S.M is not None:  # doubleton (proofs/bounds.md#doubleton)
        M = AM.mid()
        z = z + (AM - M) * S.U
    size = [sum((A[r, c] * A[r, c] for r in range(d)), _ZERO).mid() * S.r[c, 0].rad()
            for c in range(d)]  # fmt: skip
    C = _orthonormal(A.mid(), sorted(range(d), key=lambda c: -size[c]))  # longest edge first
    try:
        Ci = C.inv()
    except ZeroDivisionError:
        raise ReplayError("the new basis C is singular") from None
    return LohnerSet(centre, C, (Ci * A) * S.r + Ci * z, M, S.U)


def replay_cost(field, n: int, steps: int, K: int, m: float, prec: int, arithmetic="arb",
                sets: str = "lohner") -> int:  # fmt: skip
    """Estimated cost of ``replay_flow`` in arb operations (about 0.1 us each; m: the mean
    variational order; doubletons and zonotopes carry 2d duals, zonotopes up to 16 d
    generators, quadratic sets hyper-duals and d^4 tensors), proofs/format.md section 7, cost."""
    d = field.dimension
    g = d if sets == "lohner" else 2 * d  # the variational duals
    if sets == "quadratic":  # hyper-duals (d + d (d + 1) / 2 parts, their products), twice,
        g = d + 5 * d * (d + 1) // 2
    if arithmetic == "float64":  # float64 intervals: numpy calls per step, cells per set
        groups, active, conv = _shape(field)
        calls = 10 * groups * (2 * K + 2 * m + 1) + 15 * min(conv, 4) * (K * K + 2 * m * m)
        cells = 15 * active * (2 * K + (g + 1) * (2 * m + 1)) + 15 * conv * (
            K * K + (g + 1) * m * m
        )
        gens = 8 * d**3 if sets in ("zonotope", "quadratic") else 0  # J G: d x d x 16 d (~1/2
        gens += d**4 if sets == "quadratic" else 0  # unit each); A Q, the rest's hulls: d^4
        return int(steps * (5 * calls + n * (cells // 40 + 8 * d**3 + gens)))
    return int(
        n * steps * (field.cost * (K * K + 3 * (g + 1) * m * m) + 20 * d**3) * (1 + prec // 256)
    )


def _shape(field) -> tuple[int, int, int]:
    """For the float64 cost: an upper bound on the groups of ``jets64.Program`` (distinct depth
    and operation, twice), the nodes computed at every order (neither constant nor a product by
    a constant, which matrix products absorb) and those whose coefficients are convolutions."""
    depth, keys, active, conv = [], set(), 0, 0
    series = ("mul", "div", "sqr", "sqrt", "exp", "log", "tanh", "sigmoid", "sin", "cos")
    for i, (op, *a) in enumerate(field.nodes):
        depth.append(0 if op in ("x", "p", "c") else 1 + max(depth[j] for j in a))
        keys.add((depth[-1], op))
        scaled = op == "mul" and (field.const[a[0]] or field.const[a[1]])
        if not field.const[i] and not scaled:
            active += 1
            conv += op in series or (2 * len(a) if op == "logsumexp" else 0)
    return 2 * len(keys), active, conv


def replay_flow(
    field, pieces, starts, steps, boxes, K: int, m: int, times, orders=None, arithmetic="arb",
    apriori=None, sets="lohner",
) -> list:  # fmt: skip
    """Enclosures ``out[k][i]`` (d balls) at ``times[k]`` (ends of steps) of the flow of
    ``field`` with ``pieces`` ((duration, parameter balls)) from the boxes ``starts[i]`` (d
    exact pairs), replaying ``steps[j]`` (lengths summing to the duration of piece j) with a
    priori ``boxes[j][step][i]`` and variational order ``orders[j][step]`` (default m), set by
    set in arb at the current precision, or with ``arithmetic="float64"`` (53 bits, a field
    whose every operation has a float64 form: :func:`~certified.checker.lohner64.supported`)
    for all sets at once in float64 intervals (:func:`~certified.checker.lohner64.replay_flow64`).
    With float64, ``boxes`` None means a priori boxes built from the factors ``apriori[j][s]``
    (``lohner64.apriori64``; an entry None is chosen and stored). ``sets``: "lohner",
    "doubleton" (proofs/bounds.md#doubleton) or "zonotope" (#zonotope, float64 only).
    Raises ReplayError naming the piece, step and set.
    Guarantee: encloses (proofs/checker_soundness.md#taylor-lohner, #float-intervals)."""
    if orders is None:
        orders = [[m] * len(s) for s in steps]
    if arithmetic == "float64":
        if flint.ctx.prec != 53 or not supported(field):
            raise ReplayError("float64 arithmetic needs 53 bits and float64 forms of every node")
        from .lohner64 import replay_flow64  # numpy: only for this arithmetic

        return replay_flow64(field, pieces, starts, steps, boxes, K, orders, times, apriori,
                             sets)  # fmt: skip
    if sets in ("zonotope", "quadratic"):
        raise ReplayError(f"{sets} sets are replayed in float64 intervals only")
    dbl = sets == "doubleton"
    sets = [LohnerSet.box([a for a, _ in s], [b for _, b in s], dbl) for s in starts]
    out, t, pending = [], fmpq(0), list(times)
    for j, (duration, params) in enumerate(pieces):
        if sum(steps[j], fmpq(0)) != duration or not all(h > 0 for h in steps[j]):
            raise ReplayError(f"piece {j}: the steps are not positive or do not sum to {duration}")
        for s, h in enumerate(steps[j]):
            for i, S in enumerate(sets):
                try:
                    sets[i] = lohner_step(field, params, S, h, boxes[j][s][i], K, orders[j][s])
                except ReplayError as exc:
                    raise ReplayError(f"piece {j}, step {s}, set {i}: {exc}") from None
            t += h
            while pending and pending[0] == t:
                out.append([S.hull() for S in sets])
                pending.pop(0)
    if pending:
        raise ReplayError(f"time {pending[0]} is not the end of a step")
    return out
