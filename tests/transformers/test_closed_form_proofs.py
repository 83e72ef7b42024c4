"""The sympy proofs of proofs/transformer_closed_forms.py run, and wrong variants do not pass."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import sympy as sp

_PATH = Path(__file__).resolve().parents[2] / "proofs" / "transformer_closed_forms.py"
_spec = importlib.util.spec_from_file_location("transformer_closed_forms", _PATH)
cf = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cf)


def test_every_closed_form_is_proved():
    out = cf.check_all()
    assert set(out) == {
        "constant_pull", "gated_pull", "barycentre_flow", "equiangular_normalised",
        "equiangular_unnormalised", "equiangular_explicit_n4",
        "equiangular_explicit_n3_unnormalised",
    }  # fmt: skip
    assert all(r == 0 for rs in out.values() for r in rs)


def test_wrong_equiangular_rate_is_not_proved():
    beta, rho = sp.symbols("beta rho", real=True)
    wrong = (
        2 * sp.exp(beta * rho) * (1 - rho) * (1 + 3 * rho) / (sp.exp(beta) + 4 * sp.exp(beta * rho))
    )
    right = (
        2 * sp.exp(beta * rho) * (1 - rho) * (1 + 4 * rho) / (sp.exp(beta) + 4 * sp.exp(beta * rho))
    )
    assert sp.simplify(wrong - right) != 0
    with pytest.raises(AssertionError):
        cf._zero([wrong - right])


def test_wrong_gate_constant_is_not_proved():
    c, s, s0 = cf.c, cf.s, cf.s0
    B_wrong = 1 / (2 * (1 + c))  # the sign of the printed B matters
    T = (1 / (1 - c**2)) * sp.log((s - c) / (s0 - c)) - B_wrong * sp.log((1 - s) / (1 - s0))
    T += -1 / (2 * (1 + c)) * sp.log((1 + s) / (1 + s0))
    with pytest.raises(AssertionError):
        cf._zero([sp.together(sp.diff(T, s) - 1 / ((s - c) * (1 - s**2)))])
