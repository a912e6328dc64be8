"""Help a first-time user can read (issue 22): ``run --help`` grouped into panels (typer's
``rich_help_panel``, written by click: :mod:`baton.cli.helpfmt`) with each option's default shown,
the same panels on ``worker``, ``serve`` and ``resume``, one ``--media`` option, and ``post --to``
defaulting to the lead. In-process, through typer's runner."""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import pytest
import redis
import typer
from typer.testing import CliRunner

from baton.bus.connect import open_bus
from baton.cli.app import app
from baton.cli.options import setting_options
from baton.settings import BatonSettings

RUN_PANELS = [
    "Arguments", "Model", "Lead and sub-agents", "Session", "Approvals", "Bus & workers", "Media",
    "Output", "Options",
]  # fmt: skip


def help_of(*command: str) -> str:
    result = CliRunner().invoke(app, [*command, "--help"], terminal_width=100)
    assert result.exit_code == 0, result.output
    return result.stdout


def panels(text: str) -> dict[str, str]:
    """Each section of a help text (``Model:`` up to the next blank-line-separated heading)."""
    found: dict[str, str] = {}
    for match in re.finditer(r"^([A-Z][\w &-]+):\n((?:  .*\n|\n(?=  ))*)", text, re.MULTILINE):
        found[match[1]] = match[2]
    return found


def options_in(section: str) -> list[str]:
    """The option names a section lists (each line that starts an option)."""
    return re.findall(r"^  (?:-\w, )?(--[\w-]+)", section, re.MULTILINE)


def test_run_help_is_grouped_into_panels_in_a_readable_order() -> None:
    text = help_of("run")
    found = panels(text)
    assert [name for name in found if name in RUN_PANELS] == RUN_PANELS, list(found)
    assert options_in(found["Model"])[:2] == ["--model", "--base-url"]
    assert "--max-tokens" in options_in(found["Model"])
    assert options_in(found["Approvals"]) == ["--approve"]
    assert {"--bus", "--pool", "--local-workers"} <= set(options_in(found["Bus & workers"]))
    assert options_in(found["Media"]) == ["--media", "--image-model"]
    assert options_in(found["Output"]) == ["--json"]
    assert {"--config", "--help"} <= set(options_in(found["Options"]))


@pytest.mark.parametrize("command", ["worker", "serve", "resume"])
def test_the_shared_options_sit_in_the_same_panels_elsewhere(command: str) -> None:
    run, other = panels(help_of("run")), panels(help_of(command))
    where_run = {option: name for name, body in run.items() for option in options_in(body)}
    shared = 0
    for name, body in other.items():
        for option in options_in(body):
            if option in where_run and option not in {"--help", "--timeout"}:
                assert where_run[option] == name, (command, option)
                shared += 1
    assert shared >= 12  # the model's settings, the bus, the media at least


def shown_as(command: str) -> dict[str, str]:
    """Each option that sets a setting (its :class:`~baton.cli.options.Setting` marker), with
    that setting: the option's own default is None, so its help shows the setting's."""
    cmd = typer.main.get_command(app).commands[command]  # type: ignore[attr-defined]
    options = {param.name: param.opts[0] for param in cmd.params}
    return {options[name]: mark.name for name, mark in setting_options(cmd.callback).items()}


def shown_defaults(command: str) -> dict[str, str | None]:
    """Each visible option that takes a value, with the default its help shows (None: none)."""
    cmd = typer.main.get_command(app).commands[command]  # type: ignore[attr-defined]
    ctx = typer.Context(cmd, info_name=command)
    shown: dict[str, str | None] = {}
    for param in cmd.params:
        if param.param_type_name != "option" or param.hidden or param.is_flag:
            continue
        record = param.get_help_record(ctx)
        assert record is not None
        match = re.search(r"\[default: ([^;\]]*)", record[1])
        shown[param.opts[0]] = match[1] if match else None
    return shown


@pytest.mark.parametrize("command", ["run", "worker", "serve", "resume"])
def test_every_option_with_a_value_shows_its_default_and_it_is_the_settings(command: str) -> None:
    shown = shown_defaults(command)
    assert len(shown) > 10
    nothing = {"--base-url", "--config", "--health-file"}  # no default to speak of
    assert [option for option, default in shown.items() if default is None] == [
        option for option in shown if option in nothing
    ]
    compared = 0
    for option, field in shown_as(command).items():
        if option == "--media":  # unset: a directory, media_dir
            field = "media_dir"
        setting = BatonSettings.model_fields[field].get_default(call_default_factory=True)
        if (
            option not in shown
            or setting in (None, {})
            or (command, option)
            in {
                ("resume", "--timeout"),  # the session's own
                ("resume", "--approve"),
                ("worker", "--log-level"),  # a worker says what it does: INFO unless told
            }
        ):
            continue
        text = f"{setting:g}" if isinstance(setting, float) else str(setting)
        if option == "--media":
            text = f"./{text}"
        default = shown[option]
        assert default is not None and default.split(" (")[0] == text, (option, default, text)
        compared += 1
    assert compared >= 5


def test_media_is_one_option_and_the_old_spelling_still_works(tmp_path: Path) -> None:
    for command in ("run", "worker", "serve", "resume"):
        assert "--media-dir" not in help_of(command), command
    for flag in ("--media", "--media-dir"):
        folder = tmp_path / flag.strip("-")
        result = CliRunner().invoke(app, ["run", flag, str(folder), "paint a fox"])
        assert result.exit_code == 0, result.output
        assert list(folder.rglob("*.png")), (flag, result.output)


def test_post_sends_to_the_lead_unless_told(redis_url: str) -> None:
    async def a_running_lead() -> None:  # its record, as a live lead writes it
        async with open_bus(redis_url) as bus:
            await bus.records.hold_lead("s-to-lead", "lead-1", 30, {"status": "running"})

    anyio.run(a_running_lead)
    result = CliRunner().invoke(
        app, ["post", "--bus", redis_url, "--session", "s-to-lead", "also paint a heron"]
    )
    assert result.exit_code == 0, result.output
    with redis.Redis.from_url(redis_url, decode_responses=True) as admin:
        [(_, fields)] = admin.xrange("baton:{s-to-lead}:inbox:lead")
    assert result.stdout.strip() in fields["msg"] and "also paint a heron" in fields["msg"]
    assert "[default: lead]" in help_of("post")


@pytest.mark.parametrize(
    ("command", "flag"),
    [("run", "--lead-policy"), ("serve", "--lead-policy"), ("run", "--image-model"),
     ("worker", "--image-model"), ("serve", "--image-model"), ("serve", "--approve"),
     ("mcp", "--approve")],
)  # fmt: skip
def test_the_new_flags_reach_the_settings(command: str, flag: str) -> None:
    """Each flag is the setting of its name: a bad value is refused naming the flag."""
    bad = {"--lead-policy": "bogus", "--image-model": "", "--approve": "maybe"}[flag]
    args = [command, flag, bad, *(["paint a fox"] if command == "run" else [])]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert f"bad setting {flag}" in result.stderr, result.stderr
