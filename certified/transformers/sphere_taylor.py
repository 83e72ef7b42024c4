"""Self-attention dynamics of a transformer instance by Taylor steps vectorised over the tokens
(the particle method of :mod:`certified.transformers.particle_taylor`, its field projected onto
the sphere's tangent spaces): ``ẋ_i = P^⊥_{x_i} Σ_h V_h Σ_j softmax_j(⟨B_h x_i, x_j⟩) x_j``,
``P^⊥_x v = v − x⟨x, v⟩``, weighted tokens, several heads, piecewise-constant (V_h, B_h), and
the Euclidean variant (no projection). Cost ~n² d per Taylor term and step, where the generic
Taylor-Lohner engine (:func:`certified.transformers.flow.transformer_flow`) pays ~(n d)³: n = 64,
d = 8 takes seconds instead of being out of reach.

The result is a certified enclosure of every token at the final time (``proofs/particles.md``
§1-§3 and §6: the error carried by the logarithmic norm of the field's Jacobian on the sphere).
No certificate kind replays it: the generic rule ``taylor-lohner`` would replay the whole
(n d)-dimensional Lohner flow, out of reach at this size, so this path is enclosures only
(``certified transformer flow --no-certificate``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from certified.arith.exact import fmpq_to_str
from certified.arith.interval import Interval
from certified.errors import InputError
from certified.transformers.particle_taylor import (
    ParticleEnclosure,
    _Head,
    enclose_particles,
    exact_masses,
)

__all__ = ["sphere_supported", "sphere_taylor_flow"]


def sphere_supported(instance: Any) -> str | None:
    """None when the vectorised method applies to ``instance`` (softmax attention only: no
    W, U, b; not causal); otherwise the reason, one line. Guarantee: exact."""
    if instance.normalisation != "softmax":
        return "the vectorised method needs softmax normalisation"
    if instance.causal:
        return "the vectorised method does not do causal masks"
    if instance.hidden:
        return "the vectorised method needs attention only (no W, U, b)"
    return None


def _pieces(instance: Any) -> list:
    out = []
    for piece in instance.pieces:
        heads = [_Head(Interval.from_exact(B.tolist()), Interval.from_exact(V.tolist()))
                 for V, B in piece.heads]  # fmt: skip
        out.append((piece.duration, heads))
    return out


def sphere_taylor_flow(instance: Any, *, steps: int | None = None, terms: int = 16,
                       tol: float = 1e-15, reuse: int = 2) -> list[ParticleEnclosure]:  # fmt: skip
    """Certified enclosures of the tokens of every measure of ``instance`` at the schedule's
    end (measures do not interact: one flow each). Options as in
    :func:`~certified.transformers.particle_taylor.enclose_particles` (``tol`` bounds each
    step's Lagrange remainder; the defaults aim at widths near the rounding floor; ``reuse``
    steps share one growth-rate bound, particles.md #rate-reuse: 2 is 1.6x faster than 1 at
    n = 64, d = 8, T = 5, width 3.3e-11 instead of 1.4e-11).

    Raises
    ------
    InputError
        The instance is outside the method (:func:`sphere_supported`), or a step could not be
        validated.

    Guarantee: ``result[g].box()`` contains every token of measure g at the final time.
    """
    reason = sphere_supported(instance)
    if reason is not None:
        raise InputError(reason)
    sphere = instance.geometry == "sphere"
    pieces = _pieces(instance)
    out = []
    for X, masses in zip(instance.measures, instance.masses, strict=True):
        exact = Interval.from_exact([[fmpq_to_str(q) for q in row] for row in X])
        Xf = exact.mid()  # doubles; the exact tokens lie within e0 of them (0 for doubles)
        e0 = float(np.max(exact.width_upper()))  # >= max |X - Xf| (Xf in the interval)
        w = exact_masses(None if masses is None else [fmpq_to_str(q) for q in masses], len(X))
        out.append(enclose_particles(Xf, w, pieces, sphere=sphere, steps=steps, terms=terms,
                                     tol=tol, e0=e0, reuse=reuse, adapt=True))  # fmt: skip
    return out
