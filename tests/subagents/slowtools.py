"""Tools for the crash tests, loaded by worker processes through a profile's import path.

``slow_step`` is slow exactly once: the first call on a text naming the VICTIM that finds the
marker file named by ``BATON_TEST_SLOW_ONCE`` renames it away (atomic, so only one process wins)
and then blocks, giving the test a window to kill the worker mid-tool. Later calls return at once.
"""

from __future__ import annotations

import os
import sys

import anyio


async def slow_step(text: str) -> str:
    """Work on the text for a while.

    Args:
        text: what to work on
    """
    marker = os.environ.get("BATON_TEST_SLOW_ONCE")
    if marker and "VICTIM" in text:
        try:
            await anyio.Path(marker).rename(marker + ".taken")
        except FileNotFoundError:
            pass
        else:
            # Said on stderr (which the test reads line by line) once the marker is taken, so
            # the test kills this process only after a resumed run can no longer block here.
            print("slow_step blocking", file=sys.stderr, flush=True)
            await anyio.sleep(60)
    return f"worked on {text!r}"
