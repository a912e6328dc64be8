"""Composition helpers for sessions: profiles and models for the lead and in-process workers.

This is where the lead meets the sub-agents: ``baton.lead`` and ``baton.subagents`` sit side by
side on one layer and never import each other (the import-linter contract in ``pyproject.toml``),
so the lead's core only ever sees ``name -> description`` of the profiles. Everything from the
session's layer up may use both — :mod:`baton.session` hosts an in-process worker, :mod:`baton.api`
re-exports ``Worker`` and ``Profile``, the server and the CLI load profiles — and what they share
about profiles and models lives here.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

from baton.llm import ModelSettings, OpenAIChatModel, offline_model
from baton.llm.offline import OFFLINE_LABEL
from baton.llm.types import ChatModel
from baton.subagents.mcp_config import McpServerConfig
from baton.subagents.profiles import (
    Profile,
    builtin_profiles,
    load_lead_servers,
    load_profiles,
)

log = logging.getLogger(__name__)

ProfilesSpec = Sequence[Profile] | Mapping[str, Profile] | Path | str | None
"""Profiles as given by a caller: Python objects, a TOML file, or None for the built-in demo."""


def resolve_profiles(spec: ProfilesSpec) -> dict[str, Profile]:
    """The profiles by name; raises ``ProfileError`` for a bad TOML file."""
    if spec is None:
        return builtin_profiles()
    if isinstance(spec, str | Path):
        return load_profiles(spec)
    if isinstance(spec, Mapping):
        return dict(spec)
    return {profile.name: profile for profile in spec}


def lead_servers(
    spec: ProfilesSpec, given: Mapping[str, McpServerConfig] | None = None
) -> dict[str, McpServerConfig]:
    """The lead's MCP servers: a profiles file's ``[lead.mcp.<server>]`` tables, with ``given``
    (``SessionConfig.lead_mcp``) over them by name."""
    found = load_lead_servers(spec) if isinstance(spec, str | Path) else {}
    return {**found, **(given or {})}


def descriptions(profiles: Mapping[str, Profile]) -> dict[str, str]:
    """What the lead is told about each profile."""
    return {name: profile.description for name, profile in profiles.items()}


def media_profiles(profiles: Mapping[str, Profile]) -> frozenset[str]:
    """The profiles with a tool that produces media (``ToolRun(media=True)``): a session that asked
    one of them and got no media at all is not "completed" (lead/outcome.py)."""
    return frozenset(
        name for name, profile in profiles.items() if any(t.run.media for t in profile.tools)
    )


def lead_model(settings: ModelSettings | None) -> ChatModel:
    """The lead's model: the endpoint of ``settings``, or the offline model when None."""
    if settings is None:
        log.warning("using the %s", OFFLINE_LABEL)
        return offline_model()
    return OpenAIChatModel(settings)
