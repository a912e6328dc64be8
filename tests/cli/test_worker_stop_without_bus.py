"""A ``baton worker`` stops on SIGTERM within its shutdown timeout even while its bus is down.

Orchestrators (compose, systemd, Kubernetes) send SIGTERM and expect the process gone within a
grace period. A worker hosting an agent that waits for an approval used to ignore it once Redis
was gone: "draining (up to 30 s)", still running 100 s later, a second SIGTERM changing nothing,
only SIGKILL ending it. What a worker cannot hand back is not lost: its lease lapses and another
worker resumes the agent. Real processes throughout: a ``redis-server`` of the test's own (it is
killed), a ``baton worker``, signals; every wait is on a line a process printed or a bus event.
"""

from __future__ import annotations

import signal
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from baton.bus.base import BusOptions
from baton.bus.connect import open_bus
from baton.bus.events import ApprovalRequested
from baton.bus.messages import Envelope, SpawnRequest
from baton.testing import RedisServer
from tests.cli.helpers import Proc
from tests.support.events import wait_for_event

SESSION = "s-stop"
SHUTDOWN_S = 2.0
"""The worker's ``--shutdown-timeout`` here: short, so the test is quick."""
EXIT_SLACK_S = 8.0
"""What a loaded machine may add to it (the interpreter's exit, the test's own threads)."""


@pytest.fixture
async def own_redis() -> AsyncIterator[RedisServer]:
    """A server of this test's own: it is killed mid-test, and the shared one must stay up."""
    with RedisServer() as server:
        yield server


async def _expect(proc: Proc, text: str, timeout: float = 60.0) -> str:
    return await anyio.to_thread.run_sync(lambda: proc.expect(text, stream="err", timeout=timeout))


async def _exit_code(proc: Proc, timeout: float) -> int:
    return await anyio.to_thread.run_sync(lambda: proc.wait(timeout))


async def _worker_waiting_for_an_approval(
    start: Callable[..., Proc],
    redis: RedisServer,
    profiles_file: Path,
    env: dict[str, str],
    shutdown_s: float = SHUTDOWN_S,
) -> Proc:
    """A worker hosting a ``publisher`` that waits for a human's approval."""
    worker = start(
        "worker", "--bus", redis.url, "--profiles", str(profiles_file),
        "--shutdown-timeout", str(shutdown_s), "--lease", "5",
        env=env,
    )  # fmt: skip
    await _expect(worker, " ready: ")
    async with open_bus(redis.url, BusOptions(lease_s=5)) as bus:
        await bus.inboxes.send(Envelope(session=SESSION, sender="lead", recipient="publisher",
                                type="task", content="publish the news"))  # fmt: skip
        await bus.spawns.submit(
            SpawnRequest(session=SESSION, agent="publisher", profile="publisher")
        )
        await wait_for_event(bus, SESSION, ApprovalRequested, timeout=60)
    return worker


async def test_sigterm_ends_a_worker_within_its_shutdown_timeout_while_redis_is_down(
    start: Callable[..., Proc], own_redis: RedisServer, profiles_file: Path, env: dict[str, str]
) -> None:
    worker = await _worker_waiting_for_an_approval(start, own_redis, profiles_file, env)
    own_redis.kill()
    signalled = time.monotonic()
    worker.proc.send_signal(signal.SIGTERM)
    await _expect(worker, "draining (up to 2 s)")
    code = await _exit_code(worker, SHUTDOWN_S + EXIT_SLACK_S)
    took = time.monotonic() - signalled
    assert code == 0, worker.transcript()
    assert took < SHUTDOWN_S + EXIT_SLACK_S
    log = "".join(worker.err)
    # It says what it left behind, and who picks it up.
    assert "left for another worker" in log, log


async def test_a_second_sigterm_ends_a_worker_at_once_while_redis_is_down(
    start: Callable[..., Proc], own_redis: RedisServer, profiles_file: Path, env: dict[str, str]
) -> None:
    """The drain would take its 300 s; the second signal cuts it short."""
    worker = await _worker_waiting_for_an_approval(
        start, own_redis, profiles_file, env, shutdown_s=300
    )
    own_redis.kill()
    worker.proc.send_signal(signal.SIGTERM)
    await _expect(worker, "draining (up to 300 s)")
    signalled = time.monotonic()
    worker.proc.send_signal(signal.SIGTERM)
    await _expect(worker, "again: ")
    code = await _exit_code(worker, EXIT_SLACK_S)
    assert time.monotonic() - signalled < EXIT_SLACK_S
    assert code == 1, worker.transcript()  # a forced stop
    assert "left for another worker" in "".join(worker.err)
    # the one line a non-zero exit owes, whatever the log level (issue 22)
    assert any(line.startswith("baton worker: stopped by force") for line in worker.err)
