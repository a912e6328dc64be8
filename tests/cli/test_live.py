"""The live view in a pseudo-terminal: the lead's text streams in, and an approval question is
answered by typing ``y``. Uses the standard library's ``pty``; no terminal multiplexer needed."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from tests.cli.helpers import BATON, REPO

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")
CONTROL = re.compile(r"\x1b\[([0-9;?]*)([A-Za-z])|\x1b\][^\x07]*\x07|([\r\n])")


def emulate(raw: bytes) -> list[str]:
    """The lines a terminal shows after ``raw``, scrollback included: enough of one to follow
    rich's redraws (carriage return, cursor up/down/column, erase line), so an overwritten frame
    is gone; other escapes (colours, cursor visibility) change nothing here."""
    lines = [""]
    row = col = 0
    text = raw.decode(errors="replace")
    at = 0
    for match in [*CONTROL.finditer(text), None]:
        chunk = text[at : match.start() if match else len(text)]
        line = lines[row].ljust(col)
        lines[row] = line[:col] + chunk + line[col + len(chunk) :]
        col += len(chunk)
        if match is None:
            break
        at = match.end()
        params, command, char = match.group(1), match.group(2), match.group(3)
        count = int(params) if params and params.isdigit() else 1
        if char:
            row, col = (row + 1, 0) if char == "\n" else (row, 0)
        elif command == "A":
            row = max(row - count, 0)
        elif command == "B":
            row += count
        elif command == "G":
            col = count - 1
        elif command == "K":  # erase: 0 to the end of the line, 2 all of it
            lines[row] = "" if params == "2" else lines[row][:col]
        lines.extend([""] * (row + 1 - len(lines)))
    return [line.rstrip() for line in lines]


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

    def screen_until(self, done: Callable[[list[str]], bool], timeout: float = 60.0) -> list[str]:
        """Read output until ``done`` holds for what a terminal would show (see :func:`emulate`)."""
        deadline = time.monotonic() + timeout
        while not done(lines := emulate(self.raw)):
            left = deadline - time.monotonic()
            assert left > 0, "screen never got there:\n" + "\n".join(lines)
            ready, _, _ = select.select([self.master], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.master, 65536)
                except OSError:  # EIO: the process closed the terminal
                    chunk = b""
                assert chunk, "ended before the screen got there:\n" + "\n".join(lines)
                self.raw += chunk
        return lines

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


@pytest.mark.process
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


@pytest.mark.process
def test_live_view_keeps_updating_while_it_asks(env: dict[str, str], profiles_file: Path) -> None:
    """While the approval question waits for an answer the panels still change (north finishes),
    and once answered no frame is left behind: the question shows once, then the live panels."""
    term = Terminal(
        ["run", "--profiles", str(profiles_file), "--profile", "publisher", "--profile", "north",
         "publish and survey"],
        env,
    )  # fmt: skip

    def north_is(status: str) -> Callable[[list[str]], bool]:
        def asking_and(lines: list[str]) -> bool:
            prompt = [i for i, line in enumerate(lines) if "approve? [y/n]" in line]
            north = [i for i, line in enumerate(lines) if "north · north" in line]
            return (
                bool(prompt and north)
                and lines[prompt[-1]].endswith("▏")  # still asking, nothing typed
                and any(status in line for line in lines[north[-1] :])
            )

        return asking_and

    try:
        term.screen_until(north_is("working"))
        Path(env["BATON_TEST_RELEASE"]).touch()  # north's tool returns while the question is up
        asking = term.screen_until(north_is("exited (finished)"))
        assert "approve? [y/n] y" not in "\n".join(asking)  # not answered yet: it updated live
        term.type("y")
        term.screen_until(lambda lines: any(line.endswith("approve? [y/n] y▏") for line in lines))
        term.type("\n")
        final = term.screen_until(lambda lines: any("session completed" in line for line in lines))
    except BaseException:
        term.proc.kill()  # do not wait out a run that is stuck asking
        raise
    finally:
        code = term.close()
    assert code == 0, term.screen
    shown = "\n".join(final)
    assert shown.count("approve? [y/n]") == 1, shown  # the record of the answer, no stale frame
    assert shown.count("wants to run publish") == 1, shown
    assert shown.count("╭─ lead") == 1, shown  # one frame: the one drawn after the answer
    record = next(i for i, line in enumerate(final) if "approve? [y/n] y" in line)
    lead = next(i for i, line in enumerate(final) if "╭─ lead" in line)
    assert record < lead, shown


@pytest.mark.process
def test_a_file_typed_at_the_terminal_reaches_the_reviewer(
    env: dict[str, str], tmp_path: Path
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("a heron and a fox\n")
    term = Terminal(["run", "review my notes"], env)
    try:
        term.read_until("file path or URL")
        term.type(f"{tmp_path / 'missing.txt'}\n")  # refused in one line, then asked again
        term.read_until("cannot read")
        term.type(f"{notes}\n")
        after = term.read_until("session completed")
        assert "reviewer: upload provided: notes.txt" in after
    finally:
        code = term.close()
    assert code == 0, term.screen
    [stored] = (tmp_path / "media").rglob("reviewer-upload-*-notes.txt")
    assert stored.read_text() == "a heron and a fox\n"


@pytest.mark.process
def test_the_terminal_stops_asking_once_another_process_answered(
    env: dict[str, str], redis_url: str
) -> None:
    """Answered by ``baton upload`` elsewhere: the prompt goes away, so the next line typed is
    not taken for a question nobody waits on."""
    from tests.cli.helpers import invoke_baton

    term = Terminal(["run", "--bus", redis_url, "--session", "s-elsewhere", "review my notes"], env)
    try:
        term.read_until("file path or URL")
        [question] = anyio.run(_open_question_ids, redis_url, "s-elsewhere")
        code, _, err = invoke_baton(
            "upload",
            "s-elsewhere",
            question,
            "--url",
            "https://example.com/notes.txt",
            "--bus",
            redis_url,
            env=env,
        )
        assert code == 0, err
        after = term.read_until("session completed")
        assert f"question {question} closed" in after
    finally:
        code = term.close()
    assert code == 0, term.screen


async def _open_question_ids(url: str, session: str) -> list[str]:
    from baton.bus.connect import open_bus
    from baton.engine.questions import open_questions

    async with open_bus(url) as bus:
        return [question.id for question in await open_questions(bus, session)]
