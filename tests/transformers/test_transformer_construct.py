"""Lemma 3.2 of the measure-to-measure theorem: one constant pull moves every measure into the
open positive orthant (certified enclosures), refused when omega is an atom or d < 3."""

from __future__ import annotations

import math

import numpy as np
import pytest

from certified.errors import InputError
from certified.transformers import token_enclosures
from certified.transformers.construct import orthant_move
from certified.verdict import Outcome


def test_two_measures_move_into_the_orthant():
    rng = np.random.default_rng(0)
    ms = []
    for _ in range(2):
        X = rng.standard_normal((2, 3))
        ms.append((X / np.linalg.norm(X, axis=1, keepdims=True)).tolist())
    r = orthant_move(ms)
    assert r.outcome is Outcome.VERIFIED
    for boxes in token_enclosures(r.instance, r.result):
        assert np.all(boxes.lo > 0)


def test_omega_as_an_atom_and_low_dimension_are_refused():
    # the double just below -1/sqrt(3): on the sphere to 1e-12, and <x, 1> <= -sqrt(3) exactly
    omega = [float(np.nextafter(-1 / math.sqrt(3), -1.0))] * 3
    with pytest.raises(InputError, match="omega"):
        orthant_move([[[1, 0, 0]], [omega]])
    with pytest.raises(InputError, match="d >= 3"):
        orthant_move([[[1, 0]]])
