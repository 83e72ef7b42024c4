"""JSON Schemas of the input files and of the certificate envelope (draft 2020-12), shipped
with the package and shown on the documentation's format pages. They describe structure only:
the readers of :mod:`certified.io` (and the checker, for certificates) also check what a schema
cannot say (shapes agreeing, weights summing to exactly 1, exact number syntax)."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

__all__ = ["NAMES", "schema"]

NAMES = ("schedule", "points", "dataset", "boxes", "measure", "attention-instance", "field",
         "tokens-instance", "sweep-spec", "certificate", "stack-model")  # fmt: skip


def schema(name: str) -> dict[str, Any]:
    """The JSON Schema of file kind ``name`` (one of :data:`NAMES`)."""
    if name not in NAMES:
        raise KeyError(f"no schema {name!r}; known: {', '.join(NAMES)}")
    return json.loads(resources.files(__package__).joinpath(f"{name}.json").read_text("utf-8"))
