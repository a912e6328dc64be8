"""Redis over TLS only (``--tls-port``, ``--port 0``), with certificates made by ``openssl`` when
the test runs (:func:`baton.testing.make_certificates`).

A whole session runs over ``rediss://`` through ``baton run`` (in-process) and a real ``baton
worker`` process with the CA file from ``BATON_REDIS_CA_FILE``; mutual TLS takes the client
certificate from the config file; a CA that did not issue the server's certificate ends a
command with one line (exit 2) that names the problem and never the password.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from baton.bus.base import BusOptions
from baton.bus.errors import ConfigError, ExitCode
from baton.bus.redis import RedisBus
from baton.settings import load_settings
from baton.testing import Certificates, RedisSecurity, RedisServer, make_certificates
from baton.testing.redis_server import speaks_tls
from tests.cli.helpers import clean_env, invoke_baton, processes

PASSWORD = "tls-user-secret-77"


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("other"), name="some other CA")


@pytest.fixture(scope="module")
def tls_server(certificates: Certificates) -> Iterator[RedisServer]:
    with RedisServer(security=RedisSecurity(tls=certificates, password=PASSWORD)) as server:
        yield server


@pytest.fixture(scope="module")
def mtls_server(certificates: Certificates) -> Iterator[RedisServer]:
    with RedisServer(security=RedisSecurity(tls=certificates, client_certs=True)) as server:
        yield server


def test_the_server_speaks_tls_only(tls_server: RedisServer) -> None:
    """What the other tests reach is a TLS port: a client speaking plain RESP there gets no
    answer. A server built with TLS has no plain port at all; one built without it (the one from
    PyPI) has its TLS front on the port (baton.testing.tls_front)."""
    assert tls_server.bare_url.startswith("rediss://")
    with redis.Redis.from_url(tls_server.url, decode_responses=True) as admin:
        assert admin.ping()
        assert admin.connection_pool.connection_kwargs["ssl_ca_certs"]
        if speaks_tls(tls_server.binary):
            assert admin.config_get("port") == {"port": "0"}
            assert admin.config_get("tls-port") == {"tls-port": str(tls_server.port)}
    plain = redis.Redis(port=tls_server.port, password=PASSWORD, socket_timeout=5)
    with plain, pytest.raises((redis.ConnectionError, redis.TimeoutError)):
        plain.ping()


@pytest.mark.process
def test_a_session_completes_over_tls_with_the_ca_file_setting(
    tls_server: RedisServer, certificates: Certificates, tmp_path: Path
) -> None:
    env = clean_env(
        tmp_path,
        BATON_BUS=tls_server.bare_url,
        BATON_REDIS_CA_FILE=str(certificates.ca_cert),
        REDIS_PASSWORD=PASSWORD,
    )
    with processes() as start:
        worker = start("worker", env=env)
        ready = worker.expect(" ready: ", stream="err")
        name = ready.split("baton worker ", 1)[1].split()[0]
        assert f"bus=rediss://:***@127.0.0.1:{tls_server.port}/0?ssl_ca_certs=" in ready
        code, out, err = invoke_baton(
            "run", "--json", "--no-local-workers", "--session", "s-tls", "--timeout", "60",
            "paint a fox and write a haiku about it",
            env=env,
        )  # fmt: skip
    assert code == ExitCode.OK, err
    events = [json.loads(line) for line in out.splitlines()]
    hosted = {e["agent"]: e["worker"] for e in events if e["type"] == "agent.claimed"}
    assert hosted == {"painter": name, "writer": name}
    assert events[-1]["type"] == "session.finished" and events[-1]["status"] == "completed"
    assert PASSWORD not in out + err + "".join(worker.err)


@pytest.mark.parametrize("command", [["worker", "--check"], ["run", "paint a fox"]])
def test_a_wrong_ca_is_one_line_without_the_password(
    command: list[str], tls_server: RedisServer, other_ca: Certificates, tmp_path: Path
) -> None:
    env = clean_env(
        tmp_path,
        BATON_BUS=tls_server.bare_url,
        BATON_REDIS_CA_FILE=str(other_ca.ca_cert),
        REDIS_PASSWORD=PASSWORD,
    )
    code, out, err = invoke_baton(*command, env=env)
    assert code == ExitCode.USAGE, out + err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert "failed TLS verification" in err and "BATON_REDIS_CA_FILE" in err, err
    assert "rediss://:***@127.0.0.1" in err
    assert PASSWORD not in out + err


async def test_a_certificate_for_another_host_is_refused(tmp_path: Path) -> None:
    """The server's certificate must name the host of the URL, whatever CA issued it."""
    elsewhere = make_certificates(tmp_path, hosts=["redis.internal"])
    with RedisServer(security=RedisSecurity(tls=elsewhere)) as server:
        assert server.url.startswith("rediss://127.0.0.1:")
        with pytest.raises(ConfigError, match=r"failed TLS verification: .*127\.0\.0\.1"):
            async with RedisBus(server.url, BusOptions()) as bus:
                await bus.ping()


def test_mutual_tls_takes_the_client_certificate_from_the_config_file(
    mtls_server: RedisServer, certificates: Certificates, tmp_path: Path
) -> None:
    config = tmp_path / "baton.toml"
    config.write_text(
        f'bus = "{mtls_server.bare_url}"\n'
        f'redis_ca_file = "{certificates.ca_cert}"\n'
        f'redis_cert_file = "{certificates.client_cert}"\n'
        f'redis_key_file = "{certificates.client_key}"\n'
    )
    env = clean_env(tmp_path)
    code, out, err = invoke_baton("worker", "--check", "--config", str(config), env=env)
    assert code == ExitCode.OK, err
    assert "ssl_certfile=" in out and "is reachable" in out

    # Without its certificate the server hangs up on the client: a fault, not a verdict.
    config.write_text(f'bus = "{mtls_server.bare_url}"\nredis_ca_file = "{certificates.ca_cert}"\n')
    code, _, err = invoke_baton("worker", "--check", "--config", str(config), env=env)
    assert code == ExitCode.UNREACHABLE, err
    assert len(err.splitlines()) == 1 and "cannot reach the bus" in err, err


def test_tls_files_need_a_rediss_url(
    certificates: Certificates, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ConfigError, match=r"redis_ca_file set, .* use rediss://"):
        load_settings(bus="redis://127.0.0.1:6379/0", redis_ca_file=certificates.ca_cert)
    with pytest.raises(ConfigError, match="redis_key_file is set without redis_cert_file"):
        load_settings(bus="rediss://127.0.0.1:6380/0", redis_key_file=certificates.client_key)
    monkeypatch.setenv("BATON_REDIS_CA_FILE", "/nonexistent/ca.pem")
    with pytest.raises(ConfigError, match="BATON_REDIS_CA_FILE: Path does not point to a file"):
        load_settings(bus="rediss://127.0.0.1:6380/0")


def test_the_files_go_into_the_url_unless_it_names_its_own(
    certificates: Certificates, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BATON_REDIS_CA_FILE", str(certificates.ca_cert))
    url = load_settings(bus="rediss://h:6380/0").bus
    assert url == f"rediss://h:6380/0?ssl_ca_certs={certificates.ca_cert}"
    own = "rediss://h:6380/0?ssl_ca_certs=/etc/own-ca.pem"
    assert load_settings(bus=own).bus == own
    monkeypatch.chdir(certificates.ca_cert.parent)  # a relative path is made absolute
    monkeypatch.setenv("BATON_REDIS_CA_FILE", certificates.ca_cert.name)
    assert load_settings(bus="rediss://h:6380/0").bus == url
