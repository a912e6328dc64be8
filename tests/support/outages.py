"""Bus outages on cue: the shared ``redis-server`` killed and brought back, and an event that says
when the retry policy found the bus unreachable (so a test restarts Redis once an agent really
hit the outage, never after a guessed sleep). ``outage_when_logged`` starts the outage at an exact
point of the code under test: when it logs a given line."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import anyio

from baton.testing import RedisServer
from tests.support.logged import on_logged, when_logged


class RedisOutage:
    """Kill the server (``begin``) and bring it back (``end``); ended on exit whatever happened,
    so the tests after this one find Redis running."""

    def __init__(self, server: RedisServer) -> None:
        self.server = server
        self.active = False

    def begin(self) -> None:
        self.server.kill()
        self.active = True

    def end(self) -> None:
        if self.active:
            self.server.start()  # same port, same AOF: what was written stays
            self.active = False


@contextmanager
def redis_outage(server: RedisServer) -> Iterator[RedisOutage]:
    outage = RedisOutage(server)
    try:
        yield outage
    finally:
        outage.end()


@contextmanager
def retry_logged(what: str) -> Iterator[anyio.Event]:
    """An event set when :func:`baton.bus.retry.persist` logs that ``what`` (e.g. ``read lead``)
    failed past the bus's own retries and is backing off."""
    with when_logged("baton.bus.retry", f"{what}: bus unreachable") as event:
        yield event


@contextmanager
def outage_when_logged(outage: RedisOutage, logger: str, prefix: str) -> Iterator[None]:
    """Begin ``outage`` (once) the moment ``logger`` logs a line starting with ``prefix``: the
    code under test then meets a dead Redis on its very next bus call."""
    with on_logged(logger, prefix, outage.begin):
        yield
