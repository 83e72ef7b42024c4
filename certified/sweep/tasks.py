"""The work of one Dask task: a batch of instances, each run by its family adapter, its
certificate re-checked by the checker and written (atomically) before its row exists.

Runs on the workers; standard library, numpy and the package (no Dask, pandas or pyarrow).
The order inside a row's life is the invariant of ``proofs/sweep.md``: the certificate bytes
are checked, written and hashed first, then the row naming them is returned to the client,
which alone writes rows. A task that dies midway leaves at most certificates without rows
(rewritten with the same bytes when the instance is run again), never a row without its
certificate.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from typing import Any

from certified.errors import CertifiedError
from certified.verdict import Outcome

__all__ = ["certificate_name", "run_batch", "run_instance"]

# python-flint's working precision is process-global: on a worker with several threads, two
# instances must not run at once (each sets and restores the precision it needs)
_ONE_AT_A_TIME = threading.Lock()


def certificate_name(key: str) -> str:
    """The file name of an instance's certificate in ``DIR/certificates/``.

    Guarantee: exact (a function of the key)."""
    return f"{key}.json"


def run_instance(
    core: dict[str, Any], key: str, params: dict[str, Any], path: str | None, cert_dir: str
) -> dict[str, Any]:
    """Run one instance and write its certificate; return its row (a dict of columns).

    A ``CertifiedError`` raised by the family (an instance it refuses, e.g. coincident random
    points) gives an UNDECIDED row with the message; any other exception propagates (the task
    fails, Dask retries it, and a failing instance gets no row).

    Guarantee: a row naming a certificate is written after the certificate, whose bytes the
    checker accepted and whose SHA-256 is the row's ``certificate_sha256``.
    """
    from certified.certificates import certificate_bytes, write_atomic
    from certified.sweep.families import adapter

    fam = adapter(core["family"])
    t0 = time.perf_counter()
    try:
        result = fam.run(params, path, core["statement"], core["options"])
        verdict, reason, columns, cert = (
            result.verdict,
            result.reason,
            result.columns,
            result.certificate,
        )
    except CertifiedError as exc:
        verdict, reason, columns, cert = Outcome.UNDECIDED, f"input: {exc}", {}, None
    name = sha = None
    if cert is not None:
        data, check = certificate_bytes(cert)
        if check.verified:
            name = certificate_name(key)
            write_atomic(os.path.join(cert_dir, name), data)
            sha = hashlib.sha256(data).hexdigest()
        else:
            verdict = Outcome.UNDECIDED
            reason = f"the checker did not accept the certificate: {check.reason}"
    seconds = time.perf_counter() - t0
    row = {
        "key": key,
        "verdict": Outcome(verdict).value,
        "reason": reason,
        "seconds": seconds,
        "certificate": None if name is None else f"certificates/{name}",
        "certificate_sha256": sha,
    }
    clash = (set(params) | set(columns)) & set(row)
    if clash:  # pragma: no cover - adapters name their columns apart from these
        raise RuntimeError(f"sweep adapter {core['family']}: column {sorted(clash)[0]} reused")
    return {**row, **params, **columns}


def run_batch(
    core: dict[str, Any], items: list[tuple[str, dict[str, Any], str | None]], cert_dir: str
) -> list[dict[str, Any]]:
    """Run a batch of instances ``(key, params, path)`` in order (one Dask task).

    Guarantee: as :func:`run_instance`, for each item; one batch at a time per process.
    """
    with _ONE_AT_A_TIME:
        return [run_instance(core, key, params, path, cert_dir) for key, params, path in items]
