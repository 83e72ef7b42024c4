"""High-precision references for ReLU flows (mpmath, independent of the arb engine).

* :func:`one_neuron` -- the closed form of theorems.md section 2.
* :func:`piecewise_expm` -- region by region with ``mpmath.expm`` and ``mpmath.findroot`` for
  the crossing times, at 50 digits; sign changes are searched on a sample grid refined where a
  hyperplane function comes close to 0 (so short excursions are not missed).
* :func:`odefun` -- ``mpmath.odefun`` (Taylor) on the piecewise-linear field, for cross-checks.
"""

from __future__ import annotations

from fractions import Fraction

import mpmath

DPS = 50


def _mp(x) -> mpmath.mpf:
    if isinstance(x, Fraction):
        return mpmath.mpf(x.numerator) / x.denominator
    if hasattr(x, "p") and hasattr(x, "q"):  # flint.fmpq
        return mpmath.mpf(int(x.p)) / int(x.q)
    if isinstance(x, str):
        return _mp(Fraction(x))
    return mpmath.mpf(x)


def _sigma(z, alpha):
    return z if z > 0 else alpha * z


def one_neuron(w, a, b, x0, t):
    """``x(t)`` for ``xdot = w (a.x + b)_+`` (theorems.md section 2), at 50 digits."""
    with mpmath.workdps(DPS):
        w = [_mp(v) for v in w]
        a = [_mp(v) for v in a]
        x0 = [_mp(v) for v in x0]
        t = _mp(t)
        z0 = sum(ai * xi for ai, xi in zip(a, x0, strict=True)) + _mp(b)
        k = sum(ai * wi for ai, wi in zip(a, w, strict=True))
        if z0 <= 0:
            return list(x0)
        if k == 0:
            return [xi + t * wi * z0 for xi, wi in zip(x0, w, strict=True)]
        return [xi + wi / k * z0 * mpmath.expm1(k * t) for xi, wi in zip(x0, w, strict=True)]


class _Piece:
    def __init__(self, W, A, b, tau, alpha):
        self.d = len(W)
        self.p = len(W[0])
        self.W = [[_mp(v) for v in row] for row in W]
        self.A = [[_mp(v) for v in row] for row in A]
        self.b = [_mp(v) for v in b]
        self.tau = _mp(tau)
        self.alpha = _mp(alpha)

    def g(self, x):
        return [
            sum(ai * xi for ai, xi in zip(row, x, strict=True)) + bi
            for row, bi in zip(self.A, self.b, strict=True)
        ]

    def field(self, x):
        s = [_sigma(z, self.alpha) for z in self.g(x)]
        return [sum(self.W[r][i] * s[i] for i in range(self.p)) for r in range(self.d)]

    def augmented(self, act):
        d, p = self.d, self.p
        sl = [1 if act[i] else self.alpha for i in range(p)]
        Mt = mpmath.zeros(d + 1, d + 1)
        for r in range(d):
            for i in range(p):
                c = self.W[r][i] * sl[i]
                if c:
                    for k in range(d):
                        Mt[r, k] += c * self.A[i][k]
                    Mt[r, d] += c * self.b[i]
        return Mt


def piecewise_expm(W_list, A_list, b_list, durations, x0, alpha=0, samples=64, events=None):
    """Flow of one point, region by region, at 50 digits (see module docstring). If ``events``
    is a list, ``(piece, local time, neuron)`` is appended for every crossing."""
    with mpmath.workdps(DPS):
        x = [_mp(v) for v in x0]
        for j, (W, A, b, tau) in enumerate(zip(W_list, A_list, b_list, durations, strict=True)):
            found = []
            x = _piece(_Piece(W, A, b, tau, alpha), x, samples, found)
            if events is not None:
                events.extend((j, t, i) for t, i in found)
        return x


def _piece(pc: _Piece, x, samples, found):
    d, p = pc.d, pc.p
    tiny = mpmath.mpf(10) ** (-(DPS - 8))
    g = pc.g(x)
    f = pc.field(x)
    act = []
    for i in range(p):
        if abs(g[i]) > tiny:
            act.append(g[i] > 0)
        else:
            slope = sum(ai * fi for ai, fi in zip(pc.A[i], f, strict=True))
            act.append(slope > 0)
    t = mpmath.mpf(0)
    for _ in range(200):
        rem = pc.tau - t
        if rem <= 0:
            break
        Mt = pc.augmented(act)
        y0 = mpmath.matrix([*x, 1])

        def state(s, Mt=Mt, y0=y0):
            return mpmath.expm(Mt * s) * y0

        def both(i, s, sig, state=state, Mt=Mt):
            """sigma_i g_i and its derivative along the affine flow at time s."""
            y = state(s)
            return _g_and_slope(pc, i, sig, y, Mt)

        sig = [1 if a else -1 for a in act]
        dt = rem / samples
        E = mpmath.expm(Mt * dt)
        ys = [y0]
        for _ in range(samples):
            ys.append(E * ys[-1])
        first = None
        for i in range(p):
            if all(pc.W[r][i] == 0 for r in range(d)):
                continue
            vals = [_g_and_slope(pc, i, sig, y, Mt) for y in ys]
            root = _first_root(lambda s, i=i, sig=sig: both(i, s, sig), vals, dt, tiny)
            if root is not None and (first is None or root < first[0]):
                first = (root, i)
        if first is None:
            y = state(rem)
            x = [y[k] for k in range(d)]
            break
        s, i = first
        y = state(s)
        x = [y[k] for k in range(d)]
        t += s
        found.append((t, i))
        act[i] = not act[i]
    return x


def _g_and_slope(pc, i, sig, y, Mt):
    d = pc.d
    g = sum(pc.A[i][k] * y[k] for k in range(d)) + pc.b[i]
    dy = Mt * y
    dg = sum(pc.A[i][k] * dy[k] for k in range(d))
    return sig[i] * g, sig[i] * dg


def _first_root(fun, vals, dt, tiny):
    """First s > 0 where fun (value, slope) changes sign from >= 0 to < 0, searching the
    samples and refining intervals where a dip below 0 between samples is possible."""
    n = len(vals) - 1
    for k in range(n):
        r = _search(fun, k * dt, (k + 1) * dt, vals[k], vals[k + 1], tiny, depth=0)
        if r is not None:
            return r
    return None


def _search(fun, a, b, va, vb, tiny, depth):
    (fa, da), (fb, db) = va, vb
    if fb < -tiny:
        return _bisect(fun, a, b)
    if depth >= 8:
        return None
    # no dip below -tiny possible if the values exceed what the slopes (with margin) can take
    if min(fa, fb) > (b - a) * 2 * max(abs(da), abs(db)) - tiny:
        return None
    m = (a + b) / 2
    vm = fun(m)
    r = _search(fun, a, m, va, vm, tiny, depth + 1)
    if r is not None:
        return r
    return _search(fun, m, b, vm, vb, tiny, depth + 1)


def _bisect(fun, a, b):
    """Root of the value part of ``fun`` (value, slope) in [a, b], which changes sign there:
    secant-type ``findroot`` (or bisection if it fails or leaves [a, b]), then Newton steps
    to full precision."""
    try:
        x = mpmath.findroot(lambda s: fun(s)[0], (a, b), solver="anderson")
        if not a <= x <= b:
            raise ValueError
    except (ValueError, ZeroDivisionError):
        for _ in range(200):
            if b - a < mpmath.mpf(10) ** -12 * (1 + abs(b)):
                break
            m = (a + b) / 2
            if fun(m)[0] < 0:
                b = m
            else:
                a = m
        x = (a + b) / 2
    for _ in range(4):
        v, dv = fun(x)
        if dv == 0:
            break
        x = x - v / dv
    return x


def odefun(W_list, A_list, b_list, durations, x0, alpha=0, dps=DPS):
    """Reference by ``mpmath.odefun`` (Taylor series) through every piece."""
    with mpmath.workdps(dps):
        x = [_mp(v) for v in x0]
        for W, A, b, tau in zip(W_list, A_list, b_list, durations, strict=True):
            pc = _Piece(W, A, b, tau, alpha)
            sol = mpmath.odefun(lambda t, y, pc=pc: pc.field(list(y)), 0, x)
            x = list(sol(pc.tau))
        return x
