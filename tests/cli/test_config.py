"""One configuration path: every command — ``run``, ``worker`` and the bus commands alike — reads
the same settings (flag > environment > ``--config`` file > default), so a ``baton run`` and the
``baton worker`` beside it meet on the same bus and key prefix however they were told.

The worker runs as a process of its own (the two must meet across processes); the commands
around it run in-process (:func:`~tests.cli.helpers.invoke_baton`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.cli.helpers import Proc, invoke_baton


def test_run_and_worker_told_by_the_environment_meet_on_its_prefix(
    start: Callable[..., Proc], redis_url: str, env: dict[str, str]
) -> None:
    env = {**env, "REDIS_URL": redis_url, "BATON_PREFIX": "team-a"}
    worker = start("worker", "--concurrency", "2", env=env)  # no flags: the environment only
    ready = worker.expect(" ready: ", stream="err")
    assert f"bus={redis_url} prefix=team-a " in ready
    code, out, err = invoke_baton(
        "run", "--json", "--no-local-workers", "--session", "s-team-a", "--timeout", "60",
        "paint a fox",
        env=env,
    )  # fmt: skip
    assert code == 0, out + err  # the worker hosted the painter: they met
    claimed = [e for e in map(_event, out.splitlines()) if e.get("type") == "agent.claimed"]
    assert any(e["worker"] for e in claimed), out
    code, listed, err = invoke_baton("sessions", "--json", env=env)
    assert code == 0 and "s-team-a" in listed, err
    code, listed, err = invoke_baton("sessions", "--json", "--prefix", "baton", env=env)
    assert code == 0 and "s-team-a" not in listed, listed  # nothing went to the default keys


def test_worker_check_reads_the_config_file_and_flags_win(
    redis_url: str, env: dict[str, str], tmp_path: Path
) -> None:
    config = tmp_path / "baton.toml"
    config.write_text(f'bus = "{redis_url}"\nprefix = "from-file"\n')
    code, out, err = invoke_baton("worker", "--check", "--config", str(config), env=env)
    assert code == 0, err
    assert out.strip() == f"bus {redis_url} is reachable (prefix from-file)"
    env = {**env, "BATON_CONFIG": str(config), "BATON_PREFIX": "from-env"}
    code, out, err = invoke_baton("worker", "--check", env=env)
    assert code == 0 and out.strip().endswith("(prefix from-env)"), out + err
    code, out, err = invoke_baton("worker", "--check", "--prefix", "from-flag", env=env)
    assert code == 0 and out.strip().endswith("(prefix from-flag)"), out + err


def test_worker_refuses_a_bad_setting_as_every_command_does(
    env: dict[str, str], tmp_path: Path
) -> None:
    config = tmp_path / "baton.toml"
    config.write_text('prefix = ""\n')
    for command in ("worker", "sessions"):
        code, _, err = invoke_baton(command, "--config", str(config), env=env)
        assert code == 2, err
        assert err.count("\n") == 1 and "prefix" in err and "baton.toml" in err, err


def _event(line: str) -> dict[str, object]:
    try:
        value = json.loads(line)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def test_worker_refuses_a_bad_model_setting_and_a_profile_key_it_cannot_find(
    env: dict[str, str], tmp_path: Path, redis_url: str
) -> None:
    code, _, err = invoke_baton("worker", "--check", "--extra-body", "[1]", env=env)
    assert code == 2 and err.count("\n") == 1, err
    assert "--extra-body" in err and "must be a JSON object" in err
    profiles = tmp_path / "gpu.toml"
    profiles.write_text(
        '[profiles.gpu]\ndescription = "d"\nsystem_prompt = "s"\n'
        '[profiles.gpu.model]\nbase_url = "http://gpu.invalid/v1"\napi_key_env = "GPU_KEY"\n'
    )
    keyed = {**env, "OPENAI_API_KEY": "sk-test"}
    code, _, err = invoke_baton(
        "worker", "--bus", redis_url, "--profiles", str(profiles), env=keyed
    )
    assert code == 2, err
    assert err.splitlines()[-1] == (
        "baton worker: profile 'gpu': its model's api_key_env names GPU_KEY, which is not set"
    )
