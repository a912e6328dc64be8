"""The CLI's configuration: flag > environment variable > config file > default.

One :class:`BatonSettings` object carries everything a command was told, resolved in that order by
pydantic-settings. Every command builds it the same way (:func:`baton.cli.options.settings_from`,
from the options marked with the setting they give), ``worker`` and ``serve`` included, so
processes started alike agree on the bus and key prefix; :data:`NO_FLAG` lists the settings no
flag sets, and why.
The library itself (sessions, workers, the server) never reads it: it is handed what it needs.

The config file is TOML with the fields below as top-level keys; its path comes
from ``--config`` or ``BATON_CONFIG``::

    # baton.toml
    bus = "redis://localhost:6379/0"
    prefix = "baton"
    pool = "default"             # the pool `baton worker` serves, `run --no-local-workers` uses
    model = "gpt-4o-mini"
    openai_base_url = "http://localhost:11434/v1"
    profiles = "profiles.toml"
    approve = "ask"
    lead_policy = "auto"         # what judges the lead's answers: auto | structural | guided
    temperature = 0.2            # the model's request settings, for the lead and every sub-agent
    max_tokens = 1024            # per reply; 0 sends none
    model_timeout = 120          # seconds a request may read nothing
    model_retries = 3
    tool_choice = "required"     # the lead's; sub-agents take theirs from their profile
    budget_tokens = 200000       # the whole session: every agent's tokens and model calls
    budget_calls = 100
    bus_outage = 120             # seconds of bus outage run, watch and serve ride out (then exit 3)
    lead_lease = 10              # seconds a lead lease lasts: how long a resume waits after a crash
    unclaimed_timeout = 15       # seconds a sub-agent waits for a worker before a warning
    signing_key = "…"            # sign envelopes, refuse unsigned ones (off unless set)
    retention = 604800           # seconds a finished session's keys stay on Redis (7 days)
    media = "s3://bucket/prefix" # where tools put media (a directory by default; docs/media.md)
    image_model = "gpt-image-1"  # generate_image's model on the endpoint's Images API

    [extra_body]                 # the one key that may be a table: merged into every request
    cache_prompt = true

Environment variables: ``OPENAI_API_KEY``, ``OPENAI_BASE_URL``, ``BATON_MODEL``, ``BATON_BUS`` (or
``REDIS_URL``), ``BATON_REDIS_PASSWORD`` (or ``REDIS_PASSWORD``), ``BATON_REDIS_CA_FILE``,
``BATON_REDIS_CERT_FILE``, ``BATON_REDIS_KEY_FILE`` (docs/securing-redis.md), ``BATON_PROFILES``,
``BATON_MEDIA_DIR``, ``BATON_MEDIA``, ``BATON_MEDIA_BASE_URL``, ``BATON_MEDIA_URL_EXPIRY``,
``BATON_IMAGE_MODEL``, ``BATON_IMAGE_RESPONSE_FORMAT`` (docs/media.md), ``BATON_APPROVE``,
``BATON_PREFIX``, ``BATON_POOL``, ``BATON_SESSION_TIMEOUT``, ``BATON_UNCLAIMED_TIMEOUT``,
``BATON_BUS_OUTAGE``, ``BATON_RETENTION``, ``BATON_SIGNING_KEY``, ``BATON_LOG_LEVEL``,
``BATON_CONFIG``, and ``BATON_`` + the upper-cased name of each model and session setting
(``BATON_TEMPERATURE``, ``BATON_TOP_P``, ``BATON_MAX_TOKENS``, ``BATON_MODEL_TIMEOUT``,
``BATON_MODEL_RETRIES``, ``BATON_TOOL_CHOICE``, ``BATON_LEAD_POLICY``,
``BATON_PARALLEL_TOOL_CALLS``, ``BATON_EXTRA_BODY`` (a JSON object), ``BATON_BUDGET_TOKENS``,
``BATON_BUDGET_CALLS``, ``BATON_PROFILE_TOOLS``, ``BATON_MAX_SENDS_PER_TURN``,
``BATON_MAX_NEW_AGENTS_PER_PROFILE``, ``BATON_MAX_SENDS_PER_AGENT``, ``BATON_MAX_WAVES``). A
variable set to the empty string counts as unset (compose's ``${VAR:-}`` passes empty ones),
falling through to the config file and the default.

Every problem — an unreadable or invalid file, an unknown key, a value of the wrong kind — is one
:class:`~baton.base_errors.ConfigError` whose message names the source and the key, because the CLI
prints it as the single line a user sees.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    Field,
    FilePath,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from baton.base_errors import ConfigError
from baton.bus.base import DEFAULT_RETENTION_S
from baton.bus.connect import redis_url
from baton.bus.errors import redact_url
from baton.bus.messages import DEFAULT_POOL, ApproveMode, check_pool
from baton.bus.redact import redact_text
from baton.bus.retry import DEFAULT_OUTAGE_S
from baton.defaults import DEFAULT_IMAGE_MODEL, DEFAULT_MODEL, DEMO_IMAGE_MODEL, LEAD_LEASE_S
from baton.media import MediaStore, media_directory, open_store

if TYPE_CHECKING:
    from baton.engine.spend import SpendLimits
    from baton.lead.delegation import DelegationLimits
    from baton.llm import ModelSettings
    from baton.subagents.images import ImageGenerator
    from baton.subagents.mcp_config import McpServerConfig
    from baton.subagents.profiles import Profile

ToolChoiceSetting = Literal["auto", "required", "none"]
"""``baton.llm.types.ToolChoice``, spelt out again: importing it would load the model client (and
openai) into every command just to read a flag. ``tests/cli/test_model_settings.py`` keeps the two
equal."""
TABLE_KEYS = frozenset({"extra_body"})
"""Config-file keys that may be TOML tables; every other key is a single value."""

_SECRET = "a secret: a flag would show it in `ps` and the shell's history"
_DEPLOYMENT = "set once for a deployment (docs/securing-redis.md, docs/media.md), not per command"
_TUNING = "a fine tuning of the lead's delegation (its defaults suit most sessions)"
NO_FLAG: dict[str, str] = {
    "openai_api_key": _SECRET,
    "redis_password": _SECRET,
    "signing_key": _SECRET,
    "redis_ca_file": _DEPLOYMENT,
    "redis_cert_file": _DEPLOYMENT,
    "redis_key_file": _DEPLOYMENT,
    "media_base_url": _DEPLOYMENT,
    "media_url_expiry": _DEPLOYMENT,
    "upload_max_bytes": _DEPLOYMENT,
    "image_response_format": _DEPLOYMENT,
    "unclaimed_timeout": _DEPLOYMENT,
    "lead_lease": _DEPLOYMENT,
    "max_sends_per_turn": _TUNING,
    "max_new_agents_per_profile": _TUNING,
    "max_sends_per_agent": _TUNING,
    "max_waves": _TUNING,
}
"""The settings that no command has a flag for, and why: the environment and the config file set
them. Every other field is set by the options of the commands that use it
(:class:`baton.cli.options.Setting`); ``tests/cli/test_declared_once.py`` keeps the two lists
whole."""


_MODEL = ("openai_api_key", "openai_base_url", "model", "model_timeout", "model_retries",
          "temperature", "top_p", "max_tokens", "parallel_tool_calls", "extra_body")  # fmt: skip
_DELEGATION = ("max_sends_per_turn", "max_new_agents_per_profile", "max_sends_per_agent",
               "max_waves")  # fmt: skip
SESSION_SOURCES: dict[str, tuple[str, ...]] = {
    "bus_url": ("bus", "redis_password", "redis_ca_file", "redis_cert_file", "redis_key_file"),
    "bus_prefix": ("prefix",),
    "bus_signing_key": ("signing_key",),
    "model": _MODEL,
    "profiles": ("profiles",),
    "lead_mcp": ("profiles",),
    "approve": ("approve",),
    "pool": ("pool",),
    "timeout_s": ("session_timeout",),
    "media_dir": ("media_dir",),  # `media` naming a directory sets media_dir too
    "media": ("media",),  # media_base_url and media_url_expiry tune the store it names
    "images": (*_MODEL, "image_model", "image_response_format"),
    "tool_choice": ("tool_choice",),
    "budget": ("budget_tokens", "budget_calls"),
    "delegation": _DELEGATION,
    "profile_tools": ("profile_tools",),
    "lead_policy": ("lead_policy",),
    "bus_outage_s": ("bus_outage",),
    "lead_lease_s": ("lead_lease",),
    "retention_s": ("retention",),
    "unclaimed_s": ("unclaimed_timeout",),
    "upload_max_bytes": ("upload_max_bytes",),
}
"""Each :class:`~baton.session.SessionConfig` field the settings give, with the settings that
set it (:meth:`BatonSettings.session_fields` makes it from them; ``baton resume`` changes a field
of the session's own only when one of them was given)."""
NOT_FROM_SETTINGS: dict[str, str] = {
    **dict.fromkeys(
        ("task", "context", "session_id", "local_workers", "resume"),
        "what each session is asked: a command's arguments, a request's body",
    ),
    **dict.fromkeys(
        (
            "worker_concurrency",
            "instructions",
            "limits",
            "text_flush_s",
            "shutdown_grace_s",
            "failure_grace_s",
        ),
        "the embedding API's (and the HTTP request's instructions); the CLI keeps the defaults",
    ),
}
"""The :class:`~baton.session.SessionConfig` fields no setting gives, and why;
``tests/cli/test_declared_once.py`` keeps this and :data:`SESSION_SOURCES` covering every field
once."""
_SESSION_MADE = {
    "model": "model_settings",
    "profiles": "profile_set",
    "lead_mcp": "lead_servers",
    "media": "media_store",
    "images": "image_generator",
    "budget": "budget",
    "delegation": "delegation",
}
"""The session fields a method of the settings makes; every other one is a setting as is."""
_SESSION_AS_IS = {
    field: sources[0] for field, sources in SESSION_SOURCES.items() if field not in _SESSION_MADE
}


class BatonSettings(BaseSettings):
    """Everything a ``baton`` command can be configured with."""

    # env_ignore_empty: a variable set to "" is unset. Compose's `${OPENAI_BASE_URL:-}` and shells'
    # `FOO= baton ...` hand every process empty variables; taken as values they would be an empty
    # base URL (every model call fails), an empty model name, an invalid approve mode.
    model_config = SettingsConfigDict(
        env_prefix="BATON_",
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        env_ignore_empty=True,
    )

    openai_api_key: SecretStr | None = Field(
        None,
        validation_alias=AliasChoices("openai_api_key", "OPENAI_API_KEY"),
        description="API key of the model endpoint; none (and no base URL) means the built-in "
        "offline model; a base URL without a key is a keyless server: no Authorization header",
    )
    openai_base_url: str | None = Field(
        None,
        validation_alias=AliasChoices("openai_base_url", "OPENAI_BASE_URL"),
        description="any OpenAI-compatible endpoint (vLLM, Ollama, llama.cpp, LiteLLM)",
    )
    model: str = Field(DEFAULT_MODEL, description="model name for the lead and sub-agents")
    # -- Redis credentials and TLS (docs/securing-redis.md): declared before `bus`, which takes
    # them into its URL (baton.bus.connect.redis_url); what the URL says itself wins.
    redis_password: SecretStr | None = Field(
        None,
        # Not "redis_password": names match the environment in any case, and it would put
        # REDIS_PASSWORD first; the field's own name still works (flags, the config file).
        validation_alias=AliasChoices("BATON_REDIS_PASSWORD", "REDIS_PASSWORD"),
        description="password of the Redis user, kept out of the bus URL; a URL with its own wins",
    )
    redis_ca_file: FilePath | None = Field(
        None, description="CA certificate(s) that verify a rediss:// server (PEM)"
    )
    redis_cert_file: FilePath | None = Field(
        None, description="client certificate for a rediss:// server that asks for one (PEM)"
    )
    redis_key_file: FilePath | None = Field(
        None, description="the client certificate's private key, unless in redis_cert_file"
    )
    bus: str = Field(
        "memory://",
        validation_alias=AliasChoices("bus", "BATON_BUS", "REDIS_URL"),
        description="memory:// (in-process) or redis://HOST:PORT/DB (rediss:// for TLS)",
    )
    prefix: str = Field("baton", min_length=1, description="Redis key prefix")
    signing_key: SecretStr | None = Field(
        None,
        min_length=1,
        description="sign every envelope and refuse unsigned ones (a Redis shared with writers "
        "baton does not trust; the same key in every process; docs/protocol.md); off by default",
    )
    pool: str = Field(
        DEFAULT_POOL,
        description="worker pool: the spawn requests `baton worker` claims, and where `baton run "
        "--no-local-workers` sends its sub-agents",
    )
    profiles: Path | None = Field(None, description="TOML file of sub-agent profiles")
    media_dir: Path = Field(Path("media"), description="where sub-agent tools write media")
    # -- the media store (docs/media.md) --------------------------------------------------------
    media: str | None = Field(
        None,
        description="where tools put media: a directory (replaces media_dir) or "
        "s3://bucket/prefix (the AWS_* variables configure it); unset: media_dir",
    )
    media_base_url: str | None = Field(
        None,
        description="where the media are publicly readable: baton serve's /media for a "
        "directory (http://host:8000/media), the bucket's public URL for s3:// (else presigned)",
    )
    media_url_expiry: float = Field(
        604800.0, ge=1, le=604800, description="seconds a bucket's presigned URLs last (7 days)"
    )
    upload_max_bytes: int = Field(
        20 * 1024 * 1024,
        ge=1,
        description="the largest file a person may upload in answer to an agent's question "
        "(`baton upload`, the HTTP API)",
    )
    image_model: str = Field(
        DEFAULT_IMAGE_MODEL,
        min_length=1,
        description=(
            "the model generate_image asks of the endpoint's Images API; 'demo' (and offline): "
            "the built-in demo painter, for servers without an Images API"
        ),
    )
    image_response_format: Literal["b64_json", "url"] | None = Field(
        None, description="the Images API's response_format; unset: not sent, the server's default"
    )
    approve: ApproveMode = Field(
        "ask",
        description="how `baton run` answers the approvals of every agent of its session; for "
        "`baton serve` and `baton mcp`, the loosest approvals a client may ask for",
    )
    session_timeout: float = Field(600.0, gt=0, description="seconds a session may run")
    unclaimed_timeout: float | None = Field(
        None,
        gt=0,
        description="seconds a sub-agent's spawn request waits for a worker before a warning "
        "(default 15); with no live worker of the pool serving its profile, the agent is then "
        "ended",
    )
    lead_lease: float = Field(
        LEAD_LEASE_S,
        gt=0,
        description="seconds a session's lead lease lasts unless renewed (every third of it): how "
        "long `baton resume` waits after a lead died, and how soon `baton watch` and `baton "
        "sessions` see it lost; shorter fails over sooner and renews more often",
    )
    bus_outage: float = Field(
        DEFAULT_OUTAGE_S,
        gt=0,
        description="seconds of bus outage a session, `baton watch` and `baton serve`'s feeds "
        "ride out; past it they stop with 'bus unreachable' (exit 3)",
    )
    retention: float = Field(
        DEFAULT_RETENTION_S,
        gt=0,
        description="seconds a finished session's keys stay on Redis (default 7 days); "
        "`baton clean` removes finished sessions sooner",
    )
    log_level: str = Field(
        "CRITICAL",
        description="diagnostic logging on stderr (e.g. INFO); off by default, since the views "
        "and the one closing line are what a user reads",
    )
    # -- what every model request says (the lead and every sub-agent; a profile may override) --
    temperature: float | None = Field(None, ge=0, le=2, description="sampling temperature")
    top_p: float | None = Field(None, gt=0, le=1, description="nucleus sampling")
    max_tokens: int = Field(
        1024, ge=0, description="most tokens of one reply (0: none sent, the server decides)"
    )
    model_timeout: float = Field(60.0, gt=0, description="seconds a model request may read nothing")
    model_retries: int = Field(3, ge=0, description="retries of a failed model request")
    tool_choice: ToolChoiceSetting = Field(
        "required",
        description=(
            "the lead's tool_choice (auto, required, none); required by default: measured on a "
            "1.5B model, it delegated with pictures in 4 of 10 sessions against 1 of 10 with auto"
        ),
    )
    parallel_tool_calls: bool | None = Field(
        None, description="ask for (or forbid) several tool calls in one reply; unset: not sent"
    )
    extra_body: Annotated[dict[str, Any], NoDecode] = Field(
        default_factory=dict,
        description="JSON object merged into every request body (wins over the settings above)",
    )
    # -- the session ------------------------------------------------------------------------------
    budget_tokens: int | None = Field(
        None, ge=1, description="tokens the whole session may spend, all agents together"
    )
    budget_calls: int | None = Field(
        None, ge=1, description="model calls the whole session may make, all agents together"
    )
    profile_tools: bool | None = Field(
        None, description="offer the lead one delegation tool per profile; unset: the default"
    )
    max_sends_per_turn: int | None = Field(
        None, ge=1, description="the lead's send_message calls per turn; unset: the default (8)"
    )
    max_new_agents_per_profile: int | None = Field(
        None, ge=1, description="agents the lead starts from one profile per turn (default 4)"
    )
    max_sends_per_agent: int | None = Field(
        None, ge=1, description="messages the lead sends one agent per turn (default 3)"
    )
    max_waves: int | None = Field(
        None, ge=1, description="lead turns that delegate per request (default 2)"
    )
    lead_policy: Literal["auto", "structural", "guided"] = Field(
        "auto",
        description=(
            "what judges the lead's answers: structural (structure only), guided (aids for small "
            "models, English), auto (guided for models whose name says at most 4B parameters)"
        ),
    )

    @field_validator("bus")
    @classmethod
    def _secured_bus(cls, value: str, info: ValidationInfo) -> str:
        """The bus URL with the Redis password and TLS files in it, so every connection of every
        command, session and server gets them with the URL it is handed anyway."""
        password = info.data.get("redis_password")
        try:
            return redis_url(
                value,
                password=password.get_secret_value() if password is not None else None,
                ca_file=info.data.get("redis_ca_file"),
                cert_file=info.data.get("redis_cert_file"),
                key_file=info.data.get("redis_key_file"),
            )
        except ConfigError as exc:
            raise ValueError(str(exc)) from exc

    @field_validator("pool")
    @classmethod
    def _pool_name(cls, value: str) -> str:
        return check_pool(value)

    @model_validator(mode="before")
    @classmethod
    def _media_in_a_directory(cls, data: Any) -> Any:
        """``media`` naming a directory replaces ``media_dir``: the folder the tools write, the
        lead confines file:// URLs to and ``baton serve`` serves is one and the same."""
        if isinstance(data, dict) and isinstance(data.get("media"), str):
            try:
                directory = media_directory(data["media"])
            except ConfigError:
                return data  # the field's own check says what is wrong, naming the setting
            if directory is not None:
                return {**data, "media_dir": directory}
        return data

    @field_validator("media")
    @classmethod
    def _media_store(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                media_directory(value)
            except ConfigError as exc:
                raise ValueError(str(exc)) from exc
        return value

    @field_validator("media_base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.lower().startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return value

    @field_validator("extra_body", mode="before")
    @classmethod
    def _json_object(cls, value: object) -> object:
        """A flag or environment variable gives the object as JSON text; a TOML table as is."""
        if isinstance(value, str):
            try:
                value = json.loads(value) if value.strip() else {}
            except json.JSONDecodeError as exc:
                raise ValueError(f"not valid JSON: {exc.msg}") from exc
            if not isinstance(value, dict):
                raise ValueError('must be a JSON object, e.g. {"cache_prompt": true}')
        return value

    @property
    def keyless(self) -> bool:
        """True when no API key is configured (or an empty one)."""
        return self.openai_api_key is None or not self.openai_api_key.get_secret_value()

    @property
    def offline(self) -> bool:
        """True when neither an API key nor a base URL is configured: the built-in offline model
        answers. A base URL alone names a keyless server (llama.cpp, vLLM, Ollama): its requests
        carry no ``Authorization`` header, so no placeholder key is needed."""
        return self.keyless and not self.openai_base_url

    def model_label(self) -> str:
        """Which model and endpoint the commands use, in words, for their start lines:
        ``llama3.1 at http://localhost:11434/v1 (no API key)``; the offline model says so."""
        from baton.subagents.models import describe_model

        return describe_model(self.model_settings())

    def model_settings(self) -> ModelSettings | None:
        """The model endpoint and request settings every agent starts from (a profile may
        override them), or None for the offline model (neither a key nor a base URL)."""
        if self.offline:
            return None
        from baton.llm import ModelSettings

        return ModelSettings.model_validate(
            {
                "model": self.model,
                "base_url": self.openai_base_url,
                "api_key": None if self.keyless else self.openai_api_key,
                "timeout": self.model_timeout,
                "max_retries": self.model_retries,
                "temperature": self.temperature,
                "top_p": self.top_p,
                "max_tokens": self.max_tokens or None,
                "parallel_tool_calls": self.parallel_tool_calls,
                "extra_body": dict(self.extra_body),
            }
        )

    def media_store(self) -> MediaStore:
        """The store the ``media`` setting names (a directory: ``media_dir``); raises
        ``ConfigError`` for one that cannot be used here (no ``s3`` extra for a bucket)."""
        bucket = self.media if self.media and media_directory(self.media) is None else None
        return open_store(
            bucket or self.media_dir,
            base_url=self.media_base_url,
            url_expiry_s=self.media_url_expiry,
        )

    def image_generator(self) -> ImageGenerator | None:
        """The Images API of the configured endpoint for ``generate_image``; None offline (the
        tool paints its demo picture)."""
        settings = self.model_settings()
        if settings is None or self.image_model == DEMO_IMAGE_MODEL:
            return None
        from baton.subagents.images import OpenAIImages

        return OpenAIImages(settings, self.image_model, response_format=self.image_response_format)

    def delegation(self) -> DelegationLimits | None:
        """The lead's delegation caps, or None when none is set (the lead's defaults)."""
        given = {
            name: getattr(self, name)
            for name in (
                "max_sends_per_turn",
                "max_new_agents_per_profile",
                "max_sends_per_agent",
                "max_waves",
            )
            if getattr(self, name) is not None
        }
        if not given:
            return None
        from baton.lead.delegation import DelegationLimits

        return DelegationLimits(**given)

    def budget(self) -> SpendLimits | None:
        """The session-wide caps, or None when neither is set."""
        if self.budget_tokens is None and self.budget_calls is None:
            return None
        from baton.engine.spend import SpendLimits

        return SpendLimits(max_tokens=self.budget_tokens, max_model_calls=self.budget_calls)

    def session_fields(self, names: Iterable[str] = SESSION_SOURCES) -> dict[str, object]:
        """The :class:`~baton.session.SessionConfig` fields ``names`` as the settings give them
        (:data:`SESSION_SOURCES`), leaving out those that are None (the config's own default
        decides): the one way a command or ``baton serve`` turns its settings into a session's."""
        fields: dict[str, object] = {}
        for name in names:
            made = _SESSION_MADE.get(name)
            value = getattr(self, made)() if made else getattr(self, _SESSION_AS_IS[name])
            if value is not None:
                fields[name] = value
        return fields

    def profile_set(self) -> dict[str, Profile]:
        """The profiles by name: the profiles file's, or the built-in ones."""
        from baton.compose import resolve_profiles

        return resolve_profiles(self.profiles)

    def lead_servers(self) -> dict[str, McpServerConfig]:
        """The lead's MCP servers: the profiles file's ``[lead.mcp.<server>]`` tables."""
        from baton.compose import lead_servers

        return lead_servers(self.profiles)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Flags (init), then the environment, then the config file; no dotenv or secrets dir."""
        return init_settings, env_settings, _FileSource(settings_cls, _ConfigData.data)


class _ConfigData:
    """The parsed config file of the settings being built.

    pydantic-settings builds its sources in a classmethod with no room for a file path, so
    :func:`load_settings` parks the parsed file here for the duration of one construction.
    """

    data: Mapping[str, Any] = {}


class _FileSource(PydanticBaseSettingsSource):
    """The config file's top-level keys, as already read by :func:`read_config_file`."""

    def __init__(self, settings_cls: type[BaseSettings], data: Mapping[str, Any]) -> None:
        super().__init__(settings_cls)
        self._data = dict(data)

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return self._data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self._data)


def read_config_file(path: Path) -> dict[str, Any]:
    """The top-level keys of a TOML config file; raises ``ConfigError`` naming the file."""
    import tomllib  # only a command given a config file reads TOML

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc
    known = set(BatonSettings.model_fields)
    for key, value in data.items():
        if key not in known:
            hint = ", ".join(sorted(known))
            raise ConfigError(f"config file {path}: unknown key {key!r} (known: {hint})")
        if isinstance(value, dict) and key not in TABLE_KEYS:
            raise ConfigError(f"config file {path}: {key!r} must be a value, not a table")
    return data


def load_settings(config: Path | None = None, **flags: Any) -> BatonSettings:
    """Resolve the settings: ``flags`` (None means "not given") > env > config file > default.

    ``config`` (or ``BATON_CONFIG`` when it is None) names the TOML file. Raises ``ConfigError``
    with one line naming where the bad value came from.
    """
    if config is None and os.environ.get("BATON_CONFIG"):
        config = Path(os.environ["BATON_CONFIG"])
    data = read_config_file(config) if config is not None else {}
    given = {key: value for key, value in flags.items() if value is not None}
    _ConfigData.data = data
    try:
        return BatonSettings(**given)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, config, given)) from exc
    finally:
        _ConfigData.data = {}


def _describe(exc: ValidationError, config: Path | None, given: Mapping[str, Any]) -> str:
    error = exc.errors(include_url=False)[0]
    key = str(error["loc"][0]) if error["loc"] else "settings"
    field = BatonSettings.model_fields.get(key)
    if key in given:
        where = f"--{key.replace('_', '-')}"
    elif config is not None and key in _ConfigData.data:
        where = f"config file {config}: {key}"
    else:
        where = _env_name(key, field)
    value = error.get("input")
    secret = "api_key" in key or "password" in key or key == "signing_key"
    said = str(error["msg"])
    if isinstance(value, str):  # a bus URL quotes its password: shown redacted, never as given
        said, value = redact_text(said, value), redact_url(value)
    shown = "" if isinstance(value, dict) or secret else f" (got {value!r})"
    return f"bad setting {where}: {said}{shown}"


def _env_name(key: str, field: FieldInfo | None) -> str:
    alias = field.validation_alias if field is not None else None
    if isinstance(alias, AliasChoices):
        names = [str(choice) for choice in alias.choices if str(choice).isupper()]
        present = [name for name in names if os.environ.get(name)]  # empty is unset
        return (present or names or [key])[0]
    return f"BATON_{key.upper()}"
