"""``baton tools``: each profile's tools (and the lead's MCP tools), with where each comes from and
its parameters.

A tool's **source** is ``built-in`` (the catalogue of ``baton.subagents.tools``), ``python`` (an
import path, ``package.module:attribute``) or ``mcp`` (a server of the profile, by name). MCP
servers are started to ask them for their tools, then closed: the listing is what an agent of the
profile would be offered now. A server that cannot start is reported (and the command exits 1)
without hiding the other profiles.

Only typer and the shared options are imported at the top, like every command module, so
``baton --help`` stays fast.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import typer

from baton.cli.options import ConfigOpt, JsonOpt, ProfilesOpt, settings_from

if TYPE_CHECKING:
    from baton.engine import Tool
    from baton.settings import BatonSettings
    from baton.subagents.mcp import McpServers
    from baton.subagents.mcp_config import McpServerConfig

TOOLS_HELP = """List each profile's tools: where each comes from (built-in, a Python import path,
an MCP server) and its parameters; then the lead's MCP tools, if it has any.

MCP servers are started to ask them (and closed again); one that cannot start is reported and the
command exits 1."""
TOOLS_EXAMPLES = """Examples:

\b
  baton tools                                   # the built-in profiles
  baton tools --profiles profiles.toml          # a profiles file's, MCP servers' tools included
  baton tools --profiles profiles.toml --json   # one JSON object per line: profiles, then the lead

The profiles file format, MCP servers included: docs/profiles.md."""


def tools_command(
    ctx: typer.Context,
    profiles: ProfilesOpt = None,
    as_json: JsonOpt = False,
    config: ConfigOpt = None,
) -> None:
    settings = settings_from(ctx)
    from baton.cli.exits import run_async

    raise typer.Exit(run_async(list_tools, settings, as_json, command="baton tools"))


@dataclass
class Listing:
    """The tools of one profile (or of the lead), and what kept some from being listed."""

    kind: str
    name: str
    description: str
    tools: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "description": self.description,
            "tools": self.tools,
            "errors": self.errors,
        }


async def list_tools(settings: BatonSettings, as_json: bool) -> int:
    """Print the listings; 1 when a server could not be asked, else 0."""
    from baton.session.compose import lead_servers, resolve_profiles

    profiles = resolve_profiles(settings.profiles)
    lead = lead_servers(settings.profiles)
    listings: list[Listing] = []
    async with AsyncExitStack() as stack:
        servers: McpServers | None = None
        if lead or any(profile.mcp for profile in profiles.values()):
            servers = await _open_servers(stack)
        for name, profile in profiles.items():
            listing = Listing("profile", name, profile.description)
            listing.tools = [describe(tool) for tool in profile.tools]
            if servers is not None and profile.mcp:
                await _add_mcp(listing, servers, f"profile {name!r}", profile.mcp)
            listings.append(listing)
        if servers is not None and lead:
            listing = Listing("lead", "lead", "the lead's own tools from its MCP servers")
            await _add_mcp(listing, servers, "the lead", lead)
            listings.append(listing)
    for listing in listings:
        if as_json:
            typer.echo(json.dumps(listing.as_json()))
        else:
            typer.echo(render(listing))
        for error in listing.errors:
            typer.echo(f"baton tools: {error}", err=True)
    return 1 if any(listing.errors for listing in listings) else 0


async def _open_servers(stack: AsyncExitStack) -> McpServers:
    from baton.subagents.mcp_config import McpNotInstalled

    try:
        from baton.subagents.mcp import McpServers
    except ImportError as exc:
        raise McpNotInstalled("the profiles file") from exc
    return await stack.enter_async_context(McpServers())


async def _add_mcp(
    listing: Listing, servers: McpServers, owner: str, declared: Mapping[str, McpServerConfig]
) -> None:
    """Ask each server for its tools; one that cannot start is an error of the listing."""
    from baton.errors import ConfigError

    for server, config in declared.items():
        taken = [tool["name"] for tool in listing.tools]
        try:
            made = await servers.tools_for(owner, {server: config}, _no_media, taken=taken)
        except ConfigError as exc:  # McpServerUnavailable, or a clash of names
            listing.errors.append(str(exc))
            continue
        listing.tools.extend(describe(tool) for tool in made)


async def _no_media(data: bytes, content_type: str) -> str:
    raise RuntimeError("baton tools lists tools; it never calls them")


def describe(tool: Tool) -> dict[str, Any]:
    """One tool as the listing shows it."""
    from baton.subagents.tools import builtin_tools

    if tool.source.startswith("mcp:"):
        source, origin = "mcp", tool.source.removeprefix("mcp:")
    elif builtin_tools().get(tool.name) is tool:
        source, origin = "built-in", tool.name
    else:
        source, origin = "python", f"{tool.fn.__module__}:{tool.fn.__qualname__}"
    function = tool.schema["function"]
    return {
        "name": tool.name,
        "source": source,
        "origin": origin,
        "description": tool.description,
        "approval": tool.approval,
        "parameters": dict(function.get("parameters") or {}),
    }


def render(listing: Listing) -> str:
    """A listing as text: a heading, then one line per tool."""
    lines = [f"{listing.kind} {listing.name}: {listing.description}"]
    for tool in listing.tools:
        where = (
            tool["source"] if tool["source"] == "built-in" else f"{tool['source']} {tool['origin']}"
        )
        gated = "  (needs approval)" if tool["approval"] != "never" else ""
        lines.append(f"  {tool['name']}({signature(tool['parameters'])})  [{where}]{gated}")
        summary = str(tool["description"]).strip().split("\n")[0]
        if summary:
            lines.append(f"      {summary}")
    if not listing.tools:
        lines.append("  (no tools)")
    return "\n".join(lines)


def signature(parameters: Mapping[str, Any]) -> str:
    """``name: type, other?: type`` from a JSON schema's properties (``?``: optional)."""
    properties: Mapping[str, Any] = parameters.get("properties") or {}
    required: Sequence[str] = parameters.get("required") or ()
    parts = []
    for name, schema in properties.items():
        kind = schema.get("type", "any") if isinstance(schema, Mapping) else "any"
        if isinstance(kind, list):
            kind = "|".join(str(k) for k in kind)
        parts.append(f"{name}{'' if name in required else '?'}: {kind}")
    return ", ".join(parts)
