"""``baton mcp``: its help says how a desktop host starts it, and a bad setting is one line with
exit 2 before anything is served (what it serves is tests/server/test_mcp_server.py's); started
where ``./media`` cannot be made, it keeps media in a per-user folder."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from tests.cli.helpers import BATON, clean_env, invoke_baton
from tests.support.profiles import GALLERY


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


READ_ONLY = Path("/proc")
"""A working directory nobody can make ``media`` in, root included (permission bits would not
stop root)."""


@pytest.mark.process
@pytest.mark.skipif(not READ_ONLY.is_dir(), reason="needs Linux's /proc as a read-only directory")
async def test_a_read_only_working_directory_puts_media_in_a_per_user_folder(
    tmp_path: Path,
) -> None:
    """A host that starts ``baton mcp`` where ``./media`` cannot be made (no ``--media-dir``):
    it serves all the same, and the media land under ``$XDG_STATE_HOME/baton/media``."""
    env = clean_env(tmp_path, XDG_STATE_HOME=str(tmp_path / "state"))
    del env["BATON_MEDIA_DIR"]
    profiles = tmp_path / "gallery.toml"
    profiles.write_text(GALLERY)
    params = StdioServerParameters(command=BATON, args=["mcp", "--profiles", str(profiles)],
                                   env=env, cwd=str(READ_ONLY))  # fmt: skip
    async with Client(params) as client:
        result = await client.call_tool("run", {"task": "paint a fox"})
    assert result.structured_content is not None, result.content
    [url] = result.structured_content["media_urls"]
    folder = tmp_path / "state" / "baton" / "media"
    assert url.startswith(folder.as_uri() + "/")
    assert any(folder.glob("*/*.png"))
