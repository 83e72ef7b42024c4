"""Certificates, producer side: building and writing the files ``certified.checker`` re-checks.

The format is ``proofs/format.md``. Producers are untrusted: a certificate is worth what the
checker says about it, nothing more. Every file goes through one writer
(``certified/certificates/writer.py``): it serialises, re-checks the exact bytes with the
checker (size limit included) and only then writes them atomically.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from certified.certificates.flow import exact_number, flow_certificate, laminar_flow_exact
from certified.certificates.writer import (
    CertificateRejectedError,
    certificate_bytes,
    dumps_certificate,
    write_atomic,
    write_certificate,
    write_if_accepted,
)
from certified.verdict import Outcome

__all__ = [
    "CertificateRejectedError",
    "certificate_bytes",
    "command_json",
    "dumps_certificate",
    "exact_number",
    "flow_certificate",
    "laminar_flow_exact",
    "measure_pair_scope",
    "print_json",
    "write_atomic",
    "write_certificate",
    "write_if_accepted",
]


def command_json(
    command: str,
    verdict: Outcome | str,
    path: str | os.PathLike[str] | None,
    seconds: float,
    *,
    scope: str | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """The JSON object a command prints with ``--json``: the keys every command shares
    (``command``, ``verdict``, ``certificate``, ``seconds``; the CLI contract of design.md),
    ``scope`` (what the verdict is about: "at the 100 points of x.csv, at t = 1", "for this
    pair of measures", "over (B_R)^n"; the docs list every command's), then the command's own
    ``fields``, in order. ``verdict`` is an :class:`Outcome` or its string (anything else is a
    ValueError); the JSON holds the contract string."""
    head = {
        "command": command,
        "verdict": Outcome(verdict).value,
        "certificate": None if path is None else str(path),
        "seconds": seconds,
    }
    if scope is not None:
        head["scope"] = scope
    return {**head, **fields}


def measure_pair_scope(args: Any, gamma: Any = None) -> str:
    """The scope of a verdict about two measure files (``--mu``, ``--nu``, ``--normalize``;
    ``gamma``: this regularisation only)."""
    rescaled = (
        " (weights divided by their exact sums: --normalize)"
        if getattr(args, "normalize", False)
        else ""
    )
    at = "" if gamma is None else f", at gamma = {gamma} only"
    return f"the pair of measures {args.mu}, {args.nu}{rescaled}{at}"


def print_json(obj: Any, stream: Any = None) -> None:
    """One JSON object on one line (standard output by default)."""
    out = sys.stdout if stream is None else stream
    json.dump(obj, out)
    print(file=out)
