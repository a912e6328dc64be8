"""The README's commands and its embedding example, run exactly as written; and the reference the
README links to (docs/settings.md) holds."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit
from urllib.request import url2pathname

import pytest
from anyio.from_thread import start_blocking_portal

from baton.llm import ScriptedServer
from baton.llm.offline import offline_reply
from tests.cli.helpers import BATON, REPO, Proc


def section(title: str, page: str = "README.md") -> str:
    """The ``## title`` section of ``page`` (a path from the checkout's root)."""
    text = (REPO / page).read_text()
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


ACTIVATE = "python3 -m venv .venv && . .venv/bin/activate"
CI_TEST_COMMAND = (
    "python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' "
    "&& .venv/bin/pytest -n 6 --dist worksteal"
)


@pytest.mark.process
def test_main_job_command_prints_media_urls_whose_files_exist(
    tmp_path: Path, env: dict[str, str]
) -> None:
    block = re.search(r"```sh\n(.*?)\n```", section("Run it"), re.DOTALL)
    assert block is not None
    activate, install, run = block[1].strip().splitlines()
    assert activate == ACTIVATE  # then bare `pip`, `baton`, as in every example after it
    assert install == "pip install -q -e ."
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
    match = re.fullmatch(r'baton run "([^"]+)"', run)
    assert match, run
    return match[1]


def test_after_the_activation_every_example_runs_bare_commands() -> None:
    """The venv is activated once, in "Run it": no later example spells ``.venv/bin/``, but for
    the test command CI runs verbatim (tests/test_ci.py), which works in any shell."""
    text = (REPO / "README.md").read_text()
    after = text[text.index(ACTIVATE) + len(ACTIVATE) :]
    spelled = [
        line
        for line in after.splitlines()
        if re.search(r"\.venv/bin/(?!activate)", line) and line != CI_TEST_COMMAND
    ]
    assert spelled == []


@pytest.mark.process
def test_own_agent_and_tool_example_runs_as_written(tmp_path: Path, env: dict[str, str]) -> None:
    block = re.search(r"```python\n(.*?)```", section("Your own agent and tool, in Python"),
                      re.DOTALL)  # fmt: skip
    assert block is not None
    script = tmp_path / "count.py"
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
    status, *answer = done.stdout.splitlines()
    assert status == "completed"
    counted = [line for line in answer if "counter:" in line]
    assert counted and '"words": 10' in counted[0], done.stdout  # the tool's own result


@pytest.mark.process
def test_keyless_local_model_example_reaches_the_server_without_a_key(
    env: dict[str, str],
) -> None:
    """The README's command for a local server, with the one change that the server is the
    scripted one on loopback: its requests carry no Authorization header, and the header names
    the model and the endpoint."""
    block = re.search(r"<!-- example: keyless -->\n```sh\n(.*?)```", section("Using a real model"),
                      re.DOTALL)  # fmt: skip
    assert block is not None
    [command] = [line for line in block[1].splitlines() if line.startswith("baton run ")]
    args = shlex.split(command, comments=True)
    readme_url = args[args.index("--base-url") + 1]
    assert readme_url == "http://localhost:11434/v1" and "--image-model" in args
    server = ScriptedServer(responder=offline_reply, record=True)
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(server.serve()) as http,
    ):
        args[args.index("--base-url") + 1] = http.base_url
        done = subprocess.run(
            [BATON, *args[1:]], env=env, capture_output=True, text=True, timeout=120
        )
    assert done.returncode == 0, done.stderr
    chats = [r for r in server.requests if r.path.endswith("/chat/completions")]
    assert chats and all("authorization" not in r.headers for r in chats)
    model = args[args.index("--model") + 1]
    assert f"({model} at {http.base_url} (no API key)): " in done.stdout.splitlines()[0]


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


def test_settings_page_table_config_file_and_profile_example_hold(tmp_path: Path) -> None:
    import tomllib

    from baton.settings import BatonSettings, load_settings
    from baton.subagents.profiles import ProfileModel, parse_profiles

    requests = section("The model's requests", "docs/settings.md")
    rows = re.findall(r"^\| (`[^|]+) \|", requests, re.MULTILINE)
    keys = {key for row in rows for key in re.findall(r"`(\w+)`", row)}
    assert keys and keys <= set(BatonSettings.model_fields), keys - set(BatonSettings.model_fields)
    [config] = re.findall(r"```toml\n(.*?)```", section("A config file", "docs/settings.md"),
                          re.DOTALL)  # fmt: skip
    path = tmp_path / "baton.toml"
    path.write_text(config)
    assert load_settings(path).prefix == "baton"
    [profiles] = re.findall(r"```toml\n(.*?)```", section("A profile's own model",
                            "docs/settings.md"), re.DOTALL)  # fmt: skip
    painter = parse_profiles(tomllib.loads(profiles))["painter"]
    assert painter.tool_choice == "required" and isinstance(painter.model, ProfileModel)
    assert painter.model.api_key_env == "GPU_BOX_KEY"


def test_the_settings_page_lists_every_setting_as_the_settings_declare_it() -> None:
    from tests.support.settings_table import PAGE, generated, table

    assert generated(PAGE.read_text()) == table(), (
        "docs/settings.md's table of every setting is stale: rewrite it with "
        "`python -m tests.support.settings_table`"
    )


def test_redis_and_workers_commands_run_as_written(
    start: Callable[..., Proc], redis_url: str, env: dict[str, str], tmp_path: Path
) -> None:
    """The README's commands "by hand", with the one change that the bus is the test's Redis: a
    worker hosts the sub-agents of a run in another process, and a watch shows how it ended."""
    block = re.search(r"```sh\n(.*?)\n```", section("Redis and workers"), re.DOTALL)
    assert block is not None
    lines = block[1].splitlines()
    export, worker_line, run_line, watch_line = lines[lines.index("# or by hand:") + 1 :]
    assert export == "export BATON_BUS=redis://localhost:6379/0"
    env = {**env, "BATON_BUS": redis_url}
    assert worker_line.endswith("&")
    worker = start(*shlex.split(worker_line.removesuffix("&"))[1:], env=env)
    worker.expect(" ready: ", stream="err")
    run = start(*shlex.split(run_line, comments=True)[1:], env=env)
    run.expect("── session demo")  # it is on the bus: "another shell" watches it
    watch = start(*shlex.split(watch_line, comments=True)[1:], env=env)
    assert run.wait() == 0, run.transcript()
    printed = [line.strip() for line in run.out]
    urls = printed[printed.index("media:") + 1 :]
    assert len(urls) == 2 and all(Path(url2pathname(urlsplit(u).path)).is_file() for u in urls)
    assert watch.wait() == 0, watch.transcript()
    assert "completed" in watch.transcript(), watch.transcript()  # live, or "already completed"
