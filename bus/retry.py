"""The one retry policy for riding out bus faults: back off and try again until it works.

Each backend already retries an operation a few times before it raises ``BusUnreachable``; a Redis
restart or failover can take longer than that. An agent must not fail, lose a message or a
checkpoint to it, so every long-lived agent loop (the lead, each sub-agent, an approval wait, a
worker) sends its bus operations through :func:`persist`, which keeps trying with capped,
jittered exponential backoff. Living at the bus layer lets every layer above share it.

Cancellation still ends the wait at once (it is never retried); callers that must not be
cancelled shield the call and bound it with their own deadline. ``give_up`` lets a caller that
was asked to stop (a lead cancelled during an outage) end the retries with the last error.

``outage_s`` bounds how long one operation keeps failing before it stops retrying with
:class:`~baton.bus.errors.BusOutage` ("bus unreachable for N s"): a worker rides out any outage,
but a session someone waits on (``baton run``, ``baton watch``, a server's feeds) must end, and
say why, once the bus has been gone longer than its ``bus_outage_s`` (:data:`DEFAULT_OUTAGE_S`).
The clock starts at the operation's first failure, so a long healthy wait never counts.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

import anyio

from baton.bus.errors import BusOutage, BusUnreachable
from baton.bus.options import DEFAULT_OUTAGE_S as DEFAULT_OUTAGE_S  # its home is the options

if TYPE_CHECKING:
    from tenacity import RetryCallState

T = TypeVar("T")
log = logging.getLogger(__name__)

INITIAL_BACKOFF_S = 0.1
MAX_BACKOFF_S = 2.0


def _backoff(max_backoff_s: float, until: float | None = None) -> Callable[[RetryCallState], float]:
    """Doubling from ``INITIAL_BACKOFF_S`` up to the cap, each sleep jittered by ±50 % so that
    thousands of agents that lost the bus together do not come back in lockstep. No sleep goes
    past ``until`` (the outage bound, on the anyio clock): the last try is made at the bound."""

    def wait(state: RetryCallState) -> float:
        delay = min(INITIAL_BACKOFF_S * 2.0 ** (state.attempt_number - 1), max_backoff_s)
        delay *= 0.5 + random.random()
        if until is not None:
            delay = min(delay, max(0.0, until - anyio.current_time()))
        return delay

    return wait


def _is_blip(exc: BaseException) -> bool:
    """What is worth another try: a fault, unless a nested bounded call has already given up."""
    return isinstance(exc, BusUnreachable) and not isinstance(exc, BusOutage)


def _log_retry(what: str) -> Callable[[RetryCallState], None]:
    def before_sleep(state: RetryCallState) -> None:
        failures = state.attempt_number
        level = logging.WARNING if failures in (1, 10) or failures % 50 == 0 else logging.DEBUG
        error = state.outcome.exception() if state.outcome is not None else None
        delay = state.upcoming_sleep
        log.log(level, "%s: bus unreachable (%s); retry %d in %.2f s", what, error, failures, delay)

    return before_sleep


async def persist(
    operation: Callable[[], Awaitable[T]],
    what: str,
    *,
    max_backoff_s: float = MAX_BACKOFF_S,
    give_up: Callable[[], bool] | None = None,
    outage_s: float | None = None,
) -> T:
    """Run ``operation``; on ``BusUnreachable`` back off and retry, for as long as it takes.

    ``what`` names the operation in the log. ``give_up`` is asked after each failure; when it
    says so, the last ``BusUnreachable`` is raised instead of retrying again. With ``outage_s``,
    an operation still failing that long after its first failure raises ``BusOutage``.
    """

    try:
        return await operation()  # the common case, without building any retry machinery
    except BusUnreachable as exc:
        if isinstance(exc, BusOutage) or (give_up is not None and give_up()):
            raise  # an outage a nested call already outlasted is a verdict, not a blip
        first_failure: BusUnreachable | None = exc
    # tenacity only once the bus has failed: every agent's bus calls pass through here, and a
    # process whose bus never fails need not import it
    from tenacity import AsyncRetrying, retry_if_exception, stop_never

    failing_since = anyio.current_time()
    until = None if outage_s is None else failing_since + outage_s
    outlasted = False

    def stop(state: RetryCallState) -> bool:
        nonlocal outlasted
        if give_up is not None and give_up():
            return True
        outlasted = until is not None and anyio.current_time() >= until
        return outlasted

    retrying = AsyncRetrying(
        retry=retry_if_exception(_is_blip),
        stop=stop if give_up is not None or until is not None else stop_never,
        wait=_backoff(max_backoff_s, until),
        sleep=anyio.sleep,
        before_sleep=_log_retry(what),
        reraise=True,
    )
    attempts = 0

    async def attempt() -> T:
        nonlocal attempts, first_failure
        attempts += 1
        if first_failure is not None:  # the fast path's failure counts as the first attempt
            failure, first_failure = first_failure, None
            raise failure
        return await operation()

    try:
        result: T = await retrying(attempt)
    except BusUnreachable as exc:
        if outlasted and outage_s is not None:
            raise BusOutage(exc, anyio.current_time() - failing_since, outage_s) from exc
        raise
    log.info("%s: bus reachable again after %d retries", what, attempts - 1)
    return result
