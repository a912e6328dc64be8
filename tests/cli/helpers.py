"""Running the real ``baton`` console script as subprocesses, and reading what they print.

Tests synchronise on lines the processes print (JSON events, "ready" lines), never on sleeps:
:meth:`Proc.expect` blocks (in a thread, so the event loop stays free) until a matching line
arrives or the process ends. Every process is started in its own process group so a test can
check that nothing of it is left behind, and is killed at the end whatever happened.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.support.profiles import ARTISTS, SURVEYORS

REPO = Path(__file__).resolve().parents[2]
BATON = str(Path(sys.executable).parent / "baton")
TIMEOUT_S = 60.0

PROFILES = ARTISTS + SURVEYORS


def clean_env(tmp: Path, **extra: str) -> dict[str, str]:
    """An environment with no model key or bus configured, and this repo importable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "BATON_", "REDIS_"))}
    env.update(
        PYTHONPATH=str(REPO),
        BATON_MEDIA_DIR=str(tmp / "media"),
        PYTHONUNBUFFERED="1",
        COLUMNS="120",
    )
    env.update(extra)
    return env


class Proc:
    """One ``baton`` process with its stdout and stderr read line by line."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: Path | None = None) -> None:
        self.args = args
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            [BATON, *args],
            cwd=cwd,  # None: the test's own working directory, never the checkout
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.lines: queue.Queue[tuple[str, str | None]] = queue.Queue()
        self.out: list[str] = []
        self.err: list[str] = []
        self._checked = {"out": 0, "err": 0}
        """How many lines of each stream an ``expect`` on that stream has looked at: a line read
        while waiting on the other stream is still new to the next ``expect`` on its own (the two
        pipes are read by two threads, so their lines interleave in any order)."""
        self._readers = [
            threading.Thread(target=self._read, args=(name,), daemon=True)
            for name in ("out", "err")
        ]
        for reader in self._readers:
            reader.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read(self, name: str) -> None:
        stream = self.proc.stdout if name == "out" else self.proc.stderr
        assert stream is not None
        for line in stream:
            self.lines.put((name, line))
        self.lines.put((name, None))

    def expect(
        self, match: Callable[[str], bool] | str, *, stream: str = "out", timeout: float = TIMEOUT_S
    ) -> str:
        """The first new line on ``stream`` that matches; fails if the process ends first."""
        test = match if callable(match) else (lambda line: match in line)
        kept = self.out if stream == "out" else self.err
        while self._checked[stream] < len(kept):  # read while an expect waited on the other
            earlier = kept[self._checked[stream]]
            self._checked[stream] += 1
            if test(earlier):
                return earlier
        deadline = time.monotonic() + timeout
        ended: set[str] = set()
        while True:
            try:
                name, line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"timed out in {self.args}:\n{self.transcript()}") from None
            if line is None:
                ended.add(name)
                if name == stream:
                    raise AssertionError(f"{self.args} ended before a match:\n{self.transcript()}")
                continue
            (self.out if name == "out" else self.err).append(line)
            if name == stream:
                self._checked[stream] += 1
                if test(line):
                    return line

    def expect_event(
        self,
        type_: str,
        timeout: float = TIMEOUT_S,
        where: Callable[[dict[str, Any]], bool] = lambda event: True,
        **fields: Any,
    ) -> dict[str, Any]:
        """The next JSON event line of ``type_`` whose fields match (and ``where`` holds)."""

        def match(line: str) -> bool:
            event = _json(line)
            return (
                event is not None
                and event.get("type") == type_
                and all(event.get(k) == v for k, v in fields.items())
                and where(event)
            )

        event = _json(self.expect(match, timeout=timeout))
        assert event is not None
        return event

    def expect_each(
        self,
        type_: str,
        agents: set[str],
        where: Callable[[dict[str, Any]], bool] = lambda event: True,
    ) -> dict[str, dict[str, Any]]:
        """One ``type_`` event from each of ``agents``, in whatever order they come.

        Lines an earlier ``expect`` already read count too: agents interleave, so one agent's
        event can pass while the test still waits for another's event of an earlier kind.
        """
        found: dict[str, dict[str, Any]] = {}
        for event in self.events():
            agent = event.get("agent")
            fresh = isinstance(agent, str) and agent in agents and agent not in found
            if fresh and event.get("type") == type_ and where(event):
                found[str(agent)] = event
        while set(found) != agents:
            event = self.expect_event(
                type_, where=lambda e: e.get("agent") in agents - set(found) and where(e)
            )
            found[event["agent"]] = event
        return found

    def wait(self, timeout: float = TIMEOUT_S) -> int:
        """Exit code, after draining both streams into ``out``/``err``."""
        code = self.proc.wait(timeout)
        for reader in self._readers:
            reader.join(10)
        while not self.lines.empty():
            name, line = self.lines.get()
            if line is not None:
                (self.out if name == "out" else self.err).append(line)
        return code

    def events(self) -> list[dict[str, Any]]:
        return [e for e in (_json(line) for line in self.out) if e is not None]

    def drain(self) -> None:
        """Keep what the process wrote that no ``expect`` has read yet (for the transcript)."""
        while True:
            try:
                name, line = self.lines.get_nowait()
            except queue.Empty:
                return
            if line is not None:
                (self.out if name == "out" else self.err).append(line)

    def transcript(self) -> str:
        return f"--- stdout\n{''.join(self.out)}--- stderr\n{''.join(self.err)}"

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.pid, signal.SIGKILL)
        self.wait(10)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


def _json(line: str) -> dict[str, Any] | None:
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


@contextmanager
def processes() -> Iterator[Callable[..., Proc]]:
    """A factory of :class:`Proc`; every process started is killed on the way out."""
    started: list[Proc] = []

    def start(*args: str, env: dict[str, str], cwd: Path | None = None) -> Proc:
        proc = Proc(list(args), env, cwd)
        started.append(proc)
        return proc

    try:
        yield start
    except BaseException:
        for proc in started:  # a failing test shows what every process said, not just one
            proc.drain()
            print(f"=== {proc.args}\n{proc.transcript()}")
        raise
    finally:
        for proc in started:
            proc.kill()


def group_members(pgid: int) -> list[int]:
    """Pids still alive in a process group (zombies included: they are reaped by the parent)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def invoke_baton(
    *args: str, env: Mapping[str, str] | None = None, input: str | None = None
) -> tuple[int, str, str]:
    """Run ``baton ARGS`` in this process (typer's runner): (exit code, stdout, stderr).

    For what a process adds nothing to (arguments, help, settings, an exit code and its one
    line), at a fraction of a process's start-up. Made to read as the process would: ``env`` is
    the environment (over the sealed one of every test), ``input`` its stdin, the root logger
    starts bare as in a new interpreter (a library's warning reaches stderr, a worker's
    ``basicConfig`` writes there), and an exception the command lets escape comes back in
    stderr as the traceback the process would print. Signals, kill -9, closed pipes, a command
    run from another thread and the console script itself need :func:`run_baton`."""
    from typer.testing import CliRunner

    from baton.cli.app import app

    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    root.handlers.clear()
    try:
        result = CliRunner().invoke(app, list(args), input=input, env=dict(env or {}))
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    err = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        err += "".join(traceback.format_exception(result.exception))
    return result.exit_code, result.stdout, err


def run_baton(*args: str, env: dict[str, str], timeout: float = TIMEOUT_S) -> tuple[int, str, str]:
    """Run ``baton ARGS`` to completion: (exit code, stdout, stderr)."""
    done = subprocess.run(
        [BATON, *args],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return done.returncode, done.stdout, done.stderr


SHORT_LEAD_LEASE = {"BATON_LEAD_LEASE": "4"}
"""A lead lease of 4 s (the default is 10): a test that kills a lead waits one lease out before
``lead lost`` shows or a resume takes over. Long enough for a loaded machine's lead to renew it
(every 1.3 s) without a stall taking it away."""
