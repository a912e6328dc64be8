"""A stdio MCP server dies with its worker, ``kill -9`` included (``baton.subagents.mcp_guard``).

The SDK stops a server gracefully when its client closes (stdin closed, SIGTERM, SIGKILL), but a
worker killed outright closes nothing: a server that ignores the end of its input and SIGTERM
used to stay behind, orphaned, for ever. Real processes: a ``baton worker`` whose agent starts
such a server, ``kill -9`` of the worker, and the server's process looked for until a deadline.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import anyio
import pytest

from baton.bus.messages import SpawnRequest
from baton.bus.redis import RedisBus
from baton.testing import RedisServer
from tests.cli.helpers import REPO, clean_env, processes

GONE_WITHIN_S = 10.0
"""How long the server may outlive its worker: the kernel tells the guard at once; its fallback
looks every second."""


def stubborn_profiles(tmp_path: Path) -> Path:
    pid_file = tmp_path / "stubborn.pid"
    path = tmp_path / "profiles.toml"
    env = f"PYTHONPATH = {str(REPO)!r}, MCP_DEMO_PID_FILE = {str(pid_file)!r}"
    path.write_text(f"""
[profiles.stubborn]
description = "Has an MCP server that no graceful stop ends."
system_prompt = "[baton:subagent] You keep the time."

[profiles.stubborn.mcp.demo]
command = {str(sys.executable)!r}
args = ["-m", "tests.subagents.mcp_demo", "stdio"]
env = {{ {env}, MCP_DEMO_STUBBORN = "1" }}
""")
    return path


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its reaper has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_until(check: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:g} s")
        time.sleep(0.05)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.process
def test_a_stubborn_mcp_server_dies_with_a_worker_killed_outright(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    profiles = stubborn_profiles(tmp_path)
    pid_file = tmp_path / "stubborn.pid"
    url = redis_server.url
    env = clean_env(tmp_path)
    server_pid = 0
    try:
        with processes() as start:
            worker = start("worker", "--bus", url, "--prefix", "orphans", "--pool", "mcp",
                           "--profiles", str(profiles), env=env)  # fmt: skip
            worker.expect(" ready: ", stream="err")

            async def spawn() -> None:
                async with RedisBus(url, prefix="orphans") as bus:
                    request = SpawnRequest(session="s-orphans", agent="stubborn",
                                           profile="stubborn", pool="mcp")  # fmt: skip
                    await bus.spawns.submit(request)

            anyio.run(spawn)
            wait_until(pid_file.exists, 30, "the MCP server started")
            wait_until(lambda: pid_file.read_text().strip(), 5, "its pid written")
            server_pid = int(pid_file.read_text())
            assert alive(server_pid)

            os.kill(worker.pid, signal.SIGKILL)
            wait_until(lambda: not alive(worker.pid), 5, "the worker died")
            wait_until(lambda: not alive(server_pid), GONE_WITHIN_S, "the MCP server died too")
    finally:
        if server_pid and alive(server_pid):  # never leave it behind, whatever failed
            os.kill(server_pid, signal.SIGKILL)
