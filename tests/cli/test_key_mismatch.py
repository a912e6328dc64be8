"""A signing-key mismatch is named within seconds, on both sides, and never sent into silence:

- a ``baton run`` whose lead signs with one key and a ``baton worker`` with another used to wait
  out the session's timeout ("session timed out after 45 s"); now the worker refuses each
  request naming both key ids, and the run ends at once with that reason;
- ``baton post`` without the session's key used to exit 0 while its message was dead-lettered;
  now it exits 2 with one line and sends nothing.

A real ``baton worker`` process on a real ``redis-server`` (the lead and the worker must be apart);
the commands beside it run in-process (:func:`~tests.cli.helpers.invoke_baton`): the exit codes,
the lines and the timing are the point.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest
from pydantic import SecretStr

from baton.bus.errors import ExitCode
from baton.bus.redis import RedisBus
from baton.bus.signing import key_id
from baton.session import Session, open_session
from tests.cli.helpers import Proc, invoke_baton

LEAD_KEY = "the lead's signing key"
WORKER_KEY = "a worker's other key"
TIMEOUT = "300"
"""The session's timeout: the run must end long before it."""


def test_a_lead_and_a_worker_with_different_keys_name_the_mismatch_and_end_at_once(
    start: Callable[..., Proc], redis_url: str, env: dict[str, str]
) -> None:
    worker = start("worker", "--bus", redis_url, "--pool", "keys",
                   env={**env, "BATON_SIGNING_KEY": WORKER_KEY})  # fmt: skip
    worker.expect(" ready: ", stream="err")
    began = time.monotonic()
    code, out, err = invoke_baton(
        "run", "--json", "--bus", redis_url, "--no-local-workers", "--pool", "keys",
        "--timeout", TIMEOUT, "paint a fox",
        env={**env, "BATON_SIGNING_KEY": LEAD_KEY},
    )  # fmt: skip
    took = time.monotonic() - began
    assert took < 30, f"took {took:.0f} s"
    ours, theirs = key_id(LEAD_KEY), key_id(WORKER_KEY)
    # the lead's side: the run ends with the reason, in one line, naming both keys by id
    assert code == ExitCode.FAILED, err
    line = err.strip()
    assert "\n" not in line and "signing key mismatch" in line, err
    assert f"key id {ours}" in line and f"key id {theirs}" in line, line
    events = [json.loads(text) for text in out.splitlines()]
    exits = {e["agent"]: e["reason"] for e in events if e["type"] == "agent.exited"}
    assert exits == {"painter": "error"}
    # the worker's side: it said so itself, at once, and is still serving
    said = worker.expect("signing key mismatch", stream="err", timeout=5)
    assert f"key id {ours}" in said and f"key id {theirs}" in said, said
    assert worker.proc.poll() is None
    for secret in (LEAD_KEY, WORKER_KEY):  # ids only: no key is ever shown
        assert secret not in out + err + "".join(worker.err)


@contextmanager
def signing_session(redis_url: str, tmp_path: Path) -> Iterator[str]:
    """A session that runs (signing with :data:`LEAD_KEY`) for as long as the block does: its
    sub-agent waits for a pool nobody serves, and the session for it."""
    session_id = f"s-keys-{time.monotonic_ns() % 10**9}"
    ready = anyio.Event()

    async def run(session: Session) -> None:
        async with session:
            session.start()
            await _wait_for_setup(session)
            ready.set()
            await anyio.sleep_forever()

    session = open_session("paint a fox", session_id=session_id, bus_url=redis_url,
                           bus_signing_key=SecretStr(LEAD_KEY), local_workers=False,
                           pool="nobody", unclaimed_s=600, timeout_s=600,
                           media_dir=tmp_path)  # fmt: skip
    with anyio.from_thread.start_blocking_portal() as portal:
        future = portal.start_task_soon(run, session)
        portal.call(ready.wait)
        try:
            yield session_id
        finally:
            future.cancel()


async def _wait_for_setup(session: Session) -> None:
    """The session's setup is on the bus (with its key id): a sender can compare keys now."""
    with anyio.fail_after(20):
        while True:
            if "setup" in await session.bus.records.lead(session.id):
                return
            await anyio.sleep(0.05)


@pytest.mark.parametrize("key", [None, WORKER_KEY], ids=["no key", "another key"])
def test_post_without_the_sessions_key_exits_2_with_one_line_and_sends_nothing(
    redis_url: str, env: dict[str, str], tmp_path: Path, key: str | None
) -> None:
    post = ("post", "--bus", redis_url, "--to", "lead", "--session")
    with signing_session(redis_url, tmp_path) as session_id:
        poster = env if key is None else {**env, "BATON_SIGNING_KEY": key}
        code, out, err = invoke_baton(*post, session_id, "also paint a heron", env=poster)
        assert code == ExitCode.USAGE, (out, err)
        assert out == "" and err.count("\n") == 1, err
        assert "signing key mismatch" in err and f"key id {key_id(LEAD_KEY)}" in err, err
        # the same post with the session's key goes out
        keyed = {**env, "BATON_SIGNING_KEY": LEAD_KEY}
        code, out, err = invoke_baton(*post, session_id, "also paint a heron", env=keyed)
        assert code == ExitCode.OK, err
        assert out.strip()  # its id

        async def dead() -> list[str]:
            async with RedisBus(redis_url) as bus:
                return [d.reason for d in await bus.letters.recent() if d.session == session_id]

        assert anyio.run(dead) == []  # nothing was sent to be refused
