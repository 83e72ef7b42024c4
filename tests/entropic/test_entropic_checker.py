"""The ``entropic`` checker rule: honest certificates pass; false claims, tampered hints,
malformed fields and oversized replays are rejected."""

from __future__ import annotations

import copy

import pytest
from flint import fmpq

from certified.certificates import exact_number
from certified.checker import _parse, check_certificate
from certified.entropic import entropic_ot, sinkhorn_divergence
from certified.entropic.certificate import entropic_certificate
from certified.transport import Measure

MU = Measure([["1/3", 0], [1, 1], [2, "-1/2"]], ["1/2", "1/4", "1/4"])
NU = Measure([[0, 0], [1, 2], ["3/2", "1/7"], [-1, 1]], ["1/3", "1/6", "1/4", "1/4"])


@pytest.fixture(scope="module")
def ot_cert():
    return entropic_certificate(entropic_ot(MU, NU, "1/3"))


@pytest.fixture(scope="module")
def div_cert():
    return entropic_certificate(sinkhorn_divergence(MU, NU, "1/3", "3/2"))


def _num(x):
    return fmpq(*map(int, x.split("/"))) if "/" in x else None


def _mutated(cert, edit):
    c = copy.deepcopy(cert)
    edit(c)
    return check_certificate(c)


def test_honest_certificates_verify(ot_cert, div_cert):
    for cert in (ot_cert, div_cert):
        v = check_certificate(cert)
        assert v.verified and v.kind == "entropic", v.reason


def _shift(cert, key, delta):
    from certified.arith.exact import to_fmpq

    cert["claim"][key] = exact_number(to_fmpq(cert["claim"][key]) + delta)


@pytest.mark.parametrize("which", ["ot", "div"])
def test_claims_beyond_the_bounds_are_rejected(ot_cert, div_cert, which):
    cert = ot_cert if which == "ot" else div_cert
    eps = fmpq(1, 10**8)
    v = _mutated(cert, lambda c: _shift(c, "lower", eps))
    assert not v.verified and "claim.lower" in v.reason
    v = _mutated(cert, lambda c: _shift(c, "upper", -eps))
    assert not v.verified and "claim.upper" in v.reason
    # loosening a claim keeps it valid
    assert _mutated(cert, lambda c: _shift(c, "lower", -eps)).verified


def test_tampered_potentials_break_the_claim(ot_cert):
    def edit(c):
        c["hints"]["potentials"][0]["f"][0] = "3"

    assert not _mutated(ot_cert, edit).verified


def test_too_small_scale_is_rejected(ot_cert):
    def edit(c):
        c["hints"]["potentials"][0]["scale"] = "1/2"

    v = _mutated(ot_cert, edit)
    assert not v.verified and "scale" in v.reason


def test_instance_changes_are_caught(ot_cert):
    def gamma(c):
        c["instance"]["gamma"] = "1/4"

    def weights(c):
        c["instance"]["mu"]["weights"] = ["1/2", "1/2", "1/4"]

    def quantity(c):
        c["instance"]["quantity"] = "divergence"

    def bad_quantity(c):
        c["instance"]["quantity"] = True

    def gamma_zero(c):
        c["instance"]["gamma"] = 0

    def extra(c):
        c["hints"]["extra"] = 1

    def length(c):
        c["hints"]["potentials"][0]["g"] = c["hints"]["potentials"][0]["g"][:-1]

    def huge(c):
        c["hints"]["potentials"][0]["f"][0] = "1*2^60"

    for edit in (gamma, weights, quantity, bad_quantity, gamma_zero, extra, length, huge):
        assert not _mutated(ot_cert, edit).verified, edit.__name__


def test_replay_budget(ot_cert, monkeypatch):
    monkeypatch.setattr(_parse, "MAX_REPLAY_COST", 10)
    v = check_certificate(ot_cert)
    assert not v.verified and "resource limit" in v.reason
