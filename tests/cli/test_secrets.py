"""The Redis password never appears in anything baton prints: the commands (in-process, or real
processes where they serve), against a real ``redis-server`` that requires it, with DEBUG
logging on, every stdout, stderr and log line read.

Each path that shows a bus URL is driven for real: ``baton worker --check`` (right password,
wrong one, unreachable server, a URL no parser accepts), the worker's ready line and the log
lines of its bus connection (a wake-up connection the server drops, a server that comes back
empty), ``baton run`` (a whole session, and an unreachable bus), ``baton serve``'s start-up,
``baton sessions``, ``baton watch``, ``baton post`` — and the password given apart from the URL
(``REDIS_PASSWORD``) too. Each check also asserts that the redacted URL was shown, so a path
that stopped printing the URL cannot pass for one that hides the password.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from baton.bus.errors import redact_url
from baton.testing import RedisSecurity, RedisServer, free_port
from tests.cli.helpers import Proc, clean_env, invoke_baton

PASSWORD = "S3cretPW-xyz"
WRONG = "Wr0ngPW-abc"
SECRETS = (PASSWORD, WRONG)


@pytest.fixture(scope="module")
def secured() -> Iterator[RedisServer]:
    """A ``redis-server`` that takes only the password (``requirepass``)."""
    with RedisServer(security=RedisSecurity(password=PASSWORD)) as server:
        yield server


@pytest.fixture
def urls(secured: RedisServer) -> dict[str, str]:
    address = f"127.0.0.1:{secured.port}"
    return {
        "good": f"redis://:{PASSWORD}@{address}/0",
        "wrong": f"redis://:{WRONG}@{address}/0",
        "unreachable": f"redis://:{PASSWORD}@127.0.0.1:{free_port()}/0",
        "unparseable": f"redis://:{PASSWORD}@[::1/0",
        "query": f"redis://{address}/0?password={PASSWORD}",
    }


@pytest.fixture
def debug_env(tmp_path: Path) -> dict[str, str]:
    """DEBUG logging on stderr: every log line any layer writes is in what is read."""
    return clean_env(tmp_path, BATON_LOG_LEVEL="DEBUG")


def assert_secret_free(what: str, *texts: str) -> None:
    for text in texts:
        for secret in SECRETS:
            assert secret not in text, f"{what} printed the password:\n{text}"


def baton(env: dict[str, str], *args: str) -> tuple[int, str]:
    """Run a command to its end; its exit code and everything it printed (checked clean)."""
    code, out, err = invoke_baton(*args, env=env)
    assert_secret_free(f"baton {' '.join(args)}", out, err)
    return code, out + err


def test_the_worker_check_shows_no_password(
    urls: dict[str, str], debug_env: dict[str, str]
) -> None:
    code, shown = baton(debug_env, "worker", "--check", "--bus", urls["good"])
    assert code == 0 and ":***@127.0.0.1" in shown and "is reachable" in shown
    code, shown = baton(debug_env, "worker", "--check", "--bus", urls["query"])
    assert code == 0 and "password=***" in shown
    code, shown = baton(debug_env, "worker", "--check", "--bus", urls["wrong"])
    assert code == 2 and "refused the bus URL" in shown and ":***@" in shown
    code, shown = baton(debug_env, "worker", "--check", "--bus", urls["unreachable"])
    assert code == 3 and "cannot reach the bus at redis://:***@" in shown
    code, shown = baton(debug_env, "worker", "--check", "--bus", urls["unparseable"])
    assert code == 2 and "redis://:***@[::1/0" in shown


def test_commands_that_read_the_bus_show_no_password(
    secured: RedisServer, urls: dict[str, str], debug_env: dict[str, str], tmp_path: Path
) -> None:
    # A whole session on the secured server (its events on stdout, its logs on stderr).
    code, shown = baton(debug_env, "run", "--json", "--bus", urls["good"], "paint a fox")
    assert code == 0, shown
    events = [json.loads(line) for line in shown.splitlines() if line.startswith("{")]
    session = next(e["session"] for e in events if e["type"] == "session.started")
    code, shown = baton(debug_env, "run", "--bus", urls["unreachable"], "paint a fox")
    assert code == 3 and "cannot reach the bus at redis://:***@" in shown

    code, shown = baton(debug_env, "sessions", "--bus", urls["good"])
    assert code == 0 and session in shown
    code, shown = baton(debug_env, "sessions", "--bus", urls["wrong"])
    assert code == 2 and ":***@" in shown
    code, shown = baton(debug_env, "watch", session, "--from-start", "--bus", urls["good"])
    assert code == 0 and "paint a fox" in shown
    code, shown = baton(debug_env, "watch", "s-nope", "--bus", urls["good"])
    assert code != 0 and "no session s-nope on this bus (redis://:***@" in shown
    code, shown = baton(debug_env, "watch", session, "--bus", urls["unreachable"])
    assert code == 3 and ":***@" in shown
    code, shown = baton(
        debug_env, "post", "--session", session, "--to", "lead", "hi", "--bus", urls["wrong"]
    )
    assert code == 2 and ":***@" in shown

    # The password apart from the URL (REDIS_PASSWORD) is folded into it: hidden alike.
    apart = {**debug_env, "REDIS_PASSWORD": PASSWORD, "BATON_BUS": secured.bare_url}
    code, shown = baton(apart, "sessions")
    assert code == 0 and session in shown
    code, shown = baton(apart, "worker", "--check")
    assert code == 0 and ":***@" in shown
    code, shown = baton({**apart, "REDIS_PASSWORD": WRONG}, "worker", "--check")
    assert code == 2 and ":***@" in shown


def as_admin(server: RedisServer, *args: str) -> str:
    """Run a command as an administrator of the secured server (a client of the test's own,
    with the password: it is the test speaking, not baton); its reply."""
    with redis.Redis(port=server.port, password=PASSWORD, decode_responses=True) as admin:
        return str(admin.execute_command(*args))


def drop_wake_connections(server: RedisServer, timeout_s: float = 30.0) -> None:
    """Close the subscribed connections, once there is one: a worker subscribes in the
    background after its ready line, and only Redis can say when (polled, with a deadline)."""
    deadline = time.monotonic() + timeout_s
    while as_admin(server, "CLIENT", "KILL", "TYPE", "pubsub") == "0":
        assert time.monotonic() < deadline, "the worker never subscribed to anything"
        time.sleep(0.05)


def test_a_worker_and_a_server_log_no_password(
    secured: RedisServer,
    urls: dict[str, str],
    debug_env: dict[str, str],
    start: Callable[..., Proc],
) -> None:
    worker = start("worker", "--bus", urls["good"], env=debug_env)
    ready = worker.expect(" ready: ", stream="err")
    assert f"bus={redact_url(urls['good'])} " in ready
    # The bus connection's own log lines name the server: a dropped wake-up connection...
    drop_wake_connections(secured)
    worker.expect("wake-up connection to redis://:***@", stream="err")
    worker.expect("restored", stream="err")
    # ...and a server that comes back without baton's data.
    as_admin(secured, "FLUSHALL")
    worker.expect("came back without baton's data", stream="err")

    server = start("serve", "--port", "0", "--bus", urls["good"], env=debug_env)
    line = server.expect("baton serve: http", stream="err")
    assert f"bus {redact_url(urls['good'])} " in line

    for proc in (worker, server):
        proc.proc.send_signal(signal.SIGTERM)
        assert proc.wait() == 0, proc.transcript()
        assert_secret_free(f"baton {proc.args[0]}", "".join(proc.out), "".join(proc.err))


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:pw@host:6379/0", "redis://:***@host:6379/0"),
        ("redis://user:pw@host/0", "redis://user:***@host/0"),
        (
            "rediss://host/0?password=pw&ssl_ca_certs=/ca.pem",
            "rediss://host/0?password=***&ssl_ca_certs=/ca.pem",
        ),
        ("redis://:pw@[::1/0", "redis://:***@[::1/0"),  # no parser accepts it
        (":pw@host", ":***@host"),  # no scheme: no authority found
        ("redis:/:pw@host", "redis:***@host"),
        ("redis://host:6379/0", "redis://host:6379/0"),
        ("memory://", "memory://"),
        ("not a url", "not a url"),
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert redact_url(shown) == shown  # redacting again changes nothing
