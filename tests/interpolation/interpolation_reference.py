"""Independent exact reference for laminar schedules: piece by piece, ``x + τ W σ(A x + b)``.

Inside a piece whose every ``w_j`` is orthogonal to every ``a_i`` the field is constant along
each trajectory, so one exact Euler step of length τ is the flow (O(N · pieces), small cases).
"""

import flint

_ZERO = flint.fmpq(0)


def relu(z, alpha=_ZERO):
    return z if z > 0 else alpha * z


def reference_images(schedule, X, alpha=_ZERO):
    out = [list(row) for row in X]
    for piece in schedule.pieces:
        d, p = piece.W.shape
        for n, x in enumerate(out):
            z = [
                sum((piece.A[i, k] * x[k] for k in range(d)), flint.fmpq(0)) + piece.b[i]
                for i in range(p)
            ]
            act = [relu(zi, alpha) for zi in z]
            out[n] = [
                x[r]
                + piece.duration * sum((piece.W[r, i] * act[i] for i in range(p)), flint.fmpq(0))
                for r in range(d)
            ]
    return out
