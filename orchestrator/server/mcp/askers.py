"""What a call does with a session's question to a person (:class:`~.follow.Asker`).

- :class:`ElicitAsker`: the host asks its user, in an ``elicitation/create`` request (2025-11-25:
  of this call, of a task's ``tasks/result``, or on the connection's own channel for a task);
  the answer goes to the asking agent over the bus. An answer the question refuses (a ``file:``
  URL, a type it does not accept) is asked again with the refusal said, twice at most; then the
  question is cancelled. A request the host cannot take declines the question (the call has no
  other way to ask), or — ``leave`` — leaves it open for another way (a task's ``tasks/result``).
  The askers of a process share what they are asking (``claims``), so two ways of asking do
  not put one question to the person twice: a later asker leaves a question alone while
  another asks it, unless it ``takes_over`` (a task's ``tasks/result``, whose request reaches the
  host for sure, from its side channel, which may reach nobody: a Streamable HTTP client without
  its ``GET`` stream).
- :class:`NobodyAsker`: the host cannot ask anyone (it offers no elicitation, or cannot carry a
  request on this call): the question is declined at once on the runtime's behalf — fail closed,
  as ``baton run`` without a terminal does — and the call's result says so.

A question answered elsewhere meanwhile (the page, ``baton approve``), or expired, makes the
answer's delivery fail with :class:`~baton.engine.questions.QuestionNotFound`: nothing to do then.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

import anyio
from anyio.abc import TaskGroup
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp_types import ElicitResult
from pydantic import ValidationError

from baton.bus.base import Bus
from baton.bus.errors import BusError
from baton.bus.events import utc_now
from baton.engine.bus_channel import ApprovalNotFound
from baton.engine.questions import (
    AnswerRefused,
    Cancelled,
    OpenQuestion,
    QuestionNotFound,
    Reply,
    answer_question,
)
from baton.server.mcp.asking import elicitation_params, nobody_note, nobody_reply, reply_of

log = logging.getLogger(__name__)

Elicit = Callable[[dict[str, Any]], Awaitable[ElicitResult]]
"""Sends one ``elicitation/create`` (its params) on the call's channel and returns the answer."""

ATTEMPTS = 3
"""How many times a question is put to the person when their answers are refused."""
EXPIRY_SLACK_S = 5.0
"""How long past a question's expiry its dialog stays open (the agent logs the expiry itself)."""


async def deliver(bus: Bus, session: str, question: OpenQuestion, reply: Reply) -> str | None:
    """Send ``reply`` to ``question``; the refusal's words when it does not fit (the question
    stays open), None otherwise — sent, or the question is gone (answered elsewhere, expired)."""
    try:
        await answer_question(bus, session, question.id, reply)
    except AnswerRefused as exc:
        return str(exc)
    except (QuestionNotFound, ApprovalNotFound) as exc:
        log.info("session %s: question %s not answered: %s", session, question.id, exc)
    return None


def _seconds_left(expires_at: datetime | None) -> float:
    if expires_at is None:
        return float("inf")
    return max(0.0, (expires_at - utc_now()).total_seconds()) + EXPIRY_SLACK_S


class ElicitAsker:
    """Asks each question in an elicitation of the call (see the module docstring)."""

    def __init__(
        self,
        bus: Bus,
        session: str,
        elicit: Elicit,
        notes: list[str],
        *,
        claims: dict[str, anyio.CancelScope],
        leave: bool = False,
        takes_over: bool = False,
    ) -> None:
        self._bus = bus
        self._session = session
        self._elicit = elicit
        self._notes = notes
        self._claims = claims
        self._leave = leave
        self._takes_over = takes_over
        self._scopes: dict[str, anyio.CancelScope] = {}

    def ask(self, question: OpenQuestion, group: TaskGroup) -> None:
        claim = f"{self._session}/{question.id}"
        asking = self._claims.get(claim)
        if asking is not None:
            if not self._takes_over:
                return  # another call of this process asks it
            asking.cancel()
        scope = self._scopes[question.id] = self._claims[claim] = anyio.CancelScope()
        group.start_soon(self._ask, question, scope, claim, name=f"elicit {question.id}")

    def drop(self, question_id: str) -> None:
        scope = self._scopes.pop(question_id, None)
        if scope is not None:
            scope.cancel()

    async def _ask(self, question: OpenQuestion, scope: anyio.CancelScope, claim: str) -> None:
        try:
            with scope, anyio.move_on_after(_seconds_left(question.expires_at)):
                await self._put(question)
        except Exception as exc:  # one question's fault (its peer gone, the bus) ends the asking
            # of that question alone: it stays open and expires (declined), the call goes on
            log.warning("session %s: %s no longer asked: %s", self._session, question.id, exc)
        finally:
            if self._claims.get(claim) is scope:
                del self._claims[claim]
            if self._scopes.get(question.id) is scope:
                del self._scopes[question.id]

    async def _put(self, question: OpenQuestion) -> None:
        refusal = ""
        for _attempt in range(ATTEMPTS):
            params = elicitation_params(question)
            if refusal:
                params["message"] = f"That answer was refused: {refusal}. {params['message']}"
            reply = await self._answer_of(question, params)
            if reply is None:
                return  # left open for another way of asking
            try:
                refused = await deliver(self._bus, self._session, question, reply)
            except BusError as exc:
                log.warning("session %s: answer to %s lost: %s", self._session, question.id, exc)
                return
            if refused is None:
                return
            refusal = refused
        why = f"{ATTEMPTS} answers from the MCP host were refused (the last: {refusal})"
        await deliver(self._bus, self._session, question, Cancelled(reason=why))

    async def _answer_of(self, question: OpenQuestion, params: dict[str, Any]) -> Reply | None:
        try:
            answer = await self._elicit(params)
        except (MCPError, NoBackChannelError, ValidationError) as exc:
            if self._leave:
                log.info("session %s: %s not asked here: %s", self._session, question.id, exc)
                return None
            why = f"the MCP host could not ask a person ({str(exc).splitlines()[0][:200]})"
            self._notes.append(nobody_note(question, why))
            return nobody_reply(question, why)
        return reply_of(question, answer.action, answer.content)


class NobodyAsker:
    """Declines each question at once: nobody can be asked (see the module docstring)."""

    def __init__(self, bus: Bus, session: str, why: str, notes: list[str]) -> None:
        self._bus = bus
        self._session = session
        self._why = why
        self._notes = notes

    def ask(self, question: OpenQuestion, group: TaskGroup) -> None:
        group.start_soon(self._decline, question, name=f"decline {question.id}")

    def drop(self, question_id: str) -> None:
        """Nothing waits: each decline is sent at once."""

    async def _decline(self, question: OpenQuestion) -> None:
        self._notes.append(nobody_note(question, self._why))
        try:
            await deliver(self._bus, self._session, question, nobody_reply(question, self._why))
        except BusError as exc:
            log.warning("session %s: decline of %s lost: %s", self._session, question.id, exc)
