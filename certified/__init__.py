"""certified: rigorous numerics for neural ODEs and transformers as flow maps.

The public names below are loaded lazily (PEP 562): ``import certified.checker`` must not pull
in numpy, numba or the arithmetic layer, because the trusted checker is independent of the
rest of the package (see ``proofs/checker_soundness.md``). ``from certified import Interval``
and ``certified.Interval`` work as before; the first access imports the defining module.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"


def _is_the_command() -> bool:
    """The process runs ``certified`` (the console script) or ``python -m certified.cli``."""
    import os
    import sys

    argv = getattr(sys, "orig_argv", sys.argv)
    return os.path.basename(sys.argv[0]) == "certified" or "certified.cli" in argv[1:3]


if _is_the_command():  # signals during the command's imports give one line (_loading.py)
    from certified import _loading

    _loading.install()

# public name -> module that defines it (a new re-export goes here and in __all__)
_LAZY = {
    "Interval": "certified.arith",
    "Tri": "certified.arith",
    "TriArray": "certified.arith",
    "interval": "certified.arith",
    "CertifiedError": "certified.errors",
    "DomainError": "certified.errors",
    "EmptyIntervalError": "certified.errors",
    "InputError": "certified.errors",
    "NonFiniteError": "certified.errors",
    "NumberFormatError": "certified.errors",
    "PrecisionError": "certified.errors",
    "RangeOverflowError": "certified.errors",
    "ShapeError": "certified.errors",
    "Activation": "certified.models",
    "Piece": "certified.models",
    "Schedule": "certified.models",
    "FlowEnclosure": "certified.flow.result",
    "FlowStatus": "certified.flow.result",
    "enclose_flow": "certified.flow.api",
    "flow_certificate_for": "certified.flow.api",
    "certify_flow": "certified.flow.api",
    "NoCertificateError": "certified.errors",
    "flow_jacobian": "certified.flow",
    "SaveAt": "certified.flow",
    "StepPolicy": "certified.flow",
    "Balls": "certified.flow",
    "VectorField": "certified.fields",
    "PiecewiseField": "certified.fields",
    "field": "certified.fields",
    "check_file": "certified.checker",
    "check_certificate": "certified.checker",
    "Attention": "certified.attention",
    "Head": "certified.attention",
    "AttentionInstance": "certified.attention",
    "LipschitzVerdict": "certified.attention",
    "attention_map": "certified.attention",
    "attention_jacobian": "certified.attention",
    "attention_measure_map": "certified.attention",
    "spectral_norm_bounds": "certified.attention",
    "check_attention_hypothesis": "certified.attention",
    "check_h3": "certified.attention",
    "check_flow_gronwall": "certified.attention",
    "read_attention_instance": "certified.attention",
    "sqrt_n_family": "certified.attention",
    "search_lipschitz_lower": "certified.attention",
    "SeparationResult": "certified.moments",
    "SeparationStatus": "certified.moments",
    "Outcome": "certified.verdict",
    "SeparationWitness": "certified.moments",
    "separation_witness": "certified.moments",
    "check_moment_identity": "certified.moments",
    "check_cumulants": "certified.moments",
    "check_gradient_identity": "certified.moments",
    "log_partition_gradient": "certified.moments",
    "tilted_moments": "certified.moments",
    "discrete_measure": "certified.moments",
    "MissingDependencyError": "certified.errors",
    "Measure": "certified.transport",
    "WassersteinEnclosure": "certified.transport",
    "GaussianW2Enclosure": "certified.transport",
    "wasserstein": "certified.transport",
    "gaussian_w2": "certified.transport",
    "wasserstein_certificate": "certified.transport",
    "Interpolation": "certified.interpolation",
    "InterpolationVerdict": "certified.interpolation",
    "construct_interpolation": "certified.interpolation",
    "verify_interpolation": "certified.interpolation",
    "export_float64": "certified.interpolation",
    "construct_classification": "certified.interpolation.classification",
    "verify_classification": "certified.interpolation.classification",
    "check_semi_autonomous": "certified.interpolation.semi_autonomous",
    "construct_autonomous": "certified.interpolation.autonomous",
    "separation_probability": "certified.interpolation.autonomous",
}

__all__ = [
    "__version__",
    "Interval",
    "Tri",
    "TriArray",
    "interval",
    "CertifiedError",
    "DomainError",
    "EmptyIntervalError",
    "InputError",
    "NonFiniteError",
    "NumberFormatError",
    "PrecisionError",
    "RangeOverflowError",
    "ShapeError",
    "Activation",
    "Piece",
    "Schedule",
    "FlowEnclosure",
    "FlowStatus",
    "enclose_flow",
    "flow_certificate_for",
    "certify_flow",
    "NoCertificateError",
    "flow_jacobian",
    "SaveAt",
    "StepPolicy",
    "Balls",
    "VectorField",
    "PiecewiseField",
    "field",
    "check_file",
    "check_certificate",
    "Attention",
    "Head",
    "AttentionInstance",
    "LipschitzVerdict",
    "attention_map",
    "attention_jacobian",
    "attention_measure_map",
    "spectral_norm_bounds",
    "check_attention_hypothesis",
    "check_h3",
    "check_flow_gronwall",
    "read_attention_instance",
    "sqrt_n_family",
    "search_lipschitz_lower",
    "SeparationResult",
    "SeparationStatus",
    "Outcome",
    "SeparationWitness",
    "separation_witness",
    "check_moment_identity",
    "check_cumulants",
    "check_gradient_identity",
    "log_partition_gradient",
    "tilted_moments",
    "discrete_measure",
    "MissingDependencyError",
    "Measure",
    "WassersteinEnclosure",
    "GaussianW2Enclosure",
    "wasserstein",
    "gaussian_w2",
    "wasserstein_certificate",
    "Interpolation",
    "InterpolationVerdict",
    "construct_interpolation",
    "verify_interpolation",
    "export_float64",
    "construct_classification",
    "verify_classification",
    "check_semi_autonomous",
    "construct_autonomous",
    "separation_probability",
]

if TYPE_CHECKING:  # static analysers see the eager imports
    from certified.arith import Interval, Tri, TriArray, interval
    from certified.checker import check_certificate, check_file
    from certified.errors import (
        CertifiedError,
        DomainError,
        EmptyIntervalError,
        InputError,
        NonFiniteError,
        NumberFormatError,
        PrecisionError,
        RangeOverflowError,
        ShapeError,
    )
    from certified.flow.api import enclose_flow, flow_certificate_for
    from certified.flow.result import FlowEnclosure, FlowStatus
    from certified.models import Activation, Piece, Schedule
    from certified.moments import (
        SeparationResult,
        SeparationStatus,
        SeparationWitness,
        check_cumulants,
        check_gradient_identity,
        check_moment_identity,
        discrete_measure,
        log_partition_gradient,
        separation_witness,
        tilted_moments,
    )
    from certified.transport import (
        GaussianW2Enclosure,
        Measure,
        WassersteinEnclosure,
        gaussian_w2,
        wasserstein,
        wasserstein_certificate,
    )


def __getattr__(name: str) -> Any:
    if name == "sweep":  # the campaign module is callable: certified.sweep(spec, out)
        return importlib.import_module("certified.sweep")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'certified' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later accesses skip this hook
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
