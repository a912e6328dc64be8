"""Issue 22: a signal that ends a command leaves the one stderr line every non-zero exit owes.

SIGINT or SIGTERM to a piped ``baton run`` cancelled the session and exited 130 with nothing on
stderr; a command without handling of its own (``baton watch``) was ended by SIGTERM at once,
silently (exit -15). Signals need a process: the real console script throughout.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli.helpers import Proc


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_to_a_piped_run_says_which_and_how_the_session_ended(
    start: Callable[..., Proc], profiles_file: Path, env: dict[str, str], signum: signal.Signals
) -> None:
    run = start(
        "run", "--json", "--profiles", str(profiles_file), "--profile", "sleeper",
        "ponder the sea", env=env,
    )  # fmt: skip
    run.expect_event("tool.call", agent="sleeper")  # ponder: 300 s unless interrupted
    run.proc.send_signal(signum)
    assert run.wait() == 130, run.transcript()
    assert run.events()[-1]["status"] == "cancelled"
    assert run.err == [f"baton run: session cancelled: interrupted by {signum.name}\n"]
