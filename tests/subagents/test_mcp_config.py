"""MCP servers as a profiles file declares them (for profiles and for the lead), and the lead's
own MCP tools in a session."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import anyio
import pytest

from baton.bus.events import ToolResulted
from baton.llm.script import text
from baton.session import Session, SessionConfig
from baton.session.compose import lead_servers
from baton.subagents.errors import ProfileError
from baton.subagents.mcp_config import McpServerConfig
from baton.subagents.profiles import load_lead_servers, load_profiles
from tests.support.events import logged_events
from tests.support.models import call, scripted

FILE = f"""
[profiles.clock]
description = "Tells the time."
system_prompt = "[baton:subagent] Tell the time."

[profiles.clock.mcp.time]
command = "{sys.executable}"
args = ["-m", "mcp_server_time"]
env = {{ TZ = "UTC" }}
allow = ["get_*"]
approve = ["set_*"]
timeout_s = 5

[lead.mcp.search]
url = "http://127.0.0.1:9/mcp"
headers = {{ Authorization = "Bearer t0ken" }}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "p.toml"
    path.write_text(text)
    return path


def test_a_profiles_file_declares_servers_for_profiles_and_for_the_lead(tmp_path: Path) -> None:
    path = write(tmp_path, FILE)
    clock = load_profiles(path)["clock"]
    time = clock.mcp["time"]
    assert (time.transport, time.command, time.args) == ("stdio", sys.executable,
                                                         ("-m", "mcp_server_time"))  # fmt: skip
    assert time.env == {"TZ": "UTC"} and time.timeout_s == 5
    assert time.allows("get_current_time") and not time.allows("convert_time")
    assert time.gated("set_alarm") and not time.gated("get_current_time")
    assert clock.tool_names == ("send_message",)  # MCP tools join in the worker, not here
    (search,) = load_lead_servers(path).values()
    assert search.transport == "http" and search.headers == {"Authorization": "Bearer t0ken"}
    assert lead_servers(path, {"extra": McpServerConfig(url="http://x/mcp")}).keys() == {
        "search",
        "extra",
    }


@pytest.mark.parametrize(
    ("table", "field", "says"),
    [
        ('command = "x"\nurl = "http://h/mcp"', "mcp.time", "either command"),
        ("allow = []", "mcp.time", "either command"),
        ('url = "ftp://h/mcp"', "mcp.time.url", "should match pattern"),
        ('url = "http://h/mcp"\nargs = ["-v"]', "mcp.time", "args, env and cwd"),
        ('command = "x"\ntimeout_s = 0', "mcp.time.timeout_s", "greater than 0"),
        ('command = "x"\nprefix = "t_"', "mcp.time.prefix", "Extra inputs"),
    ],
)
def test_a_bad_server_table_names_the_profile_and_the_key(
    tmp_path: Path, table: str, field: str, says: str
) -> None:
    text = '[profiles.p]\ndescription = "d"\nsystem_prompt = "s"\n[profiles.p.mcp.time]\n' + table
    with pytest.raises(ProfileError) as caught:
        load_profiles(write(tmp_path, text))
    assert caught.value.profile == "p" and caught.value.field == field
    assert says in str(caught.value)


def test_a_bad_lead_table_stops_the_file(tmp_path: Path) -> None:
    text = '[profiles.p]\ndescription = "d"\nsystem_prompt = "s"\n[lead.mcp."bad name"]\n'
    with pytest.raises(ProfileError, match=r"lead\.mcp\.bad name"):
        load_profiles(write(tmp_path, text + 'command = "x"'))


@pytest.mark.process
async def test_the_lead_calls_its_own_mcp_tool(tmp_path: Path) -> None:
    clock = McpServerConfig(
        command=sys.executable, args=("-m", "mcp_server_time"), allow=("get_current_time",)
    )
    server, model = scripted(
        [call("get_current_time", "t1", timezone="Europe/Paris"), text("It is late in Paris.")]
    )
    config = SessionConfig(
        task="what time is it in Paris?", lead_mcp={"time": clock}, media_dir=tmp_path
    )
    with anyio.fail_after(60):
        async with model, Session(config, model=model) as session:
            result = await session.run()
            log = await logged_events(session.bus, session.id)
    assert result.status == "completed", result
    (ran,) = [e for e in log if isinstance(e, ToolResulted) and e.agent == "lead"]
    assert ran.result.name == "get_current_time" and not ran.result.is_error
    assert '"timezone": "Europe/Paris"' in ran.result.content
    offered = [t["function"]["name"] for t in server.requests[0].body.get("tools", [])]
    assert "get_current_time" in offered


def test_the_docs_example_is_a_valid_profiles_file(tmp_path: Path) -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "profiles.md").read_text()
    found = re.search(r"<!-- example: mcp-profile -->\n```toml\n(.*?)```", docs, re.DOTALL)
    assert found, "docs/profiles.md lost its MCP example"
    path = write(tmp_path, found[1])
    clock = load_profiles(path)["clock"]
    assert set(clock.mcp) == {"time", "calendar"}
    assert clock.mcp["calendar"].timeout_s == 20 and clock.mcp["time"].gated("set_alarm")
    assert set(load_lead_servers(path)) == {"time"}


def test_a_server_url_is_named_with_its_credentials_hidden() -> None:
    # where() names the server in logs and errors: a URL's password and ?token= stay hidden.
    config = McpServerConfig(url="http://u:s3cret@127.0.0.1:9/mcp?token=t0k")
    assert config.where() == "http://u:***@127.0.0.1:9/mcp?token=***"
