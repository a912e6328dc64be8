"""Agent profiles: what kind of sub-agent a spawn request asks for.

A profile names a kind of sub-agent: the description the lead is shown, its system prompt, its
tools (from a catalogue), its model and its limits. Profiles come from Python (build
:class:`Profile` directly) or from a TOML file::

    [profiles.painter]
    description = "Paints pictures from a description."
    system_prompt = "You paint pictures. Use generate_image, then send_message the result."
    tools = ["generate_image", "mypkg.tools:upscale"]   # catalogue names or import paths
    model = "gpt-4o-mini"                                # optional; default from BATON_MODEL
    tool_choice = "required"                             # optional: the default (auto, none)

    [profiles.painter.limits]                            # all optional
    max_steps = 8            # inbox rounds before the agent leaves
    idle_timeout_s = 60      # how long an empty inbox is waited on
    soft_max_rounds = 16     # engine LoopLimits fields, by name
    tool_timeout_s = 120

MCP servers add their tools to a profile (``baton.subagents.mcp``; the ``mcp`` extra), one table
per server; ``[lead.mcp.<server>]`` gives the lead tools the same way::

    [profiles.clock.mcp.time]      # server "time": a command over stdio ...
    command = "python"
    args = ["-m", "mcp_server_time"]
    allow = ["get_*"]              # the tools offered (globs; default all)
    approve = ["set_*"]            # the tools a person approves each call of (default none)

    [profiles.clock.mcp.search]    # ... or a url over streamable HTTP
    url = "http://127.0.0.1:9000/mcp"
    headers = { Authorization = "Bearer ..." }

Instead of a model name, ``[profiles.<name>.model]`` may be a table that overrides the session's
model settings for this profile alone — another model, even another endpoint::

    [profiles.painter.model]       # every key optional
    name = "qwen2.5-coder-7b"
    base_url = "http://gpu-box:8080/v1"
    api_key_env = "GPU_BOX_KEY"    # the key is read from this variable; no key is sent otherwise
    temperature = 0.2
    top_p = 0.9
    max_tokens = 512               # 0: none sent
    timeout = 120
    max_retries = 5
    parallel_tool_calls = false
    extra_body = { cache_prompt = true }   # merged over the session's

A profile with its own ``base_url`` never gets the session's API key (it would hand the key to
another host): it sends the key ``api_key_env`` names, or none.

A profile of ``kind = "a2a"`` is an agent that runs elsewhere, reached over A2A (the ``a2a`` extra;
:mod:`baton.subagents.a2a_remote`); the lead delegates to it like to any other::

    [profiles.critic]
    kind = "a2a"
    url = "https://critic.example/"  # its root: the card is at /.well-known/agent-card.json
    description = "..."              # optional: the card's description and skills otherwise
    token_env = "CRITIC_TOKEN"       # optional: sent as Authorization: Bearer <token>
    headers = { X-Team = "art" }     # optional
    timeout_s = 300                  # optional: one exchange with it, at most

A bad profile raises one :class:`~baton.subagents.errors.ProfileError` naming the file, the profile
and the field, because a worker that starts with a half-read profile fails much later and obscurely.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from baton.engine import LoopLimits, Tool
from baton.llm.types import ToolChoice
from baton.subagents.a2a_config import A2A_KIND, A2AConfig
from baton.subagents.errors import ProfileError
from baton.subagents.mcp_config import McpServerConfig, check_server_name
from baton.subagents.tools import SEND_MESSAGE, builtin_tools, import_tool, send_message

DEFAULT_MAX_STEPS = 8
DEFAULT_IDLE_TIMEOUT_S = 60.0
SUBAGENT_MARKER = "[baton:subagent]"
DEFAULT_TOOL_CHOICE: ToolChoice = "required"
"""A sub-agent's rounds ask for a tool call until its result is sent (``send_message`` is always
offered, and a terminal send ends the round): measured on llama.cpp with Qwen2.5 1.5B/0.5B, the
painter made a valid call 4/8 with ``auto`` and 8/8 with ``required`` (issue 10)."""


class ProfileModel(BaseModel):
    """A profile's overrides of the session's model settings; None keeps the session's value.

    ``api_key_env`` names the environment variable that holds the key of this profile's endpoint;
    it is read when the profile's first model client is built.
    """

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    name: str | None = Field(None, min_length=1)
    base_url: str | None = Field(None, min_length=1)
    api_key_env: str | None = Field(None, min_length=1)
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    max_tokens: int | None = Field(None, ge=0, description="0: none sent")
    timeout: float | None = Field(None, gt=0)
    max_retries: int | None = Field(None, ge=0)
    parallel_tool_calls: bool | None = None
    extra_body: dict[str, JsonValue] = Field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AgentLimits:
    """How long a sub-agent may run: inbox rounds, idle wait, and the engine's governance."""

    max_steps: int = DEFAULT_MAX_STEPS
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    loop: LoopLimits = field(default_factory=LoopLimits)

    def __post_init__(self) -> None:
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, not {self.max_steps}")
        if self.idle_timeout_s <= 0:
            raise ValueError(f"idle_timeout_s must be positive, not {self.idle_timeout_s}")


@dataclass(frozen=True, slots=True)
class Profile:
    """One kind of sub-agent. ``send_message`` (how it reports) is always among its tools.

    ``model`` is a model name or a :class:`ProfileModel` of overrides (None: the session's model);
    ``tool_choice`` is sent with every request of its rounds (None: not sent). ``mcp`` are MCP
    servers by name: their tools join ``tools`` in the worker that hosts the profile, which starts
    them on the profile's first agent (:mod:`baton.subagents.mcp`). ``a2a`` makes it a remote A2A
    agent: its worker relays each inbox batch to it instead of running a model (its ``tools``,
    ``model`` and ``mcp`` are then unused), and an empty ``description`` is filled from its card.
    """

    name: str
    description: str
    system_prompt: str
    tools: tuple[Tool, ...] = ()
    model: str | ProfileModel | None = None
    limits: AgentLimits = field(default_factory=AgentLimits)
    tool_choice: ToolChoice | None = DEFAULT_TOOL_CHOICE
    mcp: Mapping[str, McpServerConfig] = field(default_factory=dict)
    a2a: A2AConfig | None = None

    def __post_init__(self) -> None:
        if not self.name.strip():
            raise ProfileError("the name is empty", source=None, profile=None, field="name")
        for server in self.mcp:
            problem = check_server_name(server)
            if problem is not None:
                raise ProfileError(problem, source=None, profile=self.name, field=f"mcp.{server}")
        names = [t.name for t in self.tools]
        if self.a2a is not None and (set(names) - {SEND_MESSAGE} or self.mcp):
            raise ProfileError(
                'a profile of kind "a2a" runs elsewhere: it has no tools or MCP servers',
                source=None,
                profile=self.name,
                field="tools",
            )
        duplicate = next((n for n in names if names.count(n) > 1), None)
        if duplicate is not None:
            raise ProfileError(
                f"tool {duplicate!r} is listed twice", source=None, profile=self.name, field="tools"
            )
        if SEND_MESSAGE not in names:
            object.__setattr__(self, "tools", (*self.tools, send_message))

    @property
    def tool_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tools)

    @property
    def model_overrides(self) -> ProfileModel | None:
        """``model`` as overrides: a bare name is ``ProfileModel(name=...)``."""
        if isinstance(self.model, str):
            return ProfileModel(name=self.model)
        return self.model


# -- TOML ----------------------------------------------------------------------------------------

_LOOP_FIELDS = {f.name for f in dataclasses.fields(LoopLimits)}


class _LimitsSpec(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="forbid")

    max_steps: int = Field(DEFAULT_MAX_STEPS, ge=1)
    idle_timeout_s: float = Field(DEFAULT_IDLE_TIMEOUT_S, gt=0)
    soft_max_rounds: int | None = Field(None, ge=0)
    hard_max_rounds: int | None = Field(None, ge=0)
    max_repeats: int | None = Field(None, ge=1)
    tool_timeout_s: float | None = Field(None, gt=0)
    max_result_chars: int | None = Field(None, ge=1)
    approval_timeout_s: float | None = Field(None, gt=0)
    upload_timeout_s: float | None = Field(None, gt=0)
    image_timeout_s: float | None = Field(None, gt=0)


class _ProfileSpec(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="forbid")

    kind: Literal["agent"] = "agent"
    description: str = Field(min_length=1)
    system_prompt: str = Field(min_length=1)
    tools: list[str] = Field(default_factory=list)
    model: str | dict[str, Any] | None = Field(None, union_mode="left_to_right")
    tool_choice: ToolChoice | None = DEFAULT_TOOL_CHOICE
    limits: _LimitsSpec = Field(default_factory=_LimitsSpec)
    mcp: dict[str, McpServerConfig] = Field(default_factory=dict)


class _A2AProfileSpec(A2AConfig):
    """``kind = "a2a"``: a remote agent's table (:class:`A2AConfig` and what the lead is told)."""

    kind: Literal["a2a"]
    description: str = ""
    limits: _LimitsSpec = Field(default_factory=_LimitsSpec)


class _LeadSpec(BaseModel):
    """``[lead]``: what a profiles file says about the lead (its MCP servers)."""

    model_config = ConfigDict(defer_build=True, extra="forbid")

    mcp: dict[str, McpServerConfig] = Field(default_factory=dict)


def load_profiles(
    path: Path | str, catalogue: Mapping[str, Tool] | None = None
) -> dict[str, Profile]:
    """Read every ``[profiles.<name>]`` table of a TOML file; raises ``ProfileError``."""
    import tomllib  # only a process given a profiles file reads TOML

    source = Path(path)
    try:
        data = tomllib.loads(source.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ProfileError(
            f"cannot read it: {exc.strerror or exc}", source=source, profile=None, field=None
        ) from exc
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(
            f"not valid TOML: {exc}", source=source, profile=None, field=None
        ) from exc
    return parse_profiles(data, source=source, catalogue=catalogue)


def parse_profiles(
    data: Mapping[str, Any],
    *,
    source: Path | str | None = None,
    catalogue: Mapping[str, Tool] | None = None,
) -> dict[str, Profile]:
    """Profiles from already-parsed TOML data (``{"profiles": {name: table}}``; a ``[lead]``
    table is checked here and read by :func:`parse_lead_servers`)."""
    unknown = sorted(set(data) - {"profiles", "lead"})
    if unknown:
        raise ProfileError(
            "only [profiles.<name>] and [lead] tables are allowed",
            source=source,
            profile=None,
            field=unknown[0],
        )
    tables = data.get("profiles")
    if not isinstance(tables, Mapping) or not tables:
        raise ProfileError(
            "no [profiles.<name>] table found", source=source, profile=None, field="profiles"
        )
    parse_lead_servers(data, source=source)  # a bad [lead] table stops the file, too
    tools = dict(builtin_tools() if catalogue is None else catalogue)
    return {name: _profile(name, table, source, tools) for name, table in tables.items()}


def load_lead_servers(path: Path | str) -> dict[str, McpServerConfig]:
    """The lead's MCP servers of a profiles file (``[lead.mcp.<server>]``; none: empty)."""
    import tomllib

    source = Path(path)
    try:
        data = tomllib.loads(source.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        problem = f"cannot read it: {exc}"
        raise ProfileError(problem, source=source, profile=None, field=None) from exc
    return parse_lead_servers(data, source=source)


def parse_lead_servers(
    data: Mapping[str, Any], *, source: Path | str | None = None
) -> dict[str, McpServerConfig]:
    """The ``[lead.mcp.<server>]`` tables of already-parsed TOML data; raises ``ProfileError``."""
    table = data.get("lead", {})
    if not isinstance(table, Mapping):
        raise ProfileError("must be a table", source=source, profile=None, field="lead")
    try:
        spec = _LeadSpec.model_validate(table)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        where = ".".join(("lead", *(str(p) for p in error["loc"])))
        raise ProfileError(error["msg"], source=source, profile=None, field=where) from exc
    for server in spec.mcp:
        problem = check_server_name(server)
        if problem is not None:
            raise ProfileError(problem, source=source, profile=None, field=f"lead.mcp.{server}")
    return dict(spec.mcp)


def _profile(
    name: str, table: object, source: Path | str | None, tools: dict[str, Tool]
) -> Profile:
    if not isinstance(table, Mapping):
        raise ProfileError("must be a table", source=source, profile=name, field=None)
    if table.get("kind") == A2A_KIND:
        return _a2a_profile(name, table, source)
    try:
        spec = _ProfileSpec.model_validate(table)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        if error["loc"][:1] == ("model",):  # neither branch of the union: say what fits
            raise ProfileError(
                "must be a model name or a [profiles.<name>.model] table",
                source=source,
                profile=name,
                field="model",
            ) from exc
        where = ".".join(str(p) for p in error["loc"]) or None
        problem = error["msg"]
        if where == "kind":
            problem = f'must be "agent" (the default) or "{A2A_KIND}", not {table["kind"]!r}'
        raise ProfileError(problem, source=source, profile=name, field=where) from exc
    resolved = [_resolve_tool(ref, i, name, source, tools) for i, ref in enumerate(spec.tools)]
    model = _model(spec.model, name, source)
    loop_values = {
        key: value
        for key, value in spec.limits.model_dump().items()
        if key in _LOOP_FIELDS and value is not None
    }
    try:
        limits = AgentLimits(
            max_steps=spec.limits.max_steps,
            idle_timeout_s=spec.limits.idle_timeout_s,
            loop=LoopLimits(**loop_values),
        )
        return Profile(
            name=name,
            description=spec.description,
            system_prompt=spec.system_prompt,
            tools=tuple(resolved),
            model=model,
            limits=limits,
            tool_choice=spec.tool_choice,
            mcp=dict(spec.mcp),
        )
    except ValueError as exc:
        raise ProfileError(str(exc), source=source, profile=name, field="limits") from exc
    except ProfileError as exc:
        raise ProfileError(exc.problem, source=source, profile=name, field=exc.field) from exc


def _a2a_profile(name: str, table: Mapping[str, Any], source: Path | str | None) -> Profile:
    """A ``kind = "a2a"`` table: a remote agent, with no prompt, tools or model of its own."""
    if "url" not in table:
        raise ProfileError(
            'a profile of kind "a2a" needs url = "<the remote agent\'s root URL>"',
            source=source,
            profile=name,
            field="url",
        )
    try:
        spec = _A2AProfileSpec.model_validate(table)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in error["loc"]) or None
        problem = error["msg"]
        if where in {"tools", "system_prompt", "model", "tool_choice", "mcp"}:
            problem = 'a profile of kind "a2a" runs elsewhere: it has no ' + where
        elif where == "url":
            problem = (
                f"must be the remote agent's http:// or https:// root URL, not {table['url']!r}"
            )
        raise ProfileError(problem, source=source, profile=name, field=where) from exc
    remote = A2AConfig.model_validate(spec.model_dump(include=set(A2AConfig.model_fields)))
    limits = spec.limits
    try:
        return Profile(
            name=name,
            description=spec.description,
            system_prompt=f"A remote A2A agent at {remote.url}.",
            limits=AgentLimits(
                max_steps=limits.max_steps,
                idle_timeout_s=limits.idle_timeout_s,
                loop=LoopLimits(
                    **{
                        key: value
                        for key, value in limits.model_dump().items()
                        if key in _LOOP_FIELDS and value is not None
                    }
                ),
            ),
            tool_choice=None,
            a2a=remote,
        )
    except ValueError as exc:
        raise ProfileError(str(exc), source=source, profile=name, field="limits") from exc


def _model(
    spec: str | dict[str, Any] | None, profile: str, source: Path | str | None
) -> str | ProfileModel | None:
    """A model name as it is; a ``[profiles.<name>.model]`` table as :class:`ProfileModel`."""
    if not isinstance(spec, dict):
        return spec
    try:
        return ProfileModel.model_validate(spec)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        where = ".".join(("model", *(str(p) for p in error["loc"])))
        raise ProfileError(error["msg"], source=source, profile=profile, field=where) from exc


def _resolve_tool(
    ref: str, index: int, profile: str, source: Path | str | None, tools: dict[str, Tool]
) -> Tool:
    found = tools.get(ref)
    if found is not None:
        return found
    if ":" not in ref:
        known = ", ".join(sorted(tools)) or "none"
        raise ProfileError(
            f"unknown tool {ref!r} (known: {known}; or give package.module:attribute)",
            source=source,
            profile=profile,
            field=f"tools[{index}]",
        )
    try:
        made = import_tool(ref)
    except (ImportError, LookupError, TypeError, ValueError) as exc:
        raise ProfileError(
            f"cannot load tool {ref!r}: {exc}",
            source=source,
            profile=profile,
            field=f"tools[{index}]",
        ) from exc
    tools[ref] = made
    return made


# -- built-in demo profiles ------------------------------------------------------------------------


def builtin_profiles() -> dict[str, Profile]:
    """Demo profiles that work with the offline model (no API key needed); ``publisher``'s tool
    needs a person's approval, so ``baton run "publish a haiku"`` shows the approval flow, and
    ``reviewer`` asks a person for a file, so ``baton run "review my notes"`` shows an upload."""
    catalogue = builtin_tools()
    painter = Profile(
        name="painter",
        description="Paints pictures from a description and returns the image URLs.",
        system_prompt=(
            f"{SUBAGENT_MARKER} You are a painter working for a lead agent. For each task, call "
            "generate_image with a vivid prompt, then call send_message(type='result') with a "
            "short description of what you painted."
        ),
        tools=(catalogue["generate_image"],),
    )
    writer = Profile(
        name="writer",
        description="Summarises and writes short texts.",
        system_prompt=(
            f"{SUBAGENT_MARKER} You are a writer working for a lead agent. Use summarise when it "
            "helps, then call send_message(type='result') with your text."
        ),
        tools=(catalogue["summarise"],),
    )
    helper = Profile(
        name="helper",
        description="Answers a question directly, without tools.",
        system_prompt=f"{SUBAGENT_MARKER} You answer the lead's question briefly and directly.",
    )
    publisher = Profile(
        name="publisher",
        description=(
            "Publishes a text (a demo: saves it as a file under the media directory); "
            "a person must approve each publication."
        ),
        system_prompt=(
            f"{SUBAGENT_MARKER} You are a publisher working for a lead agent. Call publish with "
            "the text to publish (it runs only once a person approves it), then call "
            "send_message(type='result') saying whether it was published and where."
        ),
        tools=(catalogue["publish"],),
    )
    reviewer = Profile(
        name="reviewer",
        description=(
            "Reviews a file a person uploads: it asks for the file (request_file_upload) and "
            "reports on it."
        ),
        system_prompt=(
            f"{SUBAGENT_MARKER} You are a reviewer working for a lead agent. Call "
            "request_file_upload with a one-sentence prompt saying which file you need, then "
            "call send_message(type='result') with your review and the file's URL, or saying "
            "that no file came."
        ),
        tools=(catalogue["request_file_upload"],),
    )
    return {p.name: p for p in (painter, writer, helper, publisher, reviewer)}


def merge_profiles(*groups: Iterable[Profile] | Mapping[str, Profile]) -> dict[str, Profile]:
    """Combine profile groups; later groups override earlier ones by name."""
    merged: dict[str, Profile] = {}
    for group in groups:
        values = group.values() if isinstance(group, Mapping) else group
        merged.update({p.name: p for p in values})
    return merged
