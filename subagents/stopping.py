"""A worker's stop, held to its deadline whatever the bus does.

Stopping an agent runs shielded steps: the turn in progress ends cleanly (its events still logged),
the final report is recorded and delivered, the inbox and the spawn request are handed back. Each
is bounded, but each also retries through bus faults, so in an outage they used to add up to
minutes, and a turn's event retried for as long as the outage lasted: a worker told to stop while
Redis was down never stopped (only SIGKILL ended it). Orchestrators (compose, systemd,
Kubernetes) rely on a stop that ends within its grace period.

Two pieces here, both owned by the worker:

- :class:`Shields`: every shielded step of a worker's agents opens its scope through
  :func:`shielded`, which registers it with the worker's shields; :meth:`Shields.cut` cancels all
  of them (and any opened later), the one cancellation a shield does not stop. The worker's agents
  find the shields in their context (:data:`_current`, set where the worker starts them), so the
  inbox loop, the bookkeeping and the engine's turn need no parameter for it; an agent run
  without a worker gets plain shields.
- :class:`StopClock`: when a stopping worker gives back what still runs, and when it cuts what is
  left. Cutting is safe by design: whatever the bus did not confirm stays recorded (a ``finishing``
  report, an un-acked request), and another worker resumes the agent once its lease lapses.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar, Token

import anyio

GIVE_BACK_GRACE_S = 2.0
"""How long giving back may take before a stopping worker cuts what is still open: on a healthy
bus a give-back takes milliseconds; on a bus that is down nothing would come of waiting longer,
and what was not handed back is recovered from its lease."""


class Shields:
    """The shielded steps running now in one worker; :meth:`cut` cancels them all."""

    __slots__ = ("_cut", "_scopes")

    def __init__(self) -> None:
        self._scopes: set[anyio.CancelScope] = set()
        self._cut = False

    @property
    def is_cut(self) -> bool:
        return self._cut

    @contextmanager
    def shield(self, bound_s: float | None = None) -> Iterator[anyio.CancelScope]:
        """A scope shielded from outside cancellation, bounded by ``bound_s`` if given, and
        cancelled by :meth:`cut` (at once when opened after it)."""
        scope = anyio.CancelScope(shield=True)
        if bound_s is not None:
            scope.deadline = anyio.current_time() + bound_s
        if self._cut:
            scope.cancel()
        self._scopes.add(scope)
        try:
            with scope:
                yield scope
        finally:
            self._scopes.discard(scope)

    def cut(self) -> None:
        """Cancel every shielded step, now and from now on."""
        self._cut = True
        for scope in list(self._scopes):
            scope.cancel()

    def enter(self) -> Token[Shields | None]:
        """Make these the shields of the current task and the tasks it starts from now on."""
        return _current.set(self)

    @staticmethod
    def leave(token: Token[Shields | None]) -> None:
        _current.reset(token)


_current: ContextVar[Shields | None] = ContextVar("baton_worker_shields", default=None)
"""The shields of the worker hosting the current task's agent; None outside a worker."""


def shielded(bound_s: float | None = None) -> AbstractContextManager[anyio.CancelScope]:
    """A scope shielded from outside cancellation and bounded by ``bound_s`` (if given); inside a
    worker also cancelled when the worker cuts its stop short (outside one, shields of its own
    that nothing cuts). ``cancelled_caught`` on the scope says whether either ended it."""
    return (_current.get() or Shields()).shield(bound_s)


class StopClock:
    """A stop's two deadlines on the anyio clock; each only ever moves earlier (a second signal
    hurries a drain, nothing slows a stop down). :meth:`run` acts on them."""

    __slots__ = ("_changed", "cut_at", "give_back_at")

    def __init__(self) -> None:
        self.give_back_at = math.inf
        """When what still runs is given back unfinished."""
        self.cut_at = math.inf
        """When every shielded step still open is cut: the stop ends here."""
        self._changed = anyio.Event()

    def set(self, *, give_back_in: float, cut_in: float) -> None:
        now = anyio.current_time()
        self.give_back_at = min(self.give_back_at, now + give_back_in)
        self.cut_at = min(self.cut_at, now + max(cut_in, give_back_in))
        self._changed.set()

    async def run(self, give_back: Callable[[], None], cut: Callable[[], None]) -> None:
        """Call ``give_back`` at the give-back deadline and ``cut`` at the stop deadline, then
        return; until a stop is asked both are infinitely far."""
        gave_back = False
        while True:
            self._changed = anyio.Event()
            now = anyio.current_time()
            if not gave_back and now >= self.give_back_at:
                gave_back = True
                give_back()  # may move the cut earlier: looked at on the next pass
                continue
            if now >= self.cut_at:
                cut()
                return
            with anyio.move_on_after((self.cut_at if gave_back else self.give_back_at) - now):
                await self._changed.wait()
