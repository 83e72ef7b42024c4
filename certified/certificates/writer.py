"""The one writer of certificate and summary files.

A certificate is serialised once; the exact bytes about to be written are re-checked by the
independent checker (``certified.checker.check_bytes``, after the size limit
``certified.checker.MAX_BYTES``), and only accepted bytes are written: to a temporary file in
the target directory, flushed to disk (``fsync``), then renamed over the target with
``os.replace``. On any failure nothing is written, no temporary file is left behind and an
existing target is untouched. So a file a command leaves on disk is exactly one that
``certified check`` accepts.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from pathlib import Path
from typing import Any

from certified.checker import MAX_BYTES, Verdict, check_bytes
from certified.errors import CertifiedError, InputError

__all__ = [
    "CertificateRejectedError",
    "certificate_bytes",
    "dumps_certificate",
    "write_atomic",
    "write_certificate",
    "write_if_accepted",
]


class CertificateRejectedError(CertifiedError):
    """The certificate was not written: the checker rejected its bytes, or they exceed the
    checker's size limit. ``verdict`` is the checker's verdict (its ``reason`` says why)."""

    def __init__(self, path: str | os.PathLike[str], verdict: Verdict) -> None:
        super().__init__(f"{os.fspath(path)}: certificate not written: {verdict.reason}")
        self.verdict = verdict


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
    elif value is None:  # the leaves of partition trees (hints.partition)
        out.append("null")
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


def _size_rejection(size: int) -> Verdict | None:
    if size <= MAX_BYTES:
        return None
    return Verdict(
        False,
        None,
        f"the certificate is {size} bytes, over the checker's limit of {MAX_BYTES} bytes "
        "(certified.checker.MAX_BYTES): certify fewer points or pieces per file",
    )


def certificate_bytes(cert: dict[str, Any]) -> tuple[bytes, Verdict]:
    """Serialise ``cert`` and check those exact bytes: the size limit first, then the
    independent checker.

    Raises
    ------
    InputError
        The certificate cannot be serialised (see :func:`dumps_certificate`).

    Guarantee: the returned verdict is the checker's on the returned bytes.
    """
    data = dumps_certificate(cert).encode("utf-8")
    rejection = _size_rejection(len(data))
    return data, rejection if rejection is not None else check_bytes(data)


def _require_directory(target: Path, directory: Path) -> None:
    """Raise OutputFileError naming ``directory`` unless it is an existing directory (the
    error of a missing one used to name the internal temporary file instead)."""
    if directory.is_dir():
        return
    from certified.io import OutputFileError

    name = repr(os.fspath(directory))
    what = (
        f"(Not a directory); {name} is not a directory"
        if directory.exists()
        else f"(No such file or directory); the directory {name} does not exist"
    )
    exc = OutputFileError(
        f"{os.fspath(target)}: cannot write {what}: create the directory or choose another path"
    )
    exc.source = os.fspath(target)  # as certified.io names its file errors
    raise exc


def write_atomic(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically: readers see the old file or the complete new one.

    A fresh temporary file in the target directory (``O_EXCL``, mode 0666 less the umask),
    ``fsync``, then ``os.replace``. On any failure (including KeyboardInterrupt) the temporary
    file is removed and an existing ``path`` is untouched.

    Raises
    ------
    OutputFileError
        The directory of ``path`` does not exist or is not a directory (named in the message;
        checked before any temporary file is created).
    OSError
        The directory is not writable, the disk is full, ...

    Guarantee: none (writing); the file holds exactly ``data`` or is unchanged.
    """
    target = Path(path)
    directory = target.parent
    _require_directory(target, directory)
    for _ in range(100):
        tmp = directory / f".{target.name}.{secrets.token_hex(6)}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            break
        except FileExistsError:
            continue
    else:  # pragma: no cover - 100 collisions of 48 random bits
        raise FileExistsError(f"cannot create a temporary file in {directory}")
    try:
        try:
            f = os.fdopen(fd, "wb")
        except BaseException:
            os.close(fd)
            raise
        with f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return target


def write_if_accepted(
    path: str | os.PathLike[str], cert: dict[str, Any]
) -> tuple[Path | None, Verdict]:
    """Serialise ``cert``, re-check the exact bytes (size limit, then the checker) and write
    them atomically (:func:`write_atomic`) only if they are accepted: the CLI commands never
    write a certificate ``certified check`` would reject.

    Returns
    -------
    (pathlib.Path or None, certified.checker.Verdict)
        The path written (None when rejected: nothing written) and the checker's verdict.

    Raises
    ------
    InputError
        The certificate cannot be serialised; nothing is written.
    OSError
        Writing failed; nothing is written.

    Guarantee: a written file holds bytes the checker accepted.
    """
    data, verdict = certificate_bytes(cert)
    return (write_atomic(path, data) if verdict.verified else None), verdict


def write_certificate(path: str | os.PathLike[str], cert: dict[str, Any]) -> Path:
    """Like :func:`write_if_accepted`, but a rejection is an error.

    Raises
    ------
    CertificateRejectedError
        The checker rejected the bytes, or they exceed its size limit; nothing is written.
    InputError
        The certificate cannot be serialised; nothing is written.
    OSError
        Writing failed; nothing is written.

    Guarantee: the file holds exactly :func:`dumps_certificate` of ``cert``, which the checker
    accepted.
    """
    written, verdict = write_if_accepted(path, cert)
    if written is None:
        raise CertificateRejectedError(path, verdict)
    return written
