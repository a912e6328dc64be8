"""The contract suite runs on every backend: the memory bus, one Redis node, and a Redis Cluster
(3 masters with a replica each, started once per test process): a part that keeps its promises
on one node must keep them when its keys are spread over masters."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["memory", "redis", "redis-cluster"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)
