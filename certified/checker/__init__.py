"""The trusted kernel: re-checks a certificate file from its data alone.

It imports only the standard library, python-flint and itself (a test enforces it), so the
directory runs when copied out. Format: ``proofs/format.md``; meaning of VERIFIED:
``proofs/semantics.md``; soundness of each rule: ``proofs/checker_soundness.md``. Usage:
``python -m certified.checker FILE...`` (or ``certified check FILE...``), or ``check_file(path)``
-> ``Verdict(verified, kind, reason)``. It fails closed: anything it does not understand, every
resource limit exceeded and every unexpected exception is a rejection, never an acceptance."""

from __future__ import annotations

import contextlib
import gc
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TextIO

from ._cube_rule import check_cube_v1
from ._entropic_rule import check_entropic_v1
from ._gradient_rule import check_gradient_v1, check_training_v1
from ._interpolation_rule import check_interpolation_v1
from ._lipschitz_domain_rule import check_lipschitz_domain_v1
from ._lipschitz_rule import check_lipschitz_v1
from ._parse import (
    MAX_BYTES,
    MAX_DEPTH,
    MAX_DIGITS,
    MAX_EXPONENT,
    MAX_HEIGHT_BITS,
    MAX_REPLAY_COST,
    MAX_TOKENS,
    Rejected,
    fields,
    metered,
    show,
)
from ._reader import load_json_from
from ._separation_rule import MAX_SEPARATION_COST, check_separation_v1, gradient_coordinate
from ._stack_rule import check_stack_v1, check_stack_v2
from ._transformer_rule import (
    MAX_MATCH_OPS,
    check_transformer_cluster_v1,
    check_transformer_match_v1,
)
from ._wasserstein_rule import check_wasserstein_v1
from .flow import check_flow_v1

__all__ = ["KINDS", "MAX_BYTES", "MAX_DEPTH", "MAX_DIGITS", "MAX_EXPONENT", "MAX_HEIGHT_BITS",
           "MAX_MATCH_OPS", "MAX_REPLAY_COST", "MAX_SEPARATION_COST", "MAX_TOKENS", "Verdict",
           "check_bytes", "check_certificate", "check_file", "check_paths", "gc_paused",
           "gradient_coordinate"]  # fmt: skip

KINDS = {  # the known certificate kinds and, for each, the checker of each known version
    "flow": {1: check_flow_v1},
    "separation": {1: check_separation_v1},
    "lipschitz": {1: check_lipschitz_v1},
    "lipschitz-domain": {1: check_lipschitz_domain_v1},
    "wasserstein": {1: check_wasserstein_v1},
    "interpolation": {1: check_interpolation_v1},
    "entropic": {1: check_entropic_v1},
    "transport-to-cube": {1: check_cube_v1},
    "gradient": {1: check_gradient_v1},
    "training": {1: check_training_v1},
    "transformer-cluster": {1: check_transformer_cluster_v1},
    "transformer-match": {1: check_transformer_match_v1},
    "stack": {1: check_stack_v1, 2: check_stack_v2},
}


@dataclass(frozen=True)
class Verdict:
    """Outcome of checking one certificate: ``verified`` (well formed, claim replayed), ``kind``
    (None if unreadable), ``reason`` (why it was rejected, or a summary of what was verified).
    Guarantee: ``verified`` implies the statement of ``proofs/semantics.md`` for ``kind``."""

    verified: bool
    kind: str | None
    reason: str

    def __post_init__(self) -> None:
        if not isinstance(self.verified, bool) or not isinstance(self.reason, str):
            raise TypeError("Verdict(verified: bool, kind: str | None, reason: str)")
        if self.verified and self.kind not in KINDS:
            raise ValueError("a verified certificate has a known kind")
        if not self.verified and not self.reason:
            raise ValueError("a rejection has a reason")


def _check(obj: Any) -> tuple[str, str]:
    fields(obj, "certificate", ("kind", "version", "instance", "claim", "hints"))
    kind, version = obj["kind"], obj["version"]
    if not isinstance(kind, str) or kind not in KINDS:
        raise Rejected(f"kind: unknown certificate kind {show(kind)}")
    if isinstance(version, bool) or not isinstance(version, int) or version not in KINDS[kind]:
        known = ", ".join(str(v) for v in KINDS[kind])
        raise Rejected(f"version: {show(version)} is not a known version of {kind} ({known})")
    return kind, KINDS[kind][version](obj["instance"], obj["claim"], obj["hints"])


def _kind_of(obj: Any) -> str | None:
    kind = obj.get("kind") if isinstance(obj, dict) else None
    return kind if isinstance(kind, str) and kind in KINDS else None


def check_certificate(obj: Any, size: int = MAX_BYTES) -> Verdict:
    """Check a certificate given as a parsed JSON value (dicts, lists, ints, strings), metered as
    a file of ``size`` bytes. Never raises (but KeyboardInterrupt and the like): every failure
    is a rejection. Guarantee: ``verified`` implies the statement of ``proofs/semantics.md``."""
    try:
        with gc_paused(), metered(size):  # one meter a check (proofs/format.md section 1)
            kind, summary = _check(obj)
        return Verdict(True, kind, summary)
    except Rejected as exc:
        return Verdict(False, _kind_of(obj), str(exc) or "rejected")
    except Exception as exc:  # fail closed on anything unforeseen (MemoryError, RecursionError)
        return Verdict(False, _kind_of(obj), f"internal error: {type(exc).__name__}: {show(exc)}")


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection inside the block (a certificate holds millions of acyclic
    objects: the collector's passes over them are pure overhead)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def check_bytes(data: bytes) -> Verdict:
    """Check the contents of a certificate file (strict JSON, ``proofs/format.md``).
    Guarantee: ``verified`` implies the statement of ``proofs/semantics.md`` for the kind."""
    return _check_held([data])


def _check_held(holder: list) -> Verdict:
    """``check_bytes(holder.pop())``; the bytes are dropped once decoded (memory: the file's
    bytes, its text and its parsed values are never all alive at once)."""
    size = len(holder[0])
    with gc_paused():
        try:
            obj = load_json_from(holder)
        except Rejected as exc:
            return Verdict(False, None, str(exc))
        except Exception as exc:
            return Verdict(False, None, f"internal error: {type(exc).__name__}: {show(exc)}")
        return check_certificate(obj, size)


def check_file(path: str | os.PathLike[str]) -> Verdict:
    """Read at most ``MAX_BYTES + 1`` bytes of ``path`` and check them. Raises OSError when the
    file cannot be read (an I/O error, not a verdict).
    Guarantee: ``verified`` implies the statement of ``proofs/semantics.md`` for the kind."""
    with open(path, "rb") as f:
        holder = [f.read(MAX_BYTES + 1)]
    return _check_held(holder)


_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F)}


def _one_line(text: str) -> str:
    """``text`` as printable ASCII on one line (escapes for control and non-ASCII chars)."""
    return text.encode("ascii", "backslashreplace").decode("ascii").translate(_CONTROL)


def check_paths(paths: list[str], out: TextIO, check: Callable[..., Verdict] = check_file) -> int:
    """Check each file with ``check`` (OSError: unreadable), print its line on ``out`` (format:
    ``_cli.py``), return the exit status. On a terminal, stderr shows the file being checked."""
    status, tty = 0, sys.stderr.isatty()
    for path in paths:
        if tty:
            print(f"checking {_one_line(path)} ...", file=sys.stderr, flush=True)
        try:
            verdict = check(path)
        except OSError as exc:
            reason = _one_line(exc.strerror or type(exc).__name__)
            print(f"REJECTED {_one_line(path)}: I/O error: {reason}", file=out, flush=True)
            status = 2
            continue
        if verdict.verified:
            print(f"VERIFIED {verdict.kind} {_one_line(path)}", file=out, flush=True)
        else:
            print(f"REJECTED {_one_line(path)}: {_one_line(verdict.reason)}", file=out, flush=True)
            status = max(status, 1)
    return status
