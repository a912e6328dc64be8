"""The live view in a pseudo-terminal: the lead's text streams in, and an approval question is
answered by typing ``y``. Uses the standard library's ``pty``; no terminal multiplexer needed."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import time
from pathlib import Path

from tests.cli.helpers import BATON, REPO

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")


class Terminal:
    """A process on a pseudo-terminal; ``screen`` is everything it printed, escapes removed."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.master, slave = pty.openpty()
        os.set_blocking(self.master, False)
        env = {**env, "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"}
        env.pop("NO_COLOR", None)
        self.proc = subprocess.Popen(
            [BATON, *args],
            cwd=REPO,
            env=env,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
        )
        os.close(slave)
        self.raw = b""

    @property
    def screen(self) -> str:
        return ANSI.sub("", self.raw.decode(errors="replace"))

    def read_until(self, text: str, timeout: float = 60.0) -> str:
        """Read output until ``text`` appears in it (escapes removed); returns the screen."""
        deadline = time.monotonic() + timeout
        while text not in self.screen:
            left = deadline - time.monotonic()
            assert left > 0, f"no {text!r} on screen:\n{self.screen}"
            ready, _, _ = select.select([self.master], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.master, 65536)
                except OSError:  # EIO: the process closed the terminal
                    chunk = b""
                if not chunk:
                    assert text in self.screen, f"ended without {text!r}:\n{self.screen}"
                self.raw += chunk
        return self.screen

    def type(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def close(self) -> int:
        try:
            return self.proc.wait(30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            os.close(self.master)


def test_live_view_streams_and_takes_a_typed_approval(
    env: dict[str, str], profiles_file: Path
) -> None:
    term = Terminal(
        ["run", "--profiles", str(profiles_file), "--profile", "publisher", "publish the news"],
        env,
    )
    try:
        before = term.read_until("approve? [y/n]")
        assert "Results from" not in before  # the session waits for the answer
        assert "publisher wants to run publish" in before
        term.type("y\n")
        after = term.read_until("session completed")
        assert "publisher: publish approved" in after
        # Streamed, not printed at the end: some frame showed the lead's first answer without
        # its final one (frames start with the session header line).
        frames = after.split("session s-")
        assert any("Delegated 1 task (" in f and "Results from" not in f for f in frames), after
    finally:
        code = term.close()
    assert code == 0, term.screen
