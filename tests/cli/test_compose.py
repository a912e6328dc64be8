"""The deployment files: no Docker engine runs here, so check what can be checked statically.

docker-compose.yml must parse, name only images the project builds or Redis 7, run commands
that exist in the ``baton`` CLI with options that command accepts, and keep the promises DESIGN
§6 makes (AOF, noeviction, health checks, scalable workers that drain before they are killed).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

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


def test_worker_healthcheck_is_baton_worker_check() -> None:
    test = compose()["services"]["worker"]["healthcheck"]["test"]
    assert test[0] == "CMD"
    assert test[1:3] == ["baton", "worker"]
    assert "--check" in test
    known = worker_options()
    assert all(arg in known for arg in test[3:] if arg.startswith("-"))


def test_images_are_redis_or_built_here() -> None:
    for name, service in compose()["services"].items():
        if "build" in service:
            context = REPO / str(service["build"] if isinstance(service["build"], str)
                                 else service["build"]["context"])  # fmt: skip
            assert (context / "Dockerfile").is_file(), name
            assert service["image"].startswith("baton:")
        else:
            assert service["image"].startswith("redis:7"), name


def test_dockerfile_installs_the_project_and_runs_baton() -> None:
    text = (REPO / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.1[1-9]", text, re.MULTILINE)
    assert 'ENTRYPOINT ["baton"]' in text
    for package in ("bus", "orchestrator", "subagents"):
        assert f"COPY {package} ./{package}" in text
    cmd = re.search(r"^CMD (\[.*\])$", text, re.MULTILINE)
    assert cmd and yaml.safe_load(cmd[1])[0] in baton_commands()
    ignored = (REPO / ".dockerignore").read_text().split()
    assert ".venv" in ignored and ".git" in ignored
