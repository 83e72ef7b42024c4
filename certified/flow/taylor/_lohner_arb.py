"""The stepping loop's arb backend: each set advanced by the checker's reference step
(:func:`certified.checker.taylor.lohner_step`) at any precision; the producer only chooses the
step and the a priori box (heuristics: inflation), the step validates them."""

from __future__ import annotations

import numpy as np
from flint import arb, fmpq

from certified.arith import Interval
from certified.arith.ball import precision
from certified.checker.lohner import LohnerSet, lohner_step
from certified.checker.taylor import ReplayError, field_jets
from certified.fields.field import PiecewiseField
from certified.flow.options import InitialSets

__all__ = ["ArbSets", "arb_to_fmpq"]


def arb_to_fmpq(a: arb) -> fmpq:
    """The exact value of an arb with radius 0 (an endpoint or a midpoint)."""
    m, e = a.mid().man_exp()
    e = int(e)
    return fmpq(m) * fmpq(2) ** e if e >= 0 else fmpq(m, 2**-e)


class ArbSets:
    """Sets ``c + C r`` in arb at ``prec`` bits, one at a time."""

    def __init__(
        self, problem: PiecewiseField, sets: InitialSets, K: int, m: int, prec: int
    ) -> None:
        self.field, self.K, self.m, self.prec = problem.field.expression, K, m, prec
        self.used_order = m  # the variational order of every step
        with precision(prec):
            self.params = [[arb(v) for v in p.values] for p in problem.pieces]
            self.S = [
                LohnerSet.box(list(sets.lo[i]), list(sets.hi[i])) for i in range(sets.lo.shape[0])
            ]

    def coefficients(self, j: int):
        d = self.field.dimension
        coefs = np.zeros((self.K + 1, len(self.S), d))
        with precision(self.prec):
            for i, S in enumerate(self.S):
                X = field_jets(self.field, self.params[j], S.centre, None, self.K)
                coefs[:, i, :] = [
                    [float(X[k][q][0].mid()) for q in range(d)] for k in range(self.K + 1)
                ]
        centres = np.array([[float(c) for c in S.centre] for S in self.S])
        return coefs, centres

    def _apriori(self, j, X, h):
        """Exact a priori box (lo, hi pairs) by inflation, or None."""
        hb = arb(h)

        def image(B):
            F = field_jets(self.field, self.params[j], B, None, 1)[1]
            return [
                (
                    arb((x.lower() + hb * min(arb(0), f[0].lower())).lower()),
                    arb((x.upper() + hb * max(arb(0), f[0].upper())).upper()),
                )
                for x, f in zip(X, F, strict=True)
            ]

        def widen(T, frac):
            return [
                (
                    arb((lo - frac * (hi - lo) - abs(lo) * 2**-40 - 2**-200).lower()),
                    arb((hi + frac * (hi - lo) + abs(hi) * 2**-40 + 2**-200).upper()),
                )
                for lo, hi in T
            ]

        box = widen(image([arb(x) for x in X]), 0.1)
        for _ in range(12):
            T = image([lo.union(hi) for lo, hi in box])
            if all(
                a.lower() > lo and b.upper() < hi for (a, b), (lo, hi) in zip(T, box, strict=True)
            ):
                return [(arb_to_fmpq(lo), arb_to_fmpq(hi)) for lo, hi in box]
            box = [
                (arb(min(lo, a).lower()), arb(max(hi, b).upper()))
                for (lo, hi), (a, b) in zip(box, T, strict=True)
            ]
            box = widen(box, 0.1)
        return None

    def try_step(self, j: int, h: fmpq, tol):
        failed, self.pending, allowed = [], [], np.inf
        with precision(self.prec):
            for i, S in enumerate(self.S):
                box = self._apriori(j, S.hull(with_centre=True), h)
                if box is None:
                    failed.append(i)
                    continue
                B = [arb(lo).union(arb(hi)) for lo, hi in box]
                if tol > 0:
                    rem = field_jets(self.field, self.params[j], B, None, self.K)[self.K]
                    big = max(float(abs(r[0]).upper()) for r in rem)
                    scale = max(1.0, *(abs(float(c)) for c in S.centre))
                    if big > 0:
                        allowed = min(allowed, (tol * scale / big) ** (1.0 / self.K))
                try:
                    self.pending.append(
                        (lohner_step(self.field, self.params[j], S, h, box, self.K, self.m), box)
                    )
                except ReplayError:
                    failed.append(i)
        if failed:
            return "fail", np.array(failed)
        if tol > 0 and allowed < float(h):
            return "shrink", allowed
        return "ok", None

    def accept(self) -> Interval:
        self.S = [s for s, _ in self.pending]
        lo = np.array([[b[0] for b in box] for _, box in self.pending], dtype=object)
        hi = np.array([[b[1] for b in box] for _, box in self.pending], dtype=object)
        return Interval.from_exact(lo.tolist(), hi.tolist())

    def hull(self):
        """(float64 outward boxes, exact (N, d, 2) endpoints) enclosing every set."""
        with precision(self.prec):
            balls = [S.hull() for S in self.S]
            ends = np.array(
                [
                    [[arb_to_fmpq(arb(b.lower())), arb_to_fmpq(arb(b.upper()))] for b in row]
                    for row in balls
                ],
                dtype=object,
            )
        return Interval.from_exact(ends[..., 0].tolist(), ends[..., 1].tolist()), ends
