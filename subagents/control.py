"""Where one sub-agent stands, and what stops it: its phase, why it exited, and the cancel scopes
a stop cuts.

The phases and their one-way moves are :mod:`baton.subagents.phases`; this is one agent's place in
them, kept while it is parked (slotted: issue 24, memory per idle agent). A stop from outside may
come while the agent starts, while it runs a stretch of rounds, or while it is parked (no scope
then): a scope opened after the stop is opened cancelled, so no stop is lost between stretches.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import anyio

from baton.subagents.bookkeeping import Delivery
from baton.subagents.phases import NEXT, AgentPhase
from baton.subagents.state import ExitKind


class Control:
    """One agent's phase (:attr:`phase`), why it exited (:attr:`reason`) and its stops."""

    __slots__ = ("_scope", "_starting", "cancel_asked", "phase", "reason")

    def __init__(self) -> None:
        self.phase = AgentPhase.RUNNING
        self.reason: ExitKind | None = None
        """Why it exited, once its final report is out (or a previous owner's was); else None."""
        self.cancel_asked = False
        """Whether :meth:`cancel` was called (a stretch that starts after it is cancelled)."""
        self._scope: anyio.CancelScope | None = None
        """The running stretch's (see :meth:`stretch`); None while parked or not started."""
        self._starting: anyio.CancelScope | None = None
        """Only while it starts (see :meth:`starting`): a give-back ends the start too."""

    def move(self, phase: AgentPhase) -> bool:
        """Go to ``phase`` if :data:`~baton.subagents.phases.NEXT` allows it; whether it did."""
        if phase not in NEXT[self.phase]:
            return False
        self.phase = phase
        return True

    def exited(self, reason: ExitKind) -> None:
        """The final report is out (sent now, or by a previous owner): whatever was asked
        meanwhile, the agent has exited."""
        self.reason = reason
        self.move(AgentPhase.EXITED)

    def settle(self, delivery: Delivery, reason: ExitKind) -> bool:
        """Move to where the final bookkeeping left the agent; whether the report is out."""
        if delivery is Delivery.DELIVERED:
            self.exited(reason)
            return True
        self.move(AgentPhase.LOST if delivery is Delivery.LOST else AgentPhase.GIVEN_BACK)
        return False

    def stop_now(self) -> None:
        """Cut what runs now: the stretch of rounds, or the start."""
        if self._scope is not None:
            self._scope.cancel()
        if self._starting is not None:
            self._starting.cancel()

    def cancel(self) -> None:
        """Cut the running stretch, and any stretch that starts later."""
        self.cancel_asked = True
        if self._scope is not None:
            self._scope.cancel()

    @contextmanager
    def stretch(self) -> Iterator[anyio.CancelScope]:
        """The scope of a stretch of rounds (a scope serves one ``with``: each stretch between
        parks gets one); cancelled at once when a stop came while the agent was parked."""
        scope = self._scope = anyio.CancelScope()
        if self.phase.without_report or self.cancel_asked:  # asked while it was parked
            scope.cancel()
        try:
            with scope:
                yield scope
        finally:
            self._scope = None

    @contextmanager
    def starting(self) -> Iterator[anyio.CancelScope]:
        """The scope of the start; cancelled at once when the agent was given back before it."""
        with anyio.CancelScope() as self._starting:
            try:
                if self.phase.without_report:  # given back before it started
                    self._starting.cancel()
                yield self._starting
            finally:
                self._starting = None
