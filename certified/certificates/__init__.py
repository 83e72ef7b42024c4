"""Certificates, producer side: building and writing the files ``certified.checker`` re-checks.

The format is ``proofs/format.md``. Producers are untrusted: a certificate is worth what the
checker says about it, nothing more.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from certified.certificates.flow import exact_number, flow_certificate, laminar_flow_exact
from certified.errors import InputError
from certified.verdict import Outcome

__all__ = [
    "command_json",
    "dumps_certificate",
    "exact_number",
    "flow_certificate",
    "laminar_flow_exact",
    "print_json",
    "write_certificate",
    "write_if_accepted",
]


def _dump(value: Any, indent: str, out: list[str]) -> None:
    # Arrays of scalars go on one line (a matrix row, a point); everything else is indented,
    # so that a reader can audit the instance row by row.
    if isinstance(value, float):
        raise InputError("certificate: a float is not an exact number; use exact_number()")
    if isinstance(value, dict):
        if not value:
            out.append("{}")
            return
        inner = indent + "  "
        out.append("{\n")
        for k, (key, item) in enumerate(value.items()):
            if not isinstance(key, str):
                raise InputError(f"certificate: key {key!r} is not a string")
            out.append(f"{inner}{json.dumps(key)}: ")
            _dump(item, inner, out)
            out.append(",\n" if k < len(value) - 1 else "\n")
        out.append(indent + "}")
    elif isinstance(value, list) and any(isinstance(v, (list, dict)) for v in value):
        inner = indent + "  "
        out.append("[\n")
        for k, item in enumerate(value):
            out.append(inner)
            _dump(item, inner, out)
            out.append(",\n" if k < len(value) - 1 else "\n")
        out.append(indent + "]")
    elif isinstance(value, list) and all(type(v) is str or type(v) is int for v in value):
        out.append(json.dumps(value, ensure_ascii=True))  # "[a, b]": as the loop below writes
    elif isinstance(value, list):
        out.append("[")
        for k, item in enumerate(value):
            _dump(item, indent, out)
            if k < len(value) - 1:
                out.append(", ")
        out.append("]")
    elif isinstance(value, bool) or not isinstance(value, (int, str)):
        raise InputError(f"certificate: {type(value).__name__} is not a JSON integer or string")
    else:
        out.append(json.dumps(value, ensure_ascii=True))


def dumps_certificate(cert: dict[str, Any]) -> str:
    """The text of a certificate file: UTF-8 (in fact ASCII) JSON, one matrix row per line.

    Raises
    ------
    InputError
        The certificate holds a float or another value that is not a JSON integer, string,
        array or object.

    Guarantee: exact (``json.loads`` of the text gives back ``cert``).
    """
    out: list[str] = []
    _dump(cert, "", out)
    out.append("\n")
    return "".join(out)


def write_certificate(path: str | os.PathLike[str], cert: dict[str, Any]) -> Path:
    """Write a certificate atomically: a temporary file in the target directory, then
    ``os.replace``. On any failure nothing is left behind and an existing file is untouched.

    Returns
    -------
    pathlib.Path
        The path written.

    Raises
    ------
    InputError
        The certificate cannot be serialised (see :func:`dumps_certificate`).
    OSError
        The directory does not exist or is not writable, the disk is full, ...

    Guarantee: none (writing); the file holds exactly :func:`dumps_certificate` of ``cert``.
    """
    target = Path(path)
    text = dumps_certificate(cert)  # serialise first: a bad certificate writes nothing
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; a certificate is meant to be shared
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return target


def write_if_accepted(
    path: str | os.PathLike[str], cert: dict[str, Any]
) -> tuple[Path | None, Any]:
    """Re-check ``cert`` with the independent checker and write it (atomically, see
    :func:`write_certificate`) only if it is accepted: the CLI commands never write a
    certificate the checker would reject.

    Returns
    -------
    (pathlib.Path or None, certified.checker.Verdict)
        The path written (None when rejected) and the checker's verdict.

    Guarantee: a written file holds a certificate the checker accepted.
    """
    from certified.checker import check_certificate

    check = check_certificate(cert)
    return (write_certificate(path, cert) if check.verified else None), check


def command_json(
    command: str,
    verdict: Outcome | str,
    path: str | os.PathLike[str] | None,
    seconds: float,
    **fields: Any,
) -> dict[str, Any]:
    """The JSON object a command prints with ``--json``: the keys every command shares
    (``command``, ``verdict``, ``certificate``, ``seconds``; the CLI contract of design.md), then
    the command's own ``fields``, in order. ``verdict`` is an :class:`Outcome` or its string
    (anything else is a ValueError); the JSON holds the contract string."""
    return {
        "command": command,
        "verdict": Outcome(verdict).value,
        "certificate": None if path is None else str(path),
        "seconds": seconds,
        **fields,
    }


def print_json(obj: Any, stream: Any = None) -> None:
    """One JSON object on one line (standard output by default)."""
    out = sys.stdout if stream is None else stream
    json.dump(obj, out)
    print(file=out)
