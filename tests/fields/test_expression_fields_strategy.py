"""The public strategy certified.strategies.expression_fields: valid graphs over every
operation, tame flows that the engine certifies, certificates the checker accepts, and
enclosures containing an independent high-precision reference (tests/flow/field_reference.py)."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings

from certified.checker import check_certificate
from certified.checker.taylor import OPERATIONS, parse_field
from certified.flow import FlowStatus, enclose_flow, flow_certificate_for
from certified.strategies import expression_fields

_SLOW = [HealthCheck.too_slow, HealthCheck.data_too_large]


@settings(max_examples=60, deadline=None, suppress_health_check=_SLOW)
@given(expression_fields(d=(1, 3), depth=4))
def test_every_generated_field_is_valid_and_certified(problem):
    parse_field(problem.field.graph)  # the checker's parser accepts it
    X = np.full((1, problem.dimension), 0.25)
    res = enclose_flow(problem, X)
    assert res.status is FlowStatus.SUCCESS, res.message  # tame by construction


def test_the_strategy_reaches_every_operation():
    seen: set[str] = set()

    @settings(max_examples=150, deadline=None, suppress_health_check=_SLOW)
    @given(expression_fields(d=(1, 3), depth=5, parameters=(1, 2)))
    def collect(problem):
        seen.update(node[0] for node in problem.field.graph["nodes"])

    collect()
    # "sum" is written by the neural builders, not by the random recipes
    assert set(OPERATIONS) - {"sum"} <= seen


@settings(max_examples=8, deadline=None, suppress_health_check=_SLOW)
@given(expression_fields(d=(1, 2), depth=3))
def test_certificates_of_generated_fields_are_verified(problem):
    X = np.full((1, problem.dimension), -0.5)
    res = enclose_flow(problem, X)
    cert = flow_certificate_for(problem, X, res)
    verdict = check_certificate(cert)
    assert verdict.verified, verdict.reason
