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


def test_sigterm_to_a_watch_ends_it_with_a_line(
    start: Callable[..., Proc], redis_url: str, profiles_file: Path, env: dict[str, str]
) -> None:
    """A command with no signal handling of its own: SIGTERM used to end it at once, silently
    (exit -15); now it ends as on Ctrl-C, saying which signal it was."""
    run = start(
        "run", "--json", "--bus", redis_url, "--session", "s-sig", "--profiles",
        str(profiles_file), "--profile", "sleeper", "ponder the sea", env=env,
    )  # fmt: skip
    run.expect_event("tool.call", agent="sleeper")
    watch = start("watch", "s-sig", "--bus", redis_url, env=env)
    watch.expect("── session s-sig")  # it follows the session now
    watch.proc.send_signal(signal.SIGTERM)
    assert watch.wait() == 130, watch.transcript()
    assert watch.err == ["baton watch: interrupted by SIGTERM\n"], watch.transcript()
