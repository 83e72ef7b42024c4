"""Certified flow of axis-aligned boxes through ReLU pieces, in midpoint + matrix form.

A box is carried as the set ``{c + J (rad * u) : |u|_inf <= 1}`` with a ball centre ``c`` and
a ball matrix ``J`` (``J = I`` initially). Inside one region the flow is affine, so the set
keeps this form exactly: ``c <- E c + e``, ``J <- E J`` with ``E = exp(tau M)``, evaluated by
the same Taylor expansion (with tail) as for points, applied to the columns ``[c | J]``. No
wrapping: the final enclosure is ``c +/- |J| rad``, and ``J`` encloses ``D Phi`` on the box.
A general piece is accepted only if the whole set is certified to stay in one region over
the whole piece (proofs/bounds.md#relu-box-region); laminar pieces use Clarke's mean value
theorem (proofs/bounds.md#relu-box-laminar) and never fail.
"""

from __future__ import annotations

import itertools

import flint
from flint import arb, arb_mat

from certified.arith.exact import fmpq_to_str
from certified.flow.relu._points import Rejected
from certified.flow.relu._region import ArbPiece, Expansion, Region, _ball, _rows, _up

__all__ = ["box_state", "flow_box_piece"]

GRIDS = (8, 32)
MIN_STEP = flint.fmpq(1, 2**40)


def box_state(lo: list[flint.fmpq], hi: list[flint.fmpq]) -> tuple[arb_mat, arb_mat, list[arb]]:
    """Centre (d+1) x 1, matrix (d+1) x d (last row 0) and radii of the box [lo, hi]."""
    d = len(lo)
    c = arb_mat([[arb((a + b) / 2)] for a, b in zip(lo, hi, strict=True)] + [[arb(1)]])
    J = arb_mat([[arb(1 if r == k else 0) for k in range(d)] for r in range(d)] + [[arb(0)] * d])
    rad = [arb((b - a) / 2) for a, b in zip(lo, hi, strict=True)]
    return c, J, rad


def _ranges(ap: ArbPiece, G: list[list[arb]], rad: list[arb], tails: list[arb]) -> list[arb]:
    """Enclosures of ``ghat_h`` over the set, from the values ``G = Atil [c | J]`` and the tail
    bounds (``tails[0]`` for the centre, ``tails[1 + k]`` for column k of J)."""
    d = ap.d
    # proof: proofs/bounds.md#relu-box-region
    spread_tail = tails[0] + sum((rad[k] * tails[1 + k] for k in range(d)), arb(0))
    out = []
    for h, row in enumerate(G):
        spread = sum((_up(row[1 + k]) * rad[k] for k in range(d)), arb(0))
        out.append(_ball(row[0], _up(spread + ap.a1[h] * spread_tail)))
    return out


def _combine(ex: Expansion, powers: list[arb]) -> arb_mat:
    acc = ex.vs[0] * powers[0]
    for k in range(1, len(ex.vs)):
        acc = acc + ex.vs[k] * powers[k]
    return acc


def _validate(ap: ArbPiece, reg: Region, ex: Expansion, h: flint.fmpq, rad, m: int) -> bool:
    us = [h * flint.fmpq(i, m) for i in range(m + 1)]
    for a, b in itertools.pairwise(us):
        tails = [ex.tail(b, col) for col in range(ex.n)]
        if any(t is None for t in tails):
            return False
        P = ex._interval_powers(a, b)
        G = _rows(ap.Atil * _combine(ex, P))
        for h_, g in enumerate(_ranges(ap, G, rad, tails)):
            if not (g * reg.signs[h_] >= 0):
                return False
    return True


def _hstack(c: arb_mat, J: arb_mat) -> arb_mat:
    rc, rJ = _rows(c), _rows(J)
    return arb_mat([rc[r] + rJ[r] for r in range(len(rc))])


def _split(Y: arb_mat) -> tuple[arb_mat, arb_mat]:
    rows = _rows(Y)
    return arb_mat([[r[0]] for r in rows]), arb_mat([r[1:] for r in rows])


def flow_box_piece(
    ap: ArbPiece, c: arb_mat, J: arb_mat, rad: list[arb]
) -> tuple[arb_mat, arb_mat, dict]:
    """Carry the set ``c + J (rad * u)`` through a general piece staying in one region.

    Raises Rejected when the set is not certified to stay in one region for the whole piece.
    """
    piece = ap.piece
    d = ap.d
    tau = piece.tau
    signs = []
    if ap.H:
        G0 = _rows(ap.Atil * _hstack(c, J))
        for h, g in enumerate(_ranges(ap, G0, rad, [arb(0)] * (d + 1))):
            if g > 0:
                signs.append(1)
            elif g < 0:
                signs.append(-1)
            else:
                raise Rejected(
                    f"piece {piece.index}: the box meets the hyperplane of neurons "
                    f"{piece.neurons_of_plane[h]} at the start of the piece; split the box"
                )
    signs = tuple(signs)
    reg = ap.region(signs)
    t = flint.fmpq(0)
    steps = []
    cap = None
    while t < tau:
        h = tau - t
        if reg.hmax is not None and reg.hmax < h:
            h = reg.hmax
        if cap is not None and cap < h:
            h = cap
        Y = _hstack(c, J)
        ex = Expansion(ap, reg, Y, h)
        if any(_validate(ap, reg, ex, h, rad, m) for m in GRIDS):
            tails = [ex.tail(h, col) for col in range(ex.n)]
            if all(tl is not None for tl in tails):
                Z = _rows(_combine(ex, ex._point_powers(h)))
                Z = [
                    [_ball(Z[r][col], tails[col]) for col in range(ex.n)] if r < d else Z[r]
                    for r in range(d + 1)
                ]
                c, J = _split(arb_mat(Z))
                steps.append([fmpq_to_str(t), fmpq_to_str(t + h)])
                t += h
                continue
        cap = h / 2
        if cap < tau * MIN_STEP:
            raise Rejected(
                f"piece {piece.index}: the box is not certified to stay in region "
                f"{piece.region_string(signs)} for the whole piece (it may cross a hyperplane "
                f"near local time {float(t):.6g}); split the box"
            )
    hint = {
        "kind": "region",
        "region": piece.region_string(signs),
        "steps": steps,
    }
    return c, J, hint


def hull(c: arb_mat, J: arb_mat, rad: list[arb]) -> list[arb]:
    """Balls enclosing ``c + J (rad * u)`` coordinate-wise."""
    rc, rJ = _rows(c), _rows(J)
    d = len(rad)
    return [
        _ball(rc[r][0], _up(sum((_up(rJ[r][k]) * rad[k] for k in range(d)), arb(0))))
        for r in range(d)
    ]


def flow_box_schedule(aps: list, lo: list[flint.fmpq], hi: list[flint.fmpq]):
    """Carry one box through every piece (``aps``: ArbPiece per piece, laminar ones included).

    Returns ``(hull balls, J (d x d arb_mat), hints)``; raises Rejected.
    """
    from certified.flow.relu._laminar import piece_map_box

    c, J, rad = box_state(lo, hi)
    d = len(lo)
    hints = []
    for ap in aps:
        if ap.piece.laminar:
            cl = c.entries()[:d]
            Jd = arb_mat(_rows(J)[:d])
            cl, Jd = piece_map_box(ap.piece, cl, Jd, rad)
            c = arb_mat([[v] for v in cl] + [[arb(1)]])
            J = arb_mat(_rows(Jd) + [[arb(0)] * d])
            hints.append({"kind": "laminar"})
        else:
            c, J, hint = flow_box_piece(ap, c, J, rad)
            hints.append(hint)
    return hull(c, J, rad), arb_mat(_rows(J)[:d]), hints
