"""Waiting on another process's state that no event announces (Redis's own subscription table):
the one place the suite polls, with a bound and a name for what it waited for."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio


async def until(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 20.0) -> None:
    """Poll ``check`` until it holds; fails naming ``what`` after ``timeout``."""
    with anyio.move_on_after(timeout):
        while not await check():  # noqa: ASYNC110
            await anyio.sleep(0.02)
        return
    raise AssertionError(f"timed out waiting for {what}")
