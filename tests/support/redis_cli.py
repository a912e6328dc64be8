"""``redis-cli`` for the documented examples (docs/protocol.md) on a machine that has none.

The examples are shell: a user runs them with Redis's ``redis-cli``, and the tests run them as
written, with ``bash``, against a real server. Where ``redis-cli`` is on ``PATH`` (Debian's
``redis-tools``) that is what runs. The server the ``test`` extra brings from PyPI comes without
a command-line client, so there the examples run with a stand-in of the few options they use —
``-u URL`` and ``-x`` (the last argument read from stdin) — that sends the other arguments as
one command, each a bulk string, as ``redis-cli`` does, through redis-py. What the examples show
(their keys, fields and payloads reach an agent) is checked either way.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

_STAND_IN = """\
#!{python}
import sys

import redis

args, url, command = sys.argv[1:], "redis://127.0.0.1:6379/0", []
read_stdin = False
while args:
    arg = args.pop(0)
    if arg == "-u":
        url = args.pop(0)
    elif arg == "-x":
        read_stdin = True
    else:
        command.append(arg)
if read_stdin:
    command.append(sys.stdin.buffer.read())
with redis.Redis.from_url(url) as client:
    reply = client.execute_command(*command)
print(reply.decode(errors="replace") if isinstance(reply, bytes) else reply)
"""


def path_with_redis_cli(folder: Path) -> str:
    """``PATH`` for a documented example: as it is when it finds a ``redis-cli``, else with
    ``folder`` first, holding the stand-in."""
    path = os.environ.get("PATH", os.defpath)
    if shutil.which("redis-cli", path=path) is not None:
        return path
    folder.mkdir(parents=True, exist_ok=True)
    stand_in = folder / "redis-cli"
    stand_in.write_text(_STAND_IN.format(python=sys.executable))
    stand_in.chmod(0o755)
    return f"{folder}{os.pathsep}{path}"
