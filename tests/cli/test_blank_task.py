"""A task that is only whitespace is no task: ``baton run`` refuses it at once (exit 2, one line)
instead of starting a lead that works on nothing."""

from __future__ import annotations

import pytest

from tests.cli.helpers import invoke_baton


@pytest.mark.parametrize("task", ["", "  ", " \n\t "], ids=["empty", "spaces", "mixed"])
def test_blank_task_is_refused_with_one_line(task: str, env: dict[str, str]) -> None:
    code, out, err = invoke_baton("run", task, env=env)
    assert code == 2, err
    lines = err.splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("baton run: bad session setting: task: a new session needs a task")
    assert "not just whitespace" in lines[0]
    assert "session.started" not in out and "(empty request)" not in out
