"""One outcome type for every family: ``Outcome`` (VERIFIED / REFUTED / UNDECIDED)."""

from __future__ import annotations

import json

import pytest

from certified.attention.lipschitz import LipschitzVerdict
from certified.certificates import command_json
from certified.interpolation.classification import ClassificationVerdict
from certified.interpolation.semi_autonomous import SemiAutonomousVerdict
from certified.interpolation.verify import InterpolationVerdict
from certified.moments.separation import SeparationResult, SeparationStatus
from certified.verdict import Outcome


def test_members_are_the_contract_strings():
    assert [o.value for o in Outcome] == ["VERIFIED", "REFUTED", "UNDECIDED"]
    for o in Outcome:
        assert o == o.value and str(o) == o.value and f"{o}" == o.value
        assert Outcome(o.value) is o
        assert json.dumps(o) == f'"{o.value}"'
    assert Outcome.VERIFIED.decided and Outcome.REFUTED.decided
    assert not Outcome.UNDECIDED.decided
    for bad in ("verified", "REJECTED", ""):
        with pytest.raises(ValueError):
            Outcome(bad)


def _verdicts(outcome):
    return [
        LipschitzVerdict("H1", outcome, None, None, None, None, ""),
        ClassificationVerdict(outcome, True, None, None, 0, 0),
        InterpolationVerdict(outcome, True, None, 0, 0, "laminar-exact"),
        SemiAutonomousVerdict(outcome, 2, 1),
    ]


@pytest.mark.parametrize("outcome", list(Outcome))
def test_family_verdicts_hold_an_outcome(outcome):
    for v in _verdicts(outcome.value):  # the contract string is normalised
        assert v.verdict is outcome and v.verdict == outcome.value
    for v in _verdicts(outcome):
        assert v.verdict is outcome


def test_family_verdicts_refuse_an_unknown_outcome():
    with pytest.raises(ValueError):
        _verdicts("PROBABLY")


def test_separation_status_maps_to_the_shared_outcome():
    expected = {
        SeparationStatus.SEPARATED: Outcome.VERIFIED,
        SeparationStatus.EQUAL: Outcome.REFUTED,
        SeparationStatus.UNDECIDED: Outcome.UNDECIDED,
    }
    for status, outcome in expected.items():
        assert SeparationResult(status, None, "").verdict is outcome


def test_command_json_holds_the_contract_string():
    for verdict in (Outcome.REFUTED, "REFUTED"):
        out = command_json("x", verdict, None, 0.0)
        assert type(out["verdict"]) is str and out["verdict"] == "REFUTED"
    with pytest.raises(ValueError):
        command_json("x", "OK", None, 0.0)
