"""The settings themselves: every field a ``baton`` command reads, and which of them no flag sets.

The package docstring (:mod:`baton.settings`) says how they are resolved and named.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, Field, FilePath, SecretStr, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from baton.bus.base import DEFAULT_RETENTION_S
from baton.bus.messages import DEFAULT_POOL, ApproveMode
from baton.bus.parts.records import LEAD_LEASE_S
from baton.bus.retry import DEFAULT_OUTAGE_S
from baton.llm.defaults import DEFAULT_IMAGE_MODEL, DEFAULT_MODEL
from baton.settings.checks import (
    BusUrl,
    HttpUrl,
    JsonObject,
    MediaUrl,
    PoolName,
    media_in_a_directory,
)
from baton.settings.sources import ConfigData, FileSource

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


class BatonSettings(BaseSettings):
    """Everything a ``baton`` command can be configured with: one flat field per setting (its
    flag, its variable and its config key say the same name).

    What a setting's value must be is its type's (:mod:`baton.settings.checks`); what the
    settings make of themselves for a session, a worker or the server is
    :mod:`baton.settings.made`'s and :mod:`baton.settings.session`'s; where they come from,
    :mod:`baton.settings.load`'s.
    """

    # env_ignore_empty: a variable set to "" is unset. Compose's `${OPENAI_BASE_URL:-}` and shells'
    # `FOO= baton ...` hand every process empty variables; taken as values they would be an empty
    # base URL (every model call fails), an empty model name, an invalid approve mode.
    model_config = SettingsConfigDict(
        defer_build=True,
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
    bus: BusUrl = Field(
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
    pool: PoolName = Field(
        DEFAULT_POOL,
        description="worker pool: the spawn requests `baton worker` claims, and where `baton run "
        "--no-local-workers` sends its sub-agents",
    )
    profiles: Path | None = Field(None, description="TOML file of sub-agent profiles")
    media_dir: Path = Field(Path("media"), description="where sub-agent tools write media")
    # -- the media store (docs/media.md) --------------------------------------------------------
    media: MediaUrl | None = Field(
        None,
        description="where tools put media: a directory (replaces media_dir) or "
        "s3://bucket/prefix (the AWS_* variables configure it); unset: media_dir",
    )
    media_base_url: HttpUrl | None = Field(
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
    extra_body: JsonObject = Field(
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

    @model_validator(mode="before")
    @classmethod
    def _media_in_a_directory(cls, data: Any) -> Any:
        """``media`` naming a directory replaces ``media_dir`` (:mod:`baton.settings.checks`)."""
        return media_in_a_directory(data)

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
        return init_settings, env_settings, FileSource(settings_cls, ConfigData.data)
