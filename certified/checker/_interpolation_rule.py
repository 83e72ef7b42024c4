"""Kind ``interpolation`` v1 (proofs/interpolation.md): a ReLU schedule of laminar phases maps
each x_n to y_n (claim: max_n |Phi_T(x_n) - y_n|^2 exactly). A phase is a run of pieces whose
rows of A all equal the hinted normal a and whose w_i are orthogonal to a; it is
replayed exactly as x + G(a.x): breakpoints sorted once, slopes and intercepts by prefix sums."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import flint

from . import _parse
from ._parse import MAX_HEIGHT_BITS as H
from ._parse import Rejected, array, exact, exact_row, fields, matrix, small_integer, string, vector

_ZERO = flint.fmpq(0)
_CLAIM = ("result", "max_error_squared", "switches", "formula_switches", "variant")


def _piece(value: Any, where: str, d: int, a: list, a_raw: list, terms: list) -> list:
    # each neuron tau w sigma(a.x + beta) adds (breakpoint -beta, tau w, beta) to terms
    fields(value, where, ("duration", "W", "A", "b"))
    tau = exact(value["duration"], f"{where}.duration")
    rows = array(value["W"], f"{where}.W", d)
    p = len(array(rows[0], f"{where}.W[0]"))  # "0" (most of W) is read without parsing
    W = [exact_row(array(r, where, p), f"{where}.W[{k}]") for k, r in enumerate(rows)]
    b = vector(value["b"], f"{where}.b", p)
    # a is given as strings (checked by the caller): equal JSON rows denote equal numbers
    if tau <= 0 or array(value["A"], f"{where}.A", p) != [a_raw] * p:
        raise Rejected(f"{where}: duration <= 0, or a row of A is not the phase normal (same text)")
    nz = p * d - sum(r.count("0") + r.count(0) for r in rows)  # tau w, a . w, w beta:
    _parse.charge(2 * p * d + 3 * nz * _parse.words(_parse.top()), 0, where)  # nonzero w
    for i in range(p):
        w = [tau * W[r][i] if W[r][i] else _ZERO for r in range(d)]
        if sum((x * y for x, y in zip(a, w, strict=True) if x), _ZERO) != 0:
            raise Rejected(f"{where}.W: column {i} is not orthogonal to the phase normal")
        terms.append((-b[i], w, b[i]))
    return [W, b, a]


def _phase(X: list, a: list, terms: list, d: int, hx: int) -> tuple[list, int]:
    nz = [(j, c) for j, c in enumerate(a) if c]
    if len(nz) == 1 and abs(nz[0][1]) == 1:  # a = +-e_j (the usual first direction)
        j, c = nz[0]
        s = [x[j] for x in X] if c == 1 else [-x[j] for x in X]
    else:
        _parse.charge(len(X) * len(nz), max(hx, _parse.top()), "a phase")  # hx: height of X
        s = [sum((x[j] * c for j, c in nz), _ZERO) for x in X]
    terms.sort(key=lambda t: t[0])
    # only the coordinates some neuron moves (the others stay as they are)
    on = [k for k in range(d) if any(w[k] for _, w, _ in terms)]
    m, top = len(on), _parse.top()
    # neuron i is active at s iff s + beta_i > 0 iff breakpoint_i < s: the points in the order
    # of s, each with the sums (slope ++ intercept) of the terms whose breakpoint is below it
    # (a sweep: one running sum, no table of prefix sums; X is turned into the images in place)
    acc, j, hs = [_ZERO] * (2 * m), 0, top  # hs: the largest height of the running sums
    for n in [*sorted(range(len(X)), key=s.__getitem__), None]:
        t = s[n] if n is not None else None  # None: every sum is formed and held to H
        while j < len(terms) and (t is None or terms[j][0] < t):
            _, w, beta = terms[j]
            _parse.charge(2 * m, hs, "a phase's prefix sums")
            slope = [u + w[k] for u, k in zip(acc, on, strict=False)]
            acc = slope + [u + w[k] * beta for u, k in zip(acc[m:], on, strict=True)]
            hs, j = max(hs, *(q.height_bits() for q in acc)) if acc else hs, j + 1
            if hs > H:  # every sum: bounds the cost of each operation
                raise Rejected(f"resource limit: prefix sums beyond {H} bits")
        if n is not None:
            _parse.charge(2 * m, max(hs, hx + top), "a phase's images")
            z = list(X[n])
            for i, k in enumerate(on):
                z[k] += acc[i] * t + acc[m + i]
            X[n] = z
    hx = max(q.height_bits() for row in X for q in row)
    if hx > H:
        raise Rejected(f"resource limit: phase images beyond {H} bits")
    return X, hx


def replay_phases(X: list, schedule: Any, phases: Any, where: str) -> tuple[list, list]:
    """Phi_T(x) for every x of X, exactly, for a ReLU schedule of laminar phases (the hint
    ``phases``), and the parsed pieces ([W, b, a] each). Shared with _cube_rule.py. The list X
    itself is turned into the images, row by row (memory: one copy of the points at a time)."""
    d = len(X[0])
    sched = fields(schedule, where, ("dimension", "activation", "pieces"))
    small_integer(sched["dimension"], f"{where}.dimension", d, d)
    string(sched["activation"], f"{where}.activation", ("relu",))
    pieces = array(sched["pieces"], f"{where}.pieces")
    start, parsed, hx = 0, [], _parse.top()
    for h, phase in enumerate(array(phases, "hints.phases")):
        where = f"hints.phases[{h}]"
        fields(phase, where, ("pieces", "normal"))
        lo, hi = (small_integer(x, where, 0, len(pieces)) for x in array(phase["pieces"], where, 2))
        a = vector(a_raw := phase["normal"], f"{where}.normal", d)
        if lo != start or hi <= lo or not any(a) or not all(isinstance(x, str) for x in a_raw):
            raise Rejected(f"{where}: pieces not consecutive from {start}, or bad normal")
        terms: list = []
        for j in range(lo, hi):
            parsed.append(_piece(pieces[j], f"{where}.pieces[{j}]", d, a, a_raw, terms))
        (X, hx), start = _phase(X, a, terms, d, hx), hi
    if start != len(pieces):
        raise Rejected(f"hints.phases: cover pieces [0, {start}) of {len(pieces)}")
    return X, parsed


def check_interpolation_v1(instance: Any, claim: Any, hints: Any) -> str:
    """Check an interpolation certificate; return a summary or raise Rejected."""
    fields(instance, "instance", ("X", "Y", "schedule"))
    fields(claim, "claim", _CLAIM)
    X = matrix(instance["X"], "instance.X", None, None)
    N, d = len(X), len(X[0])
    Y = matrix(instance["Y"], "instance.Y", N, d)
    phases = fields(hints, "hints", ("phases",))["phases"]
    X, parsed = replay_phases(X, instance["schedule"], phases, "instance.schedule")
    _parse.charge(3 * N * d, max(q.height_bits() for r in X + Y for q in r), "the errors")
    err = max(
        sum(((x - y) * (x - y) for x, y in zip(u, v, strict=True)), _ZERO)
        for u, v in zip(X, Y, strict=True)
    )
    result = string(claim["result"], "claim.result", ("exact", "max-error"))
    claimed_err = exact(claim[_CLAIM[1]], "claim.max_error_squared")
    if claimed_err != err or (result == "exact") != (err == 0):
        raise Rejected(f"claim: max_error_squared or result differ from the replay's {err}")
    switches, width = sum(1 for p, q in pairwise(parsed) if p != q), max(len(p[1]) for p in parsed)
    variant = string(claim["variant"], "claim.variant", ("general", "high-dim"))
    formula = (2 if variant == "general" else 1) * -(-N // width) - 1
    claimed = [small_integer(claim[k], f"claim.{k}", 0, 10**9) for k in _CLAIM[2:4]]
    if claimed != [switches, formula]:
        raise Rejected(f"claim: switches {switches}, formula ({variant} N={N} p={width}) {formula}")
    return f"N={N} d={d} p={width} L={switches}: max_n |Phi_T(x_n) - y_n|^2 = {err}"
