"""What an agent's model steps tell the session, and the budget each request is counted against.

Every request is reserved against the session's budget before it is made (a retry too: a refusal
ends the step before that request); its usage is logged (``model.usage``, whether or not there is a
budget) and counted (``budget.updated``); a retry is a ``model.retried`` event, a cut or looped
reply a ``guard.fired`` one, a failure an ``error`` event. Apart from
:class:`~baton.engine.model_step.ModelStep`, which decides what to ask and when a reply is an
answer, so that the step reads as its decisions and this as the record they leave.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

from baton.bus.events import BudgetUpdated, ErrorEvent, GuardFired, ModelRetried, ModelUsage
from baton.engine.calls import EventSink
from baton.engine.spend import Spend
from baton.engine.telemetry import Telemetry
from baton.llm.errors import BudgetExhausted, ModelError
from baton.llm.types import RetryNotice, Usage

log = logging.getLogger(__name__)

StepGuard = Literal["length", "runaway", "budget"]
"""Where the engine answers instead of the model in a step: a reply cut at the output limit, one
that ran away, a request the budget refused."""


@dataclass(frozen=True, slots=True)
class StepReport:
    """One agent's record of its model requests: whose (``session``, ``agent``), where its
    events go (``emit``, ``telemetry``), the ``model`` asked, the session's ``spend`` (None: no
    budget)."""

    session: str
    agent: str
    emit: EventSink
    telemetry: Telemetry
    model: str
    spend: Spend | None = None

    async def reserve(self, round_no: int) -> BudgetExhausted | None:
        """Count the next model call against the session's budget; the refusal, when spent."""
        if self.spend is None:
            return None
        try:
            await self.spend.reserve(self.agent)
        except BudgetExhausted as exc:
            await self.refused(exc, round_no)
            return exc
        return None

    async def retried(self, notice: RetryNotice) -> None:
        """A retry the client is about to make: counted against the budget like any request
        (a ``BudgetExhausted`` raised here leaves the client unretried), then told."""
        if self.spend is not None:
            await self.spend.reserve(self.agent)
        await self.emit(
            ModelRetried(
                session=self.session,
                agent=self.agent,
                attempt=notice.attempt,
                reason=notice.reason,
                delay_s=notice.delay_s,
                model=self.model,
            )
        )

    async def guard(self, outcome: StepGuard) -> None:
        """The engine answered instead of the model: a cut or looped reply, a spent budget."""
        self.telemetry.loop_outcome(outcome)
        await self.emit(GuardFired(session=self.session, agent=self.agent, outcome=outcome))

    async def refused(self, error: BudgetExhausted, round_no: int) -> None:
        await self.failed(error, round_no)
        await self.guard("budget")

    async def record(self, usage: Usage | None, *, estimated: bool = False) -> None:
        """Log the request's usage (``model.usage``, when known) and count it against the
        session's budget (``budget.updated``, when it has one)."""
        if usage is not None:
            await self.emit(
                ModelUsage(
                    session=self.session,
                    agent=self.agent,
                    model=self.model,
                    input_tokens=max(usage.prompt_tokens, 0),
                    output_tokens=max(usage.completion_tokens, 0),
                    total_tokens=max(usage.total_tokens, 0),
                    estimated=estimated,
                )
            )
        if self.spend is None:
            return
        totals = await self.spend.record(self.agent, usage)
        await self.emit(
            BudgetUpdated(
                session=self.session,
                agent=self.agent,
                calls=totals.calls,
                tokens=totals.tokens,
                max_calls=totals.limits.max_model_calls,
                max_tokens=totals.limits.max_tokens,
            )
        )

    async def failed(self, error: ModelError, round_no: int) -> None:
        log.warning("model %s failed for %s/%s: %s", self.model, self.session, self.agent, error)
        await self.emit(
            ErrorEvent(
                session=self.session,
                agent=self.agent,
                message=str(error),
                detail={
                    "kind": type(error).__name__,
                    "model": self.model,
                    "round": round_no,
                    "retryable": error.retryable,
                    "attempts": error.attempts,
                },
            )
        )
