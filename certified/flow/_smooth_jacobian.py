"""C^1 enclosure of ``D Phi_T`` over a box for smooth neural ODE flows ``x' = W s(A x + b)``
(s = tanh or the logistic sigmoid) with piecewise-constant parameters, in arb ball arithmetic.

The state is carried by the validated Taylor method of :mod:`certified.flow._smooth_arb`
(centre + Euclidean radius per step, a Picard a priori box ``B_k`` per step). Along it, the
fundamental matrix ``Y`` of the variational equation ``Y' = Df(x(t)) Y``, ``Y(0) = I``, of
each step is enclosed by a Taylor expansion of order K whose Lagrange remainder is evaluated
over ``B_k`` and an a priori enclosure ``Y_B`` of ``Y`` on the step
(``I + [0, h] Df(B_k) Y_B`` inside ``Y_B``); ``D Phi_T`` is the ordered product of the step
matrices. Lemmas: proofs/bounds.md#smooth-c1-box (and #picard, #taylor-step, #lognorm,
#relu-gronwall for the norm bound).
"""

from __future__ import annotations

from typing import Any

import flint
import numpy as np
from flint import arb, fmpq

from certified.arith import Interval
from certified.arith.ball import check_precision, endpoints, mid_rad, precision
from certified.arith.exact import fmpq_to_float, fmpq_to_str, to_fmpq, to_fmpq_array
from certified.checker._taylor import _act, _interval_mul, _sqr
from certified.errors import InputError, RangeOverflowError, ShapeError
from certified.flow._smooth_arb import arb_smooth_piece
from certified.flow.relu import FlowLipschitzBound, _spectral_norm_upper
from certified.flow.result import FlowStatus

__all__ = ["smooth_flow_jacobian"]

_SMOOTH = ("tanh", "sigmoid")
_FLOAT_MAX = arb(2) ** 1000  # entries beyond this have no useful float64 Interval
_PIECEWISE_AFFINE = ("relu", "leaky_relu", "leaky-relu", "leakyrelu")


def _ds(y: arb, activation: str) -> arb:
    """s'(u) from an enclosure y of s(u): 1 - s^2 (tanh), s - s^2 (logistic)."""
    return 1 - _sqr(y) if activation == "tanh" else y - _sqr(y)


def _field_jacobian(B, W, A, b, activation):
    """Interval enclosure of ``Df(x) = W diag(s'(Ax + b)) A`` for all x in the box B
    (products by endpoints: B is wide)."""
    d, p = len(B), len(b)
    ds = []
    for i in range(p):
        u = b[i] + sum((_interval_mul(A[i][j], B[j]) for j in range(d)), arb(0))
        ds.append(_ds(_act(u, activation), activation))
    return [
        [sum((_interval_mul(W[r][i] * A[i][c], ds[i]) for i in range(p)), arb(0)) for c in range(d)]
        for r in range(d)
    ]


def _matmul(P, Q, mul=_interval_mul):
    n, k, m = len(P), len(Q), len(Q[0])
    return [
        [sum((mul(P[a][i], Q[i][c]) for i in range(k)), arb(0)) for c in range(m)] for a in range(n)
    ]


def _fundamental_a_priori(M, h_hi: arb):
    """An interval matrix Y_B with ``I + [0, h] M Y_B`` inside Y_B, or None.

    Then the fundamental matrix of ``Y' = M(t) Y`` with ``M(t)`` in M stays in Y_B on
    [0, h] (proofs/bounds.md#smooth-c1-box, a priori enclosure)."""
    d = len(M)
    H = arb(0).union(h_hi)
    eye = [[arb(1 if a == c else 0) for c in range(d)] for a in range(d)]
    Y = eye
    tiny = arb(2) ** (-flint.ctx.prec + 10)
    for _ in range(10):
        P = _matmul(M, Y)
        N = [[eye[a][c] + _interval_mul(H, P[a][c]) for c in range(d)] for a in range(d)]
        if all(
            Y[a][c].is_finite() and N[a][c].is_finite() and Y[a][c].contains(N[a][c])
            for a in range(d)
            for c in range(d)
        ):
            return N  # I + [0,h] M N inside I + [0,h] M Y = N: N is itself a priori
        Y2 = []
        for a in range(d):
            row = []
            for c in range(d):
                lo = min(Y[a][c].lower(), N[a][c].lower())
                hi = max(Y[a][c].upper(), N[a][c].upper())
                w = arb("0.1") * (hi - lo) + tiny
                row.append(arb((lo - w).lower()).union(arb((hi + w).upper())))
            Y2.append(row)
        Y = Y2
    return None


def _fundamental_coefficients(x, W, A, b, activation, K):
    """Taylor coefficients ``G_0 = I, G_1, ..., G_K`` at time 0 of the fundamental matrix of
    ``Y' = Df(x(t)) Y`` along the solution through x, for every x in the ball vector x.

    With ``u = A x + b``, ``y = s(u)``, ``z = s'(u)`` (series from the recursion of
    proofs/bounds.md#taylor-step) and ``V_k = A G_k``:
    ``(k + 1) G_{k+1} = W sum_{j <= k} diag(z_j) V_{k-j}``."""
    d, p = len(x), len(b)
    X = [list(x)]
    U = [[b[i] + sum((A[i][j] * x[j] for j in range(d)), arb(0)) for i in range(p)]]
    Ys = [[_act(u, activation) for u in U[0]]]
    Z = [[_ds(y, activation) for y in Ys[0]]]
    G = [[[arb(1 if a == c else 0) for c in range(d)] for a in range(d)]]
    V = [[[arb(A[i][c]) for c in range(d)] for i in range(p)]]
    for k in range(K):
        S = [
            [sum((Z[j][i] * V[k - j][i][c] for j in range(k + 1)), arb(0)) for c in range(d)]
            for i in range(p)
        ]
        G.append(
            [
                [sum((W[r][i] * S[i][c] for i in range(p)), arb(0)) / (k + 1) for c in range(d)]
                for r in range(d)
            ]
        )
        if k + 1 == K:
            break
        V.append(
            [
                [sum((A[i][j] * G[-1][j][c] for j in range(d)), arb(0)) for c in range(d)]
                for i in range(p)
            ]
        )
        X.append([sum((W[j][i] * Ys[k][i] for i in range(p)), arb(0)) / (k + 1) for j in range(d)])
        U.append([sum((A[i][j] * X[k + 1][j] for j in range(d)), arb(0)) for i in range(p)])
        Ys.append(
            [
                sum(((jj + 1) * U[jj + 1][i] * Z[k - jj][i] for jj in range(k + 1)), arb(0))
                / (k + 1)
                for i in range(p)
            ]
        )
        zz = []
        for i in range(p):
            conv = sum((Ys[k + 1 - jj][i] * Ys[jj][i] for jj in range(k + 2)), arb(0))
            zz.append(-conv if activation == "tanh" else Ys[k + 1][i] - conv)
        Z.append(zz)
    return G


def _step_matrix(X, B, h: arb, W, A, b, activation, K):
    """Enclosures ``(Y, Y_B)`` of the step's fundamental matrix at time h and over [0, h] for
    every trajectory starting in the box X and staying in the a priori box B over [0, h];
    None if no a priori Y_B is found.

    ``Y(h) in sum_{i<K} G_i(X) h^i + G_K(B) Y_B h^K`` (Lagrange remainder per entry; the K-th
    coefficient at time xi is ``G_K(x(xi)) Y(xi)``: proofs/bounds.md#smooth-c1-box)."""
    Y_B = _fundamental_a_priori(_field_jacobian(B, W, A, b, activation), h.upper())
    if Y_B is None:
        return None
    G_X = _fundamental_coefficients(X, W, A, b, activation, K - 1)
    G_KB = _fundamental_coefficients(B, W, A, b, activation, K)[K]
    S = _matmul(G_KB, Y_B)
    for i in range(K - 1, -1, -1):
        S = [[S[a][c] * h + G_X[i][a][c] for c in range(len(X))] for a in range(len(X))]
    return S, Y_B


def _d2s(y: arb, activation: str) -> arb:
    """s''(u) from an enclosure y of s(u): -2 s (1 - s^2) (tanh), s'(1 - 2 s) (logistic)."""
    if activation == "tanh":
        return -2 * _interval_mul(y, 1 - _sqr(y))
    return _interval_mul(_ds(y, activation), 1 - 2 * y)


def _curvature_source(B, J_B, W, A, b, activation):
    """``Q[l] ⊇ {D^2 f(x)[J e_., J e_l] : x in B, J in J_B}`` for l = 0..d-1: the source term
    of the second variational equation, ``Q[l][a][c] = sum_i W_ai s''(u_i) (AJ)_ic (AJ)_il``."""
    d, p = len(B), len(b)
    P = _matmul([[arb(v) for v in row] for row in A], J_B)
    dd = []
    for i in range(p):
        u = b[i] + sum((_interval_mul(A[i][j], B[j]) for j in range(d)), arb(0))
        dd.append(_d2s(_act(u, activation), activation))
    Q = []
    for lc in range(d):
        T = [
            [
                _interval_mul(dd[i], _sqr(P[i][c]) if c == lc else _interval_mul(P[i][c], P[i][lc]))
                for c in range(d)
            ]
            for i in range(p)
        ]
        Q.append(_matmul(W, T))
    return Q


def _jacobian_piece(J: flint.arb_mat, H, chain, W, A, b, activation, h: arb, K):
    """``J <- Y_m ... Y_1 J`` over the steps of one piece, and (if H is not None) the second
    derivatives ``H[l] <- Y H[l] + h Y_B Q[l]`` (variation of constants); None if a step's a
    priori enclosure fails."""
    centres, radii, boxes = chain
    d = len(centres[0])
    for k in range(len(boxes)):
        r = radii[k]
        X = [arb(c - r).union(arb(c + r)) for c in centres[k]]
        B = [arb(lo).union(arb(hi)) for lo, hi in boxes[k]]
        step = _step_matrix(X, B, h, W, A, b, activation, K)
        if step is None:
            return None
        Y = flint.arb_mat(step[0])
        if H is not None:
            Y_B = step[1]
            J_B = _matmul(Y_B, [[J[a, c] for c in range(d)] for a in range(d)])
            Q = _curvature_source(B, J_B, W, A, b, activation)
            H = [Y * H[lc] + flint.arb_mat(_matmul(Y_B, Q[lc])) * h for lc in range(d)]
        J = Y * J
    return J, H


def _steps_for_rate(W, A, tau: fmpq) -> int:
    """Number of steps with ``h L <= 1/2``, ``L = sum_i |w_i| |a_i|`` (the Gronwall rate of the
    field): the Taylor remainders then decay like 2^-K. Heuristic (floats): it only chooses the
    step; every enclosure is validated whatever the step."""
    Wf = np.array([[float(v) for v in row] for row in W])
    Af = np.array([[float(v) for v in row] for row in A])
    rate = float(np.sum(np.linalg.norm(Wf, axis=0) * np.linalg.norm(Af, axis=1)))
    return min(1 << 16, max(1, int(np.ceil(2 * rate * float(tau)))))


def _run(pieces, d, lo, hi, activation, order, hmax, max_halvings, curvature):
    """The validated Taylor method through every piece for the box [lo, hi] (exact), with the
    fundamental matrix and, if ``curvature``, the second derivatives of the flow.

    Returns (J, H, steps, centre, radius, log_lipschitz) or a failure message."""
    centre = [(a + c) / 2 for a, c in zip(lo, hi, strict=True)]
    r2 = sum(((c - a) / 2) ** 2 for a, c in zip(lo, hi, strict=True))
    radius = mid_rad(arb(r2).sqrt().upper())[0] if r2 else fmpq(0)
    eye = [[arb(1 if a == c else 0) for c in range(d)] for a in range(d)]
    J = flint.arb_mat(eye)
    H = [flint.arb_mat(d, d) for _ in range(d)] if curvature else None
    log_lip = fmpq(0)
    steps = []
    prec = flint.ctx.prec
    for j, (W, A, b, tau) in enumerate(pieces):
        m = max(1, int((tau / hmax).ceil()), _steps_for_rate(W, A, tau))
        Wa = [[arb(v) for v in row] for row in W]
        Aa = [[arb(v) for v in row] for row in A]
        ba = [arb(v) for v in b]
        for _ in range(max_halvings + 1):
            res = arb_smooth_piece([centre], [radius], W, A, b, activation, tau, m, order, prec)
            new = None
            if res is not None:
                new = _jacobian_piece(J, H, res[3][0], Wa, Aa, ba, activation, arb(tau / m), order)
            if new is not None:
                break
            m *= 2
        else:
            return (
                f"piece {j}: an a priori enclosure (state or variational) failed even with "
                f"{m // 2} steps; lower max_step, shrink or split the box"
            )
        J, H = new
        centre, radius = res[0][0], res[1][0]
        log_lip += mid_rad(res[2][0])[0]
        steps.append(m)
    return J, H, steps, centre, radius, log_lip


def _float_up(q: fmpq) -> float:
    """q rounded up to a double, inf beyond the float64 range."""
    try:
        return fmpq_to_float(q, "up")
    except RangeOverflowError:
        return float("inf")


def _intersect(x: arb, y: arb) -> arb:
    """A ball containing the intersection of two enclosures of the same number."""
    if not (x.is_finite() and y.is_finite()):
        return x if x.is_finite() else y
    if not x.overlaps(y):
        raise RuntimeError("internal: two enclosures of D Phi are disjoint; please report")
    return x.intersection(y)


def _parse(W_list, A_list, b_list, durations, box, activation, order, max_step, max_halvings):
    if not isinstance(activation, str) or activation not in _SMOOTH:
        if isinstance(activation, str) and activation.lower() in _PIECEWISE_AFFINE:
            raise InputError(
                f"activation: {activation!r} is piecewise affine; use "
                "certified.flow.relu_flow_jacobian for ReLU / leaky ReLU fields"
            )
        raise InputError(f"activation: {activation!r} is not one of {list(_SMOOTH)}")
    if isinstance(order, bool) or not isinstance(order, int) or not 1 <= order <= 40:
        raise InputError(f"order: expected an integer Taylor order in [1, 40], got {order!r}")
    if isinstance(max_halvings, bool) or not isinstance(max_halvings, int) or max_halvings < 0:
        raise InputError(f"max_halvings: expected an integer >= 0, got {max_halvings!r}")
    for name, x in (("W_list", W_list), ("A_list", A_list), ("b_list", b_list)):
        if not isinstance(x, (list, tuple, np.ndarray)):
            raise InputError(f"{name}: expected a list with one array per piece")
    if not isinstance(durations, (list, tuple, np.ndarray)):
        raise InputError("durations: expected a list with one duration per piece")
    if len(durations) == 0:
        raise InputError("durations: the schedule is empty; give at least one piece")
    if not len(W_list) == len(A_list) == len(b_list) == len(durations):
        raise ShapeError(
            f"schedule: W_list, A_list, b_list and durations have lengths {len(W_list)}, "
            f"{len(A_list)}, {len(b_list)}, {len(durations)}; give one entry per piece in each"
        )
    if not isinstance(box, Interval):
        raise InputError("box: expected an Interval of shape (d,); build it with Interval(lo, hi)")
    if box.ndim == 2 and box.shape[0] == 1:
        box = box.reshape(-1)
    pieces = []
    d = None
    for j in range(len(durations)):
        W = to_fmpq_array(W_list[j], f"W_list[{j}]")
        A = to_fmpq_array(A_list[j], f"A_list[{j}]")
        b = to_fmpq_array(b_list[j], f"b_list[{j}]")
        if W.ndim != 2 or W.shape[0] == 0 or W.shape[1] == 0:
            raise ShapeError(f"W_list[{j}]: expected a non-empty (d, p) matrix, got {W.shape}")
        d = W.shape[0] if d is None else d
        p = W.shape[1]
        if W.shape[0] != d or A.shape != (p, d) or b.shape != (p,):
            raise ShapeError(
                f"pieces[{j}]: W, A, b have shapes {W.shape}, {A.shape}, {b.shape}; expected "
                f"({d}, p), (p, {d}), (p,)"
            )
        tau = to_fmpq(durations[j], f"durations[{j}]")
        if tau <= 0:
            raise InputError(f"durations[{j}]: {tau} is not positive; durations must be > 0")
        pieces.append((W.tolist(), A.tolist(), b.tolist(), tau))
    if box.shape != (d,):
        raise ShapeError(f"box: expected shape ({d},) to match the field, got {box.shape}")
    lo = [to_fmpq(float(v)) for v in box.lo]
    hi = [to_fmpq(float(v)) for v in box.hi]
    hmax = to_fmpq(max_step, "max_step")
    if hmax <= 0:
        raise InputError(f"max_step: {hmax} is not positive; give a step length > 0")
    return pieces, d, lo, hi, hmax


def smooth_flow_jacobian(
    W_list: Any,
    A_list: Any,
    b_list: Any,
    durations: Any,
    box: Interval,
    *,
    activation: str = "tanh",
    prec: int = 128,
    max_step: Any = "1/16",
    order: int = 20,
    max_halvings: int = 6,
) -> FlowLipschitzBound:
    """C^1 enclosure of ``D Phi_T`` over an axis-aligned box for a smooth field, and the
    Lipschitz bound it gives.

    .. math::

        J(T) \\supseteq \\{ D\\Phi_T(x) : x \\in \\mathrm{box} \\},
        \\qquad \\mathrm{Lip}(\\Phi_T|_{\\mathrm{box}}) \\le \\max_{D \\in J(T)} \\|D\\|_2

    Per step of length h: the state tube (centre + radius, a priori box ``B``) of the validated
    Taylor method, then the fundamental matrix of the variational equation enclosed by a
    Taylor expansion of order ``order`` with its remainder over ``B`` and an a priori enclosure
    ``Y_B`` (``I + [0, h] Df(B) Y_B`` inside ``Y_B``); ``J`` is the ordered product of the step
    matrices (proofs/bounds.md#smooth-c1-box). For a box of positive width, the second
    derivatives ``H_l = d/dx_l D Phi`` are enclosed over the box as well (second variational
    equation, variation of constants per step) and ``J`` is intersected with the mean value
    form ``D Phi(c) + sum_l H_l [-r_l, r_l]`` about the centre c. The norm bound is the
    smaller of a certified spectral bound (Cholesky of ``mu I - J^T J``) and ``|| |J| ||_F``
    (proofs/bounds.md#relu-gronwall).

    Parameters
    ----------
    W_list, A_list, b_list : per piece, W (d, p), A (p, d), b (p,): floats (exact doubles) or
        exact numbers (``"1/3"``, fmpq).
    durations : per piece, exact positive numbers.
    box : Interval of shape (d,) or (1, d), the initial box (a point box is allowed).
    activation : "tanh" or "sigmoid" (for ReLU / leaky ReLU use ``relu_flow_jacobian``).
    prec : working precision in bits of the ball arithmetic.
    max_step : largest step (exact number); the step is also at most ``1 / (2 L)`` for the
        field's Gronwall rate ``L = sum_i |w_i| |a_i|``, and halved up to ``max_halvings``
        times when an a priori enclosure fails.
    order : Taylor order K of the state and variational steps (tightness and cost only).

    Returns
    -------
    FlowLipschitzBound
        ``method="c1-box"``, ``jacobian`` the (d, d) Interval enclosure of ``D Phi_T`` over the
        box, ``upper`` the Lipschitz bound; hints: ``jacobian_exact`` (d x d pairs of exact
        endpoint strings of the ball enclosure), ``steps`` per piece, ``order``, ``precision``,
        ``lognorm_lipschitz`` (the log-norm bound on the circumscribed ball, for comparison),
        ``final_centre``/``final_radius`` (a Euclidean ball containing ``Phi_T(box)``).
        STEP_REJECTED (``upper`` inf, no jacobian) if an a priori enclosure fails even after
        ``max_halvings`` halvings.

    Raises
    ------
    InputError, ShapeError, NonFiniteError, NumberFormatError, PrecisionError
        Bad input, named (an empty schedule, wrong shapes, NaN, a ReLU activation, ...).

    Guarantee: if the status is SUCCESS, ``jacobian`` contains ``D Phi_T(x)`` for every x in
    the box, and ``upper`` is an upper bound on the Lipschitz constant (Euclidean norm) of
    ``Phi_T`` restricted to the box.
    """
    prec = check_precision(prec)
    pieces, d, lo, hi, hmax = _parse(
        W_list, A_list, b_list, durations, box, activation, order, max_step, max_halvings
    )
    point = all(a == c for a, c in zip(lo, hi, strict=True))
    with precision(prec):
        run = _run(pieces, d, lo, hi, activation, order, hmax, max_halvings, not point)
        if isinstance(run, str):
            return FlowLipschitzBound(
                upper=float("inf"),
                upper_exact=None,
                method="c1-box",
                status=FlowStatus.STEP_REJECTED,
                message=run,
            )
        J, H, steps, centre, radius, log_lip = run
        if not point:
            # mean value form about the centre c: D Phi(x) in D Phi(c) + sum_l H_l (x_l - c_l)
            mid = [(a + c) / 2 for a, c in zip(lo, hi, strict=True)]
            run_c = _run(pieces, d, mid, mid, activation, order, hmax, max_halvings, False)
            if not isinstance(run_c, str):
                M = run_c[0]
                for lc in range(d):
                    half = (hi[lc] - lo[lc]) / 2
                    M = M + H[lc] * arb(0).union(arb(half)).union(arb(-half))
                J = flint.arb_mat(
                    [[_intersect(J[a, c], M[a, c]) for c in range(d)] for a in range(d)]
                )
        entries = [[J[a, c] for c in range(d)] for a in range(d)]
        if not all(e.is_finite() and e.abs_upper() < _FLOAT_MAX for row in entries for e in row):
            return FlowLipschitzBound(
                upper=float("inf"),
                upper_exact=None,
                method="c1-box",
                status=FlowStatus.UNSUPPORTED,
                message="D Phi_T exceeds the float64 range on this box; shorten the schedule "
                "or rescale the field",
                hints={"steps": steps},
            )
        frob = sum((e.abs_upper() * e.abs_upper() for row in entries for e in row), arb(0)).sqrt()
        bound = frob
        spec = _spectral_norm_upper(J)
        if spec is not None and spec < frob:
            bound = spec
        upper_q = endpoints(bound, "norm bound")[1]
        exact = [
            [tuple(fmpq_to_str(v) for v in endpoints(e, "jacobian")) for e in row]
            for row in entries
        ]
        jac = Interval.from_balls(entries)
        lognorm = endpoints(arb(log_lip).exp(), "log-norm bound")[1]
    return FlowLipschitzBound(
        upper=_float_up(upper_q),
        upper_exact=upper_q,
        method="c1-box",
        jacobian=jac,
        hints={
            "jacobian_exact": exact,
            "steps": steps,
            "order": order,
            "precision": prec,
            "lognorm_lipschitz": _float_up(lognorm),
            "final_centre": [fmpq_to_str(v) for v in centre],
            "final_radius": fmpq_to_str(radius),
        },
    )
