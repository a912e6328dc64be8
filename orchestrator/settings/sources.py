"""Where the settings come from besides flags and the environment: the config file.

pydantic-settings builds its sources in a classmethod with no room for a file path, so
:func:`~baton.settings.load.load_settings` parks the parsed file in :class:`ConfigData` for the
duration of one construction and :class:`FileSource` hands its keys over.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource


class ConfigData:
    """The parsed config file of the settings being built.

    pydantic-settings builds its sources in a classmethod with no room for a file path, so
    :func:`load_settings` parks the parsed file here for the duration of one construction.
    """

    data: Mapping[str, Any] = {}


class FileSource(PydanticBaseSettingsSource):
    """The config file's top-level keys, as already read by :func:`read_config_file`."""

    def __init__(self, settings_cls: type[BaseSettings], data: Mapping[str, Any]) -> None:
        super().__init__(settings_cls)
        self._data = dict(data)

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return self._data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self._data)
