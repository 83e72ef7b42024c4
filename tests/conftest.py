"""Shared test configuration: hypothesis profiles and restoration of python-flint's globals."""

from __future__ import annotations

import os
import tempfile

# Compiled kernels run with bounds checking in the tests (an out-of-range table index would
# otherwise read garbage silently), cached apart from the production build.
os.environ.setdefault("NUMBA_BOUNDSCHECK", "1")
os.environ.setdefault(
    "NUMBA_CACHE_DIR", os.path.join(tempfile.gettempdir(), "certified-numba-boundscheck")
)

import flint
import pytest
from hypothesis import HealthCheck, settings

# "dev" is the default; CI=true loads the deterministic "ci" profile; "thorough" is for long
# searches (HYPOTHESIS_PROFILE=thorough pytest -m slow).
settings.register_profile("dev", max_examples=60, deadline=None)
settings.register_profile(
    "ci",
    max_examples=100,
    deadline=None,
    derandomize=True,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("thorough", max_examples=2000, deadline=None)
_profile = os.environ.get("HYPOTHESIS_PROFILE") or (
    "ci" if os.environ.get("CI", "").lower() == "true" else "dev"
)
settings.load_profile(_profile)


@pytest.fixture(autouse=True)
def _restore_flint_context():
    """python-flint's precision is process-global: every test gets it back unchanged."""
    prec, cap = flint.ctx.prec, flint.ctx.cap
    yield
    changed = (flint.ctx.prec, flint.ctx.cap) != (prec, cap)
    flint.ctx.prec, flint.ctx.cap = prec, cap
    assert not changed, "a test (or the code under test) left flint.ctx.prec/cap changed"
