"""Resolving the settings: flags > environment > config file > default, and the one line a bad
value is refused with, naming where it came from.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, ValidationError
from pydantic.fields import FieldInfo

from baton.bus.errors import redact_url
from baton.bus.redact import redact_text
from baton.errors import ConfigError
from baton.settings.fields import TABLE_KEYS, BatonSettings
from baton.settings.sources import ConfigData


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
    ConfigData.data = data
    try:
        return BatonSettings(**given)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, config, given)) from exc
    finally:
        ConfigData.data = {}


def _describe(exc: ValidationError, config: Path | None, given: Mapping[str, Any]) -> str:
    error = exc.errors(include_url=False)[0]
    key = str(error["loc"][0]) if error["loc"] else "settings"
    field = BatonSettings.model_fields.get(key)
    if key in given:
        where = f"--{key.replace('_', '-')}"
    elif config is not None and key in ConfigData.data:
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
