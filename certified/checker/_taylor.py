"""Replay of the validated Taylor method for tanh / sigmoid fields, in arb ball arithmetic.

Independent of the producer (which runs compiled float64 interval kernels): this module
recomputes every enclosure from the certificate's data and the producer's a priori boxes,
which are the only hints. Soundness: proofs/bounds.md#picard, #taylor-step, #lognorm and
proofs/checker_soundness.md#taylor-lognorm.
"""

from __future__ import annotations

from flint import arb, fmpq

__all__ = ["TaylorReplayError", "replay_smooth_piece"]


class TaylorReplayError(Exception):
    """A step of the replay failed (the certificate is then rejected with this reason)."""


def _act1(u: arb, activation: str) -> arb:
    if activation == "tanh":
        return u.tanh()
    return 1 / (1 + (-u).exp())


def _act(u: arb, activation: str) -> arb:
    """s(u) for a ball u, by its endpoints: s is increasing, and arb's derivative-based
    enclosure of a wide ball is looser than the image of the endpoints."""
    lo = _act1(arb(u.lower()), activation).lower()
    hi = _act1(arb(u.upper()), activation).upper()
    return arb(lo).union(arb(hi))


def _sqr(y: arb) -> arb:
    """The range of y^2 over the ball y (tighter than the ball product y * y)."""
    lo, hi = y.lower(), y.upper()
    top = max(lo * lo, hi * hi)
    bottom = arb(0) if (lo <= 0 and hi >= 0) else min(lo * lo, hi * hi)
    return arb(bottom.lower()).union(arb(top.upper()))


def _field(x, W, A, b, activation):
    p, d = len(b), len(x)
    y = [_act(b[i] + sum((A[i][j] * x[j] for j in range(d)), arb(0)), activation) for i in range(p)]
    return [sum((W[j][i] * y[i] for i in range(p)), arb(0)) for j in range(d)]


def _ball_mul(x: arb, y: arb) -> arb:
    return x * y


def _interval_mul(x: arb, y: arb) -> arb:
    """The range of x * y over two balls, by endpoints: for wide balls (the a priori box)
    this is tighter than the ball product, and it matches the producer's interval
    arithmetic, so the replay does not reject what the producer verified."""
    xl, xh, yl, yh = x.lower(), x.upper(), y.lower(), y.upper()
    p = (xl * yl, xl * yh, xh * yl, xh * yh)
    lo = min(q.lower() for q in p)
    hi = max(q.upper() for q in p)
    return arb(lo).union(arb(hi))


def _taylor(x, W, A, b, activation, K, wide=False):
    """Coefficients x_0..x_K of the solution through the (ball) point x, in ball arithmetic
    (products by endpoints when ``wide``: the remainder over the a priori box)."""
    mul = _interval_mul if wide else _ball_mul
    d, p = len(x), len(b)
    X = [list(x)]
    U = [[b[i] + sum((mul(A[i][j], x[j]) for j in range(d)), arb(0)) for i in range(p)]]
    Y = [[_act(u, activation) for u in U[0]]]
    if activation == "tanh":
        Z = [[1 - _sqr(y) for y in Y[0]]]
    else:
        Z = [[y - _sqr(y) for y in Y[0]]]
    for k in range(K):
        X.append(
            [sum((mul(W[j][i], Y[k][i]) for i in range(p)), arb(0)) / (k + 1) for j in range(d)]
        )
        if k + 1 == K:
            break
        U.append([sum((mul(A[i][j], X[k + 1][j]) for j in range(d)), arb(0)) for i in range(p)])
        Y.append(
            [
                sum(((jj + 1) * mul(U[jj + 1][i], Z[k - jj][i]) for jj in range(k + 1)), arb(0))
                / (k + 1)
                for i in range(p)
            ]
        )
        zz = []
        for i in range(p):
            conv = sum((mul(Y[jj][i], Y[k + 1 - jj][i]) for jj in range(k + 2)), arb(0))
            zz.append(-conv if activation == "tanh" else Y[k + 1][i] - conv)
        Z.append(zz)
    return X


def _lognorm_upper(B, W, A, b, activation) -> arb:
    """Upper bound of mu_2(Df) over the box B (Gershgorin on the symmetric part)."""
    d, p = len(B), len(b)
    s = []
    for i in range(p):
        y = _act(b[i] + sum((A[i][j] * B[j] for j in range(d)), arb(0)), activation)
        s.append(1 - _sqr(y) if activation == "tanh" else y - _sqr(y))
    J = [
        [sum((W[r][i] * s[i] * A[i][c] for i in range(p)), arb(0)) for c in range(d)]
        for r in range(d)
    ]
    best = None
    for r in range(d):
        row = J[r][r]
        for c in range(d):
            if c != r:
                row = row + abs((J[r][c] + J[c][r]) / 2)
        up = row.upper()
        best = up if best is None or up > best else best
    return best


def replay_smooth_piece(W, A, b, activation, tau: fmpq, K: int, chain):
    """Check the producer's chain of balls through one piece of duration tau.

    chain[q] = (centres, radii, boxes) for point q: centres[n] (list of d exact numbers) and
    radii[n] (exact) for n = 0..m, boxes[n] (d pairs (lo, hi)) for n = 0..m-1, with m equal
    steps. Each step is verified: the Picard inclusion X_n + [0, h] f(B_n) inside B_n for
    X_n = c_n +- r_n, then r_{n+1} >= e^{l h} r_n + |E_n - c_{n+1}| with E_n the Taylor
    enclosure of Phi_h(c_n) (remainder over B_n) and l the log-norm bound over B_n.
    Raises TaylorReplayError on the first failed check.
    """
    for q, (centres, radii, boxes) in enumerate(chain):
        m = len(boxes)
        if m == 0 or len(centres) != m + 1 or len(radii) != m + 1:
            raise TaylorReplayError(f"point {q}: need m >= 1 boxes and m + 1 centres and radii")
        h = arb(tau / m)
        h_hi = h.upper()
        for n in range(m):
            c = [arb(v) for v in centres[n]]
            r = arb(radii[n])
            d = len(c)
            box = boxes[n]
            if len(box) != d or len(centres[n + 1]) != d:
                raise TaylorReplayError(f"point {q}, step {n}: wrong dimension")
            if not (r >= 0):
                raise TaylorReplayError(f"point {q}, step {n}: negative radius")
            B = [arb(lo).union(arb(hi)) for lo, hi in box]
            f = _field(B, W, A, b, activation)
            for j in range(d):
                # X + [0, h] f(B) by endpoints (a ball product would overestimate it)
                img_lo = ((c[j] - r).lower() + h_hi * min(arb(0), f[j].lower())).lower()
                img_hi = ((c[j] + r).upper() + h_hi * max(arb(0), f[j].upper())).upper()
                if not (img_lo >= arb(box[j][0]) and img_hi <= arb(box[j][1])):
                    raise TaylorReplayError(
                        f"point {q}, step {n}: Picard inclusion fails in coordinate {j}"
                    )
            rem = _taylor(B, W, A, b, activation, K, wide=True)[K]
            coef = _taylor(c, W, A, b, activation, K)
            growth = (_lognorm_upper(B, W, A, b, activation) * h).exp()
            nxt = [arb(v) for v in centres[n + 1]]
            dist2 = arb(0)
            for j in range(d):
                s = rem[j]
                for k in range(K - 1, -1, -1):
                    s = s * h + coef[k][j]
                e = s - nxt[j]  # (arb ** 2 is NaN for a ball containing 0 in python-flint 0.9)
                dist2 += e * e
            need = growth * r + arb(dist2.upper()).sqrt()
            if not (need.upper() <= arb(radii[n + 1])):
                raise TaylorReplayError(
                    f"point {q}, step {n}: the claimed radius is below e^(l h) r + |E - c|"
                )
