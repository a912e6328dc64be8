"""``baton tools`` lists each profile's tools with their source, MCP servers asked for theirs; and
an offline ``baton run`` gets its answer from an MCP server (``mcp-server-time``, from PyPI)."""

from __future__ import annotations

import json
import re
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.cli.helpers import invoke_baton

CLOCK = f"""
[profiles.clock]
description = "Tells the current time in a time zone, from an MCP time server."
system_prompt = "[baton:subagent] Call get_current_time, then send_message the result."

[profiles.clock.mcp.time]          # server name "time"
command = "{sys.executable}"
args = ["-m", "mcp_server_time"]
approve = ["set_*"]                # tools that need a person's approval (globs)
allow = ["*"]                      # which tools the agent sees (globs)
"""


def clock_profiles(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "p.toml"
    path.write_text(CLOCK + extra)
    return path


@pytest.mark.process
def test_json_lists_the_mcp_servers_tools_with_their_parameters(
    tmp_path: Path, env: dict[str, str]
) -> None:
    code, out, err = invoke_baton("tools", "--profiles", str(clock_profiles(tmp_path)), "--json",
                               env=env)  # fmt: skip
    assert code == 0, err
    (listing,) = [json.loads(line) for line in out.splitlines()]
    assert (listing["kind"], listing["name"], listing["errors"]) == ("profile", "clock", [])
    tools = {tool["name"]: tool for tool in listing["tools"]}
    assert set(tools) == {"send_message", "get_current_time", "convert_time"}
    clock = tools["get_current_time"]
    assert (clock["source"], clock["origin"], clock["approval"]) == ("mcp", "time", "never")
    assert clock["parameters"]["required"] == ["timezone"]
    assert clock["parameters"]["properties"]["timezone"]["type"] == "string"
    assert tools["send_message"]["source"] == "built-in"


@pytest.mark.process
def test_text_lists_built_in_and_python_tools_and_reports_a_server_that_cannot_start(
    tmp_path: Path, env: dict[str, str]
) -> None:
    broken = """
[profiles.broken]
description = "Has a server that is not there."
system_prompt = "[baton:subagent] Nothing works."
tools = ["summarise", "tests.support.tools:ponder"]

[profiles.broken.mcp.ghost]
command = "/nonexistent/mcp-server"
startup_timeout_s = 5
"""
    code, out, err = invoke_baton("tools", "--profiles", str(clock_profiles(tmp_path, broken)),
                               env=env)  # fmt: skip
    assert code == 1, out
    assert "profile clock:" in out and "get_current_time(timezone: string)  [mcp time]" in out
    assert "summarise(text: string)  [built-in]" in out
    assert "ponder(text: string)  [python tests.support.tools:ponder]" in out
    assert "profile 'broken': MCP server 'ghost' cannot start" in err


@pytest.mark.process
def test_an_offline_run_gets_the_time_in_paris_from_the_mcp_server(
    tmp_path: Path, env: dict[str, str]
) -> None:
    profiles = clock_profiles(tmp_path)
    code, out, err = invoke_baton("run", "--profiles", str(profiles), "Europe/Paris", env=env)
    assert code == 0, err
    assert "clock" in out and '"timezone": "Europe/Paris"' in out, out
    found = re.search(r'"datetime": "([^"]+)"', out)
    assert found, out
    told = datetime.fromisoformat(found[1])
    offset = told.utcoffset()
    assert offset is not None and offset.total_seconds() in (3600, 7200)  # CET or CEST
    assert abs((told - datetime.now(UTC)).total_seconds()) < 120  # the time now, in Paris
