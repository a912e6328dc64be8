"""One import name over three folders: what ``pyproject.toml``'s ``package-dir`` promises."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _setuptools() -> dict[str, object]:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    table: dict[str, object] = pyproject["tool"]["setuptools"]
    return table


def test_every_package_folder_ships_under_baton() -> None:
    table = _setuptools()
    mapping = table["package-dir"]
    assert isinstance(mapping, dict)
    assert mapping == {"baton": "orchestrator", "baton.bus": "bus", "baton.subagents": "subagents"}
    expected: set[str] = set()
    for name, folder in mapping.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT / folder).parts
            expected.add(".".join((name, *parts)))
    packages = table["packages"]
    assert isinstance(packages, list)
    assert set(packages) == expected


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=60
    )


def test_outside_the_repository_only_baton_imports(tmp_path: Path) -> None:
    public = _python(
        "from baton import Session, SessionConfig, Worker, Profile, tool, open_bus\n"
        "import baton\n"
        "print(baton.__file__)",
        tmp_path,
    )
    assert public.returncode == 0, public.stderr
    assert Path(public.stdout.strip()) == ROOT / "orchestrator" / "__init__.py"
    for bare in ("bus", "orchestrator", "subagents"):
        result = _python(f"import {bare}", tmp_path)
        assert result.returncode != 0
        assert f"No module named '{bare}'" in result.stderr


def test_the_bus_layer_loads_without_the_model_client(tmp_path: Path) -> None:
    # `baton/__init__` resolves its public names lazily: importing the bus must not pay for
    # openai (over a second) the way an eager re-export would.
    result = _python(
        "import sys, baton.bus.redis\nprint('openai' in sys.modules, 'baton.api' in sys.modules)",
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "False"]


def test_the_lazy_public_names_are_the_api_modules() -> None:
    # baton/__init__ mirrors baton.api's names without importing it; the two lists must not drift.
    import baton
    import baton.api

    assert baton.__all__ == baton.api.__all__
    for name in baton.__all__:
        assert getattr(baton, name) is getattr(baton.api, name)
