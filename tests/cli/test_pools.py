"""``--pool`` on the command line: ``baton run --no-local-workers --pool gpu`` meets only
``baton worker --pool gpu``, and the setting reads like every other (flag > env > file)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from baton.bus.errors import ConfigError
from baton.settings import load_settings
from tests.cli.helpers import Proc, invoke_baton


def test_run_sends_its_sub_agents_to_the_pool_it_names(
    start: Callable[..., Proc], redis_url: str, env: dict[str, str]
) -> None:
    elsewhere = start("worker", "--bus", redis_url, env=env)  # the default pool: never asked
    elsewhere.expect(" ready: ", stream="err")
    gpu = start("worker", "--bus", redis_url, "--pool", "gpu", env=env)
    ready = gpu.expect(" ready: ", stream="err")
    assert " pool=gpu " in ready
    name = ready.split("baton worker ", 1)[1].split()[0]

    code, out, err = invoke_baton(
        "run", "--json", "--bus", redis_url, "--no-local-workers", "--pool", "gpu",
        "--timeout", "60", "paint a fox and write a haiku about it",
        env=env,
    )  # fmt: skip
    assert code == 0, err
    events = [json.loads(line) for line in out.splitlines()]
    # One agent.spawned per sub-agent (its worker's claim is agent.claimed): a consumer that
    # counts agents by it used to count each twice, once with an empty worker.
    spawned = sorted(e["agent"] for e in events if e["type"] == "agent.spawned")
    assert spawned == ["painter", "writer"], spawned
    claimed = [e for e in events if e["type"] == "agent.claimed"]
    hosts = {e["agent"]: e["worker"] for e in claimed}
    assert hosts == {"painter": name, "writer": name}


def test_the_pool_setting_comes_from_a_flag_the_environment_or_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "baton.toml"
    config.write_text('pool = "cpu"\n')
    assert load_settings().pool == "default"
    assert load_settings(config).pool == "cpu"
    monkeypatch.setenv("BATON_POOL", "gpu")
    assert load_settings(config).pool == "gpu"
    assert load_settings(config, pool="tpu").pool == "tpu"
    with pytest.raises(ConfigError, match=r"--pool: .*reserved"):
        load_settings(pool="local")
