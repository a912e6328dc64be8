"""run_async, the one path from an error to one line and an exit code (every command, the worker
included): errors raised inside a task group arrive wrapped in an exception group."""

from __future__ import annotations

import anyio
import pytest
import typer

from baton.bus.errors import BusUnreachable, ExitCode
from baton.cli.exits import run_async


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
