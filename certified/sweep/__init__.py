"""Campaigns of theorem instances on Dask (``certified sweep``; the ``sweep`` extra).

``certified.sweep(spec, out)`` (this module is callable) or :func:`sweep` runs every instance
of a spec (``proofs/sweep.md``) on an embedded ``LocalCluster`` or any Dask scheduler, writes
each certificate (re-checked by the checker first) to ``out/certificates/`` and the rows to
Parquet as they finish, and returns the table as a pandas DataFrame. Dask, pandas and pyarrow
are imported only when a sweep runs: the rest of the package never imports them.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from certified.sweep.spec import Instance, SpecError, SweepSpec, instance_key, load_spec

__all__ = ["Instance", "SpecError", "SweepSpec", "instance_key", "load_spec", "sweep"]


def sweep(spec: Any, out: Any = None, **kwargs: Any) -> Any:
    """Run a sweep and return its table: see :func:`certified.sweep.run.sweep`.

    Guarantee: as :func:`certified.sweep.run.sweep`."""
    from certified.errors import MissingDependencyError

    try:
        from certified.sweep.run import sweep as run
    except ImportError as exc:  # pragma: no cover - the extra is in the test environment
        raise MissingDependencyError(
            f"certified sweep needs the sweep extra ({exc.name} is missing): "
            "pip install 'certified[sweep]'"
        ) from None
    return run(spec, out, **kwargs)


class _CallableModule(types.ModuleType):
    """``certified.sweep(spec, out)``: the package is callable as its main function."""

    def __call__(self, spec: Any, out: Any = None, **kwargs: Any) -> Any:
        return sweep(spec, out, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
