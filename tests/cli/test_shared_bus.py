"""Issue 22: every command that needs a bus other processes share refuses ``memory://`` at once.

``baton worker`` with no ``--bus`` used to serve the in-process bus forever, reachable by nobody;
``baton run --no-local-workers`` on it waited out its timeout for workers that could never claim
its requests. Now each of them, like the bus commands before, ends with exit 2 and the one line of
:func:`baton.cli.sharedbus.require_shared_bus`, before anything starts. In-process (typer's
runner): an exit code and a line need no process.
"""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from baton.cli.app import app
from baton.cli.sharedbus import GIVE_A_SHARED_BUS, in_process

NEEDS_A_SHARED_BUS = {
    "worker": ["worker"],
    "worker --check": ["worker", "--check"],
    "run --no-local-workers": ["run", "--no-local-workers", "--timeout", "5", "paint a fox"],
    "resume": ["resume", "s1"],
    "post": ["post", "--session", "s1", "--to", "lead", "hi"],
    "watch": ["watch", "s1"],
    "approve": ["approve", "s1", "call_1", "--yes"],
    "sessions": ["sessions"],
    "clean": ["clean"],
    "cancel": ["cancel", "s1"],
}


@pytest.mark.timeout(30)  # before the fix, `baton worker` served memory:// until killed
@pytest.mark.parametrize("name", list(NEEDS_A_SHARED_BUS))
@pytest.mark.parametrize("bus", [None, "memory://", "MEMORY://x"])
def test_commands_that_need_a_shared_bus_refuse_memory(name: str, bus: str | None) -> None:
    args = NEEDS_A_SHARED_BUS[name] + ([] if bus is None else ["--bus", bus])
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    command = name.split()[0]
    assert line.startswith(f"baton {command}: "), line
    assert "memory:// lives inside one process" in line and GIVE_A_SHARED_BUS in line, line


@pytest.mark.parametrize(
    ("url", "inside"),
    [
        ("memory://", True),
        ("Memory://", True),
        (" memory://", True),
        ("memory:", True),
        ("redis://localhost:6379/0", False),
        ("rediss://h/0", False),
        ("unix:///tmp/r.sock", False),
        ("memoryx://", False),
        ("", False),
    ],
)
def test_in_process_names_only_the_memory_bus(url: str, inside: bool) -> None:
    assert in_process(url) is inside
