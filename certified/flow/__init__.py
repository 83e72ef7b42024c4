"""Certified flows: one entry point (:func:`enclose_flow`) for every field, results
(FlowEnclosure, FlowStatus), initial sets, saved times and step policies, C^1 enclosures and
Lipschitz bounds, and the piecewise-affine ReLU engines.

Only light modules load here; the engines load when first used.
"""

from certified.flow.api import NoCertificateError, certify_flow, enclose_flow, flow_certificate_for
from certified.flow.lipschitz import flow_jacobian, norm2_upper
from certified.flow.options import Balls, SaveAt, StepPolicy
from certified.flow.relu import (
    DEFAULT_PREC,
    FlowLipschitzBound,
    NotLaminarError,
    gronwall_lipschitz,
    laminar_flow_exact,
    relu_flow,
    relu_flow_float64,
    relu_flow_jacobian,
)
from certified.flow.result import FlowEnclosure, FlowStatus

__all__ = [
    "DEFAULT_PREC",
    "Balls",
    "FlowEnclosure",
    "FlowLipschitzBound",
    "FlowStatus",
    "NoCertificateError",
    "NotLaminarError",
    "SaveAt",
    "StepPolicy",
    "certify_flow",
    "enclose_flow",
    "flow_certificate_for",
    "flow_jacobian",
    "gronwall_lipschitz",
    "laminar_flow_exact",
    "norm2_upper",
    "relu_flow",
    "relu_flow_float64",
    "relu_flow_jacobian",
]
