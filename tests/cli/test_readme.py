"""The README's commands and its embedding example, run exactly as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit
from urllib.request import url2pathname

import pytest

from tests.cli.helpers import BATON, REPO


def section(title: str) -> str:
    text = (REPO / "README.md").read_text()
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


@pytest.mark.process
def test_main_job_command_prints_media_urls_whose_files_exist(
    tmp_path: Path, env: dict[str, str]
) -> None:
    block = re.search(r"```sh\n(.*?)\n```", section("Run it"), re.DOTALL)
    assert block is not None
    command = block[1].strip()
    install, _, run = command.rpartition(" && ")
    assert install == "python3 -m venv .venv && .venv/bin/pip install -q -e ."
    assert run.startswith(".venv/bin/baton run ")
    env = {k: v for k, v in env.items() if k != "BATON_MEDIA_DIR"}  # the default: ./media
    done = subprocess.run(
        [BATON, "run", _task(run)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    urls = [line.strip() for line in lines[lines.index("media:") + 1 :]]
    assert urls
    for url in urls:
        path = Path(url2pathname(urlsplit(url).path))
        assert path.is_file() and path.is_relative_to(tmp_path / "media")


def _task(run: str) -> str:
    match = re.fullmatch(r'\.venv/bin/baton run "([^"]+)"', run)
    assert match, run
    return match[1]


@pytest.mark.process
def test_embedding_example_runs_as_written(tmp_path: Path, env: dict[str, str]) -> None:
    block = re.search(r"```python\n(.*?)```", section("Embedding"), re.DOTALL)
    assert block is not None
    script = tmp_path / "example.py"
    script.write_text(block[1])
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    last = done.stdout.splitlines()[-1]
    assert last.startswith("completed [") and "file://" in last
    assert "Results from" in done.stdout  # the lead's streamed text came first
    assert ".Results" not in done.stdout  # and its rounds did not run together


def test_readme_settings_table_config_file_and_profile_example_hold(tmp_path: Path) -> None:
    import tomllib

    from baton.settings import BatonSettings, load_settings
    from baton.subagents.profiles import ProfileModel, parse_profiles

    text = section("Using a real model")
    rows = re.findall(r"^\| (`[^|]+) \|", text, re.MULTILINE)
    keys = {key for row in rows for key in re.findall(r"`(\w+)`", row)}
    assert keys and keys <= set(BatonSettings.model_fields), keys - set(BatonSettings.model_fields)
    config, profiles = re.findall(r"```toml\n(.*?)```", text, re.DOTALL)
    path = tmp_path / "baton.toml"
    path.write_text(config)
    assert load_settings(path).prefix == "baton"
    painter = parse_profiles(tomllib.loads(profiles))["painter"]
    assert painter.tool_choice == "required" and isinstance(painter.model, ProfileModel)
    assert painter.model.api_key_env == "GPU_BOX_KEY"
