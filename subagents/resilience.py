"""Riding out bus faults: retry an operation with backoff until it works or we are cancelled.

The bus already retries each operation a few times before it raises ``BusUnreachable``; a Redis
restart or failover can take longer than that. A sub-agent must not lose a message or a checkpoint
to it, so its bus operations go through :func:`persist`, which keeps trying with capped exponential
backoff. Cancellation still ends the wait at once (it is never caught here); callers that must not
be cancelled shield the call and bound it with their own deadline.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from baton.bus.errors import BusUnreachable

T = TypeVar("T")
log = logging.getLogger(__name__)

INITIAL_BACKOFF_S = 0.1
MAX_BACKOFF_S = 2.0


async def persist(
    operation: Callable[[], Awaitable[T]], what: str, *, max_backoff_s: float = MAX_BACKOFF_S
) -> T:
    """Run ``operation``; on ``BusUnreachable`` back off and retry, for as long as it takes."""
    delay = INITIAL_BACKOFF_S
    failures = 0
    while True:
        try:
            result = await operation()
        except BusUnreachable as exc:
            failures += 1
            log_at = logging.WARNING if failures in (1, 10) or failures % 50 == 0 else logging.DEBUG
            log.log(
                log_at, "%s: bus unreachable (%s); retry %d in %.2f s", what, exc, failures, delay
            )
            await anyio.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, max_backoff_s)
            continue
        if failures:
            log.info("%s: bus reachable again after %d retries", what, failures)
        return result
