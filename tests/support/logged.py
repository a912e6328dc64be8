"""Acting the moment a logger writes a given line: the event-based synchronisation the outage and
shutdown tests use instead of a guessed sleep.

The line must reach the handler whatever the logging configuration left by an earlier test or an
in-process CLI command (``baton run`` sets the root logger to CRITICAL): the logger's own level
is lowered for the duration and put back after.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import anyio


class _OnLine(logging.Handler):
    def __init__(self, prefix: str, act: Callable[[], None]) -> None:
        super().__init__(logging.DEBUG)
        self.prefix, self.act = prefix, act
        self.done = False

    def emit(self, record: logging.LogRecord) -> None:
        if not self.done and record.getMessage().startswith(self.prefix):
            self.done = True
            self.act()


@contextmanager
def on_logged(logger: str, prefix: str, act: Callable[[], None]) -> Iterator[None]:
    """Call ``act`` once, when ``logger`` (or a logger below it) logs a line starting with
    ``prefix``, at any level."""
    handler = _OnLine(prefix, act)
    target = logging.getLogger(logger)
    level, disabled = target.level, target.disabled
    target.setLevel(logging.DEBUG)
    target.disabled = False
    target.addHandler(handler)
    try:
        yield
    finally:
        target.removeHandler(handler)
        target.setLevel(level)
        target.disabled = disabled


@contextmanager
def when_logged(logger: str, prefix: str) -> Iterator[anyio.Event]:
    """An event set when ``logger`` logs a line starting with ``prefix``."""
    event = anyio.Event()
    with on_logged(logger, prefix, event.set):
        yield event
