"""Certified flows: results (FlowEnclosure, FlowStatus) and the piecewise-affine ReLU engine."""

from certified.flow._smooth_jacobian import smooth_flow_jacobian
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
    "FlowEnclosure",
    "FlowLipschitzBound",
    "FlowStatus",
    "NotLaminarError",
    "gronwall_lipschitz",
    "laminar_flow_exact",
    "relu_flow",
    "relu_flow_float64",
    "relu_flow_jacobian",
    "smooth_flow_jacobian",
]
