"""Issue 15, item 6: what used to end in a traceback ends in one line and the right exit code.

A bus URL the Redis server turns down (a database it does not have, credentials it refuses) is a
configuration error (exit 2) for every command that opens the bus, and no message repeats the
URL's password; ``baton serve`` without the ``server`` extra says which extra to install (and its
``--help`` works regardless); a reader that closes stdout early ends a command quietly (141).
An exit code and its line are read in-process (:func:`~tests.cli.helpers.invoke_baton`); what
only the console script shows (a blocked import, a closed pipe, a server's start-up line) runs it.
"""

from __future__ import annotations

import os
import subprocess
import tomllib
from pathlib import Path

import pytest
import redis

from baton.testing import RedisServer, free_port
from baton.testing.redis_server import DATABASES
from tests.cli.helpers import BATON, REPO, TIMEOUT_S, invoke_baton, processes, run_baton

PASSWORD = "hunter2-secret"

# Every command that opens the bus, with the arguments it needs besides --bus.
BUS_COMMANDS = {
    "run": ["run", "paint a fox"],
    "resume": ["resume", "s1"],
    "worker": ["worker"],
    "worker --check": ["worker", "--check"],
    "watch": ["watch", "s1"],
    "sessions": ["sessions"],
    "post": ["post", "--session", "s1", "--to", "lead", "hello"],
    "approve": ["approve", "s1", "call_1", "--yes"],
    "serve": ["serve", "--port", "0"],
}


def one_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def server_base(redis_server: RedisServer) -> str:
    return redis_server.url.rsplit("/", 1)[0]  # redis://HOST:PORT/0 -> redis://HOST:PORT


@pytest.mark.parametrize("name", list(BUS_COMMANDS))
def test_a_database_the_server_lacks_is_a_config_error(
    name: str, env: dict[str, str], redis_server: RedisServer
) -> None:
    url = f"{server_base(redis_server)}/{DATABASES}"  # one past the test server's last database
    code, _, err = invoke_baton(*BUS_COMMANDS[name], "--bus", url, env=env)
    line = one_line(err)
    assert code == 2, err
    assert line.startswith(f"baton {name.split()[0]}: ")
    assert url in line and "DB index is out of range" in line


@pytest.mark.parametrize("name", ["run", "worker", "sessions", "serve"])
def test_refused_credentials_are_a_config_error_without_the_password(
    name: str, env: dict[str, str], redis_server: RedisServer
) -> None:
    host = server_base(redis_server).removeprefix("redis://")
    url = f"redis://:{PASSWORD}@{host}/0"  # this server has no password: AUTH is refused
    code, out, err = invoke_baton(*BUS_COMMANDS[name], "--bus", url, env=env)
    line = one_line(err)
    assert code == 2, err
    assert f"redis://:***@{host}/0" in line
    assert PASSWORD not in out + err


@pytest.mark.parametrize("name", ["run", "worker --check", "watch"])
def test_an_unreachable_bus_is_named_without_the_password(name: str, env: dict[str, str]) -> None:
    url = f"redis://:{PASSWORD}@127.0.0.1:{free_port()}/0?password={PASSWORD}"
    code, out, err = invoke_baton(*BUS_COMMANDS[name], "--bus", url, env=env)
    line = one_line(err)
    assert code == 3, err
    assert "cannot reach the bus at redis://:***@127.0.0.1:" in line
    assert "password=***" in line
    assert PASSWORD not in out + err


def test_an_unknown_scheme_is_named_without_the_password(env: dict[str, str]) -> None:
    code, _, err = invoke_baton("sessions", "--bus", f"redis+x://u:{PASSWORD}@h/0", env=env)
    assert code == 2
    assert "unknown bus URL 'redis+x://u:***@h/0'" in one_line(err)


@pytest.mark.process
def test_serve_names_its_bus_without_the_password(env: dict[str, str]) -> None:
    """The start-up line of a server whose Redis wants a password shows the URL redacted."""
    with RedisServer() as server, processes() as start:
        with redis.Redis(port=server.port) as admin:
            admin.config_set("requirepass", PASSWORD)
        url = f"redis://:{PASSWORD}@127.0.0.1:{server.port}/0"
        serve = start("serve", "--port", "0", "--bus", url, env=env)
        line = serve.expect("baton serve: http", stream="err")
        assert f"bus redis://:***@127.0.0.1:{server.port}/0" in line
        assert PASSWORD not in line


# -- baton serve without the `server` extra ---------------------------------------------------


@pytest.fixture
def without_server_extra(env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """An environment where starlette, sse-starlette and uvicorn cannot be imported, as after
    ``pip install baton-orchestrator`` without the extra: a ``sitecustomize`` blocks them in every
    process."""
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(
        "import sys\nfor name in ('starlette', 'sse_starlette', 'uvicorn'):\n"
        "    sys.modules[name] = None\n"
    )
    return {**env, "PYTHONPATH": os.pathsep.join([str(blocker), env["PYTHONPATH"]])}


@pytest.mark.process
def test_the_blocker_really_blocks(without_server_extra: dict[str, str]) -> None:
    done = subprocess.run(
        [str(Path(BATON).parent / "python"), "-c", "import uvicorn"],
        env=without_server_extra,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert done.returncode == 1 and "ModuleNotFoundError" in done.stderr


@pytest.mark.process
def test_serve_help_works_without_the_server_extra(without_server_extra: dict[str, str]) -> None:
    code, out, err = run_baton("serve", "--help", env=without_server_extra)
    assert code == 0, err
    assert "--port" in out and "Traceback" not in err


@pytest.mark.process
def test_serve_says_which_extra_to_install(without_server_extra: dict[str, str]) -> None:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert any(dep.startswith("uvicorn") for dep in extras["server"])  # the name told is real
    code, _, err = run_baton("serve", "--port", "0", env=without_server_extra)
    assert code == 2, err
    line = one_line(err)
    assert line.startswith("baton serve: ") and "pip install 'baton-orchestrator[server]'" in line


@pytest.mark.process
def test_other_commands_never_need_the_server_extra(without_server_extra: dict[str, str]) -> None:
    code, out, err = run_baton("run", "--json", "paint a fox", env=without_server_extra)
    assert code == 0, err
    assert '"session.finished"' in out


# -- a reader that stops reading ---------------------------------------------------------------


def run_into_closed_pipe(*args: str, env: dict[str, str]) -> tuple[int, str]:
    """Run ``baton ARGS`` with stdout a pipe nobody reads any more (``| head -1`` after its
    line): the first write meets EPIPE, deterministically. (exit code, stderr)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [BATON, *args],
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=TIMEOUT_S,
        )
    finally:
        os.close(write_end)
    return done.returncode, done.stderr


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "plain"])
@pytest.mark.process
def test_run_into_a_closed_pipe_ends_quietly(as_json: bool, env: dict[str, str]) -> None:
    code, err = run_into_closed_pipe("run", *(["--json"] if as_json else []), "x", env=env)
    assert code == 141, err
    assert err == ""


@pytest.mark.process
def test_a_closed_pipe_cancels_the_session_and_loses_nothing(
    env: dict[str, str], redis_url: str
) -> None:
    code, err = run_into_closed_pipe("run", "--json", "--bus", redis_url, "paint a fox", env=env)
    assert (code, err) == (141, "")
    code, out, err = invoke_baton("sessions", "--bus", redis_url, env=env)
    assert code == 0, err
    assert "cancelled" in out and "paint a fox" in out  # recorded as ended, not running forever
    code, err = run_into_closed_pipe("sessions", "--json", "--bus", redis_url, env=env)
    assert (code, err) == (141, "")
