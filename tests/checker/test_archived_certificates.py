"""Certificates written by earlier versions stay VERIFIED: a checker whose replay changes (a
faster product, another rounding) must still accept every honest certificate already handed
out. ``hostile_seeds/`` holds one certificate of each kind written by ``certified demo`` on
2026-11-27 (before issue 21's float64 speed work) and, written by their commands the same day
(hostile_seeds/README.md), one of every other kind and variant; the Lorenz, tanh and
transformer flow certificates among them were REJECTED ("misses the replayed enclosure") while
the flow rule's replay used midpoint-radius series products, and this test was missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from certified.checker import check_file

ARCHIVE = sorted((Path(__file__).parent / "hostile_seeds").glob("*.json"))


def test_there_is_an_archive():
    assert len(ARCHIVE) >= 21


@pytest.mark.parametrize("path", ARCHIVE, ids=[p.stem for p in ARCHIVE])
def test_an_archived_certificate_is_still_verified(path: Path):
    verdict = check_file(path)
    assert verdict.verified, f"{path.name}: {verdict.reason}"
