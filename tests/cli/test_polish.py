"""What a user notices first about the CLI: ``--version``, ``-h``, readable help, a task on stdin.

In-process (typer's runner, :func:`~tests.cli.helpers.invoke_baton`): help, a version, an exit
code and its line need no process.
"""

from __future__ import annotations

import json
import re
from importlib.metadata import version

import pytest

from baton.errors import DISTRIBUTION
from tests.cli.helpers import invoke_baton

COMMANDS = [
    "run", "resume", "post", "watch", "approve", "cancel", "sessions", "worker", "serve", "clean",
    "tools",
]  # fmt: skip


def test_version_flag_prints_the_version(env: dict[str, str]) -> None:
    code, out, err = invoke_baton("--version", env=env)
    assert (code, err) == (0, "")
    assert out.strip() == f"baton {version(DISTRIBUTION)}"


@pytest.mark.parametrize("command", [[], *([c] for c in COMMANDS)], ids=lambda c: " ".join(c))
def test_dash_h_is_help(command: list[str], env: dict[str, str]) -> None:
    code, short, _ = invoke_baton(*command, "-h", env=env)
    assert code == 0
    assert short == invoke_baton(*command, "--help", env=env)[1]
    assert "-h, --help" in short


@pytest.mark.parametrize("command", COMMANDS)
def test_help_shows_no_python_type_names_for_options(command: str, env: dict[str, str]) -> None:
    _, out, _ = invoke_baton(command, "--help", env=env)
    options = out.split("\n\n  Examples:", 1)[0]  # every panel of options, not the examples
    assert "Options:" in options
    assert not re.findall(r"<[a-z][\w\[\] ]*>", options), options


ARGUMENTS = {
    "run": ["TASK"],
    "resume": ["SESSION"],
    "post": ["TEXT"],
    "watch": ["SESSION"],
    "approve": ["SESSION", "CALL_ID"],
    "cancel": ["SESSION"],
}


@pytest.mark.parametrize("command", COMMANDS)
def test_help_names_arguments_by_metavar_alone(command: str, env: dict[str, str]) -> None:
    _, out, _ = invoke_baton(command, "--help", env=env)
    section = out.split("Arguments:\n", 1)[1].split("\n\n", 1)[0] if "Arguments:" in out else ""
    firsts = [line for line in section.splitlines() if re.match(r"  \S", line)]  # not wrapped
    assert [line.split()[0] for line in firsts] == ARGUMENTS.get(command, []), out
    for line in firsts:
        assert re.match(r"  [A-Z_]+  \S", line), line  # the name, then straight to its help
    assert not re.findall(r"<[a-z][\w\[\] ]*>", section), section


def test_run_help_names_values_for_what_they_are(env: dict[str, str]) -> None:
    _, out, _ = invoke_baton("run", "--help", env=env)
    for shown in ("--bus URL", "--profile NAME", "--approve ask|auto|deny", "--timeout SECONDS"):
        assert shown in out


def test_run_dash_reads_the_task_from_stdin(env: dict[str, str]) -> None:
    code, out, err = invoke_baton("run", "--json", "-", env=env, input="paint a fox\n")
    assert code == 0, err
    events = [json.loads(line) for line in out.splitlines()]
    started = [e for e in events if e["type"] == "session.started"]
    assert [e["task"] for e in started] == ["paint a fox"]


def test_run_dash_with_nothing_on_stdin_is_a_usage_error(env: dict[str, str]) -> None:
    code, out, err = invoke_baton("run", "--json", "-", env=env, input="  \n")
    assert code == 2
    assert err.strip() == "baton run: no task on stdin (`-` reads the task from stdin)"
    assert out == ""


@pytest.mark.parametrize(("level", "shown"), [("INFO", False), ("DEBUG", True)])
def test_the_http_clients_request_lines_show_only_at_debug(
    level: str, shown: bool, env: dict[str, str]
) -> None:
    code, _, err = invoke_baton("run", "paint a fox", env={**env, "BATON_LOG_LEVEL": level})
    assert code == 0, err
    assert "baton: using the offline model" in err  # INFO lines of baton's own still show
    assert ("HTTP Request:" in err) is shown, err


def test_a_timed_out_session_says_so_once_and_in_words(env: dict[str, str]) -> None:
    code, out, err = invoke_baton("run", "--timeout", "0.01", "paint a fox", env=env)
    assert code == 1
    assert err.splitlines() == ["baton run: session timed out after 0.01 s"]
    assert re.search(r"^── session s-\w+ timed out$", out, re.MULTILINE), out
    assert f"session {out.split()[2]} timed_out" not in out  # the status, said as words
