"""Where a hosted sub-agent stands, as one value instead of a set of flags.

A sub-agent can be told to stop in three ways that end differently, and the worker must know which
one happened to do the right thing with the spawn request afterwards:

- *drain* (the worker is shutting down gracefully): finish the round in progress, then stop
  unfinished; the worker gives the request back and another worker resumes from the checkpoint;
- *give back now* (a forced stop, or the drain ran out of time): stop mid-round; the
  un-checkpointed round is redone elsewhere;
- *lose the lease* (another worker took the agent over after our lease lapsed): stop at once,
  report nothing and give nothing back, since the request is no longer ours to give.

Otherwise the agent runs until it exits with a final report. The phases only move forward
(:data:`NEXT`): a later, weaker request never undoes a stronger one (draining after a forced stop
changes nothing; losing the lease wins over giving back, since giving back a request we no longer
hold would take it from its new owner). Only a delivered final report overrides them all: once it
is out, the agent has exited, whatever was asked meanwhile.
"""

from __future__ import annotations

import enum
from typing import NamedTuple

from baton.subagents.state import ExitKind


class AgentPhase(enum.Enum):
    RUNNING = "running"
    """Reading its inbox and running rounds (also before :meth:`SubAgent.run` starts)."""
    DRAINING = "draining"
    """Stops at the next safe point (between rounds, or while waiting) and is given back."""
    GIVING_BACK = "giving back"
    """Stops now, mid-round if need be, and is given back without a final report."""
    LOST = "lost"
    """Another worker owns it now: stops now, with no report and nothing to give back."""
    EXITED = "exited"
    """Its final report was delivered (see :attr:`SubAgent.reason`). Final."""
    GIVEN_BACK = "given back"
    """Stopped unfinished, with its inbox released; its worker gives the request back. Final."""

    @property
    def stopping_unfinished(self) -> bool:
        """True when the loop must not start another round nor wait for more messages."""
        return self in (AgentPhase.DRAINING, AgentPhase.GIVING_BACK, AgentPhase.LOST)

    @property
    def without_report(self) -> bool:
        """True when stopping must not send a final report (someone else carries on)."""
        return self in (AgentPhase.GIVING_BACK, AgentPhase.LOST, AgentPhase.GIVEN_BACK)


NEXT: dict[AgentPhase, frozenset[AgentPhase]] = {
    AgentPhase.RUNNING: frozenset(AgentPhase) - {AgentPhase.RUNNING},
    AgentPhase.DRAINING: frozenset(
        {AgentPhase.GIVING_BACK, AgentPhase.LOST, AgentPhase.EXITED, AgentPhase.GIVEN_BACK}
    ),
    AgentPhase.GIVING_BACK: frozenset({AgentPhase.LOST, AgentPhase.EXITED, AgentPhase.GIVEN_BACK}),
    # A report already on its way when the lease was lost still went out: that is an exit.
    AgentPhase.LOST: frozenset({AgentPhase.EXITED}),
    AgentPhase.EXITED: frozenset(),
    AgentPhase.GIVEN_BACK: frozenset(),
}
"""The phases each phase may move to; any other move is ignored (see the module docstring)."""


class Outcome(NamedTuple):
    """How a run ended when it ends with a final report: why, and the error text if it failed."""

    reason: ExitKind
    error: str = ""
