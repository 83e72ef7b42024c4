"""Dask LocalClusters shared by the sweep tests (started once per session: a start costs
seconds)."""

from __future__ import annotations

import logging

import pytest


def _cluster(workers):
    from dask.distributed import Client, LocalCluster

    cluster = LocalCluster(
        n_workers=workers,
        threads_per_worker=1,
        processes=True,
        dashboard_address=":0",
        silence_logs=logging.CRITICAL,
    )
    return cluster, Client(cluster, set_as_default=False)


@pytest.fixture(scope="session")
def client2():
    pytest.importorskip("dask.distributed")
    cluster, client = _cluster(2)
    yield client
    client.close()
    cluster.close()


@pytest.fixture(scope="session")
def client1():
    pytest.importorskip("dask.distributed")
    cluster, client = _cluster(1)
    yield client
    client.close()
    cluster.close()
