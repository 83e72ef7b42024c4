"""Dask LocalClusters shared by the sweep tests (started once per session: a start costs
seconds)."""

from __future__ import annotations

import logging

import pytest


def _client(workers):
    """A client of the embedded cluster that ``certified sweep`` starts (same settings)."""
    pytest.importorskip("dask.distributed")
    from dask.distributed import Client

    from certified.sweep.run import local_cluster

    with (
        local_cluster(workers, silence_logs=logging.CRITICAL) as cluster,
        Client(cluster, set_as_default=False) as client,
    ):
        yield client


@pytest.fixture(scope="session")
def client2():
    yield from _client(2)


@pytest.fixture(scope="session")
def client1():
    yield from _client(1)
