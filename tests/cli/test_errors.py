"""User errors: each gives its exit code and exactly one line on stderr, never a traceback.

In-process (typer's runner, :func:`~tests.cli.helpers.invoke_baton`): an exit code and its line need
no process; tests/cli/test_exits.py and test_one_line_errors.py keep the console script's own.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from baton.testing import free_port
from tests.cli.helpers import invoke_baton


def one_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture
def dead_redis() -> str:
    return f"redis://127.0.0.1:{free_port()}/0"


@pytest.mark.parametrize(
    "args",
    [
        ["run", "paint a fox"],
        ["post", "--session", "s1", "--to", "lead", "hello"],
        ["watch", "s1"],
        ["approve", "s1", "call_1", "--yes"],
        ["sessions"],
        ["worker", "--check"],
        ["worker"],
    ],
    ids=lambda args: " ".join(args[:2]) if args[0] == "worker" else args[0],
)
def test_unreachable_redis_exits_3(args: list[str], env: dict[str, str], dead_redis: str) -> None:
    code, _, err = invoke_baton(*args, "--bus", dead_redis, env=env)
    assert code == 3, err
    assert "cannot reach the bus" in one_line(err)


@pytest.mark.parametrize("command", ["run", "post", "sessions"])
def test_bad_bus_url_exits_2(command: str, env: dict[str, str]) -> None:
    args = {"run": ["run", "x"], "post": ["post", "-s", "s1", "--to", "lead", "x"]}
    code, _, err = invoke_baton(*args.get(command, [command]), "--bus", "bogus://x", env=env)
    assert code == 2
    assert "unknown bus URL 'bogus://x'" in one_line(err)


def test_env_var_bus_url_is_used_and_checked(env: dict[str, str]) -> None:
    code, _, err = invoke_baton("sessions", env={**env, "REDIS_URL": "nope://"})
    assert code == 2
    assert "unknown bus URL 'nope://'" in one_line(err)


def test_memory_bus_is_refused_where_another_process_is_needed(env: dict[str, str]) -> None:
    code, _, err = invoke_baton("watch", "s1", env=env)
    assert code == 2
    assert "needs a shared bus" in one_line(err)


def test_unknown_profile_exits_2(env: dict[str, str]) -> None:
    code, _, err = invoke_baton("run", "--profile", "juggler", "x", env=env)
    assert code == 2
    line = one_line(err)
    assert "unknown profile 'juggler'" in line and "painter" in line


def test_bad_profiles_file_exits_2(env: dict[str, str], tmp_path: Path) -> None:
    bad = tmp_path / "profiles.toml"
    bad.write_text('[profiles.x]\ndescription = "no prompt"\n')
    code, _, err = invoke_baton("run", "--profiles", str(bad), "x", env=env)
    assert code == 2
    assert "bad agent profile" in one_line(err)


def test_worker_with_a_bad_profiles_file_exits_2(
    env: dict[str, str], tmp_path: Path, redis_url: str
) -> None:
    bad = tmp_path / "profiles.toml"
    bad.write_text('[profiles.x]\ndescription = "no prompt"\n')
    code, _, err = invoke_baton("worker", "--bus", redis_url, "--profiles", str(bad), env=env)
    assert code == 2, err
    assert "bad agent profile" in one_line(err)


def test_worker_with_a_missing_profiles_file_says_so_in_one_line(
    env: dict[str, str], tmp_path: Path, redis_url: str
) -> None:
    missing = tmp_path / "nowhere.toml"
    code, _, err = invoke_baton("worker", "--bus", redis_url, "--profiles", str(missing), env=env)
    assert code in (1, 2), err
    assert "nowhere.toml" in one_line(err)


def test_worker_with_an_unknown_log_level_exits_2(env: dict[str, str]) -> None:
    code, _, err = invoke_baton("worker", "--log-level", "chatty", env=env)
    assert code == 2, err
    assert one_line(err) == "baton worker: bad setting log_level: unknown level 'chatty'"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("bus = \n", "is not valid TOML"),
        ('colour = "blue"\n', "unknown key 'colour'"),
        ('approve = "sometimes"\n', "approve"),
        ("session_timeout = -1\n", "session_timeout"),
    ],
    ids=["syntax", "unknown-key", "bad-value", "out-of-range"],
)
def test_bad_config_file_exits_2(
    text: str, expected: str, env: dict[str, str], tmp_path: Path
) -> None:
    config = tmp_path / "baton.toml"
    config.write_text(text)
    code, _, err = invoke_baton("run", "--config", str(config), "x", env=env)
    assert code == 2
    line = one_line(err)
    assert expected in line and "baton.toml" in line


def test_missing_config_file_from_env_exits_2(env: dict[str, str], tmp_path: Path) -> None:
    missing = tmp_path / "absent.toml"
    code, _, err = invoke_baton("run", "x", env={**env, "BATON_CONFIG": str(missing)})
    assert code == 2
    assert "cannot read config file" in one_line(err)


def test_flag_beats_env_beats_config_file(env: dict[str, str], tmp_path: Path) -> None:
    config = tmp_path / "baton.toml"
    config.write_text('bus = "fromfile://"\n')
    code, _, err = invoke_baton("sessions", "--config", str(config), env=env)
    assert "'fromfile://'" in one_line(err) and code == 2
    env = {**env, "BATON_BUS": "fromenv://"}
    code, _, err = invoke_baton("sessions", "--config", str(config), env=env)
    assert "'fromenv://'" in one_line(err) and code == 2
    code, _, err = invoke_baton("sessions", "--config", str(config), "--bus", "flag://", env=env)
    assert "'flag://'" in one_line(err) and code == 2


class _Refusing(http.server.BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint that refuses every request: a wrong API key."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        body = json.dumps(
            {"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}}
        ).encode()
        self.send_response(401)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def refusing_endpoint() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def test_model_endpoint_refusing_fails_the_session_with_one_line(
    env: dict[str, str], refusing_endpoint: str
) -> None:
    env = {**env, "OPENAI_API_KEY": "sk-wrong", "OPENAI_BASE_URL": refusing_endpoint}
    code, out, err = invoke_baton("run", "paint a fox", env=env)
    assert code == 1
    line = one_line(err)
    assert "session failed" in line and "401" in line
    assert "sk-wrong" not in out + err


def test_approve_needs_yes_or_no(env: dict[str, str]) -> None:
    code, _, err = invoke_baton("approve", "s1", "call_1", env=env)
    assert code == 2
    assert "--yes or --no" in one_line(err)


@pytest.mark.parametrize(
    "command", ["run", "post", "watch", "approve", "sessions", "worker", "version"]
)
def test_every_command_has_help_with_examples(command: str, env: dict[str, str]) -> None:
    code, out, _ = invoke_baton(command, "--help", env=env)
    assert code == 0
    assert f"baton {command}" in out
    if command != "version":
        assert "Example" in out
