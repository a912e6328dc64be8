"""Real worker processes on real Redis: kill -9 mid-round, SIGTERM drain, ``--check``.

Workers run as ``python -m baton.cli worker`` (the same command as ``baton worker``), with the
model served by a scripted server on a loopback socket in this test process, so the test knows
exactly when a model call is in flight. Leases are short (1 s) to keep the run quick. The test
waits on process output lines, bus messages and events — never on sleeps.
"""

from __future__ import annotations

import itertools
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from baton.bus.base import Bus, BusOptions, SpawnQueue
from baton.bus.connect import open_bus
from baton.bus.events import AgentClaimed, AgentExited, ToolCalled
from baton.bus.messages import DEFAULT_POOL, SpawnRequest
from baton.llm import ScriptedServer
from baton.llm.offline import offline_reply
from baton.llm.script import Json, Reply, ScriptItem
from baton.subagents.state import load_checkpoint
from baton.testing import RedisServer, free_port
from tests.subagents.helpers import SESSION, Lead, read_png, task
from tests.support.events import wait_for_event
from tests.support.media import file_path

REPO = Path(__file__).resolve().parents[2]
LEASE_S = 2.5  # short, so resuming is quick; long enough for a loaded CI machine
_prefixes = itertools.count()

PROFILES = """
[profiles.crash]
description = "Paints, slowly when asked to."
system_prompt = "[baton:subagent] Paint the task."
tools = ["generate_image", "tests.subagents.slowtools:slow_step"]
"""


class WorkerProcess:
    """One ``python -m baton.cli worker`` process and its stderr, line by line."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "baton.cli", "worker", *args],
            cwd=REPO,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.log: list[str] = []
        self.name = ""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.put(line)
        self.lines.put(None)

    async def expect(self, text: str, timeout: float = 30.0) -> str:
        """Wait for a stderr line containing ``text``."""

        def look() -> str:
            while True:
                line = self.lines.get(timeout=timeout)
                if line is None:
                    raise AssertionError(f"worker exited before {text!r}:\n{''.join(self.log)}")
                self.log.append(line)
                if text in line:
                    return line

        return await anyio.to_thread.run_sync(look)

    async def ready(self) -> None:
        line = await self.expect(" ready: ")
        self.name = line.split("baton worker ", 1)[1].split()[0]

    async def exit_code(self, timeout: float = 30.0) -> int:
        return await anyio.to_thread.run_sync(lambda: self.proc.wait(timeout))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._reader.join(10)  # it ends at EOF, once the process is gone
        if self.proc.stderr is not None:
            self.proc.stderr.close()


@dataclass
class Cluster:
    bus: Bus
    server: ScriptedServer
    args: list[str]
    env: dict[str, str]
    workers: list[WorkerProcess] = field(default_factory=list)

    async def start_worker(self) -> WorkerProcess:
        worker = WorkerProcess(self.args, self.env)
        self.workers.append(worker)
        await worker.ready()
        return worker

    async def owner_of(self, agent: str) -> WorkerProcess:
        owner = (await self.bus.records.agent(SESSION, agent)).get("owner", "")
        return next(w for w in self.workers if owner.startswith(w.name + "/"))


@asynccontextmanager
async def cluster(
    redis_server: RedisServer, tmp_path: Path, responder: Callable[[Json], ScriptItem]
) -> AsyncIterator[Cluster]:
    profiles = tmp_path / "profiles.toml"
    profiles.write_text(PROFILES)
    prefix = f"proc{next(_prefixes)}x{os.getpid()}"
    server = ScriptedServer(responder=responder)
    async with server.serve() as http:
        env = {
            **os.environ,
            "OPENAI_API_KEY": "sk-test",
            "OPENAI_BASE_URL": http.base_url,
            "BATON_MODEL": "scripted",
            "BATON_TEST_SLOW_ONCE": str(tmp_path / "slow-once"),
        }
        args = ["--bus", redis_server.url, "--prefix", prefix, "--lease", str(LEASE_S),
                "--profiles", str(profiles), "--media", str(tmp_path / "media"),
                "--shutdown-timeout", "10", "--concurrency", "8"]  # fmt: skip
        options = BusOptions(lease_s=LEASE_S)
        async with open_bus(redis_server.url, options, prefix=prefix) as bus:
            running = Cluster(bus, server, args, env)
            try:
                yield running
            finally:
                for worker in running.workers:
                    worker.stop()


class Moment:
    """Makes the VICTIM's model call slow at one moment of its round, and tells when it is there."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.reached = anyio.Event()

    def __call__(self, body: Json) -> ScriptItem:
        reply = offline_reply(body)
        messages = body["messages"]
        users = [i for i, m in enumerate(messages) if m["role"] == "user"]
        victim = "VICTIM" in str(messages[users[-1]]["content"])
        after_tool = any(m["role"] == "tool" for m in messages[users[-1] :])
        wanted = {"model": not after_tool, "after_tool": after_tool}.get(self.kind, False)
        if victim and wanted and not self.reached.is_set():
            self.reached.set()
            return Reply(text=reply.text, calls=reply.calls, delay=30.0)  # slow until killed
        return reply


@pytest.mark.parametrize("moment", ["model", "tool", "after_tool"])
@pytest.mark.process
async def test_kill_9_mid_round_resumes_on_the_other_worker(
    redis_server: RedisServer, tmp_path: Path, moment: str
) -> None:
    timing = Moment(moment)
    async with cluster(redis_server, tmp_path, timing) as c:
        if moment == "tool":
            (tmp_path / "slow-once").touch()
        await c.start_worker()
        await c.start_worker()
        agents = {"v": "paint the VICTIM fox", "a1": "paint a heron", "a2": "paint a pike"}
        ids = {}
        for agent, text in agents.items():
            message = task(agent, text)
            ids[agent] = message.id
            await c.bus.inboxes.send(message)
            await c.bus.spawns.submit(SpawnRequest(session=SESSION, agent=agent, profile="crash"))
        if moment == "tool":
            await wait_for_event(
                c.bus, SESSION, lambda e: isinstance(e, ToolCalled) and e.call.name == "slow_step"
                and e.agent == "v", timeout=60,
            )  # fmt: skip
        else:
            with anyio.fail_after(60):
                await timing.reached.wait()
        victim = await c.owner_of("v")
        if moment == "tool":
            await victim.expect("slow_step blocking", timeout=60)
        victim.proc.send_signal(signal.SIGKILL)
        assert await victim.exit_code() == -signal.SIGKILL

        lead = Lead(c.bus)
        results = await lead.until_results(3, timeout=90)
        survivor = next(w for w in c.workers if w is not victim)
        assert sorted(r.sender for r in results) == ["a1", "a2", "v"]  # exactly one each
        final = lead.results_from("v")[0]
        assert "Done: paint the VICTIM fox" in final.content
        assert len(final.media_urls) == 1 and read_png(file_path(final.media_urls[0]))
        # The report goes out before the agent records that it exited: wait for that too (the
        # worker says so once it has).
        await survivor.expect(f"{SESSION}/v exited: finished", timeout=60)
        exits = [e async for e in _exits(c.bus, "v")]
        assert exits == ["finished"]  # logged before the report went out, once
        state = await c.bus.records.agent(SESSION, "v")
        assert state["status"] == "exited" and state["owner"].startswith(survivor.name + "/")
        checkpoint = load_checkpoint(state["checkpoint"])
        assert checkpoint is not None and ids["v"] in checkpoint.processed  # nothing lost
        spawned = []
        async for logged in c.bus.log.tail(SESSION, follow=False):
            if isinstance(logged.event, AgentClaimed) and logged.event.agent == "v":
                spawned.append(logged.event.worker)
        assert spawned[-1] == survivor.name and victim.name in spawned
        every = SpawnQueue.of_pool(DEFAULT_POOL, ["crash"])
        assert await c.bus.claims.claim(every) is None  # every spawn request was acked
        survivor.proc.send_signal(signal.SIGTERM)
        assert await survivor.exit_code() == 0


async def _exits(bus: Bus, agent: str) -> AsyncIterator[str]:
    async for logged in bus.log.tail(SESSION, follow=False):
        if isinstance(logged.event, AgentExited) and logged.event.agent == agent:
            yield logged.event.reason


class Drain:
    """d1's model call is slow (so SIGTERM lands mid-round); d2 stops after a draft and waits."""

    def __init__(self) -> None:
        self.d1_in_call = anyio.Event()

    def __call__(self, body: Json) -> ScriptItem:
        messages = body["messages"]
        last_user = str([m for m in messages if m["role"] == "user"][-1]["content"])
        reply = offline_reply(body)
        if "slow one" in last_user and not self.d1_in_call.is_set():
            self.d1_in_call.set()
            return Reply(text=reply.text, calls=reply.calls, delay=0.2)
        if "draft" in last_user:
            if messages[-1]["role"] == "user":
                return reply  # the tools
            return Reply(text="Drafted; waiting for more.")  # no result: the agent waits
        return reply


@pytest.mark.process
async def test_sigterm_drains_then_the_other_worker_resumes(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    drain = Drain()
    async with cluster(redis_server, tmp_path, drain) as c:
        first = await c.start_worker()
        await c.bus.inboxes.send(task("d2", "draft a seascape"))
        await c.bus.spawns.submit(SpawnRequest(session=SESSION, agent="d2", profile="crash"))
        await wait_for_event(c.bus, SESSION, lambda e: e.type == "round.ended" and
                             e.agent == "d2" and e.round == 2)  # fmt: skip
        await c.bus.inboxes.send(task("d1", "the slow one"))
        await c.bus.spawns.submit(SpawnRequest(session=SESSION, agent="d1", profile="crash"))
        with anyio.fail_after(30):
            await drain.d1_in_call.wait()
        first.proc.send_signal(signal.SIGTERM)
        await first.expect("draining")
        await first.expect("s1/d2 given back unfinished")
        assert await first.exit_code() == 0
        lead = Lead(c.bus)
        (d1,) = await lead.until_results(1)  # the running round finished before the exit
        assert d1.sender == "d1" and "Done: the slow one" in d1.content

        second = await c.start_worker()
        await second.expect("resuming s1/d2")
        await c.bus.inboxes.send(task("d2", "now finish it"))
        await lead.until_results(2)
        (d2,) = lead.results_from("d2")
        assert "now finish it" in d2.content
        assert len(lead.results) == 2
        second.proc.send_signal(signal.SIGTERM)
        second.proc.send_signal(signal.SIGTERM)
        assert await second.exit_code() in (0, 1)


@pytest.mark.process
async def test_check_exit_codes(redis_server: RedisServer) -> None:
    def run(url: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "baton.cli", "worker", "--bus", url, "--check"],
            cwd=REPO, capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    ok = await anyio.to_thread.run_sync(run, redis_server.url)
    assert ok.returncode == 0, ok.stderr
    down = await anyio.to_thread.run_sync(run, f"redis://127.0.0.1:{free_port()}/0")
    assert down.returncode == 3
    lines = [line for line in down.stderr.splitlines() if line.startswith("baton worker:")]
    assert len(lines) == 1 and "cannot reach the bus" in lines[0]
