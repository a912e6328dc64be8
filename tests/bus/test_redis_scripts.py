"""The Lua scripts ship as files: each one in ``bus/redis/scripts`` is loaded, and the package data
names them, so a non-editable install carries them too."""

from __future__ import annotations

import tomllib
from fnmatch import fnmatch
from pathlib import Path

from baton.bus.redis.scripts import SCRIPTS

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "bus" / "redis" / "scripts"


def test_every_lua_file_is_a_script_the_bus_loads() -> None:
    on_disk = {path.stem: path.read_bytes() for path in FOLDER.glob("*.lua")}
    assert on_disk == {script.name: script.body for script in SCRIPTS}


def test_the_package_data_ships_every_lua_file() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns: list[str] = pyproject["tool"]["setuptools"]["package-data"]["baton.bus.redis"]
    for path in FOLDER.glob("*.lua"):
        relative = path.relative_to(ROOT / "bus" / "redis").as_posix()
        assert any(fnmatch(relative, pattern) for pattern in patterns), relative
