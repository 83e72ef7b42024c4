"""Reproducible examples of hypothesis strategies: the data of a generated sweep instance.

The example of a strategy for a seed is the one that Hypothesis's public fuzzing entry point,
``fuzz_one_input`` (a ``@given`` test's ``.hypothesis.fuzz_one_input``), draws from the byte
string ``SHAKE-256("certified.sweep.draw/1/<seed>/<attempt>")`` (32 KiB): the bytes are the
only source of randomness (its ``BytestringProvider`` turns them into choices by plain
rejection sampling, with no dependence on the process, on ``sys.modules`` or on earlier
draws), so the same seed gives the same example in every process and on every worker. Not
``strategy.example()`` (unseeded, interactive use only), nor ``@given`` with ``@seed``: its
default provider mixes in constants collected from the modules imported at the time, which
differ between the client and a worker (``proofs/sweep.md``).

Attempt 0 is tried first; an attempt whose bytes Hypothesis refuses (a filter or a unique
collection gave up, or the example would exceed Hypothesis's limit of 8 KiB of choices) is
followed by the next, up to :data:`ATTEMPTS`. The example depends on the Hypothesis version
(its documentation says so of ``fuzz_one_input``): the sweep records the version in every
generated instance (its key), and a test pins exact examples for this version.
"""

from __future__ import annotations

import hashlib
import threading
from functools import cache
from typing import Any

from certified.errors import InputError

__all__ = ["ATTEMPTS", "BUFFER_BYTES", "byte_stream", "draw_example", "hypothesis_version"]

BUFFER_BYTES = 32 * 1024  # choices are capped at 8 KiB; rejection sampling reads < 2x that
ATTEMPTS = 8
CHOICE_LIMIT = 8 * 1024  # Hypothesis's BUFFER_SIZE: the largest example it draws (bytes)

_LOCK = threading.Lock()
_MISSING = object()
_SLOT: list[Any] = [None, _MISSING]  # the strategy to draw, the value drawn


@cache
def hypothesis_version() -> str:
    """The installed Hypothesis version (without importing it), recorded in generated
    instances.

    Raises
    ------
    MissingDependencyError
        Hypothesis is not installed.

    Guarantee: exact."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("hypothesis")
    except PackageNotFoundError:
        from certified.errors import MissingDependencyError

        raise MissingDependencyError(
            "generated sweep instances (grid, random) are drawn from certified.strategies, "
            "which needs hypothesis: pip install 'certified[test]'"
        ) from None


def byte_stream(seed: int, attempt: int = 0, size: int = BUFFER_BYTES) -> bytes:
    """The bytes that drive attempt ``attempt`` of the draw for ``seed``: SHAKE-256 of
    ``"certified.sweep.draw/1/<seed>/<attempt>"``.

    Guarantee: exact (a function of its arguments; a longer stream extends a shorter one)."""
    return hashlib.shake_256(f"certified.sweep.draw/1/{seed}/{attempt}".encode("ascii")).digest(
        size
    )


@cache
def _fuzz_target() -> Any:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    @settings(database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def capture(data: Any) -> None:
        _SLOT[1] = data.draw(_SLOT[0])

    return capture.hypothesis.fuzz_one_input


def draw_example(strategy: Any, seed: int, *, what: str = "instance") -> Any:
    """The example of ``strategy`` for ``seed`` (see the module docstring).

    Raises
    ------
    InputError
        No attempt gave an example (the message names ``what`` and the likely cause).

    Guarantee: exact (a function of the strategy, the seed and the Hypothesis version)."""
    if type(seed) is not int or seed < 0:
        raise InputError(f"seed: {seed!r} is not a non-negative integer")
    import warnings

    fuzz = _fuzz_target()
    with _LOCK, warnings.catch_warnings():
        # Hypothesis compares the global random state before and after a draw; another
        # thread of a Dask worker using `random` meanwhile is reported as if the strategy had
        # (its own comment calls this a race): the strategies drawn here never use `random`
        warnings.filterwarnings("ignore", "Do not use the `random` module inside strategies")
        try:
            for attempt in range(ATTEMPTS):
                _SLOT[:] = [strategy, _MISSING]
                if fuzz(byte_stream(seed, attempt)) is not None and _SLOT[1] is not _MISSING:
                    return _SLOT[1]
        finally:
            _SLOT[:] = [None, _MISSING]
    raise InputError(
        f"{what}: Hypothesis gave no example in {ATTEMPTS} attempts (an example is at most "
        f"{CHOICE_LIMIT // 1024} KiB of choices); use smaller sizes, or file instances"
    )
