"""Faults at a bus part's seam: run a step before every call of one of a part's methods.

Code under test reaches the bus through its parts (``bus.log.emit``, ``bus.claims.renew``), so a
step put in front of a part's method sees every caller. The step may wait (to hold the call),
raise (to refuse it), or only note it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any


def before(part: object, method: str, step: Callable[..., Awaitable[None]]) -> None:
    """Run ``await step(*args, **kwargs)`` ahead of each call of ``part.method``, with the same
    arguments; what ``step`` raises is what the caller gets, and the call is then not made."""
    original: Callable[..., Awaitable[Any]] = getattr(part, method)

    async def call(*args: Any, **kwargs: Any) -> Any:
        await step(*args, **kwargs)
        return await original(*args, **kwargs)

    setattr(part, method, call)
