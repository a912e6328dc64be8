"""The model's request settings, the lead's tool choice and the session's budget: from flags, the
environment and the config file (in that order), to the ``ModelSettings`` every agent starts from.
"""

from __future__ import annotations

from pathlib import Path
from typing import get_args

import pytest

from baton.bus.errors import ConfigError, ExitCode
from baton.cli.run import EXIT_CODES, session_settings
from baton.engine.spend import SpendLimits
from baton.lead.delegation import DelegationLimits
from baton.llm.types import ToolChoice
from baton.settings import ToolChoiceSetting, budget, delegation, load_settings, model_settings

CONFIG = """
temperature = 0.1
top_p = 0.8
max_tokens = 100
model_timeout = 30
model_retries = 1
tool_choice = "auto"
parallel_tool_calls = false
budget_tokens = 1000

[extra_body]
cache_prompt = true
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "baton.toml"
    path.write_text(text)
    return path


def test_the_tool_choice_setting_spells_the_model_clients_choices() -> None:
    assert get_args(ToolChoiceSetting) == get_args(ToolChoice)


def test_flag_beats_environment_beats_file_for_every_model_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("BATON_MAX_TOKENS", "200")
    monkeypatch.setenv("BATON_TOOL_CHOICE", "required")
    monkeypatch.setenv("BATON_BUDGET_CALLS", "7")
    settings = load_settings(write(tmp_path, CONFIG), temperature=0.5, top_p=None)
    model = model_settings(settings)
    assert model is not None
    assert model.temperature == 0.5  # the flag
    assert model.max_tokens == 200  # the environment, over the file
    assert (model.top_p, model.timeout, model.max_retries) == (0.8, 30, 1)  # the file
    assert model.parallel_tool_calls is False
    assert model.extra_body == {"cache_prompt": True}  # a TOML table, for this key only
    assert settings.tool_choice == "required"
    assert budget(settings) == SpendLimits(max_tokens=1000, max_model_calls=7)
    assert session_settings(settings) == {
        "tool_choice": "required",
        "lead_policy": "auto",
        "budget": SpendLimits(max_tokens=1000, max_model_calls=7),
    }


def test_defaults_bound_every_reply_and_leave_the_rest_to_the_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    settings = load_settings()
    model = model_settings(settings)
    assert model is not None
    assert model.max_tokens == 1024 and (model.timeout, model.max_retries) == (60, 3)
    assert (model.temperature, model.top_p, model.parallel_tool_calls) == (None, None, None)
    assert model.extra_body == {}
    assert budget(settings) is None
    # tool_choice measured: small models delegate more; the policy by the model's profile
    assert session_settings(settings) == {"tool_choice": "required", "lead_policy": "auto"}


def test_max_tokens_zero_sends_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    model = model_settings(load_settings(max_tokens=0))
    assert model is not None and model.max_tokens is None


def test_without_a_key_there_are_no_model_settings_but_the_session_settings_stay() -> None:
    settings = load_settings(tool_choice="required", budget_calls=3, profile_tools=True)
    assert model_settings(settings) is None
    assert session_settings(settings) == {
        "tool_choice": "required",
        "lead_policy": "auto",
        "budget": SpendLimits(max_model_calls=3),
        "profile_tools": True,
    }


def test_delegation_caps_from_the_environment_and_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert delegation(load_settings()) is None  # the lead's own defaults
    monkeypatch.setenv("BATON_MAX_SENDS_PER_TURN", "5")
    settings = load_settings(write(tmp_path, "max_sends_per_agent = 1\n"))
    expected = DelegationLimits(max_sends_per_turn=5, max_sends_per_agent=1)
    assert delegation(settings) == expected
    assert session_settings(settings) == {
        "tool_choice": "required",
        "delegation": expected,
        "lead_policy": "auto",
    }
    assert expected.max_new_agents_per_profile == DelegationLimits().max_new_agents_per_profile


def test_extra_body_is_a_json_object_from_a_flag_or_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert load_settings(extra_body='{"top_k": 20, "min_p": 0.05}').extra_body == {
        "top_k": 20,
        "min_p": 0.05,
    }
    monkeypatch.setenv("BATON_EXTRA_BODY", '{"cache_prompt": false}')
    assert load_settings().extra_body == {"cache_prompt": False}


@pytest.mark.parametrize(
    ("where", "value", "says"),
    [
        ("flag", "{not json", "bad setting --extra-body: Value error, not valid JSON"),
        ("flag", "[1, 2]", "bad setting --extra-body: Value error, must be a JSON object"),
        ("env", "{not json", "bad setting BATON_EXTRA_BODY: Value error, not valid JSON"),
    ],
)
def test_extra_body_that_is_no_json_object_is_refused_naming_its_source(
    monkeypatch: pytest.MonkeyPatch, where: str, value: str, says: str
) -> None:
    flags: dict[str, object] = {}
    if where == "flag":
        flags["extra_body"] = value
    else:
        monkeypatch.setenv("BATON_EXTRA_BODY", value)
    with pytest.raises(ConfigError) as refused:
        load_settings(None, **flags)
    assert str(refused.value).startswith(says)
    assert refused.value.exit_code == ExitCode.USAGE


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[temperature]\nvalue = 1\n", "'temperature' must be a value, not a table"),
        ('tool_choice = "named"\n', "tool_choice: Input should be 'auto', 'required' or 'none'"),
        ("temperature = 3\n", "temperature: Input should be less than or equal to 2"),
        ("max_tokens = -1\n", "max_tokens: Input should be greater than or equal to 0"),
        ("budget_calls = 0\n", "budget_calls: Input should be greater than or equal to 1"),
        ("model_retries = -1\n", "model_retries: Input should be greater than or equal to 0"),
    ],
)
def test_a_bad_value_in_the_file_names_the_file_and_key(
    tmp_path: Path, text: str, says: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as refused:
        load_settings(path)
    assert str(path) in str(refused.value) and says in str(refused.value)


def test_every_session_status_has_an_exit_code() -> None:
    from baton.lead.agent import LeadStatus

    assert set(EXIT_CODES) == set(get_args(LeadStatus))
    assert EXIT_CODES == {
        "completed": 0,
        "incomplete": 4,
        "failed": 1,
        "timed_out": 1,
        "cancelled": 130,
    }
