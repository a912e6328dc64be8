from __future__ import annotations

import pytest

from tests.llm.helpers import MOUNTS, Mount


@pytest.fixture(params=MOUNTS)
def mount(request: pytest.FixtureRequest) -> Mount:
    """Run the test once per mount: in-process transport and real loopback HTTP."""
    value: Mount = request.param
    return value
