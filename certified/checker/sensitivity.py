"""C^1 enclosures with respect to the parameters of an expression field, and the certified loss
gradient they give (public: producers compute with it the claims the checker replays, as the
flow producers do with ``lohner.replay_flow``).

On a piece with constant parameters theta, the parameters are appended to the state as
constants: ``z = (x, theta)``, ``z' = (f(x; theta), 0)``. Along the replayed Taylor-Lohner steps
of x (``lohner.lohner_step``, which validates each a priori box B), each step's Jacobian of the
augmented flow ``[[M_h, S_h], [0, I]]`` is enclosed over (the step's set) x {theta} by the
order-m variational polynomial plus its remainder over B x {theta} with
``V_B = I + [-e, e]``, ``e = exp(L h) - 1``, ``L >= |Df_aug(B)|_inf`` (proofs/bounds.md
#variational, applied to the augmented field). The chain rule gives ``M_l = dx(t_l)/dx(t_{l-1})``
and ``S_l = dx(t_l)/d theta_l``; the discrete adjoint ``p_{l-1} = M_l^T p_l``,
``p_L = (x(T) - y) / N``, gives ``grad_{theta_l} J = eps h_l theta_l + sum_i S_{l,i}^T p_{l,i}``
for ``J = (1/N) sum_i |x_i(T) - y_i|^2 / 2 + (eps/2) sum_l h_l |theta_l|^2``
(proofs/training.md#gradient)."""

from __future__ import annotations

from flint import arb, arb_mat, fmpq

from ._parse import charge, common_bits, exact_sum, top
from .lohner import LohnerSet, lohner_step
from .taylor import ExpressionField, ReplayError, field_jets

__all__ = [
    "augmented_field",
    "loss_and_gradient",
    "relu_field",
    "relu_sign_failure",
    "replay_sensitivities",
    "sensitivity_cost",
]

_ZERO = arb(0)


def augmented_field(field: ExpressionField) -> ExpressionField:
    """The field of ``(x, theta)``: parameter k becomes coordinate d + k, with derivative 0.

    Guarantee: exact (the same graph)."""
    d, P = field.dimension, len(field.names)
    nodes = [("x", d + a[0]) if op == "p" else (op, *a) for op, *a in field.nodes]
    nodes.append(("c", fmpq(0)))
    return ExpressionField(d + P, [], nodes, [*field.outputs, *([len(nodes) - 1] * P)])


def relu_field(d: int, p: int, pattern) -> ExpressionField:
    """The masked field ``f_s(x; W, A, b) = sum_k s_k W_{:k} (A_k x + b_k)`` of a ReLU layer
    ``W relu(A x + b)`` (W d x p, A p x d, b p), written with the original parameters (W row-major,
    then A row-major, then b), so that its parameter derivatives are the ReLU flow's where the
    pattern s holds (proofs/training.md#relu).
    Guarantee: exact (the graph)."""
    names = [f"W[{i}][{k}]" for i in range(d) for k in range(p)]
    names += [f"A[{k}][{i}]" for k in range(p) for i in range(d)] + [f"b[{k}]" for k in range(p)]
    nodes: list[tuple] = [("x", i) for i in range(d)]
    z = {}
    for k in (k for k in range(p) if pattern[k]):
        terms = []
        for i in range(d):
            nodes += [("p", d * p + k * d + i), ("mul", len(nodes), i)]
            terms.append(len(nodes) - 1)
        nodes += [("p", 2 * d * p + k), ("sum", *terms, len(nodes))]
        z[k] = len(nodes) - 1
    outputs = []
    for i in range(d):
        terms = []
        for k, zk in z.items():
            nodes += [("p", i * p + k), ("mul", len(nodes), zk)]
            terms.append(len(nodes) - 1)
        nodes.append(("sum", *terms) if terms else ("c", fmpq(0)))
        outputs.append(len(nodes) - 1)
    return ExpressionField(d, names, nodes, outputs)


def relu_sign_failure(d: int, p: int, theta, pattern, box) -> int | None:
    """The first neuron k whose ``A_k . B + b_k`` is not strictly positive (s_k = 1) or strictly
    negative (s_k = 0) over the exact box B (d pairs), in exact rational interval arithmetic;
    None when every sign is certified. ``theta``: exact parameters in :func:`relu_field`'s order.
    Guarantee: exact (proofs/training.md#relu)."""
    # charged before: 4 p d + p exact operations on sums whose common denominator divides that
    # of A and b times that of the box (the scan of the heights: p d + 2 d operations)
    ends = [x for pair in box for x in pair]
    charge(p * d + 2 * d, top(), "an a priori box's signs")
    bits = common_bits(theta[d * p :]) + common_bits(ends) + (d + 1).bit_length()
    charge(4 * p * d + p, bits, "an a priori box's signs")
    for k in range(p):
        lo = hi = theta[2 * d * p + k]
        for i, (xl, xh) in enumerate(box):
            a = theta[d * p + k * d + i]
            lo, hi = lo + min(a * xl, a * xh), hi + max(a * xl, a * xh)
        if not (lo > 0 if pattern[k] else hi < 0):
            return k
    return None


def _poly(coefs: list[arb], h: arb) -> arb:
    out = coefs[-1]
    for c in reversed(coefs[:-1]):
        out = out * h + c
    return out


def step_jacobian(aug: ExpressionField, d: int, X: list[arb], theta: list[arb], h: fmpq,
                  box, m: int) -> tuple[arb_mat, arb_mat]:  # fmt: skip
    """``(M_h, S_h)`` enclosing ``d Phi_h / dx`` and ``d Phi_h / d theta`` at every x in the balls
    X, for a step of length h whose a priori box ``box`` (d exact pairs, Picard-validated by
    ``lohner_step``) contains every trajectory from X over [0, h].
    Guarantee: encloses (proofs/training.md#sensitivity)."""
    D, hb = aug.dimension, arb(h)
    B = [arb(lo).union(arb(hi)) for lo, hi in box] + list(theta)
    ident = [[arb(int(i == j)) for j in range(D)] for i in range(D)]
    df = field_jets(aug, [], B, ident, 1)[1]
    L = max(sum((abs(g) for g in df[i][1:]), _ZERO).upper() for i in range(d))
    e = (arb((arb(L) * hb).exp().upper()) - 1).upper()
    # theta' = 0: the last P rows of the variational matrix are exactly those of I
    VB = [[ident[i][j] + (arb(0, e) if i < d else _ZERO) for j in range(D)] for i in range(D)]
    vrem = field_jets(aug, [], B, VB, m)[m]
    vx = field_jets(aug, [], list(X) + list(theta), ident, m - 1)
    J = [[_poly([vx[k][i][1 + j] for k in range(m)] + [vrem[i][1 + j]], hb) for j in range(D)]
         for i in range(d)]  # fmt: skip
    return arb_mat([r[:d] for r in J]), arb_mat([r[d:] for r in J])


def sensitivity_cost(field: ExpressionField, n: int, steps: int, K: int, m: int, prec: int,
                     loss: ExpressionField | None = None) -> int:  # fmt: skip
    """Estimated arb operations of :func:`replay_sensitivities` (proofs/format.md section 10;
    the augmented duals' share fitted on d = p = 2 and d = p = 8 tanh fields, 53 bits) and of
    the per-point ``loss`` of :func:`loss_and_gradient` (its graph's order-1 duals in 2d + 1
    parts at every point)."""
    d, P = field.dimension, len(field.names)
    aug = field.cost * (d + P + 1) * m * m // 6
    per = field.cost * (K * K + 3 * (d + 1) * m * m) + aug + 20 * d**3 + 2 * d * d * P
    at_point = 0 if loss is None else loss.cost * (2 * d + 1)
    return n * (steps * per + at_point) * (1 + prec // 256)


def replay_sensitivities(field: ExpressionField, pieces, points, steps, boxes, K: int, m: int,
                         field_of=None):  # fmt: skip
    """Per point i: the balls of ``x_i(T)`` and, per piece l, ``(M_l, S_l)``; pieces are
    (duration, parameter balls), ``steps[l]`` the step lengths of piece l (summing to its
    duration), ``boxes[l][s][i]`` the a priori box of point i in step s; ``field_of(l)``, when
    given, the field of piece l (else ``field`` throughout). Raises ReplayError naming the
    piece, step and point.
    Guarantee: encloses (proofs/training.md#sensitivity)."""
    d = field.dimension
    sets = [LohnerSet.box(list(x), list(x)) for x in points]
    mats = [[] for _ in points]
    for j, (duration, theta) in enumerate(pieces):
        field = field if field_of is None else field_of(j)
        aug = augmented_field(field)
        if sum(steps[j], fmpq(0)) != duration or not all(h > 0 for h in steps[j]):
            raise ReplayError(f"piece {j}: the steps are not positive or do not sum to {duration}")
        for i in range(len(sets)):
            M = arb_mat([[int(a == b) for b in range(d)] for a in range(d)])
            S = arb_mat(d, len(theta))
            for s, h in enumerate(steps[j]):
                try:
                    X = sets[i].hull(with_centre=True)
                    sets[i] = lohner_step(field, theta, sets[i], h, boxes[j][s][i], K, m)
                    Mh, Sh = step_jacobian(aug, d, X, theta, h, boxes[j][s][i], m)
                except ReplayError as exc:
                    raise ReplayError(f"piece {j}, step {s}, point {i}: {exc}") from None
                M, S = Mh * M, Mh * S + Sh
            mats[i].append((M, S))
    return [S.hull() for S in sets], mats


def loss_and_gradient(finals, mats, targets, pieces, eps: fmpq, loss=None):
    """Balls of J and of ``grad_{theta_l} J`` (a list per piece) from the replay's final balls
    and sensitivities, ``targets`` exact rows, ``pieces`` (duration, exact parameters);
    ``loss``: an expression field of dimension 2d whose first output is the per-point loss
    Phi(x, y) (default ``|x - y|^2 / 2``), J's data part being its mean.
    Guarantee: encloses (proofs/training.md#gradient)."""
    n, d = len(finals), len(targets[0])
    data, grads = _ZERO, [[_ZERO] * len(theta) for _, theta in pieces]
    seeds = [[arb(int(a == b)) for b in range(d)] for a in range(2 * d)]
    for i in range(n):
        r = [finals[i][q] - arb(targets[i][q]) for q in range(d)]
        if loss is None:
            data += sum((v * v for v in r), _ZERO) / 2
        else:  # value and x-gradient of Phi at (x(T), y): the first output's order-1 dual
            at = field_jets(loss, [], [*finals[i], *(arb(y) for y in targets[i])], seeds, 1)
            data += at[1][0][0]
            r = list(at[1][0][1:])
        p = arb_mat([[v / n] for v in r])  # grad of (1/N) Phi at x(T)
        for j in reversed(range(len(pieces))):
            M, S = mats[i][j]
            g = S.transpose() * p
            grads[j] = [a + g[k, 0] for k, a in enumerate(grads[j])]
            p = M.transpose() * p
    count = sum(len(theta) for _, theta in pieces)  # charged before: 4 products a parameter
    charge(4 * count, 3 * top(), "the regulariser")
    reg = exact_sum([h * v * v for h, theta in pieces for v in theta], "the regulariser")
    out = [[g + arb(eps * h * v) for g, v in zip(grads[j], theta, strict=True)]
           for j, (h, theta) in enumerate(pieces)]  # fmt: skip
    return data / n + arb(eps * reg / 2), out
