"""One import name over three folders: what ``pyproject.toml``'s ``package-dir`` promises."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from typing import get_args

import pytest

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


@pytest.mark.process
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


@pytest.mark.process
def test_the_bus_layer_and_the_bus_commands_load_without_the_model_client(tmp_path: Path) -> None:
    # `baton/__init__`, `baton.lead` and `baton.llm` resolve their names lazily: the bus, and
    # what `baton watch`, `post` and `sessions` import (the lead's lease and record, the
    # message types), must not pay for openai (half a second or more a process).
    result = _python(
        "import sys, baton.bus.redis, baton.cli.busops, baton.llm.types\n"
        "print('openai' in sys.modules, 'baton.api' in sys.modules)",
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "False"]


def test_the_approve_mode_has_one_name() -> None:
    """Defined once, in the bus's messages, and re-exported: the settings, a session's config and
    the spawn request that carries it to a worker name the same type (it had two names)."""
    import baton
    from baton.bus.messages import ApproveMode, SpawnRequest
    from baton.session import SessionConfig
    from baton.settings import BatonSettings

    assert baton.ApproveMode is ApproveMode
    assert get_args(ApproveMode) == ("ask", "auto", "deny")
    for model in (BatonSettings, SessionConfig, SpawnRequest):
        annotation: object = model.model_fields["approve"].annotation
        assert annotation == ApproveMode, model


def test_the_lazy_public_names_are_the_api_modules() -> None:
    # baton/__init__ mirrors baton.api's names without importing it; the two lists must not drift.
    import baton
    import baton.api

    assert baton.__all__ == baton.api.__all__
    for name in baton.__all__:
        assert getattr(baton, name) is getattr(baton.api, name)


def source_copy(into: Path) -> Path:
    """The project's sources copied under ``into``: a build writes its ``build/`` and
    ``*.egg-info`` beside the sources it builds, so it builds a copy, never the checkout."""
    caches = shutil.ignore_patterns("__pycache__", "*.egg-info", ".*_cache")
    outputs = {".git", ".venv", "build", "dist", "media"}  # at the top only: baton.media is code

    def skip(folder: str, names: list[str]) -> set[str]:
        top = outputs.intersection(names) if Path(folder) == ROOT else set()
        return set(caches(folder, names)) | top

    return Path(shutil.copytree(ROOT, into, ignore=skip))


@pytest.mark.process
def test_the_built_wheel_is_one_baton_package(tmp_path: Path) -> None:
    # What a user gets from `pip install baton-orchestrator` (not the editable hook): every module
    # under baton/, the data files beside them, and no top-level bus/orchestrator/subagents.
    source = source_copy(tmp_path / "source")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob("baton_orchestrator-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        archive.extractall(tmp_path / "site")
    tops = {name.split("/", 1)[0] for name in names if not name.split("/", 1)[0].endswith("-info")}
    assert tops == {"baton"}
    shipped = ("baton/bus/redis/bus.py", "baton/bus/memory/bus.py", "baton/subagents/worker.py")
    for name in (*shipped, "baton/engine/loop.py"):
        assert name in names
    scripts = "baton/bus/redis/scripts/"
    assert any(name.startswith(scripts) and name.endswith(".lua") for name in names)
    assert "baton/server/assets/session.js" in names

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import baton; from baton import Session, SessionConfig; "
            "import baton.bus.redis; print(baton.__file__)",
        ],
        cwd=outside,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert Path(result.stdout.strip()).is_relative_to(tmp_path / "site")
    bare = subprocess.run(
        [sys.executable, "-c", "import bus"], cwd=outside, env=env, capture_output=True, text=True
    )
    assert "No module named 'bus'" in bare.stderr


@pytest.mark.process
def test_without_the_optional_extras_every_command_still_loads(tmp_path: Path) -> None:
    """The extras (otel, mcp, a2a, ag-ui, s3, server) are optional: with none installed, the
    package, its CLI and a session still load (``None`` in ``sys.modules`` is how Python spells
    "not installed"; a plain install once died on importing telemetry without opentelemetry)."""
    blocked = [
        "opentelemetry", "mcp", "a2a", "ag_ui", "boto3", "starlette", "sse_starlette", "uvicorn",
    ]  # fmt: skip
    result = _python(
        f"import sys\nfor name in {blocked!r}: sys.modules[name] = None\n"
        "import baton, baton.cli.app, baton.session, baton.subagents.worker\n"
        "from baton.engine import telemetry\n"
        "from baton import Session, SessionConfig, Worker\n"
        "print(telemetry.current_trace())",
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["None"]


def _distribution() -> str:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    name: str = pyproject["project"]["name"]
    return name


def test_the_distribution_is_not_the_unrelated_baton_on_pypi() -> None:
    # `baton` on PyPI is another project: `pip install baton` would install it, not this.
    from baton.errors import DISTRIBUTION

    assert _distribution() == DISTRIBUTION != "baton"


INSTALL_HINT = re.compile(r"pip install (?:-e |-q )*'?([\w.-]+)\[([\w,-]+)\]")


def test_every_install_hint_names_the_distribution() -> None:
    """A hint a user copies (`pip install 'NAME[extra]'`) installs this project, and only with
    extras it declares: the package's error messages, the docs, the README and the Dockerfile."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    extras = set(pyproject["project"]["optional-dependencies"])
    files = [ROOT / "README.md", ROOT / "Dockerfile", *(ROOT / "docs").glob("*.md")]
    for folder in ("orchestrator", "bus", "subagents"):
        files += (ROOT / folder).rglob("*.py")
    hints = []
    for path in files:
        for name, wanted in INSTALL_HINT.findall(path.read_text(encoding="utf-8")):
            hints.append((path.relative_to(ROOT), name, wanted))
    ours = [(path, name, wanted) for path, name, wanted in hints if name != "moto"]
    assert ours  # the hints exist, so the check below checks something
    for path, name, wanted in ours:
        assert name in {_distribution(), "."}, f"{path}: pip install {name}[{wanted}]"
        assert set(wanted.split(",")) <= extras, f"{path}: {wanted}"
