"""The CLI's configuration: flag > environment variable > config file > default.

One :class:`BatonSettings` object carries everything a command was told, resolved in that order by
pydantic-settings. Every command builds it the same way (:func:`baton.cli.options.settings_from`),
``worker`` and ``serve`` included, so processes started alike agree on the bus and key prefix.
The library itself (sessions, workers, the server) never reads it: it is handed what it needs.

The config file is TOML with the fields below as top-level keys; its path comes
from ``--config`` or ``BATON_CONFIG``::

    # baton.toml
    bus = "redis://localhost:6379/0"
    prefix = "baton"
    model = "gpt-4o-mini"
    openai_base_url = "http://localhost:11434/v1"
    profiles = "profiles.toml"
    approve = "ask"

Environment variables: ``OPENAI_API_KEY``, ``OPENAI_BASE_URL``, ``BATON_MODEL``, ``BATON_BUS`` (or
``REDIS_URL``), ``BATON_PROFILES``, ``BATON_MEDIA_DIR``, ``BATON_APPROVE``, ``BATON_PREFIX``,
``BATON_SESSION_TIMEOUT``, ``BATON_LOG_LEVEL``, ``BATON_CONFIG``.

Every problem — an unreadable or invalid file, an unknown key, a value of the wrong kind — is one
:class:`~baton.bus.errors.ConfigError` whose message names the source and the key, because the CLI
prints it as the single line a user sees.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, Field, SecretStr, ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from baton.bus.errors import ConfigError
from baton.defaults import DEFAULT_MODEL, ApproveMode


class BatonSettings(BaseSettings):
    """Everything a ``baton`` command can be configured with."""

    model_config = SettingsConfigDict(
        env_prefix="BATON_", populate_by_name=True, extra="forbid", frozen=True
    )

    openai_api_key: SecretStr | None = Field(
        None,
        validation_alias=AliasChoices("openai_api_key", "OPENAI_API_KEY"),
        description="API key of the model endpoint; none means the built-in offline model",
    )
    openai_base_url: str | None = Field(
        None,
        validation_alias=AliasChoices("openai_base_url", "OPENAI_BASE_URL"),
        description="any OpenAI-compatible endpoint (vLLM, Ollama, llama.cpp, LiteLLM)",
    )
    model: str = Field(DEFAULT_MODEL, description="model name for the lead and sub-agents")
    bus: str = Field(
        "memory://",
        validation_alias=AliasChoices("bus", "BATON_BUS", "REDIS_URL"),
        description="memory:// (in-process) or redis://HOST:PORT/DB",
    )
    prefix: str = Field("baton", min_length=1, description="Redis key prefix")
    profiles: Path | None = Field(None, description="TOML file of sub-agent profiles")
    media_dir: Path = Field(Path("media"), description="where sub-agent tools write media")
    approve: ApproveMode = Field("ask", description="how approvals are answered in `baton run`")
    session_timeout: float = Field(600.0, gt=0, description="seconds a session may run")
    log_level: str = Field(
        "CRITICAL",
        description="diagnostic logging on stderr (e.g. INFO); off by default, since the views "
        "and the one closing line are what a user reads",
    )

    @property
    def offline(self) -> bool:
        """True when no API key is configured: the built-in offline model answers."""
        return self.openai_api_key is None or not self.openai_api_key.get_secret_value()

    def model_env(self) -> dict[str, str]:
        """The settings in the environment-variable form ``baton.subagents.models.EnvModels`` reads.

        In-process workers get their model from this mapping, so a key or endpoint given by flag
        or config file reaches them exactly as it reaches the lead.
        """
        env = {"BATON_MODEL": self.model}
        if not self.offline and self.openai_api_key is not None:
            env["OPENAI_API_KEY"] = self.openai_api_key.get_secret_value()
        if self.openai_base_url:
            env["OPENAI_BASE_URL"] = self.openai_base_url
        return env

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
        if isinstance(value, dict):
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
    shown = "" if isinstance(value, dict) or "api_key" in key else f" (got {value!r})"
    return f"bad setting {where}: {error['msg']}{shown}"


def _env_name(key: str, field: FieldInfo | None) -> str:
    alias = field.validation_alias if field is not None else None
    if isinstance(alias, AliasChoices):
        names = [str(choice) for choice in alias.choices if str(choice).isupper()]
        present = [name for name in names if name in os.environ]
        return (present or names or [key])[0]
    return f"BATON_{key.upper()}"
