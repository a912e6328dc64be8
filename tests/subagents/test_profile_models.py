"""Each profile's model: the session's settings with the profile's overrides, one client per
distinct settings, another endpoint with its own key (never the session's), the offline model when
the session has none."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr

from baton.bus.errors import ConfigError
from baton.llm import ModelSettings, OpenAIChatModel, ScriptedServer
from baton.llm.offline import OFFLINE_MODEL_NAME, offline_reply
from baton.subagents.models import ProfileModels, offline_models
from baton.subagents.profiles import Profile, ProfileModel, load_profiles

BASE = ModelSettings(
    model="session-model",
    base_url="http://session.invalid/v1",
    api_key=SecretStr("sk-session"),
    temperature=0.3,
    max_tokens=256,
    extra_body={"cache_prompt": True},
)


def agent(name: str, model: str | ProfileModel | None = None) -> Profile:
    return Profile(name=name, description="d", system_prompt="s", model=model)


async def test_profiles_with_the_same_settings_share_one_client() -> None:
    async with ProfileModels(BASE) as models:
        plain, other_plain = models(agent("a")), models(agent("b"))
        warm = models(agent("c", ProfileModel(temperature=0.9)))
        also_warm = models(agent("d", ProfileModel(temperature=0.9)))
        named = models(agent("e", "other-model"))
    assert plain is other_plain and warm is also_warm
    assert len({id(plain), id(warm), id(named)}) == 3
    assert isinstance(warm, OpenAIChatModel) and warm.settings.temperature == 0.9
    assert isinstance(named, OpenAIChatModel) and named.settings.model == "other-model"


def test_overrides_replace_the_session_settings_they_name_and_merge_the_extra_body() -> None:
    overrides = ProfileModel(
        name="m2", top_p=0.5, max_tokens=0, timeout=9, max_retries=1, extra_body={"top_k": 5}
    )
    settings = ProfileModels(BASE).settings_for(agent("p", overrides))
    assert settings is not None
    assert (settings.model, settings.top_p, settings.timeout, settings.max_retries) == (
        "m2",
        0.5,
        9,
        1,
    )
    assert settings.max_tokens is None  # 0: none sent
    assert settings.temperature == 0.3 and settings.base_url == BASE.base_url  # kept
    assert settings.extra_body == {"cache_prompt": True, "top_k": 5}
    assert settings.api_key is not None and settings.api_key.get_secret_value() == "sk-session"


def test_another_endpoint_never_gets_the_session_key() -> None:
    models = ProfileModels(BASE, env={"GPU_KEY": "sk-gpu"})
    keyless = models.settings_for(agent("p", ProfileModel(base_url="http://gpu.invalid/v1")))
    assert keyless is not None and keyless.api_key is None
    keyed = models.settings_for(
        agent("q", ProfileModel(base_url="http://gpu.invalid/v1", api_key_env="GPU_KEY"))
    )
    assert keyed is not None and keyed.api_key is not None
    assert keyed.api_key.get_secret_value() == "sk-gpu"


def test_a_key_variable_that_is_not_set_is_a_configuration_error_at_check() -> None:
    models = ProfileModels(BASE, env={})
    broken = agent("gpu", ProfileModel(base_url="http://gpu.invalid/v1", api_key_env="GPU_KEY"))
    with pytest.raises(ConfigError, match=r"profile 'gpu'.*GPU_KEY, which is not set"):
        models.check([agent("fine"), broken])


async def test_without_a_session_model_only_a_profile_endpoint_is_reached() -> None:
    server = ScriptedServer(responder=offline_reply, record=True)
    async with server.serve() as http, ProfileModels(None, env={}) as models:
        shared = models(agent("a", ProfileModel(temperature=0.5)))
        own = models(agent("b", ProfileModel(name="local", base_url=http.base_url)))
        assert shared.model == OFFLINE_MODEL_NAME
        reply = await own.complete([{"role": "user", "content": "hello"}])
        assert reply.text
    assert [request.body["model"] for request in server.requests] == ["local"]
    assert "authorization" not in server.requests[0].headers  # no key: none sent


async def test_a_factory_less_worker_stays_offline_whatever_a_profile_names() -> None:
    async with offline_models() as models:
        model = models(agent("b", ProfileModel(base_url="http://gpu.invalid/v1")))
    assert model.model == OFFLINE_MODEL_NAME


def test_toml_model_table_and_tool_choice(tmp_path: Path) -> None:
    path = tmp_path / "profiles.toml"
    path.write_text(
        """
[profiles.painter]
description = "Paints."
system_prompt = "You paint."

[profiles.painter.model]
name = "qwen"
base_url = "http://gpu.invalid/v1"
api_key_env = "GPU_KEY"
temperature = 0.2
extra_body = { cache_prompt = true }

[profiles.chatty]
description = "Chats."
system_prompt = "You chat."
model = "small"
tool_choice = "auto"
"""
    )
    profiles = load_profiles(path)
    painter, chatty = profiles["painter"], profiles["chatty"]
    assert painter.model == ProfileModel(
        name="qwen",
        base_url="http://gpu.invalid/v1",
        api_key_env="GPU_KEY",
        temperature=0.2,
        extra_body={"cache_prompt": True},
    )
    assert painter.tool_choice == "required"  # a sub-agent's default
    assert chatty.model == "small" and chatty.model_overrides == ProfileModel(name="small")
    assert chatty.tool_choice == "auto"


def test_the_label_shows_the_endpoint_redacted() -> None:
    secret = BASE.model_copy(update={"base_url": "http://proxy:s3cret@session.invalid/v1"})
    assert ProfileModels(secret).label == "session-model at http://proxy:***@session.invalid/v1"
