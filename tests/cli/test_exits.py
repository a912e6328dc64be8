"""run_async, the one path from an error to one line and an exit code (every command, the worker
included): errors raised inside a task group arrive wrapped in an exception group. And a session
that did not complete: ``baton run`` exits with its status's code and one line saying why."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
import typer

from baton.bus.errors import BusUnreachable, ExitCode
from baton.cli.exits import run_async
from baton.llm import ScriptedServer
from baton.llm.script import HttpError, Reply, ScriptItem
from tests.cli.helpers import BATON, clean_env


async def fails_in_a_task_group(error: BaseException) -> None:
    async def task() -> None:
        raise error

    async with anyio.create_task_group() as group:
        group.start_soon(task)
        await anyio.sleep_forever()


@pytest.mark.parametrize(
    ("error", "code", "line"),
    [
        (BusUnreachable("redis://127.0.0.1:1/0", "refused"), ExitCode.UNREACHABLE,
         "baton worker: cannot reach the bus at redis://127.0.0.1:1/0: refused"),
        (FileNotFoundError(2, "No such file or directory", "p.toml"), ExitCode.FAILED,
         "baton worker: No such file or directory: p.toml"),
    ],
    ids=["bus-unreachable", "os-error"],
)  # fmt: skip
def test_an_error_out_of_a_task_group_is_one_line_and_its_code(
    error: BaseException, code: int, line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(typer.Exit) as exited:
        run_async(fails_in_a_task_group, error, command="baton worker")
    assert exited.value.exit_code == code
    assert capsys.readouterr().err.splitlines() == [line]


def test_a_bug_out_of_a_task_group_keeps_its_traceback() -> None:
    with pytest.raises(BaseExceptionGroup) as raised:
        run_async(fails_in_a_task_group, KeyError("bug"), command="baton worker")
    assert raised.group_contains(KeyError)


INVENTED = "https://via.placeholder.com/fox.png"


@pytest.mark.parametrize(
    ("reply", "code", "line"),
    [
        (Reply(text=f"Here is your fox: {INVENTED}"), ExitCode.INCOMPLETE,
         ("baton run: session incomplete: ", INVENTED)),
        (HttpError(400, "context too long", "invalid_request_error"), ExitCode.FAILED,
         ("baton run: session failed: ", "context too long")),
    ],
    ids=["incomplete", "failed"],
)  # fmt: skip
@pytest.mark.process
async def test_a_session_that_did_not_complete_exits_with_its_statuss_code_and_one_line(
    tmp_path: Path, reply: ScriptItem, code: int, line: tuple[str, str]
) -> None:
    server = ScriptedServer(responder=lambda body: reply, record=True)
    async with server.serve() as http:
        env = clean_env(
            tmp_path,
            OPENAI_API_KEY="sk-test",
            OPENAI_BASE_URL=http.base_url,
            BATON_MODEL_RETRIES="0",
            # the lead's answer stands (no routing of "paint a fox" to the painter, whose model
            # here says the same): the invented URL decides
            BATON_CONFIRM_DIRECT="false",
        )
        done = await anyio.run_process(
            [BATON, "run", "--timeout", "60", "--approve", "deny", "paint a fox"],
            env=env, check=False,
        )  # fmt: skip
    assert done.returncode == code
    said = done.stderr.decode().splitlines()
    start, why = line
    assert len(said) == 1 and said[0].startswith(start) and why in said[0], said
    assert server.requests  # the lead asked the model
