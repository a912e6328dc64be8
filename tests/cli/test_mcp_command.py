"""``baton mcp``: its help says how a desktop host starts it, and a bad setting is one line with
exit 2 before anything is served (what it serves is tests/server/test_mcp_server.py's)."""

from __future__ import annotations

import json
import re

from tests.cli.helpers import invoke_baton


def test_the_help_gives_the_hosts_one_line_of_configuration(env: dict[str, str]) -> None:
    code, out, _ = invoke_baton("mcp", "--help", env=env)
    assert code == 0
    assert "docs/mcp-server.md" in re.sub(r"-\n\s+", "-", out)  # the help wraps at hyphens
    [config] = re.findall(r'\{"mcpServers".*\}', out)
    assert json.loads(config) == {"mcpServers": {"baton": {"command": "baton", "args": ["mcp"]}}}
    for tool in ("run", "post", "state", "cancel", "profiles"):
        assert tool in out
    assert "--profiles" in out and "--bus" in out and "--media-dir" in out


def test_the_command_list_names_it(env: dict[str, str]) -> None:
    code, out, _ = invoke_baton("--help", env=env)
    assert code == 0 and re.search(r"^\s+mcp\s+Serve baton over MCP", out, re.MULTILINE)


def test_a_bad_bus_is_one_line_and_exit_2(env: dict[str, str]) -> None:
    code, out, err = invoke_baton("mcp", "--bus", "nope://somewhere", env=env)
    assert code == 2, err
    assert out == ""  # stdout is the protocol's alone, even for an error
    assert len(err.strip().splitlines()) == 1 and "nope://somewhere" in err
