"""High-precision references for flows of expression fields (independent of the code under test).

* :func:`taylor_flow` -- a high-order Taylor integrator in mpmath (50 digits by default) for any
  expression graph (``proofs/format.md`` section 7, read from its JSON form): Taylor coefficients
  by textbook series recurrences written here (tanh, sigmoid and logsumexp go through exp, log
  and division, not through the package's auxiliary series), steps chosen so that the last
  coefficients times h^k are far below 10^-dps, exact save times.
* :func:`taylor_flow_batch` -- the same recurrences vectorised over many initial points in numpy
  ``longdouble`` (about 19 digits): a *screen* only. A sample is decided by it only when it lies
  well inside the enclosure (by ``SCREEN_MARGIN`` relative); anything closer is recomputed by
  :func:`taylor_flow` at 30 digits (see :func:`box_misses`).
* :func:`odefun_flow` -- ``mpmath.odefun`` on the graph's values, a cross-check of the above.
* :func:`evaluate` -- the graph's value f(x) in mpmath.
"""

from __future__ import annotations

from fractions import Fraction

import mpmath
import numpy as np

DPS = 50
SCREEN_MARGIN = 1e-11  # relative distance from a face below which the screen does not decide


def mp(v):
    """The exact value of a number (int, float, "p/q" or decimal string, fmpq) as an mpf at the
    working precision."""
    if isinstance(v, mpmath.mpf):
        return v
    if hasattr(v, "p") and hasattr(v, "q"):  # flint.fmpq
        return mpmath.mpf(int(v.p)) / int(v.q)
    if isinstance(v, str):
        v = Fraction(v)
    if isinstance(v, Fraction):
        return mpmath.mpf(v.numerator) / v.denominator
    if isinstance(v, (int, np.integer)):
        return mpmath.mpf(int(v))
    return mpmath.mpf(float(v))  # a double is exact in an mpf


class _Mp:
    exp, log, sqrt, sin, cos = mpmath.exp, mpmath.log, mpmath.sqrt, mpmath.sin, mpmath.cos

    @staticmethod
    def absmax(v):
        return abs(v)

    @staticmethod
    def const(v):
        return mp(v)


class _Np:
    exp, log, sqrt, sin, cos = np.exp, np.log, np.sqrt, np.sin, np.cos

    @staticmethod
    def absmax(v):
        return float(np.max(np.abs(v)))

    @staticmethod
    def const(v):
        f = Fraction(int(v.p), int(v.q)) if hasattr(v, "p") else Fraction(v)
        return np.longdouble(f.numerator) / np.longdouble(f.denominator)


def _dot(ns, u, v):
    """sum_j u_j v_j (mpmath's exact-accumulating fdot for mpf, numpy sums for arrays)."""
    if ns is _Mp:
        return mpmath.fdot(u, v)
    return sum((a * b for a, b in zip(u, v, strict=True)), 0 * u[0])


def _constant_nodes(graph):
    const = []
    for op, *a in graph["nodes"]:
        const.append(op in ("p", "c") or (op != "x" and all(const[i] for i in a)))
    return const


def _series_of(graph, const, params, X, k, S, ns):
    """Append coefficient k of every node to S (S[n] holds coefficients 0..k-1 of node n);
    X[i] holds coefficients 0..k of coordinate i."""
    zero = 0 * X[0][0]
    for n, (op, *a) in enumerate(graph["nodes"]):
        s = S[n]
        if op == "x":
            s.append(X[a[0]][k])
        elif op in ("p", "c"):
            s.append((params[a[0]] if op == "p" else ns.const(a[0])) if k == 0 else zero)
        elif op == "neg":
            s.append(-S[a[0]][k])
        elif op == "add":
            s.append(S[a[0]][k] + S[a[1]][k])
        elif op == "sub":
            s.append(S[a[0]][k] - S[a[1]][k])
        elif op == "sum":
            s.append(sum((S[i][k] for i in a[1:]), S[a[0]][k]))
        elif op in ("mul", "sqr"):
            u, v = S[a[0]], S[a[-1]]
            if const[a[0]] or const[a[-1]]:
                s.append(u[0] * v[k] if const[a[0]] else u[k] * v[0])
            else:
                s.append(_dot(ns, u[: k + 1], v[k::-1]))
        elif op == "div":
            u, v = S[a[0]], S[a[1]]
            corr = _dot(ns, v[1 : k + 1], s[k - 1 :: -1]) if k else zero
            s.append((u[k] - corr) / v[0])
        else:
            s.append(_elementary(op, a, k, S, s, ns, n))


_AUX: dict = {}


def _exp_coef(u, y, k, ns):
    """Coefficient k of y = exp(u) (y' = u' y), given y_0..y_{k-1}."""
    if k == 0:
        return ns.exp(u[0])
    return _dot(ns, [j * u[j] for j in range(1, k + 1)], y[k - 1 :: -1]) / k


def _log_coef(u, y, k, ns):
    """Coefficient k of y = log(u) (u y' = u')."""
    if k == 0:
        return ns.log(u[0])
    corr = _dot(ns, [j * y[j] for j in range(1, k)], u[k - 1 : 0 : -1]) if k > 1 else 0 * u[0]
    return (u[k] - corr / k) / u[0]


def _inv_coef(u, y, k, ns):
    """Coefficient k of y = 1 / u."""
    if k == 0:
        return 1 / u[0]
    return -_dot(ns, u[1 : k + 1], y[k - 1 :: -1]) / u[0]


def _elementary(op, a, k, S, s, ns, n):
    u = S[a[0]]
    key = (id(S), n)
    if op == "sqrt":  # y^2 = u
        if k == 0:
            return ns.sqrt(u[0])
        corr = _dot(ns, s[1:k], s[k - 1 : 0 : -1]) if k > 1 else 0 * u[0]
        return (u[k] - corr) / (2 * s[0])
    if op == "exp":
        return _exp_coef(u, s, k, ns)
    if op == "log":
        return _log_coef(u, s, k, ns)
    if op in ("sin", "cos"):  # sin' = u' cos, cos' = -u' sin
        if k == 0:
            _AUX[key] = ([ns.sin(u[0])], [ns.cos(u[0])])
        else:
            sn, cs = _AUX[key]
            ju = [j * u[j] for j in range(1, k + 1)]
            sk = _dot(ns, ju, cs[k - 1 :: -1]) / k
            ck = -_dot(ns, ju, sn[k - 1 :: -1]) / k
            sn.append(sk)
            cs.append(ck)
        return _AUX[key][op == "cos"][k]
    if op in ("tanh", "sigmoid"):
        # tanh u = 1 - 2 / (exp(2u) + 1); sigmoid u = 1 / (1 + exp(-u))
        if k == 0:
            _AUX[key] = ([], [])
        e, inv = _AUX[key]
        scaled = [2 * c for c in u] if op == "tanh" else [-c for c in u]
        e.append(_exp_coef(scaled, e, k, ns))
        den = [c + (1 if j == 0 else 0) for j, c in enumerate(e)]
        inv.append(_inv_coef(den, inv, k, ns))
        if op == "sigmoid":
            return inv[k]
        return (1 if k == 0 else 0) - 2 * inv[k]
    if op == "logsumexp":  # log(sum_j exp(u_j))
        if k == 0:
            _AUX[key] = [[] for _ in a] + [[], []]
        aux = _AUX[key]
        for j, i in enumerate(a):
            aux[j].append(_exp_coef(S[i], aux[j], k, ns))
        aux[-2].append(sum((aux[j][k] for j in range(1, len(a))), aux[0][k]))
        aux[-1].append(_log_coef(aux[-2], aux[-1], k, ns))
        return aux[-1][k]
    raise ValueError(f"unknown operation {op}")


def _coefficients(graph, params, x, K, ns):
    """Taylor coefficients 0..K of the solution through x (lists per coordinate)."""
    d = graph["dimension"]
    X = [[x[i]] for i in range(d)]
    S: list[list] = [[] for _ in graph["nodes"]]
    const = _constant_nodes(graph)
    try:
        for k in range(K):
            _series_of(graph, const, params, X, k, S, ns)
            for i, o in enumerate(graph["outputs"]):
                X[i].append(S[o][k] / (k + 1))
    finally:
        for key in [key for key in _AUX if key[0] == id(S)]:
            del _AUX[key]
    return X


def evaluate(graph, params, x):
    """f(x) in mpmath at the working precision."""
    X = _coefficients(graph, [mp(v) for v in params], [mp(v) for v in x], 1, _Mp)
    return [c[1] for c in X]


def _pieces(problem):
    """(duration, parameter values) pairs of a PiecewiseField (exact fmpq)."""
    return [(p.duration, p.values) for p in problem.pieces]


def _advance(graph, params, x, span, K, digits, ns, budget):
    """Phi_span(x) by Taylor steps of order K; budget: a one-element list of steps left."""
    t = Fraction(0)
    while t < span:
        X = _coefficients(graph, params, x, K, ns)
        scale = max(1.0, max(ns.absmax(c[0]) for c in X))
        tol = 10.0 ** -(digits + 4) * scale
        h = np.inf
        for k in range(K - 4, K + 1):  # several coefficients: one may vanish by accident
            a = max(ns.absmax(c[k]) for c in X)
            if a > 0:
                h = min(h, float((tol / a) ** (1.0 / k)))
        hq = span - t
        if h < float(hq):
            hq = min(hq, Fraction(h).limit_denominator(2**40))
        hh = ns.const(hq)
        x = []
        for c in X:
            v = c[K]
            for j in range(K - 1, -1, -1):
                v = v * hh + c[j]
            x.append(v)
        t += hq
        budget[0] -= 1
        if budget[0] < 0:
            raise RuntimeError("reference: step budget exhausted")
    return x


def _integrate(graph, pieces, x, times, K, digits, ns, max_steps):
    """Values at the sorted exact times (Fractions), stepping exactly onto each time and onto
    the ends of the pieces."""
    out, t, pending = [], Fraction(0), [Fraction(str(s)) for s in times]
    budget = [max_steps]
    for duration, values in pieces:
        end = t + Fraction(str(duration))
        params = [ns.const(v) for v in values]
        while t < end:
            stop = min([end, *pending[:1]])
            x = _advance(graph, params, x, stop - t, K, digits, ns, budget)
            t = stop
            if pending and pending[0] == t:
                out.append(list(x))
                pending.pop(0)
    if pending:
        raise ValueError(f"time {pending[0]} is after the end of the pieces")
    return out


def taylor_flow(graph, pieces, x0, times, dps=DPS, order=None, max_steps=20_000):
    """Phi_t(x0) at each of the sorted ``times`` (exact), as lists of mpf, by a Taylor method of
    order ``order`` (default about 1.2 dps) at ``dps`` digits (guard digits added). ``pieces``:
    (duration, parameter values) pairs, or a PiecewiseField."""
    if not isinstance(pieces, list):
        pieces = _pieces(pieces)
    K = order or max(20, int(1.2 * dps))
    with mpmath.workdps(dps + 15):
        x = [mp(v) for v in x0]
        return _integrate(graph, pieces, x, times, K, dps, _Mp, max_steps)


def taylor_flow_batch(graph, pieces, X0, times, order=24, max_steps=20_000):
    """The same integrator vectorised over the rows of X0, in numpy longdouble (a screen: about
    19 digits, no guarantee). Returns an array (len(times), N, d) of longdouble."""
    if not isinstance(pieces, list):
        pieces = _pieces(pieces)
    X0 = np.asarray(X0, dtype=np.longdouble)
    x = [X0[:, i].copy() for i in range(X0.shape[1])]
    digits = min(18, np.finfo(np.longdouble).precision)
    with np.errstate(all="raise"):
        out = _integrate(graph, pieces, x, times, order, digits, _Np, max_steps)
    return np.stack([np.stack(v, axis=1) for v in out])


def odefun_flow(graph, pieces, x0, T, dps=30):
    """Phi_T(x0) by mpmath.odefun (its own Taylor scheme) on the graph's values."""
    if not isinstance(pieces, list):
        pieces = _pieces(pieces)
    with mpmath.workdps(dps):
        x = [mp(v) for v in x0]
        t = Fraction(0)
        for duration, values in pieces:
            tau = min(Fraction(str(duration)), Fraction(str(T)) - t)
            if tau <= 0:
                break
            params = [mp(v) for v in values]
            sol = mpmath.odefun(lambda s, y, params=params: evaluate(graph, params, list(y)), 0, x)
            x = list(sol(mp(tau)))
            t += tau
        return x


# --- containment -----------------------------------------------------------------------------


def exact(v) -> Fraction:
    """The exact rational value of a float, fmpq, int, string or (binary) mpf."""
    if isinstance(v, mpmath.mpf):
        sign, man, e, _ = v._mpf_  # (sign, mantissa, exponent, bit count); finite values only
        if not mpmath.isfinite(v):
            raise ValueError(f"reference is not finite: {v}")
        return (-1) ** sign * Fraction(int(man)) * Fraction(2) ** int(e)
    if hasattr(v, "p") and hasattr(v, "q"):
        return Fraction(int(v.p), int(v.q))
    if isinstance(v, str):
        return Fraction(v)
    return Fraction(float(v)) if not isinstance(v, (int, Fraction)) else Fraction(v)


def outside(lo, hi, ref, rel=1e-40):
    """Coordinates where the mpf reference lies outside [lo, hi] (floats or fmpq), compared
    exactly, beyond the reference's own error ``rel`` (relative, with an absolute floor)."""
    bad, rel = [], Fraction(rel)
    for i, v in enumerate(ref):
        q = exact(v)
        tol = rel * max(1, abs(q))
        if not (exact(lo[i]) - tol <= q <= exact(hi[i]) + tol):
            bad.append(i)
    return bad


def box_misses(graph, pieces, samples, times, enc_lo, enc_hi, digits=30):
    """Indices (k, sample) of sampled initial points whose image at times[k] lies outside the
    enclosure [enc_lo[k], enc_hi[k]] (shape (d,) each), decided by the longdouble screen where it
    is far from the faces and by :func:`taylor_flow` at ``digits`` otherwise. Returns also how
    many samples the mpmath reference decided."""
    screen = taylor_flow_batch(graph, pieces, samples, times)
    misses, decided = [], 0
    for s in range(samples.shape[0]):
        close = False
        for k in range(len(times)):
            lo, hi = np.asarray(enc_lo[k], float), np.asarray(enc_hi[k], float)
            v = screen[k, s].astype(float)
            margin = SCREEN_MARGIN * np.maximum(1.0, np.abs(v)) + SCREEN_MARGIN * (hi - lo)
            if not np.all((v - margin > lo) & (v + margin < hi)):
                close = True
        if not close:
            continue
        decided += 1
        refs = taylor_flow(graph, pieces, samples[s], times, dps=digits)
        for k, ref in enumerate(refs):
            if outside(enc_lo[k], enc_hi[k], ref, rel=10.0 ** -(digits - 6)):
                misses.append((k, s))
    return misses, decided


def refuse_predicted_orders(monkeypatch) -> None:
    """Make the float64 predictor's hints ones the checker refuses (variational orders 9, above
    hints.jacobian_order 8): the one-pass writer must fall back to the engine's route."""
    from certified.flow.taylor import float64

    real = float64.predict_steps

    def bad(problem, X0, saves, **kw):
        out = real(problem, X0, saves, **kw)
        out["jacobian_orders"] = [[9] * len(s) for s in out["steps"]]
        return out

    monkeypatch.setattr(float64, "predict_steps", bad)


def random_schedule(activation: str, d: int, seed: int, duration: str, pieces: int = 2) -> dict:
    """A schedule JSON of ``pieces`` pieces of ``duration``: W, A ~ N(0, 1/4) and b ~ N(0, 1),
    rounded to 3 decimals (drawn piece by piece from ``default_rng(seed)``)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(pieces):
        W = np.round(rng.standard_normal((d, d)) / 2, 3).tolist()
        A = np.round(rng.standard_normal((d, d)) / 2, 3).tolist()
        out.append(
            {
                "duration": duration,
                "W": W,
                "A": A,
                "b": np.round(rng.standard_normal(d), 3).tolist(),
            }
        )
    return {"dimension": d, "activation": activation, "pieces": out}
