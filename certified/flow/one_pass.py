"""The one-pass certificate of a smooth flow from points at 53 bits (issue 18).

Rule taylor-lohner with the float64 replay: the steps and orders come from the float64
predictor (:func:`certified.flow.taylor.float64.predict_steps`), the claims are the checker's
own replay of them, and the re-check of the certificate's exact bytes reuses that replay
(``checker.flow.reusing_replays``, proofs/checker_soundness.md#replay-reuse): one replay where
the engine's route costs an enclosure, a replay and a check. ``certified flow --points --out``
writes with it (:func:`one_pass`, the write inside its block); :func:`one_pass_certificate` is
the same pass for the Python API (:func:`certified.flow.api.certify_flow`), writing nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from certified.flow.options import SaveAt
from certified.flow.result import FlowEnclosure

__all__ = ["one_pass", "one_pass_applies", "one_pass_certificate"]


def one_pass_applies(problem: Any, start: Any, prec: int | None = None) -> bool:
    """Whether the one pass can be tried: points (not boxes or balls) of a non-sphere field
    whose expression the float64 replay supports (``checker.lohner.supported``), at 53 bits.
    The pass may still fail (then the engine's route is taken).

    Guarantee: none (a routing decision).
    """
    from certified.arith import Interval
    from certified.checker.lohner import supported
    from certified.flow.options import Balls

    if prec not in (None, 53) or isinstance(start, (Interval, Balls)):
        return False
    # sphere fields: the engine's route checks that the points are on the sphere
    return not problem.field.sphere and supported(problem.field.expression)


@contextlib.contextmanager
def one_pass(
    problem: Any, start: Any, save_at: SaveAt, progress: Any = None
) -> Iterator[tuple[FlowEnclosure, dict[str, Any]] | None]:
    """Yield ``(result, certificate)`` whose claims are the checker's replay of the predicted
    steps, or None (nothing to check: take the engine's route) when the pass does not apply or
    the checker refuses the predicted steps. Inside the block, a check of the certificate's
    bytes (``certificates.certificate_bytes``, ``write_if_accepted``) reuses that replay; the
    certificate is NOT checked yet, and nothing is written here.

    ``problem``: a :class:`~certified.fields.PiecewiseField`; ``start``: points (N, d);
    ``save_at``: the saved times (``save_at.times(problem.total_time)``); ``progress``: a
    ``certified._progress.Progress`` (the CLI's stage messages) or None.

    Guarantee: none (the checker decides); ``result.enclosures`` are the claims, which hold
    once the checker accepts the certificate's bytes.
    """
    from certified.arith import Interval
    from certified.certificates.field_flow import FieldCertificateError, field_flow_certificate
    from certified.certificates.writer import dumps_certificate
    from certified.checker import check_bytes
    from certified.checker.flow import reusing_replays
    from certified.flow.options import initial_set
    from certified.flow.result import FlowStatus
    from certified.flow.taylor import float64

    stage = progress.stage if progress is not None else (lambda what: contextlib.nullcontext())
    if not one_pass_applies(problem, start):
        yield None
        return
    sets = initial_set(start, problem.dimension)
    saves = save_at.times(problem.total_time)
    times = tuple(str(t) for t in saves)
    with stage("choosing the steps (float64 predictor)"):
        hints = float64.predict_steps(problem, sets.c, saves)
    n, d = sets.c.shape
    zero = np.zeros((len(times), n, d))
    draft = FlowEnclosure(times, Interval(zero, zero), FlowStatus.SUCCESS, hints=hints)
    try:  # the claims of the draft are placeholders: its check fails, its replay is kept
        cert = field_flow_certificate(problem, sets, draft, precision=53, replay=False)
    except FieldCertificateError:
        yield None
        return
    with reusing_replays() as replays, stage("replaying the steps as the checker does"):
        check_bytes(dumps_certificate(cert).encode())
        if not replays:  # refused before its replay (hints over a limit): nothing to reuse
            yield None
            return
        out = list(replays.values())[-1]
        lo = np.array([[[_double(b.lower(), "down") for b in r] for r in o] for o in out])
        hi = np.array([[[_double(b.upper(), "up") for b in r] for r in o] for o in out])
        cert["claim"]["enclosures"] = _exact_rows(lo, hi)
        yield FlowEnclosure(times, Interval(lo, hi), FlowStatus.SUCCESS, hints=hints), cert


def one_pass_certificate(
    problem: Any, start: Any, save_at: SaveAt | None = None
) -> tuple[FlowEnclosure, dict[str, Any]] | None:
    """The one pass (:func:`one_pass`) with its certificate's exact bytes checked (size limit,
    then the checker, reusing the pass's replay): ``(result, certificate)`` when accepted,
    None when the pass does not apply, fails or is rejected. Nothing is written.

    Guarantee: none (the checker decides); a returned certificate's bytes
    (``dumps_certificate``) were accepted by the checker, and ``result.enclosures`` are its
    claims.
    """
    from certified.certificates.writer import certificate_bytes

    save_at = save_at if save_at is not None else SaveAt()
    with one_pass(problem, start, save_at) as one:
        if one is None:
            return None
        _, verdict = certificate_bytes(one[1])
    return one if verdict.verified else None


def _double(ball, rnd: str) -> float:
    """An end point of an arb (exact) rounded to a double in the direction ``rnd``."""
    from certified.arith.exact import fmpq_to_float
    from certified.flow.taylor._lohner_arb import arb_to_fmpq

    return fmpq_to_float(arb_to_fmpq(ball), rnd)


def _exact_rows(lo, hi) -> list:
    from certified.certificates.flow import exact_number

    return [
        [[[exact_number(a), exact_number(b)] for a, b in zip(r1, r2, strict=True)]
         for r1, r2 in zip(L, H, strict=True)]
        for L, H in zip(lo.tolist(), hi.tolist(), strict=True)
    ]  # fmt: skip
