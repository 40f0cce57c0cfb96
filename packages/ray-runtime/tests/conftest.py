"""One local cluster for the session: two CPUs, token authentication on, no dashboard (~4 s)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

os.environ["RAY_ENABLE_UV_RUN_RUNTIME_ENV"] = "0"  # or workers die at start under `uv run`

ray = pytest.importorskip("ray")


@pytest.fixture(scope="session", autouse=True)
def cluster() -> Iterator[None]:
    import agent_channel_ray as acr
    import cluster_bodies as bodies

    ray.cloudpickle.register_pickle_by_value(bodies)  # the workers cannot import the tests
    acr.start_cluster(num_cpus=2)
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture(scope="session")
def pool(cluster: None) -> object:
    """One host actor for the tests that need no actor of their own (an actor takes ~3 s)."""
    import agent_channel_ray as acr

    return acr.ExecutionHost.remote()
