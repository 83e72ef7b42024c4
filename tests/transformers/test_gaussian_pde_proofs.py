"""The sympy proofs of proofs/gaussian_pde.py run, and a wrong rate is not proved."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import sympy as sp

_PATH = Path(__file__).resolve().parents[2] / "proofs" / "gaussian_pde.py"
_spec = importlib.util.spec_from_file_location("gaussian_pde_proofs", _PATH)
gp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gp)


def test_every_identity_is_proved():
    out = gp.check_all()
    assert set(out) == {"tilt", "continuity", "residual_layer", "one_dimensional", "scalar_v",
                        "diagonal"}  # fmt: skip
    assert all(r == 0 for rs in out.values() for r in rs)


def test_euler_step_is_not_a_residual_layer():
    """The Euler step of the moment ODE misses h^2 M Sigma M^T (theorems.md §9, trap 1)."""
    S, M, h = gp._sym("s", 2), gp._gen("M", 2), gp.h
    G = sp.eye(2) + h * M
    with pytest.raises(AssertionError):
        gp._zero(list(G * S * G.T - (S + h * (M * S + S * M.T))))


def test_wrong_closed_form_is_not_proved():
    a, s0, t, v = sp.symbols("a s0 t v", real=True)
    s = s0 / (1 - v * a * s0 * t)  # the factor 2 is needed
    with pytest.raises(AssertionError):
        gp._zero([sp.diff(s, t) - 2 * (v * s * a) * s])
