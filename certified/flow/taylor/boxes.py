"""Boxes of smooth flows (tanh, sigmoid, any expression field) as quadratic sets, split
adaptively (issue 18 item 3, smooth side).

A box is carried as the quadratic set ``x^ + M u + Q(u, u)/2 + G e`` (proofs/bounds.md#quadratic;
the zonotope ``x^ + M u + G e`` of #zonotope for fields with logsumexp): u ranges over the
initial box's radii and never changes, M follows ``DPhi`` at the centre, Q its second derivative
(a point tensor), and the errors of each step (third order in the box's width, the Taylor
remainder, rounding) become d new generators of G, carried by point matrices afterwards (at
most 16 d, the smallest boxed). Neither the image of the box nor its curvature is wrapped step
by step. Where a sub-box's enclosure is wider than ``ratio`` times its linear part
``|M| rad(U)``, it is bisected (across the input axis that contributes most to the image; a
box 64x past its linear part, or failed, across six axes at once) while the budget
``max_splits`` lasts, worst first.

Untrusted: the steps come from the engine run on the centres, each sub-box is advanced by the
checker's own float64 step (:func:`certified.checker.lohner64.lohner_step64`), and the claims
are the checker's replay of the final sub-boxes; the certificate carries ``hints.partition``
(certified/checker/_partition.py) and ``hints.sets``. A box whose sub-boxes still fail (the a
priori enclosure), or is still over TOO_WIDE times its linear part when the budget is spent, is
named with the failing sub-box and the reason, and left out of the certificate; the others come
back.

Reach (issue 18's instance, d = 8, T = 4, README for the measured table): the doubleton sets
(``x^ + M u + C r``, hints.sets "doubleton", still checked) lost tanh boxes above side
0.005-0.01 (their error part C r wrapped at every step); the zonotopes (still checked) above
side 0.02-0.05, their first-order spread term ``(J M - M') U`` overestimating the curvature
``D^2 Phi_h (M u, M u) / 2`` ~30x, quadratic in the side. Quadratic sets carry that term
exactly: a tanh box of side 0.05 comes back at 1.66x its linear part without splits (zonotope
2.3e13x). What limits them is the third-order rest, boxed every step, which feeds back through
the hull (a tanh box of side 0.1 needs 64 or more sub-boxes, some boxes more than a file
holds), and their cost: two hyper-dual series a step, about 8x a zonotope's, so a file holds
fewer sub-boxes (the checker's replay limit).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from certified.arith import Interval
from certified.flow.relu._split import _tree as partition_tree

__all__ = [
    "DEFAULT_MAX_SPLITS",
    "certify_smooth_boxes",
    "SmoothBoxes",
    "box_hulls",
    "run_smooth_boxes",
    "smooth_box_certificate",
    "split_smooth_boxes",
]

DEFAULT_MAX_SPLITS = 64  # bisections per file (certified flow --max-splits)
BOX_ORDER = 12  # the Taylor order of box steps at most (the engine's at the centres is up to 20,
# for points; a box's width is the zonotope's spread term: on the issue-18 tanh boxes orders
# 20, 12, 10 give the same widths to 6 digits, order 12 a third less time)
JACOBIAN_ORDER = 6  # the variational order of every step (below 6 its remainder over the a priori
# box dominates the spread of J on the issue-18 tanh boxes; above, no gain)
SETS = "quadratic"  # hints.sets of box certificates (proofs/bounds.md#quadratic; "zonotope",
# #zonotope, for fields with logsumexp, which the second-order replay does not take)
RATIO = 1.5  # split a sub-box whose width exceeds RATIO times its linear part's
TOO_WIDE = 100.0  # after the budget, a sub-box over TOO_WIDE times its linear part fails its box


@dataclass(eq=False)
class _Leaf:
    box: int  # input box
    lo: np.ndarray
    hi: np.ndarray
    path: tuple = ()  # ((axis, cut, side), ...) from the input box; side 0 left, 1 right
    enc: tuple = (None, None)  # enclosure at the final time (lo, hi), None if failed
    linear: float = np.inf  # max width of the linear part |M| rad(U) (2x)
    weights: np.ndarray | None = None  # per input axis: its share of the image's width
    why: str = ""  # the failure, if any


@dataclass
class SmoothBoxes:
    """The outcome per input box: its leaves (preorder), their enclosures at the final time,
    the flat bisection tree; ``failed``: input box -> message naming the sub-box and reason."""

    lo: np.ndarray  # (n_leaves, d) doubles, leaves of the boxes that came back
    hi: np.ndarray
    owner: np.ndarray  # (n_leaves,) index of the input box
    enc_lo: np.ndarray  # (n_leaves, d) float enclosures at the final time (checker's step)
    enc_hi: np.ndarray
    trees: dict = field(default_factory=dict)  # input box -> flat tree
    failed: dict = field(default_factory=dict)
    steps: list = field(default_factory=list)  # per piece, exact step lengths
    order: int = 20
    splits: int = 0
    linear: np.ndarray | None = None  # (n_leaves,) max width of each leaf's linear part
    limit: int = 0  # the sub-boxes a file holds (the checker's replay limit), when it stopped us
    sets: str = SETS  # hints.sets: how the leaves were advanced (and are replayed)

    def advice(self, splits: str = "--max-splits") -> str:
        """What to do about the boxes that did not come back."""
        if self.limit:
            return (f"certify fewer boxes per file (a file holds about {self.limit} sub-boxes: "
                    "the checker's replay limit) or give smaller boxes")  # fmt: skip
        return f"raise {splits} or give smaller boxes"

    def ratio(self, i: int) -> float:
        """The largest ratio, over box i's leaves, of the enclosure's width to its linear
        part's (1: no wrapping, no nonlinear error)."""
        sel = self.owner == i
        widths = np.max(self.enc_hi[sel] - self.enc_lo[sel], axis=1)
        return float(np.max(widths / np.maximum(self.linear[sel], 1e-300)))


def _plan(problem, lo: np.ndarray, hi: np.ndarray):
    """The step lengths and Taylor order of the engine run on the boxes' centres (any steps
    are valid: tightness only), and the boxes whose centre's flow fails (their messages): the
    centres are then run one at a time and the steps taken from those that pass."""
    from certified.flow.api import enclose_flow

    centres = 0.5 * lo + 0.5 * hi
    res = enclose_flow(problem, centres)
    if res.status.value == "success":
        return res.hints["steps"], res.hints["order"], {}
    plan, bad = None, {}
    for i in range(centres.shape[0]):
        one = enclose_flow(problem, centres[i : i + 1])
        if one.status.value == "success":
            plan = plan or one
        else:
            bad[i] = f"box {i}: the flow from its centre fails ({one.message})"
    if plan is None:
        raise _PlanError(res.message)
    return plan.hints["steps"], plan.hints["order"], bad


class _PlanError(Exception):
    pass


def sets_for(field) -> str:
    """hints.sets for boxes of ``field``: SETS, or "zonotope" where quadratic sets cannot go
    (logsumexp has no second-order form in the replay)."""
    if SETS == "quadratic" and any(node[0] == "logsumexp" for node in field.nodes):
        return "zonotope"
    return SETS


def _advance(problem, leaves: list[_Leaf], steps, K: int) -> None:
    """Advance the leaves by the checker's float64 zonotope step; a leaf whose step fails at
    every a priori factor (or whose basis is singular) gets ``why`` and no enclosure."""
    from flint import arb, fmpq

    from certified.arith.ball import precision
    from certified.arith.exact import to_fmpq
    from certified.checker.ivec import from_arb, from_fmpq
    from certified.checker.jets64 import Program, jets64
    from certified.checker.lohner64 import Sets, apriori64, lohner_step64
    from certified.checker.taylor import ReplayError

    if not leaves:
        return
    prog = Program(problem.field.expression)
    starts = [[(to_fmpq(a), to_fmpq(b)) for a, b in zip(x.lo, x.hi, strict=True)] for x in leaves]
    alive = np.arange(len(leaves))
    with precision(53), np.errstate(all="ignore"):
        S = Sets.boxes(starts, sets_for(problem.field.expression))
        for j, piece in enumerate(problem.pieces):
            P = from_arb([arb(v) for v in piece.values])
            for s, h in enumerate(steps[j]):
                hb = from_fmpq([fmpq(h)])
                while alive.size:
                    try:
                        B, ok = _apriori(prog, P, S, hb, apriori64, jets64)
                        why = {int(q): "the Picard inclusion fails for every a priori factor up "
                               "to 64" for q in np.flatnonzero(~ok)}  # fmt: skip
                        if not why:
                            S = lohner_step64(prog, P, S, h, B, K, JACOBIAN_ORDER)
                            break
                    except ReplayError as exc:
                        m = re.search(r"set (\d+)", str(exc))
                        why = {int(m[1]) if m else 0: str(exc).split(": ", 1)[-1]}
                    for q, msg in why.items():
                        leaves[alive[q]].why = f"piece {j}, step {s}: {msg}"
                    keep = ~np.isin(np.arange(alive.size), list(why))
                    alive = alive[keep]
                    S = _subset(S, keep)
        if not alive.size:
            return
        H = S.hull()
        lin = 2 * np.einsum("nij,nj->ni", np.abs(S.M), np.maximum(-S.U.lo, S.U.hi))
        share = np.abs(S.M).sum(axis=1) * (S.U.hi - S.U.lo)  # (n, d): each input axis
    for k, q in enumerate(alive):
        leaf = leaves[q]
        leaf.enc = (H.lo[k].copy(), H.hi[k].copy())
        leaf.linear = float(lin[k].max())
        leaf.weights = share[k]
        if not (np.isfinite(H.lo[k]).all() and np.isfinite(H.hi[k]).all()):
            leaf.enc, leaf.why = (None, None), "the enclosure is not finite"


_RHOS = [2.0**k for k in range(-8, 7)]  # the a priori factors tried (as the checker's search)


def _apriori(prog, P, S, hb, apriori64, jets64):
    """A priori boxes per set (n, d) and which sets have one: for each set the first factor of
    ``_RHOS`` whose box passes the Picard inclusion ``X + [0, h] f(B) in B`` (the check of
    lohner_step64, repeated here only to choose: a set failing at every factor is named alone,
    not the first set of a batch that fails together at a factor too large for the others)."""
    X = S.hull(with_centre=True)
    B, ok = None, np.zeros(X.shape[0], dtype=bool)
    for rho in _RHOS:
        Br = apriori64(prog, P, S, hb, rho)
        T = X + jets64(prog, P, Br, None, 1)[1][..., 0].union_zero() * hb
        good = ~ok & ((T.lo >= Br.lo) & (T.hi <= Br.hi)).all(axis=1)
        if B is None:
            B = Br
        B.lo[good], B.hi[good] = Br.lo[good], Br.hi[good]
        ok |= good
        if ok.all():
            break
    return B, ok


def _most_leaves(problem, steps, K: int) -> int:
    """The most sets whose replay stays within the checker's limit (rule taylor-lohner's cost,
    zonotopes, the float64 replay): the producer's budget before any work."""
    from certified.checker.lohner import MAX_TAYLOR_OPS, replay_cost

    field, total = problem.field.expression, sum(len(s) for s in steps)
    kind = sets_for(field)
    one = replay_cost(field, 1, total, K, JACOBIAN_ORDER, 53, "float64", kind)
    per = replay_cost(field, 2, total, K, JACOBIAN_ORDER, 53, "float64", kind) - one
    return max(1, int((MAX_TAYLOR_OPS - one) / max(per, 1)))


def _subset(S, keep):
    from certified.checker.ivec import Iv

    def sub(x):
        return None if x is None else Iv(x.lo[keep], x.hi[keep])

    M = None if S.M is None else S.M[keep]
    G = None if S.G is None else S.G[keep]
    Q = None if S.Q is None else S.Q[keep]
    return type(S)(S.centre[keep], S.C[keep], sub(S.r), M, sub(S.U), G, Q)


def _width(leaf: _Leaf) -> float:
    return np.inf if leaf.enc[0] is None else float(np.max(leaf.enc[1] - leaf.enc[0]))


def _bad(leaf: _Leaf, ratio: float) -> float:
    """How far the leaf is from its linear part (inf when it failed; <= ratio: good)."""
    if leaf.enc[0] is None:
        return np.inf
    return _width(leaf) / max(leaf.linear, 1e-300)


_tree = partition_tree  # one writer of hints.partition trees (flow/relu/_split.py)


def _split(leaf: _Leaf, k: int) -> list[_Leaf] | None:
    """2^k sub-boxes: halves across the input axis contributing most to the image (the longest
    side for a failed leaf), each halved again across the next axis, k times (fewer when a side
    cannot be cut); None if none."""
    w = leaf.weights if leaf.weights is not None else leaf.hi - leaf.lo
    out = [leaf]
    for axis in np.argsort(-w, kind="stable")[:k]:
        parts = [_bisect(x, int(axis)) for x in out]
        out = [y for p, x in zip(parts, out, strict=True) for y in (p or [x])]
    return None if len(out) == 1 else out


def _bisect(leaf: _Leaf, axis: int) -> list[_Leaf] | None:
    """Two halves across ``axis`` (at a double strictly inside), or None."""
    cut = float(0.5 * leaf.lo[axis] + 0.5 * leaf.hi[axis])
    if not leaf.lo[axis] < cut < leaf.hi[axis]:
        return None
    a, b = leaf.hi.copy(), leaf.lo.copy()
    a[axis], b[axis] = cut, cut
    return [
        _Leaf(leaf.box, leaf.lo, a, (*leaf.path, (axis, cut, 0))),
        _Leaf(leaf.box, b, leaf.hi, (*leaf.path, (axis, cut, 1))),
    ]


def split_smooth_boxes(
    problem, lo: np.ndarray, hi: np.ndarray, max_splits: int = DEFAULT_MAX_SPLITS,
    ratio: float = RATIO,
) -> SmoothBoxes:  # fmt: skip
    """Sub-boxes of the double boxes ``[lo, hi]`` (n, d) and their enclosures at the final time
    of ``problem`` (a PiecewiseField), split as the module docstring says.

    Guarantee: none for the splitting (untrusted); each enclosure is the checker's float64
    zonotope step applied to its leaf (so it contains the leaf's image), and the leaves of each
    tree cover its box exactly (cuts at doubles strictly inside), as the checker verifies.
    """
    lo, hi = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
    steps, K, bad = _plan(problem, lo, hi)
    K = min(K, BOX_ORDER)
    most = _most_leaves(problem, steps, K)
    if lo.shape[0] - len(bad) > most:
        raise _PlanError(
            f"the checker's replay of {lo.shape[0]} boxes would be over its limit (at most about "
            f"{most} boxes or sub-boxes per certificate): split the file"
        )
    leaves = [_Leaf(i, lo[i].copy(), hi[i].copy()) for i in range(lo.shape[0]) if i not in bad]
    _advance(problem, leaves, steps, K)
    splits, capped = 0, False
    while splits < max_splits:
        worst = sorted((x for x in leaves if _bad(x, ratio) > ratio), key=lambda x: -_bad(x, ratio))
        new = []
        for leaf in worst:
            room = min(max_splits - splits, most - len(leaves) - len(new))
            capped |= most - len(leaves) - len(new) < 1 <= max_splits - splits  # the file is full
            # far from its linear part: several axes at once (fewer rounds, same budget)
            # (an input box 64x past its linear part or failed: six axes at once, three for a
            # sub-box; issue 18's tanh boxes of side 0.1: 2^6 sub-boxes 4.6-12.8x, measured)
            k = 1 if _bad(leaf, ratio) < 4 * ratio else 2
            if _bad(leaf, ratio) >= 64:
                k = 3 if leaf.path else min(leaf.lo.size, 6)
            while k > 1 and 2**k - 1 > room:
                k -= 1
            parts = _split(leaf, k) if room > 0 else None
            if parts is None:
                continue
            leaves.remove(leaf)
            new += parts
            splits += len(parts) - 1
        if not new:
            break
        _advance(problem, new, steps, K)
        leaves += new
    out = SmoothBoxes(lo=np.zeros((0, lo.shape[1])), hi=np.zeros((0, lo.shape[1])),
                      owner=np.zeros(0, dtype=int), enc_lo=None, enc_hi=None,
                      steps=steps, order=K, splits=splits, limit=most if capped else 0,
                      sets=sets_for(problem.field.expression))  # fmt: skip
    kept, out.failed = [], dict(bad)
    for i in range(lo.shape[0]):
        if i in bad:
            continue
        mine = sorted((x for x in leaves if x.box == i), key=lambda x: [s for _, _, s in x.path])
        broken = [k for k, x in enumerate(mine) if _bad(x, ratio) > TOO_WIDE]
        if broken:
            k = max(broken, key=lambda k: _bad(mine[k], ratio))
            x = mine[k]
            where = f"sub-box {k} of {len(mine)} [{_show(x.lo)}, {_show(x.hi)}]"
            why = x.why or (f"its enclosure is {_bad(x, ratio):.3g} times as wide as its linear "
                            f"part after {splits} splits (the limit: {TOO_WIDE:g})")  # fmt: skip
            out.failed[i] = f"box {i}, {where}: {why}"
            continue
        out.trees[i] = _tree(mine)
        kept += mine
    if kept:
        out.lo = np.array([x.lo for x in kept])
        out.hi = np.array([x.hi for x in kept])
        out.owner = np.array([x.box for x in kept])
        out.enc_lo = np.array([x.enc[0] for x in kept])
        out.enc_hi = np.array([x.enc[1] for x in kept])
        out.linear = np.array([x.linear for x in kept])
    return out


def _show(v: np.ndarray) -> str:
    return "(" + ", ".join(f"{x:.6g}" for x in v) + ")"


def box_hulls(split: SmoothBoxes) -> dict:
    """Input box -> (lo, hi): the hull of its leaves' enclosures (floats)."""
    out = {}
    for i in split.trees:
        sel = split.owner == i
        out[i] = (split.enc_lo[sel].min(axis=0), split.enc_hi[sel].max(axis=0))
    return out


def smooth_box_certificate(problem, lo: np.ndarray, hi: np.ndarray, split: SmoothBoxes,
                           replays: dict | None = None) -> dict:  # fmt: skip
    """A flow certificate (rule taylor-lohner, zonotope sets, ``hints.partition``, a priori
    factors picked by the checker) of the input boxes that came back (``split.trees``); the
    claims are the checker's own replay of their leaves (a check of the draft, whose claims are
    placeholders), each input box claiming the hull of its leaves' balls, rounded outward.
    ``replays``: the dict of an open :func:`certified.checker.flow.reusing_replays` block, so
    that the writer's re-check in that block reuses this replay (same instance, hints and
    times, proofs/checker_soundness.md#replay-reuse); None: a block of its own.

    Guarantee: none (the checker decides)."""
    import contextlib

    from flint import arb, fmpq

    from certified.certificates.field_flow import FieldCertificateError
    from certified.certificates.flow import FORMAT_VERSION, double_strings, exact_number
    from certified.certificates.writer import dumps_certificate
    from certified.checker import check_bytes
    from certified.checker.flow import reusing_replays

    boxes = sorted(split.trees)
    if not boxes:
        raise FieldCertificateError("no box came back: nothing to certify")
    sel = np.isin(split.owner, boxes)
    T = problem.total_time
    inst = np.stack([np.asarray(lo)[boxes], np.asarray(hi)[boxes]], axis=-1)
    instance = {**problem.to_json(), "boxes": double_strings(inst), "time": exact_number(T)}
    instance.pop("sphere", None)
    instance["pieces"] = [
        {"duration": exact_number(p.duration), "parameters": [exact_number(v) for v in p.values]}
        for p in problem.pieces
    ]
    trees = [[v if v is None or isinstance(v, int) else exact_number(v) for v in split.trees[i]]
             for i in boxes]  # fmt: skip
    cert = {
        "kind": "flow",
        "version": FORMAT_VERSION,
        "instance": instance,
        "claim": {"times": [exact_number(T)], "enclosures": [double_strings(inst)]},  # placeholder
        "hints": {
            "method": "taylor-lohner",
            "order": split.order,
            "jacobian_order": JACOBIAN_ORDER,
            "precision": 53,
            "steps": [
                [exact_number(fmpq(s) if not isinstance(s, fmpq) else s) for s in st]
                for st in split.steps
            ],
            "arithmetic": "float64",
            "apriori": "search",
            "sets": split.sets,
            "partition": trees,
        },
    }
    block = contextlib.nullcontext(replays) if replays is not None else reusing_replays()
    with block as memo:
        memo.clear()
        verdict = check_bytes(dumps_certificate(cert).encode())
        if not memo:
            why = verdict.reason
            raise FieldCertificateError(f"the checker's replay rejects a sub-box ({why})")
        out = list(memo.values())[-1][0]
    owner = split.owner[sel]
    lo_ = np.array([[float(arb(b.lower()).lower()) for b in row] for row in out])
    hi_ = np.array([[float(arb(b.upper()).upper()) for b in row] for row in out])
    lo_, hi_ = np.nextafter(lo_, -np.inf), np.nextafter(hi_, np.inf)  # outward to doubles
    claims = np.array([np.stack([lo_[owner == i].min(axis=0), hi_[owner == i].max(axis=0)], -1)
                       for i in boxes])  # fmt: skip
    cert["claim"]["enclosures"] = [double_strings(claims)]
    return cert


def certify_smooth_boxes(problem, lo: np.ndarray, hi: np.ndarray,
                         max_splits: int = DEFAULT_MAX_SPLITS) -> tuple:  # fmt: skip
    """(FlowEnclosure, certificate) for the double boxes ``[lo, hi]`` (n, d) of a smooth field at
    53 bits, as ``certified flow --boxes --out`` computes them: zonotopes split under
    ``max_splits``, the enclosure of each box the hull of its sub-boxes', the certificate's bytes
    accepted by the checker (re-checked reusing the replay its claims came from); nothing
    written. Raises :class:`~certified.errors.NoCertificateError` when a box does not come back
    (naming it, its sub-box and the reason) or the checker rejects the certificate.

    Guarantee: none (the checker decides); the returned certificate was accepted by the checker,
    and the enclosure of box i contains ``Phi_T(x)`` for every x in it."""
    from certified.certificates.field_flow import FieldCertificateError
    from certified.certificates.writer import certificate_bytes
    from certified.checker.flow import reusing_replays
    from certified.errors import NoCertificateError
    from certified.flow.result import FlowEnclosure, FlowStatus

    lo, hi = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
    try:
        split = split_smooth_boxes(problem, lo, hi, max_splits=max_splits)
    except _PlanError as exc:
        raise NoCertificateError(f"the step plan at the boxes' centres failed: {exc}") from None
    if split.failed:
        fails = [split.failed[i] for i in sorted(split.failed)]
        raise NoCertificateError(f"{len(fails)} of {lo.shape[0]} boxes did not come back within "
                                 f"{max_splits} splits: {'; '.join(fails[:3])}; "
                                 f"{split.advice('max_splits')}")  # fmt: skip
    with reusing_replays() as replays:
        try:
            cert = smooth_box_certificate(problem, lo, hi, split, replays)
        except FieldCertificateError as exc:
            raise NoCertificateError(str(exc)) from None
        _, verdict = certificate_bytes(cert)
    if not verdict.verified:
        raise NoCertificateError(f"the checker rejected the certificate: {verdict.reason}")
    hulls = box_hulls(split)
    n = lo.shape[0]
    L = np.array([hulls[i][0] for i in range(n)])[None]
    H = np.array([hulls[i][1] for i in range(n)])[None]
    result = FlowEnclosure(
        (str(problem.total_time),),
        Interval(L, H),
        FlowStatus.SUCCESS,
        hints={"method": "taylor-lohner", "sets": split.sets, "splits": split.splits},
    )
    return result, cert


def run_smooth_boxes(args, problem, start, n: int, source, t0: float) -> int:
    """``certified flow`` on boxes of a smooth field at 53 bits: zonotopes, split under
    ``--max-splits``; enclosures of every box that comes back (the hull of its sub-boxes'), the
    failing ones named with their sub-box and reason; with ``--out``, a certificate of the boxes
    that came back (VERIFIED only when all did and the checker accepts it). Exit 0 on VERIFIED."""
    import sys
    import time

    from certified._progress import Progress
    from certified.arith.exact import fmpq_to_str, to_fmpq
    from certified.certificates import command_json, print_json, write_if_accepted
    from certified.certificates.field_flow import FieldCertificateError
    from certified.checker.flow import reusing_replays
    from certified.flow.command import decimal_upper, flow_scope
    from certified.flow.result import FlowEnclosure, FlowStatus

    budget = DEFAULT_MAX_SPLITS if args.max_splits is None else args.max_splits
    lo, hi = start.lo.astype(float), start.hi.astype(float)
    progress = Progress("flow")
    with progress.stage(f"enclosing the flow of {n} boxes (zonotopes, at most {budget} splits)"):
        try:
            split = split_smooth_boxes(problem, lo, hi, max_splits=budget)
        except _PlanError as exc:
            split, message = None, f"the step plan at the boxes' centres failed: {exc}"
    hulls = {} if split is None else box_hulls(split)
    if split is not None:
        fails = [split.failed[i] for i in sorted(split.failed)]
        message = "; ".join(fails[:5]) + (f"; and {len(fails) - 5} more" if len(fails) > 5 else "")
        if fails:
            message = (f"{len(fails)} of {n} boxes did not come back within {budget} splits ("
                       f"{message}); {split.advice()}")  # fmt: skip
    verdict, path, complete = "UNDECIDED", None, len(hulls) == n
    if complete and args.out is None:
        verdict = "VERIFIED"
    if hulls and args.out is not None:
        try:
            with reusing_replays() as replays:  # the writer's re-check reuses the claims' replay
                with progress.stage("building the certificate (the checker's replay of the "
                                    "sub-boxes)"):  # fmt: skip
                    cert = smooth_box_certificate(problem, lo, hi, split, replays)
                with progress.stage("writing the certificate, re-checked by the checker first"):
                    path, check = write_if_accepted(args.out, cert)
            if not check.verified:
                message = f"the certificate was not accepted by the checker: {check.reason}"
            elif complete:
                verdict = "VERIFIED"
        except FieldCertificateError as exc:
            message = str(exc)
    T = str(problem.total_time)
    if complete and args.enclosures is not None:
        L = np.array([hulls[i][0] for i in range(n)])[None]
        H = np.array([hulls[i][1] for i in range(n)])[None]
        FlowEnclosure((T,), Interval(L, H), FlowStatus.SUCCESS).save(args.enclosures)
    width = max((float(np.max(b - a)) for a, b in hulls.values()), default=None)
    scope = flow_scope(len(hulls), "boxes", source, [T]) + (
        "" if complete else f" (boxes {', '.join(str(i) for i in sorted(hulls))} of {n})"
    )
    if args.out is None:
        scope += " (no certificate: enclosures by the checker's own float64 step)"
    splits = 0 if split is None else split.splits
    wide = [] if split is None else [i for i in hulls if split.ratio(i) > RATIO]
    note = ""
    if wide:  # valid, but the budget ran out before the linear part dominated
        worst = max(split.ratio(i) for i in wide)
        note = (f"{len(wide)} boxes are still wider than {RATIO}x their linear part (worst "
                f"{worst:.3g}x): raise --max-splits for tighter enclosures")  # fmt: skip
    if args.json:
        out = command_json("flow", verdict, path, time.perf_counter() - t0, scope=scope,
                           message="" if verdict == "VERIFIED" else message)  # fmt: skip
        out["enclosures"] = [
            None if i not in hulls else [
                [fmpq_to_str(to_fmpq(a)), fmpq_to_str(to_fmpq(b))]
                for a, b in zip(hulls[i][0].tolist(), hulls[i][1].tolist(), strict=True)
            ]
            for i in range(n)
        ]  # fmt: skip
        out["max_width"] = None if width is None else decimal_upper(width)
        out["splits"] = splits
        out["note"] = note
        out["failed"] = {str(i): m for i, m in ({} if split is None else split.failed).items()}
        print_json(out)
    else:
        if width is not None:
            print(f"{len(hulls)} of {n} boxes, T = {T}: max enclosure width {width:.3e} "
                  f"({splits} splits)")  # fmt: skip
        print(f"{verdict}" + (f": certificate written to {path}" if path and verdict == "VERIFIED"
                              else f": {message}" if verdict != "VERIFIED" else ""))  # fmt: skip
        if verdict == "VERIFIED":
            print(f"  scope: {scope}")
        if note:
            print(f"  note: {note}")
    if verdict == "VERIFIED":
        return 0
    print(f"certified flow: {message}", file=sys.stderr)
    return 1
