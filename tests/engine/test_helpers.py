"""The engine-test helpers can fail: ``engine_tasks`` finds a task waiting inside engine code."""

from __future__ import annotations

import anyio

from baton.engine.channels import MemoryChannel
from baton.engine.interaction import UploadQuestion
from tests.engine.helpers import engine_tasks


async def test_engine_tasks_sees_a_task_waiting_in_engine_code() -> None:
    async with MemoryChannel() as channel, anyio.create_task_group() as group:
        with channel.listen() as questions:
            group.start_soon(
                channel.request_upload,
                UploadQuestion(id="q1", session="s", agent="a", call_id="c1", prompt="a file"),
            )
            await questions.receive()  # the engine's side is now waiting for the answer
            assert len(engine_tasks()) == 1
            group.cancel_scope.cancel()
    assert engine_tasks() == []
