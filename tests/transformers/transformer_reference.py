"""50-digit mpmath references for transformer dynamics, written from the formula of
theorems.md §1.3-1.4 directly (not from the package's expression graph)."""

from __future__ import annotations

from fractions import Fraction

import mpmath
import numpy as np

DPS = 50


def mp(v):
    if hasattr(v, "p") and hasattr(v, "q"):
        return mpmath.mpf(int(v.p)) / int(v.q)
    if isinstance(v, str):
        f = Fraction(v)
        return mpmath.mpf(f.numerator) / f.denominator
    return mpmath.mpf(v)


def mat(M, d, rows=None):
    rows = d if rows is None else rows
    return [[mp(M[r][c]) for c in range(len(M[r]))] for r in range(rows)]


def field(inst: dict, piece: dict):
    """x -> x' for an instance dict (tokens or measures) and one piece, in mpmath."""
    measures = inst.get("measures") or [{"tokens": inst["tokens"], "weights": inst.get("weights")}]
    d = len(measures[0]["tokens"][0])
    sizes = [len(m["tokens"]) for m in measures]
    masses = [
        [mp(w) for w in m["weights"]] if m.get("weights") else [mpmath.mpf(1) / n] * n
        for m, n in zip(measures, sizes, strict=True)
    ]
    sphere = inst.get("geometry", "sphere") == "sphere"
    softmax = inst.get("normalisation", "softmax") == "softmax"
    causal = inst.get("causal", False)
    zero = [[0] * d for _ in range(d)]
    heads = piece.get("heads") or [{"V": piece.get("V", zero), "B": piece.get("B", zero)}]
    heads = [(mat(h.get("V", zero), d), mat(h.get("B", zero), d)) for h in heads]
    act = (
        mpmath.tanh
        if piece.get("activation", "tanh") == "tanh"
        else (lambda u: 1 / (1 + mpmath.exp(-u)))
    )
    W = piece.get("W")

    def f(x):
        out, start = [], 0
        for n, m in zip(sizes, masses, strict=True):
            X = [[x[(start + i) * d + c] for c in range(d)] for i in range(n)]
            for i in range(n):
                keys = range(i + 1) if causal else range(n)
                v = [mpmath.mpf(0)] * d
                for V, B in heads:
                    Bx = [mpmath.fsum(B[r][c] * X[i][c] for c in range(d)) for r in range(d)]
                    e = {
                        j: m[j] * mpmath.exp(mpmath.fsum(Bx[r] * X[j][r] for r in range(d)))
                        for j in keys
                    }
                    Z = mpmath.fsum(e.values()) if softmax else 1
                    A = [mpmath.fsum(e[j] * X[j][c] for j in keys) / Z for c in range(d)]
                    v = [v[r] + mpmath.fsum(V[r][c] * A[c] for c in range(d)) for r in range(d)]
                if W is not None:
                    p = len(piece["b"])
                    z = [
                        act(
                            mpmath.fsum(mp(piece["U"][k][c]) * X[i][c] for c in range(d))
                            + mp(piece["b"][k])
                        )
                        for k in range(p)
                    ]
                    v = [v[r] + mpmath.fsum(mp(W[r][k]) * z[k] for k in range(p)) for r in range(d)]
                if sphere:
                    xv = mpmath.fsum(X[i][r] * v[r] for r in range(d))
                    v = [v[r] - X[i][r] * xv for r in range(d)]
                out += v
            start += n
        return out

    return f


def state(inst: dict):
    measures = inst.get("measures") or [{"tokens": inst["tokens"]}]
    return [mp(v) for m in measures for row in m["tokens"] for v in row]


def flow(inst: dict, dps: int = DPS):
    """The state at the end of the schedule (mpmath.odefun, a Taylor method, at dps digits)."""
    with mpmath.workdps(dps):
        x = state(inst)
        for piece in inst["pieces"]:
            f = field(inst, piece)
            sol = mpmath.odefun(lambda t, y, f=f: f(y), 0, x)
            x = sol(mp(piece["duration"]))
        return x


def layers(inst: dict, L: int, dps: int = DPS):
    """x <- x + (tau / L) f(x), L layers per piece."""
    with mpmath.workdps(dps):
        x = state(inst)
        for piece in inst["pieces"]:
            f = field(inst, piece)
            h = mp(piece["duration"]) / L
            for _ in range(L):
                x = [a + h * b for a, b in zip(x, f(x), strict=True)]
        return x


def contains(lo, hi, values) -> list[int]:
    """Indices where the exact double endpoints do not contain the reference."""
    return [
        i
        for i, (a, b, v) in enumerate(zip(np.ravel(lo), np.ravel(hi), values, strict=True))
        if not (mpmath.mpf(float(a)) <= v <= mpmath.mpf(float(b)))
    ]
