"""Kind ``interpolation`` v1 (proofs/interpolation.md): a ReLU schedule of laminar phases maps
each x_n to y_n (or within the claimed squared error). Each phase (consecutive pieces, every
row of A a nonzero multiple of the hinted normal a, every w_i orthogonal to a) is replayed
exactly as x + G(a.x): breakpoints sorted once, slopes and intercepts by prefix sums."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from itertools import pairwise
from typing import Any

import flint

from ._parse import MAX_HEIGHT_BITS, Rejected, array, exact, fields, matrix, small_integer, string

_ZERO = flint.fmpq(0)


def _too_high(values: list, where: str) -> None:
    if any(q.height_bits() > MAX_HEIGHT_BITS for q in values):
        raise Rejected(f"resource limit: {where}: a number beyond {MAX_HEIGHT_BITS} bits")


def _sums(rows: list[list], d: int, reverse: bool) -> list[list]:
    """Prefix sums (suffix sums when ``reverse``) with a zero row at the open end."""
    acc, out = [_ZERO] * d, [[_ZERO] * d]
    for i, row in enumerate(reversed(rows) if reverse else rows):
        acc = [u + v for u, v in zip(acc, row, strict=True)]
        out.append(acc)
        if i % 512 == 511:
            _too_high(acc, "prefix sums")
    return out[::-1] if reverse else out


def _piece(value: Any, where: str, d: int, a: list) -> tuple[list, list]:
    """Terms (breakpoint, mu, tau*w*mu, tau*w*beta) of a laminar piece with normal a."""
    fields(value, where, ("duration", "W", "A", "b"))
    tau = exact(value["duration"], f"{where}.duration")
    if tau <= 0:
        raise Rejected(f"{where}.duration: not positive")
    W = matrix(value["W"], f"{where}.W", d, None)
    p = len(W[0])
    A = matrix(value["A"], f"{where}.A", p, d)
    b = [exact(x, f"{where}.b[{i}]") for i, x in enumerate(array(value["b"], f"{where}.b", p))]
    k = next(j for j, x in enumerate(a) if x)
    terms: dict[bool, list] = {True: [], False: []}
    for i in range(p):
        mu = A[i][k] / a[k]
        w = [tau * W[r][i] for r in range(d)]
        if mu == 0 or any(A[i][j] != mu * a[j] for j in range(d)):
            raise Rejected(f"{where}.A[{i}]: not a nonzero multiple of the phase normal")
        if sum((x * y for x, y in zip(a, w, strict=True) if x), _ZERO) != 0:
            raise Rejected(f"{where}.W: column {i} is not orthogonal to the phase normal")
        terms[mu > 0].append((-b[i] / mu, [x * mu for x in w], [x * b[i] for x in w]))
    return terms, [tau, W, A, b]


def _phase(X: list, a: list, terms: dict, d: int) -> list:
    nz = [(j, x) for j, x in enumerate(a) if x]
    s = [sum((x[j] * c for j, c in nz), _ZERO) for x in X]
    slope = [[_ZERO] * d for _ in X]
    icpt = [[_ZERO] * d for _ in X]
    for positive, items in terms.items():
        items.sort(key=lambda t: t[0])
        brk = [t[0] for t in items]
        sl, ic = (
            _sums([t[1] for t in items], d, not positive),
            _sums([t[2] for t in items], d, not positive),
        )
        find = bisect_left if positive else bisect_right  # active where mu s + beta > 0
        for n, sn in enumerate(s):
            i = find(brk, sn)
            slope[n] = [u + v for u, v in zip(slope[n], sl[i], strict=True)]
            icpt[n] = [u + v for u, v in zip(icpt[n], ic[i], strict=True)]
    out = [
        [x + u * sn + v for x, u, v in zip(X[n], slope[n], icpt[n], strict=True)]
        for n, sn in enumerate(s)
    ]
    _too_high([q for row in out for q in row], "phase images")
    return out


def check_interpolation_v1(instance: Any, claim: Any, hints: Any) -> str:
    """Check an interpolation certificate; return a summary or raise Rejected."""
    fields(instance, "instance", ("X", "Y", "schedule"))
    fields(
        claim, "claim", ("result", "max_error_squared", "switches", "formula_switches", "variant")
    )
    fields(hints, "hints", ("phases",))
    X = matrix(instance["X"], "instance.X", None, None)
    N, d = len(X), len(X[0])
    Y = matrix(instance["Y"], "instance.Y", N, d)
    sched = fields(instance["schedule"], "instance.schedule", ("dimension", "activation", "pieces"))
    small_integer(sched["dimension"], "instance.schedule.dimension", d, d)
    string(sched["activation"], "instance.schedule.activation", ("relu",))
    pieces = array(sched["pieces"], "instance.schedule.pieces")
    phases = array(hints["phases"], "hints.phases")
    start, parsed = 0, []
    for h, phase in enumerate(phases):
        fields(phase, f"hints.phases[{h}]", ("pieces", "normal"))
        lo, hi = (
            small_integer(x, f"hints.phases[{h}].pieces", 0, len(pieces))
            for x in array(phase["pieces"], f"hints.phases[{h}].pieces", 2)
        )
        a = [
            exact(x, f"hints.phases[{h}].normal")
            for x in array(phase["normal"], f"hints.phases[{h}].normal", d)
        ]
        if lo != start or hi <= lo or not any(a):
            raise Rejected(f"hints.phases[{h}]: pieces not consecutive from {start}, or normal 0")
        terms: dict[bool, list] = {True: [], False: []}
        for j in range(lo, hi):
            t, piece = _piece(pieces[j], f"instance.schedule.pieces[{j}]", d, a)
            terms[True] += t[True]
            terms[False] += t[False]
            parsed.append(piece)
        X = _phase(X, a, terms, d)
        start = hi
    if start != len(pieces):
        raise Rejected(f"hints.phases: cover pieces [0, {start}) of {len(pieces)}")
    err = max(
        sum(((x - y) * (x - y) for x, y in zip(u, v, strict=True)), _ZERO)
        for u, v in zip(X, Y, strict=True)
    )
    if exact(claim["max_error_squared"], "claim.max_error_squared") != err:
        raise Rejected("claim.max_error_squared: not the replayed max_n |Phi_T(x_n) - y_n|^2")
    result = string(claim["result"], "claim.result", ("exact", "max-error"))
    if (result == "exact") != (err == 0):
        raise Rejected(f"claim.result: {result} but max_n |Phi_T(x_n) - y_n|^2 = {err}")
    switches = sum(1 for p, q in pairwise(parsed) if p[1:] != q[1:])
    width = max(len(p[3]) for p in parsed)
    K = -(-N // width)
    variant = string(claim["variant"], "claim.variant", ("general", "high-dim"))
    formula = 2 * K - 1 if variant == "general" else K - 1
    if small_integer(claim["switches"], "claim.switches", 0, 10**9) != switches:
        raise Rejected(f"claim.switches: the schedule has {switches} switches")
    if small_integer(claim["formula_switches"], "claim.formula_switches", 0, 10**9) != formula:
        raise Rejected(f"claim.formula_switches: {variant} gives {formula} for N={N}, p={width}")
    what = "Phi_T(x_n) = y_n exactly" if err == 0 else f"max |Phi_T(x_n) - y_n|^2 = {err}"
    return f"N={N} d={d} p={width} L={switches}: {what}"
