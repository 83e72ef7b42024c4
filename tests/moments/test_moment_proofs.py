"""The sympy proofs of proofs/moment_matching.py run, and wrong variants do not pass."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import sympy as sp

_PATH = Path(__file__).resolve().parents[2] / "proofs" / "moment_matching.py"
_spec = importlib.util.spec_from_file_location("moment_matching", _PATH)
mm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mm)


def test_check_all_proves_every_identity():
    counts = mm.check_all()
    assert counts == {
        "moment_identity": 2,
        "moment_identity_discrete": 4,
        "log_derivative": 1,
        "cumulant_expansion": 2 * mm.ORDER,
        "cumulants_of_a_finite_variable": 12,
        "gradient_form": 6,
    }


def test_each_proof_returns_zero_residuals():
    for fn in (
        mm.moment_identity,
        mm.moment_identity_discrete,
        mm.cumulant_expansion,
        mm.gradient_form,
    ):
        assert all(r == 0 for r in fn())
    assert mm.log_derivative() == 0


def test_wrong_moment_identity_does_not_simplify_to_zero():
    b = mm.b
    n = 2
    y = sp.symbols("y1:3", real=True)
    w = sp.symbols("w1:3", positive=True)
    Z = sum(wi * sp.exp(b * yi) for wi, yi in zip(w, y, strict=True))

    def tilted(k):
        return sum(wi * yi**k * sp.exp(b * yi) for wi, yi in zip(w, y, strict=True)) / Z

    assert n == 2
    for k in (1, 2):
        plus = sp.simplify(sp.diff(tilted(k), b) - (tilted(k + 1) + tilted(k) * tilted(1)))
        shifted = sp.simplify(sp.diff(tilted(k), b) - (tilted(k + 1) - tilted(k - 1) * tilted(1)))
        assert plus != 0 and shifted != 0


def test_wrong_cumulant_index_does_not_match():
    order = 5
    m = mm._moments(order)
    bell = mm.bell_cumulants(m, order)
    rec = mm.recursion_cumulants(m, order)
    assert all(sp.expand(bell[j] - rec[j]) == 0 for j in range(order))
    assert any(sp.expand(bell[j + 1] - rec[j]) != 0 for j in range(order - 1))
    # kappa_2 is the variance, kappa_3 the third central moment
    assert sp.expand(bell[1] - (m[2] - m[1] ** 2)) == 0
    assert sp.expand(bell[2] - (m[3] - 3 * m[1] * m[2] + 2 * m[1] ** 3)) == 0
