"""Training as a flow (issue 21, proofs/training.md): certified gradients of neural-ODE losses,
certified descent, and certified counts of conservation laws.

Public names load their modules when first used (the package stays light to import).
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "GradientEnclosure": "certified.training.gradient",
    "NotDifferentiableError": "certified.training.gradient",
    "certified_gradient": "certified.training.gradient",
    "DescentTrace": "certified.training.descent",
    "certified_descent": "certified.training.descent",
    "ConservationCount": "certified.training.conservation",
    "architecture": "certified.training.conservation",
    "count_laws": "certified.training.conservation",
    "LawsAlongFlow": "certified.training.gradient_flow",
    "laws_along_gradient_flow": "certified.training.gradient_flow",
    "gradient_certificate": "certified.training.certificate",
    "training_certificate": "certified.training.certificate",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'certified.training' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
