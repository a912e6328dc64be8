"""The checks of single settings, as the types their fields are declared with.

Each is a value a user sets (a flag, a variable, a config key) that must be turned down with one
line naming what is wrong: the bus URL (and the Redis credentials and TLS files it takes in), the
pool's name, the media store, a public URL, a JSON object. Declared as ``Annotated`` types rather
than validators of :class:`~baton.settings.fields.BatonSettings`, so the class reads as the list of
settings and each check lives once, by its name.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, ValidationInfo
from pydantic_settings import NoDecode

from baton.bus.connect import redis_url
from baton.bus.messages import check_pool
from baton.errors import ConfigError
from baton.media import media_directory


def _secured_bus(value: str, info: ValidationInfo) -> str:
    """The bus URL with the Redis password and TLS files in it, so every connection of every
    command, session and server gets them with the URL it is handed anyway (the fields that
    give them are declared before ``bus``)."""
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


def _media_store(value: str) -> str:
    try:
        media_directory(value)
    except ConfigError as exc:
        raise ValueError(str(exc)) from exc
    return value


def _http_url(value: str) -> str:
    if not value.lower().startswith(("http://", "https://")):
        raise ValueError("must be an http:// or https:// URL")
    return value


def _json_object(value: object) -> object:
    """A flag or environment variable gives the object as JSON text; a TOML table as is."""
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except json.JSONDecodeError as exc:
            raise ValueError(f"not valid JSON: {exc.msg}") from exc
        if not isinstance(value, dict):
            raise ValueError('must be a JSON object, e.g. {"cache_prompt": true}')
    return value


BusUrl = Annotated[str, AfterValidator(_secured_bus)]
"""A bus URL, with the Redis credentials and TLS files of the settings taken into it."""
PoolName = Annotated[str, AfterValidator(check_pool)]
"""A worker pool's name."""
MediaUrl = Annotated[str, AfterValidator(_media_store)]
"""Where tools put media: a directory or ``s3://bucket/prefix``."""
HttpUrl = Annotated[str, AfterValidator(_http_url)]
"""An ``http://`` or ``https://`` URL."""
JsonObject = Annotated[dict[str, Any], NoDecode, BeforeValidator(_json_object)]
"""A JSON object: JSON text from a flag or a variable, a table from the config file."""


def media_in_a_directory(data: Any) -> Any:
    """The raw settings with ``media`` naming a directory put in ``media_dir`` too: the folder
    the tools write, the lead confines file:// URLs to and ``baton serve`` serves is one and the
    same."""
    if isinstance(data, dict) and isinstance(data.get("media"), str):
        try:
            directory = media_directory(data["media"])
        except ConfigError:
            return data  # the field's own check says what is wrong, naming the setting
        if directory is not None:
            return {**data, "media_dir": directory}
    return data
