"""Each setting is declared once (issue 23, "one configuration model"): a flag names its setting in
one marker (:class:`baton.cli.options.Setting`) and every command passes on the options it
declares without naming them again; a setting nobody can reach, a flag that sets another setting
than its name says, or a command that takes some of the model's options and not the rest fails
here. In-process: typer's runner and the commands' own parameters."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path
from typing import Any, get_args, get_type_hints

import pytest
import typer
from pydantic import AliasChoices
from typer.core import TyperArgument, TyperOption
from typer.testing import CliRunner

import baton.settings
from baton.cli.app import app
from baton.cli.options import MODEL, setting_options
from baton.session import SessionConfig
from baton.settings import (
    NO_FLAG,
    NOT_FROM_SETTINGS,
    SESSION_SOURCES,
    BatonSettings,
    session_fields,
)

COMMANDS: dict[str, Any] = typer.main.get_command(app).commands  # type: ignore[attr-defined]
"""Each command as click (typer's own copy of it) holds it."""

SPELT_OTHERWISE = {
    "--base-url": "openai_base_url",  # the variable is OPENAI_BASE_URL, the flag the short name
    "--timeout": "session_timeout",  # of the command's session
}
"""Flags whose setting is not their own name with ``-`` for ``_`` (user contract: README)."""


def marked(command: str) -> dict[str, str]:
    """The command's options that set a setting: parameter name -> setting."""
    callback = COMMANDS[command].callback
    assert callback is not None
    return {param: mark.name for param, mark in setting_options(callback).items()}


def reachable() -> dict[str, set[str]]:
    """Each setting that some command's flag sets, with those commands."""
    found: dict[str, set[str]] = {}
    for command in COMMANDS:
        for setting in marked(command).values():
            found.setdefault(setting, set()).add(command)
    return found


def test_every_setting_has_a_flag_or_says_why_not() -> None:
    flags = reachable()
    fields = set(BatonSettings.model_fields)
    assert set(flags) | set(NO_FLAG) == fields, sorted(fields - set(flags) - set(NO_FLAG))
    assert not set(flags) & set(NO_FLAG), "a setting with a flag is listed as having none"
    assert all(reason.strip() for reason in NO_FLAG.values())


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_each_flag_is_named_after_its_setting(command: str) -> None:
    params = {param.name: param for param in COMMANDS[command].params}
    for param, setting in marked(command).items():
        assert setting in BatonSettings.model_fields, (command, param, setting)
        option = params[param]
        assert isinstance(option, TyperOption)
        flag = option.opts[0]
        expected = SPELT_OTHERWISE.get(flag, flag.removeprefix("--").replace("-", "_"))
        assert setting == expected, (command, flag, setting)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_each_visible_flag_says_its_environment_variable(command: str) -> None:
    params = {param.name: param for param in COMMANDS[command].params}
    for param, setting in marked(command).items():
        option = params[param]
        assert isinstance(option, TyperOption)
        if option.hidden:
            continue
        alias = BatonSettings.model_fields[setting].validation_alias
        names = (
            [str(name) for name in alias.choices if str(name).isupper()]
            if isinstance(alias, AliasChoices)
            else [f"BATON_{setting.upper()}"]
        )
        missing = [name for name in names if name not in (option.help or "")]
        assert not missing, (command, option.opts[0], missing)


def sample(command: str, option: TyperOption) -> tuple[list[str], object]:
    """Arguments that give ``option`` a value, and the value the command should pass on (by the
    type the command declares for it)."""
    if option.is_flag:
        return [option.opts[0]], True
    callback = inspect.unwrap(COMMANDS[command].callback)
    declared = get_args(get_type_hints(callback, include_extras=True)[option.name])[0]
    kinds = set(get_args(declared)) - {type(None)}
    if kinds == {int}:
        return [option.opts[0], "2"], 2
    if kinds == {float}:
        return [option.opts[0], "0.5"], 0.5
    if kinds == {Path}:
        return [option.opts[0], "some/where"], Path("some/where")
    assert kinds == {str}, (command, option.opts[0], declared)
    return [option.opts[0], "some-value"], "some-value"


NEEDED = {"approve": ["--yes"]}
"""What a command needs beyond its required parameters before it reads its settings."""


@pytest.mark.parametrize("command", sorted(set(COMMANDS) - {"version"}))
def test_every_flag_of_a_command_reaches_its_setting(
    command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Given every option at once, the command hands each value to the setting its marker names
    and no other setting a value."""
    told: dict[str, Any] = {}

    def load(config: Path | None = None, **flags: Any) -> BatonSettings:
        told.update(flags)
        raise typer.Exit(0)

    monkeypatch.setattr(baton.settings, "load_settings", load)
    args: list[str] = []
    expected: dict[str, object] = {}
    params = {param.name: param for param in COMMANDS[command].params}
    for param, setting in marked(command).items():
        option = params[param]
        assert isinstance(option, TyperOption)
        given, value = sample(command, option)
        args += given
        expected[setting] = value
    for param in COMMANDS[command].params:
        if param.required and isinstance(param, TyperOption):
            args += [param.opts[0], "s-1"]
    args += NEEDED.get(command, [])
    args += ["s-1" for param in COMMANDS[command].params if isinstance(param, TyperArgument)]
    result = CliRunner().invoke(app, [command, *args])
    assert result.exit_code == 0, result.output
    assert {name: value for name, value in told.items() if value is not None} == expected


def model_options(command: str) -> list[str]:
    return [
        option.opts[0]
        for option in COMMANDS[command].params
        if isinstance(option, TyperOption) and getattr(option, "rich_help_panel", None) == MODEL
    ]


def test_a_command_that_takes_the_model_takes_all_of_its_options() -> None:
    takers = [command for command in COMMANDS if model_options(command)]
    assert {"run", "resume", "worker", "serve"} <= set(takers)
    for command in takers:
        assert model_options(command) == model_options("run"), command


def test_run_and_serve_start_sessions_from_the_same_settings() -> None:
    """What ``serve`` leaves to its own local workers (the pool), and the timeout it takes from
    the environment only; otherwise the same flags (``--approve`` included: there the ceiling
    on what each request may ask, docs/http.md)."""
    run, serve = set(marked("run").values()), set(marked("serve").values())
    assert run - serve == {"pool", "session_timeout"}
    assert serve - run == set()


@pytest.mark.process
def test_the_help_path_loads_no_pydantic(tmp_path: Path) -> None:
    """``baton --help`` stays fast: the options and the defaults they show (the models, from
    baton.llm.defaults) are read without the settings' pydantic machinery."""
    code = (
        "import sys, baton.cli.app, baton.llm.defaults\n"
        "print(sorted(name for name in sys.modules if name.split('.')[0] == 'pydantic'))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_every_session_field_has_its_source_in_the_settings_or_says_why_not() -> None:
    fields = set(SessionConfig.model_fields)
    sourced, unsourced = set(SESSION_SOURCES), set(NOT_FROM_SETTINGS)
    assert sourced | unsourced == fields, sorted(fields - sourced - unsourced)
    assert not sourced & unsourced
    for field, settings in SESSION_SOURCES.items():
        assert settings and set(settings) <= set(BatonSettings.model_fields), field
    made = session_fields(BatonSettings())
    assert set(made) <= sourced
    SessionConfig.model_validate({"task": "a task", **made})  # what they make, a session takes


SESSION_ENV = {
    "BATON_UNCLAIMED_TIMEOUT": ("unclaimed_s", 7.0),
    "BATON_RETENTION": ("retention_s", 99.0),
    "BATON_TOOL_CHOICE": ("tool_choice", "auto"),
    "BATON_LEAD_POLICY": ("lead_policy", "guided"),
    "BATON_PROFILE_TOOLS": ("profile_tools", True),
}
"""Settings that both ``baton run`` and ``baton serve`` give every session they start."""


def test_run_and_serve_give_their_sessions_the_same_settings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import baton.server
    import baton.session

    for name, (_, value) in SESSION_ENV.items():
        monkeypatch.setenv(name, str(value).lower())
    monkeypatch.setenv("BATON_MAX_WAVES", "3")
    monkeypatch.setenv("BATON_BUDGET_CALLS", "9")
    ran: list[Any] = []

    class Captured(Exception):
        pass

    def session(config: Any, **_: object) -> Any:
        ran.append(config)
        raise Captured

    async def serve(config: Any) -> int:
        ran.append(config)
        return 0

    monkeypatch.setattr(baton.session, "Session", session)
    monkeypatch.setattr(baton.server, "serve", serve)
    runner = CliRunner()
    runner.invoke(app, ["run", "--media", str(tmp_path), "paint a fox"])
    result = runner.invoke(app, ["serve", "--port", "0", "--media", str(tmp_path)])
    assert result.exit_code == 0, result.output
    run_config, server_config = ran
    for field, value in SESSION_ENV.values():
        assert getattr(run_config, field) == value, field
        assert server_config.session_defaults[field] == value, field
    for config in (run_config, SessionConfig(task="t", **server_config.session_defaults)):
        assert config.delegation.max_waves == 3
        assert config.budget is not None and config.budget.max_model_calls == 9
