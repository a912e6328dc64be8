"""An environment variable set to the empty string counts as unset, wherever baton reads settings.

docker-compose.yml passes ``OPENAI_BASE_URL: ${OPENAI_BASE_URL:-}`` (and so does many a shell
script, ``FOO= baton …``): every container then has the variable, empty. Taken as a value, it
was an empty base URL, an empty model name, an approve mode that is no mode (exit 2). Empty must
fall through to the config file and the default, like an unset variable.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from baton.llm.defaults import DEFAULT_MODEL
from baton.settings import load_settings, model_settings
from tests.cli.helpers import Proc, clean_env, invoke_baton

EMPTY = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "BATON_MODEL",
    "BATON_BUS",
    "REDIS_URL",
    "BATON_APPROVE",
    "BATON_PREFIX",
    "BATON_POOL",
    "BATON_TEMPERATURE",
    "BATON_MAX_TOKENS",
    "BATON_EXTRA_BODY",
    "BATON_SESSION_TIMEOUT",
    "BATON_LOG_LEVEL",
    "BATON_PROFILES",
    "BATON_CONFIG",
)
"""Variables a deployment may pass empty; every one of them must read as unset."""


def test_empty_variables_are_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in EMPTY:
        monkeypatch.setenv(name, "")
    settings = load_settings()
    for name, field in type(settings).model_fields.items():
        if field.default_factory is None:
            assert getattr(settings, name) == field.default, name
    assert settings.offline and model_settings(settings) is None
    assert settings.bus == "memory://" and settings.model == DEFAULT_MODEL


def test_an_empty_variable_falls_through_to_the_config_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = tmp_path / "baton.toml"
    config.write_text('model = "from-file"\nopenai_base_url = "http://127.0.0.1:9/v1"\n')
    monkeypatch.setenv("BATON_MODEL", "")
    monkeypatch.setenv("OPENAI_BASE_URL", "")
    settings = load_settings(config)
    assert settings.model == "from-file"
    assert settings.openai_base_url == "http://127.0.0.1:9/v1"


def test_with_a_key_an_empty_base_url_is_openais_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", "")
    model = model_settings(load_settings())
    assert model is not None and model.base_url is None and model.model == DEFAULT_MODEL


def test_an_empty_baton_bus_lets_redis_url_through(monkeypatch: pytest.MonkeyPatch) -> None:
    """BATON_BUS and REDIS_URL are aliases: an empty first one is skipped, not taken."""
    monkeypatch.setenv("BATON_BUS", "")
    monkeypatch.setenv("REDIS_URL", "redis://elsewhere:6379/0")
    assert load_settings().bus == "redis://elsewhere:6379/0"


def test_baton_run_with_every_variable_empty_runs_offline(tmp_path: Path) -> None:
    """The environment compose gives a container: the offline model answers, exit 0."""
    env = clean_env(tmp_path, **dict.fromkeys(EMPTY, ""))
    code, out, err = invoke_baton("run", "--json", "paint a fox", env=env)
    assert code == 0, err
    assert '"session.finished"' in out
    assert "bad setting" not in err


@pytest.mark.process
def test_a_worker_with_a_key_and_an_empty_base_url_targets_openai(
    tmp_path: Path, redis_url: str
) -> None:
    """The worker's ready line names the model and endpoint it will call: the default ones."""
    env = clean_env(tmp_path, **{**dict.fromkeys(EMPTY, ""), "OPENAI_API_KEY": "sk-test"})
    env["BATON_BUS"] = redis_url
    worker = Proc(["worker", "--shutdown-timeout", "1"], env)
    try:
        ready = worker.expect(" ready: ", stream="err")
    finally:
        worker.kill()
    assert f"model={DEFAULT_MODEL} at https://api.openai.com/v1" in ready, ready
