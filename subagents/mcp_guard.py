"""Keeps a stdio MCP server from outliving the process that started it, ``kill -9`` included.

The ``mcp`` SDK starts a stdio server in a session (and process group) of its own and, when its
client closes, stops it gracefully: stdin closed, then SIGTERM to the group, then SIGKILL. That
needs the client to run. A worker killed outright (``kill -9``, the OOM killer) runs nothing, and
a server that ignores the end of its input and SIGTERM stays forever, orphaned. The SDK has no hook
into how it starts the process, so baton starts this guard in its place (``python -I
mcp_guard.py <worker pid> -- <command> <args>...``) and the guard starts the server:

- the guard is the leader of the group the SDK made, and the server runs in that group (with its
  own children, unless they leave it), on the guard's stdin, stdout and stderr, which are the
  SDK's pipes: the SDK speaks to the server exactly as before, and its graceful stop reaches the
  whole group exactly as before (the guard outlives the server's SIGTERM and exits with its code);
- the guard asks the kernel for a signal when its parent dies (Linux:
  ``prctl(PR_SET_PDEATHSIG)``; elsewhere, and as a fallback, it looks at its parent every
  :data:`POLL_S`), and then kills its whole group with SIGKILL. A parent that died before the
  guard asked is caught by comparing its parent's pid with the one it was given.

It imports nothing of baton (``-I``: no site packages, no environment) so it starts in tens of
milliseconds, and it never writes to stdout, which is the server's.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from types import FrameType

PR_SET_PDEATHSIG = 1
POLL_S = 1.0
"""How often the guard looks whether its parent is still there, whatever the kernel said."""
ORPHANED = signal.SIGUSR1
"""The signal the kernel sends the guard when its parent dies (the server never gets it)."""


def _kill_group() -> None:
    """SIGKILL to the guard's whole group: the server, its children, the guard itself."""
    os.killpg(os.getpgrp(), signal.SIGKILL)


def _ask_for_parent_death_signal() -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(ORPHANED), 0, 0, 0)
    except (OSError, AttributeError):  # no prctl here: the polling below still guards
        pass


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--" or not argv[0].isdigit():
        print("usage: mcp_guard.py PARENT_PID -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    parent, command = int(argv[0]), argv[2:]

    def orphaned(signum: int, frame: FrameType | None) -> None:
        if os.getppid() != parent:
            _kill_group()

    signal.signal(ORPHANED, orphaned)
    # SIGTERM is the SDK's graceful stop, sent to the whole group: the server decides what it
    # does with it; the guard waits for the server, then exits with its code.
    signal.signal(signal.SIGTERM, lambda signum, frame: None)
    _ask_for_parent_death_signal()
    if os.getppid() != parent:  # it died before the kernel was asked
        _kill_group()
    try:
        server = subprocess.Popen(command)
    except OSError as exc:
        print(f"cannot start the MCP server {command[0]!r}: {exc}", file=sys.stderr)
        return 127
    # The server alone holds the pipes now (a stray write here would corrupt its stdout).
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    while True:
        try:
            code = server.wait(timeout=POLL_S)
        except subprocess.TimeoutExpired:
            if os.getppid() != parent:
                _kill_group()
            continue
        return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
