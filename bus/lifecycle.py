"""One lifecycle for objects that own background tasks or resources: :class:`Service`.

Sessions, servers, workers and the Redis bus each own a task group and a few things to close, and
each used to enter and exit them by hand in ``__aenter__``/``__aexit__`` — four copies of the same
fiddly code (unwind on a failed open, unwind once, pass the exception on, never enter twice), each
with its own flags. Here it is written once, after anyio's ``AsyncResource``: a subclass says what
it opens in :meth:`Service._open`, putting everything that must be undone on the
``AsyncExitStack`` it is given, and the base class guarantees the rest:

- the stack is unwound exactly once: when ``_open`` fails (then the error propagates), or on the
  first ``__aexit__``/``aclose()``; a second close is a no-op;
- an instance is entered once: entering one that is open or closed raises
  :class:`LifecycleError` (make a new one instead: half-reset state is where bugs live);
- exceptions and cancellation propagate; the stack's own exit callbacks see them (an anyio task
  group on the stack sees the body's exception, and one that cancelled itself suppresses its own
  cancellation, as it would in a plain ``async with``);
- :attr:`Service.phase` says where the object stands (``NEW`` → ``OPEN`` → ``CLOSED``), instead of
  a set of flags.

A task group must be exited by the task that entered it, so ``__aexit__``/``aclose()`` belong to
the task that entered the service. To stop a service from another task, give it a method that only
*signals* (cancels a scope, sets an event) and let the owner's ``async with`` finish the shutdown.
Work that must run before the stack unwinds (stop accepting, drain) is pushed on the stack last, so
it runs first; ``stack.push_async_exit`` gives it the exception too.
"""

from __future__ import annotations

import enum
import sys
from contextlib import AsyncExitStack
from types import TracebackType
from typing import Self

from baton.errors import BatonError


class LifecycleError(BatonError, RuntimeError):
    """A service was entered twice, or entered after it was closed: a programming error."""


class Phase(enum.Enum):
    """Where a :class:`Service` stands. ``OPEN`` from the moment ``__aenter__`` begins until the
    moment closing begins; ``CLOSED`` from then on (also while the stack unwinds, so the service
    refuses new work during its own shutdown)."""

    NEW = "new"
    OPEN = "open"
    CLOSED = "closed"


class Service:
    """Base class for an async context manager that owns a task group and/or resources.

    Subclasses override :meth:`_open` and call ``super().__init__()``.
    """

    def __init__(self) -> None:
        self._phase = Phase.NEW
        self._stack: AsyncExitStack | None = None

    @property
    def phase(self) -> Phase:
        return self._phase

    async def _open(self, stack: AsyncExitStack) -> None:
        """Open what this service owns, entering each part on ``stack`` (task groups, clients,
        ``push_async_callback`` for anything else to undo). If this raises, what was entered is
        unwound and the error propagates from ``__aenter__``."""

    async def __aenter__(self) -> Self:
        if self._phase is not Phase.NEW:
            what = type(self).__name__
            raise LifecycleError(f"this {what} is {self._phase.value}; a {what} opens once")
        self._phase = Phase.OPEN
        stack = AsyncExitStack()
        await stack.__aenter__()
        try:
            await self._open(stack)
        except BaseException:
            self._phase = Phase.CLOSED
            await stack.__aexit__(*sys.exc_info())
            raise
        self._stack = stack
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        """Unwind the stack (once), from the task that entered the service. Returns what the
        stack returns: True only when one of its parts handled the exception itself."""
        self._phase = Phase.CLOSED
        stack, self._stack = self._stack, None
        if stack is None:
            return False
        return bool(await stack.__aexit__(exc_type, exc, tb))

    async def aclose(self) -> None:
        """Close without an exception in flight (for a service entered by ``__aenter__`` rather
        than ``async with``); a no-op once closed. A service never opened is closed for good."""
        await self.__aexit__(None, None, None)
