"""Redis secured with a password and the ACL user of ``docs/securing-redis.md``.

The server is started with the documented ``ACL SETUSER`` rules read from the doc itself (so the
doc cannot drift from what was tested), and its ``default`` user behind a password of its own
(the administrator's). A whole session then runs as the restricted user through ``baton run``
(in-process) and a real ``baton worker`` process, with the user name in the URL and the password
in ``REDIS_PASSWORD``; the same user cannot touch a key or channel outside baton's prefix.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from redis.exceptions import NoPermissionError, ResponseError

from baton.bus.base import BusOptions
from baton.bus.connect import redis_url
from baton.bus.errors import ConfigError, ExitCode
from baton.bus.events import AgentSpawned
from baton.bus.redis import RedisBus
from baton.bus.redis.adapter import RedisRefused
from baton.settings import load_settings
from baton.testing import RedisSecurity, RedisServer
from tests.cli.helpers import REPO, clean_env, invoke_baton, processes

DOC = REPO / "docs" / "securing-redis.md"
ADMIN_PASSWORD = "admin-only-Zq7"
PASSWORD = "acl/user:pass@word-9x"  # characters a URL would need encoded: REDIS_PASSWORD needs none
PLACEHOLDER = ">CHANGE-ME"
SUBCOMMANDS = frozenset(
    {"CLIENT", "CLUSTER", "SCRIPT", "XGROUP", "XINFO", "CONFIG", "OBJECT", "MEMORY"}
)


def documented_acl() -> str:
    """The one ``ACL SETUSER`` line of the doc."""
    lines = [line for line in DOC.read_text().splitlines() if line.startswith("ACL SETUSER ")]
    assert len(lines) == 1, lines
    return lines[0]


def user_rules(password: str) -> str:
    """The doc's line as a server's ``--user`` takes it (the rules after ``ACL SETUSER``)."""
    line = documented_acl().removeprefix("ACL SETUSER ")
    assert PLACEHOLDER in line.split()
    return line.replace(PLACEHOLDER, f">{password}")


@pytest.fixture(scope="module")
def acl_server() -> Iterator[RedisServer]:
    security = RedisSecurity(password=ADMIN_PASSWORD, users=[user_rules(PASSWORD)])
    with RedisServer(security=security) as server:
        yield server


@pytest.fixture
def admin(acl_server: RedisServer) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(acl_server.url, decode_responses=True)
    client.flushall()
    client.acl_log_reset()
    yield client
    client.close()


def user_url(server: RedisServer) -> str:
    """The restricted user's URL, without its password (that comes from REDIS_PASSWORD)."""
    return server.bare_url.replace("redis://", "redis://baton@", 1)


@pytest.mark.process
def test_the_documented_user_runs_a_whole_session_with_a_real_worker(
    acl_server: RedisServer, admin: redis.Redis, tmp_path: Path
) -> None:
    env = clean_env(tmp_path, BATON_BUS=user_url(acl_server), REDIS_PASSWORD=PASSWORD)
    with processes() as start:
        worker = start("worker", env=env)
        ready = worker.expect(" ready: ", stream="err")
        name = ready.split("baton worker ", 1)[1].split()[0]
        assert "bus=redis://baton:***@" in ready and PASSWORD not in ready
        code, out, err = invoke_baton(
            "run", "--json", "--no-local-workers", "--session", "s-acl", "--timeout", "60",
            "paint a fox and write a haiku about it",
            env=env,
        )  # fmt: skip
    assert code == ExitCode.OK, err
    events = [json.loads(line) for line in out.splitlines()]
    hosted = [e for e in events if e["type"] == "agent.claimed"]
    spawned = {e["agent"]: e["worker"] for e in hosted}
    assert spawned.get("painter") == name and spawned.get("writer") == name
    assert events[-1]["type"] == "session.finished" and events[-1]["status"] == "completed"
    assert PASSWORD not in out + err + "".join(worker.err)

    # Not one command refused, not even one redis-py shrugs off; but CLIENT SETINFO, which
    # Redis 7.2+ knows and the line leaves out (7.0 refuses the line with it; see the doc).
    refusals = [e for e in admin.acl_log() if e["object"] != "client|setinfo"]
    assert refusals == []
    keys = [str(key) for key in admin.keys("*")]
    assert keys and all(key.startswith("baton:") for key in keys), keys


def test_the_user_cannot_touch_keys_or_channels_outside_the_prefix(
    acl_server: RedisServer, admin: redis.Redis
) -> None:
    admin.set("other:secret", "untouched")
    user = redis.Redis.from_url(
        user_url(acl_server), password=PASSWORD, decode_responses=True, protocol=2
    )
    try:
        assert user.set("baton:probe", "1") and user.get("baton:probe") == "1"
        refused: dict[str, Callable[[], object]] = {
            "GET": lambda: user.get("other:secret"),
            "SET": lambda: user.set("other:secret", "overwritten"),
            "DEL": lambda: user.delete("other:secret"),
            "XADD": lambda: user.xadd("other:stream", {"x": "1"}),
            "PUBLISH": lambda: user.publish("other:channel", "hello"),
            "SUBSCRIBE": lambda: subscribe(user, "other:channel"),
            "KEYS": lambda: user.keys("*"),
            "FLUSHALL": lambda: user.flushall(),
            "CONFIG": lambda: user.config_get("dir"),
            "EVAL": lambda: user.eval("return redis.call('GET', KEYS[1])", 1, "other:secret"),
        }
        for name, attempt in refused.items():
            with pytest.raises(NoPermissionError):
                attempt()
                pytest.fail(f"{name} outside the prefix was allowed")
        # What the doc warns of: SCAN (baton clean's) is not filtered by the key pattern, so
        # the names of other keys show; their values stay out of reach (above).
        assert "other:secret" in {str(key) for key in user.scan_iter(match="*")}
    finally:
        user.close()
    assert admin.get("other:secret") == "untouched"
    assert admin.exists("other:stream") == 0


def subscribe(client: redis.Redis, channel: str) -> None:
    pubsub = client.pubsub()  # type: ignore[no-untyped-call, unused-ignore]
    try:
        pubsub.subscribe(channel)
        pubsub.get_message(timeout=5)  # the confirmation, or the refusal
    finally:
        pubsub.close()


async def test_a_bus_on_another_prefix_is_refused_by_name(acl_server: RedisServer) -> None:
    """The user's keys are the prefix's: a bus told another prefix gets Redis's NOPERM as the
    error of the operation, typed, not a hang or a lost write."""
    url = redis_url(user_url(acl_server), password=PASSWORD)
    async with RedisBus(url, BusOptions(), prefix="other") as bus:
        await bus.ping()
        with pytest.raises(RedisRefused) as refused:
            await bus.log.emit(AgentSpawned(session="s-other", agent="a", profile="p"))
    assert refused.value.code == "NOPERM"


def test_a_wrong_password_is_one_line_that_never_shows_it(
    acl_server: RedisServer, tmp_path: Path
) -> None:
    wrong = "not-the-password-4242"
    env = clean_env(tmp_path, BATON_BUS=user_url(acl_server), REDIS_PASSWORD=wrong)
    code, out, err = invoke_baton("worker", "--check", env=env)
    assert code == ExitCode.USAGE, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert "refused the bus URL" in err and "redis://baton:***@" in err
    assert wrong not in out + err

    env["REDIS_PASSWORD"] = PASSWORD
    code, out, err = invoke_baton("worker", "--check", env=env)
    assert code == ExitCode.OK, err
    assert "redis://baton:***@" in out and PASSWORD not in out + err


# -- the password setting ------------------------------------------------------------------------


def test_redis_password_goes_into_a_url_that_names_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BATON_BUS", "redis://baton@redis:6379/0")
    monkeypatch.setenv("REDIS_PASSWORD", "p@ss/word")
    settings = load_settings()
    assert settings.bus == "redis://baton:p%40ss%2Fword@redis:6379/0"
    assert "p@ss/word" not in repr(settings.redis_password)
    monkeypatch.setenv("BATON_REDIS_PASSWORD", "other")  # the BATON_ name comes first
    assert load_settings().bus == "redis://baton:other@redis:6379/0"


def test_a_password_in_the_url_wins_over_redis_password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDIS_PASSWORD", "from-env")
    assert load_settings(bus="redis://:own@redis:6379/0").bus == "redis://:own@redis:6379/0"
    assert load_settings().bus == "memory://"  # a memory bus has no password to take


def test_redis_password_comes_from_the_config_file(tmp_path: Path) -> None:
    config = tmp_path / "baton.toml"
    config.write_text('bus = "unix:///run/redis.sock"\nredis_password = "filed"\n')
    assert load_settings(config).bus == "unix://:filed@/run/redis.sock"


def test_redis_url_leaves_what_it_is_not_given_alone() -> None:
    assert redis_url("redis://h:6379/0") == "redis://h:6379/0"
    assert redis_url("redis://h:6379/0", password="") == "redis://h:6379/0"
    assert redis_url("redis://u@h:6379/0?db=2", password="p") == "redis://u:p@h:6379/0?db=2"
    with pytest.raises(ConfigError, match="rediss://"):
        redis_url("redis://h:6379/0", ca_file="/etc/ca.pem")


# -- the documented line keeps up with the code ----------------------------------------------------


def sent_commands(known: set[str]) -> set[str]:
    """Every command the bus's code sends, ``name`` or ``name|subcommand`` as ACL rules name
    them: the first string of a command tuple in ``bus/**/*.py`` that is one of the server's
    ``known`` commands (not an argument such as ``("IDLE", ms)``), and each ``redis.call`` or
    ``pcall`` of ``bus/redis/scripts/*.lua``."""
    found: set[str] = set()
    python = re.compile(r'\(\s*"([A-Z]{3,})"(?:\s*,\s*"([A-Z]+)")?')
    lua = re.compile(r"redis\.p?call\(\s*'([A-Z]+)'(?:\s*,\s*'([A-Z]+)')?")
    sources = [(path, python) for path in (REPO / "bus").rglob("*.py")]
    sources += [(path, lua) for path in (REPO / "bus" / "redis" / "scripts").glob("*.lua")]
    for path, pattern in sources:
        for command, sub in pattern.findall(path.read_text()):
            name = command.lower()
            if name not in known:
                continue
            found.add(f"{name}|{sub.lower()}" if command in SUBCOMMANDS and sub else name)
    return found


def test_the_documented_line_allows_every_command_the_bus_sends(admin: redis.Redis) -> None:
    allowed = {rule[1:] for rule in documented_acl().split() if rule.startswith("+")}
    known = {str(name) for name in admin.command_list()}
    sent = sent_commands(known)
    assert {"evalsha", "xreadgroup", "xgroup|create", "hincrby"} <= sent  # the scan sees both
    missing = {c for c in sent if c not in allowed and c.split("|")[0] not in allowed}
    assert not missing, f"add to docs/securing-redis.md's ACL SETUSER line: {sorted(missing)}"


def test_the_documented_line_is_one_redis_accepts_as_a_command(
    acl_server: RedisServer, admin: redis.Redis
) -> None:
    """The doc tells an operator to run it as ``ACL SETUSER``; running it twice (``reset``)
    gives the same user the server was started with."""
    started = admin.acl_getuser("baton")
    setuser = ("ACL", "SETUSER", *user_rules(PASSWORD).split())
    admin.execute_command(*setuser)  # type: ignore[no-untyped-call]
    admin.execute_command(*setuser)  # type: ignore[no-untyped-call]
    assert admin.acl_getuser("baton") == started
    with pytest.raises(ResponseError):
        admin.execute_command("ACL", "SETUSER", "baton", "+no-such-command")  # type: ignore[no-untyped-call]


async def test_a_wake_up_channel_the_user_may_not_subscribe_to_is_refused_by_name(
    acl_server: RedisServer,
) -> None:
    """A user without SUBSCRIBE on the channel (here: a prefix not its own) gets NOPERM from
    the inbox wait that needed it, naming the channel; the bus's wake-up reader does not die
    with it (before: NoPermissionError escaped the reader and ended the bus's task group)."""
    url = redis_url(user_url(acl_server), password=PASSWORD)
    async with RedisBus(url, BusOptions(), prefix="other") as bus:
        for _ in range(2):  # the same answer again: the reader is still there
            with pytest.raises(RedisRefused) as refused:
                await bus.inboxes.wait("s-other", "lead", 5)
            assert refused.value.code == "NOPERM"
            assert "SUBSCRIBE other:{s-other}:wake:lead" in str(refused.value)
        await bus.ping()
