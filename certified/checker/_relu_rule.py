"""Rule ``relu-regions`` of kind ``flow`` v1: enclosures of (leaky) ReLU flows with non-laminar
pieces, re-derived region by region in arb (proofs/checker_soundness.md#relu-regions). Hints
(per point, per piece): ``{"kind": "laminar" | "equilibrium"}`` or ``{"kind": "regions",
"segments": [{"region", "start", "end", "steps"}], "crossings": [{"neurons", "window", "eps"}]}``:
only *where* to look (regions, step and window times, window widths); enclosures are recomputed."""

from __future__ import annotations

from math import isqrt
from typing import Any

import flint
from flint import arb, fmpq

from . import _parse
from ._parse import MAX_HEIGHT_BITS, Rejected, array, exact, fields, small_integer, string

MAX_RELU_OPS = 10**8  # ball operations a replay may take
_Z = fmpq(0)


def _sig(z: Any, al: fmpq) -> Any:
    """sigma(z) = max(z, al z) of an exact z, or of a ball by its endpoints (NaN stays NaN)."""
    if isinstance(z, fmpq):
        return z if z > 0 else al * z
    lo, hi = z.lower(), z.upper()
    return arb(lo if lo > 0 else al * lo).union(arb(hi if hi > 0 else al * hi))


def _count(x: Any) -> int:
    return len(x) if isinstance(x, list) else 0


def _norm2_up(v: list[fmpq]) -> arb:
    return arb(sum((c * c for c in v), _Z)).sqrt()


class _Net:
    """Exact data of one piece: columns w_i, rows a_i, b_i, slope al (0: ReLU); live neurons
    (w_i, a_i != 0) and the constant drift of the neurons with a_i = 0."""

    def __init__(self, piece: Any, d: int, al: fmpq) -> None:
        self.d, self.p, self.tau, self.al = d, len(piece.b), piece.duration, al
        self.w = [[piece.W[k][i] for k in range(d)] for i in range(self.p)]
        self.a, self.b, self.height = piece.A, piece.b, piece.height
        _parse.charge(4 * self.p * d, 2 * self.height, piece.where)  # c0, _laminar (exact)
        self.live = [i for i in range(self.p) if any(self.w[i]) and any(self.a[i])]
        live = set(self.live)  # the regions, "-" read as "+":
        self.signs = "".join("+" if i in live else "." for i in range(self.p))
        self.c0 = [_Z] * d
        for i in range(self.p):
            if any(self.w[i]) and not any(self.a[i]):
                self.c0 = [self.c0[k] + self.w[i][k] * _sig(self.b[i], al) for k in range(d)]
        self.lip = sum((_norm2_up(self.w[i]) * _norm2_up(self.a[i]) for i in self.live), arb(0))
        self.laminar, self.memo = self._laminar(), {}

    def _laminar(self) -> bool:
        """All live a_i parallel to one a, a . w_i = 0 and a . c0 = 0 (bounds.md#relu-laminar)."""
        if not self.live:
            return True
        a, d = self.a[self.live[0]], self.d
        m = next(k for k in range(d) if a[k] != 0)
        if any(self.a[i][k] * a[m] != self.a[i][m] * a[k] for i in self.live for k in range(d)):
            return False
        return all(sum((a[k] * v[k] for k in range(d)), _Z) == 0 for v in [self.c0] + self.w)

    def field(self, x: list, zero: Any) -> list:
        out = list(self.c0)
        for i in self.live:
            z = _sig(sum((self.a[i][k] * x[k] for k in range(self.d)), zero) + self.b[i], self.al)
            out = [out[k] + self.w[i][k] * z for k in range(self.d)]
        return out

    def affine(self, region: str) -> tuple[list[list[fmpq]], list[fmpq]]:
        """M, c of the field on the closed region (exact; slope 1 on +, al on -)."""
        if region in self.memo:
            return self.memo[region]
        d, c = self.d, list(self.c0)
        M = [[_Z] * d for _ in range(d)]
        for i in self.live:
            s = fmpq(1) if region[i] == "+" else self.al
            if s:
                for k in range(d):
                    c[k] += s * self.w[i][k] * self.b[i]
                    for m in range(d):
                        M[k][m] += s * self.w[i][k] * self.a[i][m]
        self.memo[region] = M, c
        return M, c


class _Series:
    """Taylor coefficients of the affine flow from every point of the ball Y, with the tail
    bound T(s) of proofs/bounds.md#relu-taylor-tail."""

    def __init__(self, M, c, Y: list[arb], N: int, h: fmpq) -> None:
        d = len(Y)
        self.m = max(sum((abs(v) for v in row), _Z) for row in M)
        if self.m * h >= N + 2:
            raise Rejected(f"a step of length {h} is too long for order {N} (m h >= N + 2)")
        Ma, ca = [[arb(v) for v in row] for row in M], [arb(v) for v in c]
        v = [list(Y) + [arb(1)]]
        for k in range(N):
            prev = v[-1]
            nxt = [
                (sum((Ma[r][s] * prev[s] for s in range(d)), arb(0)) + ca[r] * prev[d]) / (k + 1)
                for r in range(d)
            ]
            v.append(nxt + [arb(0)])
        self.v, self.N, self.d = v, N, d
        self.vN = sum((abs(x) for x in v[N][:d]), arb(0)).upper()  # >= the max norm; NaN stays

    def tail(self, s: fmpq) -> arb:
        if s == 0:
            return arb(0)
        ms = arb(self.m * s)
        t = arb(self.vN) * arb(s) ** self.N * (ms / (self.N + 1)) / (1 - ms / (self.N + 2))
        return arb(t.upper())

    @staticmethod
    def horner(coef: list[arb], S: arb) -> arb:
        out = arb(0)
        for x in reversed(coef):
            out = out * S + x
        return out

    def coords(self, S: arb, s_hi: fmpq) -> list[arb]:
        T = self.tail(s_hi)
        return [self.horner([v[j] for v in self.v], S) + arb(0, T) for j in range(self.d)]

    def scalar(self, row: list[arb], S: arb, s_hi: fmpq, weight: arb) -> arb:
        """row . x~(s) over S (row of length d + 1), with tail weight * T(s_hi)."""
        coef = [sum((row[j] * v[j] for j in range(self.d + 1)), arb(0)) for v in self.v]
        return self.horner(coef, S) + arb(0, (weight * self.tail(s_hi)).upper())


def _signed_rows(net: _Net, region: str, M, c):
    """Per live neuron: sigma_i (a_i, b_i), sigma_i (a_i^T M, a_i^T c) and their tail weights."""
    out, d = [], net.d
    for i in net.live:
        sg, a = (1 if region[i] == "+" else -1), net.a[i]
        g = [arb(sg * x) for x in a] + [arb(sg * net.b[i])]
        aM = [sum((a[k] * M[k][m] for k in range(d)), _Z) for m in range(d)]
        ac = sum((a[k] * c[k] for k in range(d)), _Z)
        dg = [arb(sg * x) for x in aM] + [arb(sg * ac)]
        w1, w2 = arb(sum((abs(x) for x in a), _Z)), arb(sum((abs(x) for x in aM), _Z))
        out.append((i, g, dg, w1, w2))
    return out


def _flat(x: list, J: list, r: list) -> list[arb]:
    """Exact ends (lo, hi) of the coordinates of c + J u, |u_k| <= r_k (c in the balls x,
    columns J_k); not a ball: a ball's radius has 30 bits, which would lose ~1e-9 |J| r."""
    e = [sum((abs(c[k]).upper() * rk for c, rk in zip(J, r)), arb(0)) for k in range(len(x))]  # noqa: B905
    return [((v.lower() - w).lower(), (v.upper() + w).upper()) for v, w in zip(x, e, strict=True)]


def _step(net, region, Y, h: fmpq, N: int, G: int, J=(), r=()) -> tuple[list, list]:
    """Certify x(s) in R_region on [0, h] from every point of Y + J u, |u| <= r (sign at s = 0
    already known, bounds.md#relu-region-membership, #relu-box-region); return x(h) in the
    same form (the flow of R_region is affine: columns follow e^{sM})."""
    M, c = net.affine(region)
    ser = _Series(M, c, Y, N, h)
    cols = [_Series(M, [_Z] * net.d, col, N, h) for col in J]

    def scalar(row, S, s_hi, weight):  # the centre's, plus r_k |column k's| (no bias term)
        out = ser.scalar(row, S, s_hi, weight)
        for q, rk in zip(cols, r, strict=True):
            out += arb(0, (abs(q.scalar(row[:-1] + [arb(0)], S, s_hi, weight)) * rk).upper())
        return out

    for i, g, dg, w1, w2 in _signed_rows(net, region, M, c):
        if scalar(g, arb(0).union(arb(h)), h, w1) >= 0:
            continue  # coarse pass: g >= 0 over the whole step
        for l_ in range(G):
            u, v = h * fmpq(l_, G), h * fmpq(l_ + 1, G)
            gp = scalar(dg, arb(u).union(arb(v)), v, w2)
            if gp >= 0 or (gp <= 0 and scalar(g, arb(v), v, w1) >= 0):
                continue
            gu = scalar(g, arb(u), u, w1)
            if arb(gu.lower()) + arb(v - u) * min(arb(gp.lower()), arb(0)) >= 0:
                continue
            raise Rejected(f"neuron {i}: region membership fails on [{u}, {v}] of the step")
    return ser.coords(arb(h), h), [q.coords(arb(h), h) for q in cols]


def _window(net, region, Y, h: fmpq, eps_hint: fmpq, N: int, prec: int) -> list[arb]:
    """Window lemma (bounds.md#relu-window) over [0, h] with lo = 0: return x(h)'s ball."""
    M, c = net.affine(region)
    ser = _Series(M, c, Y, N, h)
    eps_hat = arb(4 * eps_hint) + arb(2) ** (-2 * prec)
    X = ser.coords(arb(0).union(arb(h)), h)
    B = [x + arb(0, eps_hat.lower()) for x in X]
    phi = arb(0)
    for i in net.live:
        gi = sum((net.a[i][k] * B[k] for k in range(net.d)), arb(0)) + net.b[i]
        if not (gi if region[i] == "+" else -gi) >= 0:
            phi += (1 - net.al) * _norm2_up(net.w[i]) * arb(abs(gi).upper())
    eps = arb(((net.lip * arb(h)).exp() * arb(h) * phi).upper())
    if not eps < arb(eps_hat.lower()):
        raise Rejected(f"window of length {h}: the error bound {eps} is not below eps_hat")
    return [x + arb(0, eps) for x in ser.coords(arb(h), h)]


def _times(value: Any, where: str) -> tuple[fmpq, fmpq]:
    t0, t1 = (exact(x, f"{where}[{k}]") for k, x in enumerate(array(value, where, 2)))
    if not t0 < t1:
        raise Rejected(f"{where}: empty time interval")
    return t0, t1


def _events(entry: Any, where: str, net: _Net) -> list[tuple]:
    """Steps and windows of a piece as (t0, t1, region, eps or None), tiling [0, tau]."""
    fields(entry, where, ("kind", "segments", "crossings"))
    segs = []
    for k, s in enumerate(array(entry["segments"], f"{where}.segments")):
        w = f"{where}.segments[{k}]"
        fields(s, w, ("region", "start", "end", "steps"))
        region = s["region"]
        if not isinstance(region, str) or region.replace("-", "+") != net.signs:
            raise Rejected(f"{w}.region: expected one of +- per live neuron and . otherwise")
        start, end = _times([s["start"], s["end"]], w)
        if start != (segs[-1][1] if segs else _Z):
            raise Rejected(f"{w}.start: segments must tile the piece")
        segs.append((start, end, region, array(s["steps"], f"{w}.steps", minimum=0), w))
    if segs[-1][1] != net.tau:
        raise Rejected(f"{where}.segments: the last segment does not end at the duration")
    events = []
    for start, end, region, steps, w in segs:
        for k, st in enumerate(steps):
            t0, t1 = _times(st, f"{w}.steps[{k}]")
            if not start <= t0 < t1 <= end:
                raise Rejected(f"{w}.steps[{k}]: outside its segment")
            events.append((t0, t1, region, None))
    for k, cr in enumerate(array(entry["crossings"], f"{where}.crossings", minimum=0)):
        w = f"{where}.crossings[{k}]"
        fields(cr, w, ("neurons", "window", "eps"))
        for j, i in enumerate(array(cr["neurons"], f"{w}.neurons", minimum=0)):
            small_integer(i, f"{w}.neurons[{j}]", 0, net.p - 1)
        lo, hi = _times(cr["window"], f"{w}.window")
        eps = exact(cr["eps"], f"{w}.eps")
        if eps < 0:
            raise Rejected(f"{w}.eps: negative")
        owner = [s for s in segs if s[0] <= lo < s[1]]
        if not owner or hi > net.tau:
            raise Rejected(f"{w}.window: outside the piece")
        events.append((lo, hi, owner[0][2], eps))
    events.sort(key=lambda e: e[0])
    t = _Z
    for e in events:
        if e[0] != t:
            raise Rejected(f"{where}: steps and windows do not tile [0, duration] at t = {t}")
        t = e[1]
    if t != net.tau:
        raise Rejected(f"{where}: steps and windows end at {t}, not at the duration")
    return events


def _member(net, region, x, exact_state: bool, J=(), r=()) -> bool:
    """sigma_i (a_i . x + b_i) >= 0 for every live neuron (exactly, or certified on x + J u)."""
    zero = _Z if exact_state else arb(0)
    for i in net.live:
        g = sum((net.a[i][k] * x[k] for k in range(net.d)), zero) + net.b[i]
        for col, rk in zip(J, r, strict=True):
            g += arb(0, (abs(sum((net.a[i][k] * col[k] for k in range(net.d)), zero)) * rk).upper())
        if not ((g if region[i] == "+" else -g) >= 0):
            return False
    return True


def _regions_piece(net, entry, where, x, is_exact, N, G, prec, J, r):
    events = _events(entry, where, net)
    certified = None  # the region whose membership is known at the current time
    if is_exact:
        certified = events[0][2] if _member(net, events[0][2], x, True) else None
        x = [arb(v) for v in x]
    for t0, t1, region, eps in events:
        try:
            if eps is not None:
                if J:
                    raise Rejected("a box must stay in one region: no windows")
                x, certified = _window(net, region, x, t1 - t0, eps, N, prec), None
                continue
            if certified != region and not _member(net, region, x, False, J, r):
                raise Rejected(f"the state at t = {t0} is not certified in region {region}")
            (x, J), certified = _step(net, region, x, t1 - t0, N, G, J, r), region
        except Rejected as exc:
            raise Rejected(f"{where}: [{t0}, {t1}]: {exc}") from None
    return x, J


def _laminar_columns(net: _Net, x: list, J: list, r: list) -> list:
    """Columns D J, D = I + tau sum_i w_i s_i a_i^T with s_i the slopes of neuron i over the
    hull of a_i . y + b_i on the set x + J u, |u_k| <= r_k (bounds.md#relu-box-laminar)."""
    d, terms = net.d, []
    for i in net.live:
        dot = lambda v, i=i: sum((net.a[i][k] * v[k] for k in range(d)), arb(0))  # noqa: E731
        e = sum((abs(dot(c)).upper() * rk for c, rk in zip(J, r, strict=True)), arb(0))
        z = dot(x) + net.b[i]
        z = (z - e).union(z + e)
        s = arb(1) if z > 0 else arb(net.al) if z < 0 else arb(net.al).union(arb(1))
        terms.append((i, net.tau * s, dot))
    return [
        [c[k] + sum((t * net.w[i][k] * dot(c) for i, t, dot in terms), arb(0)) for k in range(d)]
        for c in J
    ]


def _cost(net: _Net, x: list, budget: int, where: str) -> int:
    """Charge an exact map of the point x through net as the rule laminar-exact does."""
    w = 1 + max(net.height, *(c.height_bits() for c in x)) // 64
    budget -= (net.p + 1) * net.d * w * isqrt(w)
    if budget < 0 or max(c.height_bits() for c in x) > MAX_HEIGHT_BITS:
        raise Rejected(f"resource limit: {where}: exact replay beyond the cost or height limits")
    return budget


def check_relu_regions(activation, pieces, points, boxes, hints, al=_Z, initial_boxes=False):
    """Check enclosures of a (leaky, slope al) ReLU flow from points (exact vectors) or initial
    boxes (vectors of (lo, hi)); return a summary or raise Rejected."""
    if activation not in ("relu", "leaky_relu"):
        raise Rejected("instance.schedule.activation: rule relu-regions needs relu or leaky_relu")
    if boxes is None:
        raise Rejected("claim: rule relu-regions certifies enclosures, not exact images")
    prec = small_integer(hints["precision"], "hints.precision", 53, 4096)
    N = small_integer(hints["order"], "hints.order", 4, 100)
    G = small_integer(hints["grid"], "hints.grid", 1, 64)
    n, d = len(points), len(points[0])
    nets = [_Net(p, d, al) for p in pieces]
    per_point = array(hints["points"], "hints.points", n)
    entries = [array(e, f"hints.points[{q}]", len(pieces)) for q, e in enumerate(per_point)]
    ops, budget = 0, _parse.MAX_REPLAY_COST
    for q in range(n):
        for j, e in enumerate(entries[q]):
            kind = e.get("kind") if isinstance(e, dict) else None
            string(kind, f"hints.points[{q}][{j}].kind", ("laminar", "equilibrium", "regions"))
            w, p = 1 + nets[j].height // 64, nets[j].p
            ops += (p + 1) * (d + 1)
            if kind == "regions":
                segs = e["segments"] if isinstance(e.get("segments"), list) else []
                k = _count(e.get("crossings"))  # steps and windows listed (not yet validated)
                k += sum(_count(s.get("steps")) for s in segs if isinstance(s, dict))
                series = (N + 1) * ((d + 1) ** 2 + 3 * (G + 2) * p * (d + 1))
                ops += (k + 1) * series * (1 + d * initial_boxes)
                ops += (k + 1) * p * d * d * w * isqrt(w)  # exact M, c of each region
    if ops > MAX_RELU_OPS:
        raise Rejected(f"resource limit: the replay needs more than {MAX_RELU_OPS} operations")
    with flint.ctx.workprec(prec):
        for q in range(n):
            x, is_exact, J, r = list(points[q]), not initial_boxes, [], []
            if initial_boxes:  # the box is its centre + J u, J = I, |u_k| <= r_k (half widths)
                x, r = [arb((lo + hi) / 2) for lo, hi in x], [(hi - lo) / 2 for lo, hi in x]
                J = [[arb(int(k == m)) for k in range(d)] for m in range(d)]
            for j, (net, e) in enumerate(zip(nets, entries[q], strict=True)):
                where = f"hints.points[{q}][{j}]"
                if is_exact:
                    budget = _cost(net, x, budget, where)
                if e["kind"] != "regions":
                    fields(e, where, ("kind",))
                if e["kind"] == "laminar":
                    if not net.laminar:
                        raise Rejected(f"{where}: piece {j} is not laminar")
                    if not is_exact:  # x + J u keeps its shape: Phi(y) - Phi(c) = D (y - c)
                        J = _laminar_columns(net, x, J, r)
                    f = net.field(x, _Z if is_exact else arb(0))
                    x = [x[k] + net.tau * f[k] for k in range(d)]
                elif e["kind"] == "equilibrium":
                    if not is_exact or any(net.field(x, _Z)):
                        raise Rejected(f"{where}: the state is not an exact equilibrium")
                else:
                    x, J = _regions_piece(net, e, where, x, is_exact, N, G, prec, J, r)
                    is_exact = False
            if is_exact:
                _cost(nets[-1], x, budget, f"hints.points[{q}]")
            ends = [(v, v) for v in x] if is_exact else _flat(x, J, r)
            for k, (lo, hi) in enumerate(boxes[q]):
                lo, hi = (lo, hi) if is_exact else (arb(lo), arb(hi))
                if not (lo <= ends[k][0] and ends[k][1] <= hi):
                    raise Rejected(f"claim.enclosures[{q}][{k}]: does not contain its ball")
    what = "boxes" if initial_boxes else "points"
    return f"rule relu-regions: {n} {what}, {len(pieces)} pieces, enclosures, order {N}"
