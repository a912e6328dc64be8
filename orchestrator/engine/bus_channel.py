"""Questions to a person over the bus: the agent asks in one process, a person answers from
another. Approvals first (below); a question for a file or an image (``request_file_upload``,
``describe_image``) waits the same way on the same inbox, for an envelope of type ``answer``
whose ``meta`` is a :class:`~baton.bus.payloads.QuestionReply` (docs/protocol.md, *Questions*;
:mod:`baton.engine.questions` finds the question and sends the answer).

An agent whose tool needs approval (the lead in a session, or a sub-agent on a remote worker) uses
:class:`BusInteractionChannel`. The engine announces the question itself — it emits
``ApprovalRequested(session, agent, calls)`` through the agent's event sink, which every baton agent
forwards to the session's event log — then the channel waits for the answers, which arrive as
envelopes of type ``approval`` on the inbox ``<agent>.approvals`` whose ``meta`` is an
:class:`~baton.bus.payloads.ApprovalAnswer` (``call_id``, ``approved``, ``reason``). Whoever
answers — ``baton approve S CALL_ID --yes``, ``Session.answer()``, an HTTP endpoint — calls
:func:`answer_approval`, which finds the asking agent in the session's event log and sends that
envelope. The engine bounds the wait and fails closed (timeout, error, cancel: declined), and emits
``ApprovalDecided``.

Why a separate inbox: the agent's own inbox is read by its inbox loop between rounds, while an
approval is awaited *inside* a round; a separate inbox keeps the two readers apart. Both are the
same :class:`~baton.bus.inbox.InboxReader`, so an answer arriving during a bus blip still counts,
and a malformed answer (``"approved": "yes"``) goes to the dead letters instead of deciding.

Use ``emit_events=True`` only with an engine whose events do not reach the bus: then the channel
writes ``ApprovalRequested``/``ApprovalDecided`` itself so :func:`answer_approval` can find it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urlsplit

import anyio

from baton.bus.base import Bus
from baton.bus.events import ApprovalDecided, ApprovalRequested
from baton.bus.inbox import InboxReader
from baton.bus.messages import Envelope
from baton.bus.parts.store import StoreTable
from baton.bus.payloads import ApprovalAnswer, approval_answer, question_reply
from baton.engine.errors import InteractionCancelled, InteractionUnavailable
from baton.engine.interaction import (
    ApprovalDecision,
    ApprovalQuestion,
    ImageQuestion,
    ProvidedMedia,
    UploadQuestion,
)
from baton.errors import BatonError, ExitCode

log = logging.getLogger(__name__)

APPROVAL_TYPE: Literal["approval"] = "approval"
ANSWER_TYPE: Literal["answer"] = "answer"
"""An answer to a question for a file or an image (:mod:`baton.engine.questions`)."""
ANSWERS: StoreTable = "answers"
"""The session's table of answered questions (:func:`claim_answer`)."""
REASON_MAX = 1000
"""The longest reason an answer carries (the wire's limit)."""
WAIT_SLICE_S = 60.0
"""One inbox wait; the engine's own timeout bounds the whole question."""


class ApprovalNotFound(BatonError):
    """No pending approval with that call id in the session (unknown, or already decided)."""

    exit_code = ExitCode.USAGE

    def __init__(self, session: str, call_id: str, detail: str, decided: bool = False) -> None:
        super().__init__(f"session {session}: {detail} (call id {call_id!r})")
        self.session = session
        self.call_id = call_id
        self.decided = decided
        """True when the approval was requested and has been decided (else none was asked)."""


def approvals_inbox(agent: str) -> str:
    """The inbox an agent's approval answers arrive on."""
    return f"{agent}.approvals"


class BusInteractionChannel:
    """The engine's :class:`~baton.engine.InteractionChannel`, answered over the bus."""

    def __init__(
        self,
        bus: Bus,
        session: str,
        agent: str,
        *,
        emit_events: bool = False,
        file_root: Path | None = None,
    ) -> None:
        self.bus = bus
        self.session = session
        self.agent = agent
        self.file_root = file_root
        """The folder whose files a ``file:`` answer may name (the agent's media directory);
        None: no ``file:`` answer is taken (:func:`usable_file`)."""
        self.inbox = approvals_inbox(agent)
        self.emit_events = emit_events
        self._reader = InboxReader(bus, session, self.inbox)
        self._scopes: set[anyio.CancelScope] = set()
        self._cancelled: set[anyio.CancelScope] = set()

    async def ask_approval(self, question: ApprovalQuestion) -> Mapping[str, ApprovalDecision]:
        """Wait until every call of the question is decided (the engine bounds the wait)."""
        if self.emit_events:
            calls = list(question.calls)
            await self.bus.log.emit(
                ApprovalRequested(session=self.session, agent=self.agent, calls=calls)
            )
        wanted = {call.call_id for call in question.calls}
        decisions: dict[str, ApprovalDecision] = {}

        async def take(batch: list[Envelope]) -> bool:
            self._collect(batch, wanted, decisions)
            await self._reader.ack([envelope.id for envelope in batch])  # stale ones too
            return wanted <= decisions.keys()

        if wanted:
            await self._waiting(question.id, take)
        if self.emit_events:
            for call_id, decision in decisions.items():
                await self.bus.log.emit(
                    ApprovalDecided(
                        session=self.session,
                        agent=self.agent,
                        call_id=call_id,
                        approved=decision.approved,
                        reason=decision.reason,
                    )
                )
        return decisions

    def _collect(
        self, batch: list[Envelope], wanted: set[str], decisions: dict[str, ApprovalDecision]
    ) -> None:
        """Keep the answers to this question; stale or stray ones are only logged.

        The reader already moved answers whose payload misfits to the dead letters, so every
        ``approval`` here parses.
        """
        for envelope in batch:
            answer = approval_answer(envelope) if envelope.type == APPROVAL_TYPE else None
            if answer is None or answer.call_id not in wanted:
                log.info("%s/%s: ignoring a stale or stray answer %s (%s)",
                         self.session, self.agent, envelope.id, envelope.type)  # fmt: skip
                continue
            reason = answer.reason or envelope.content
            nobody = answer.nobody and not answer.approved
            decisions[answer.call_id] = ApprovalDecision(
                approved=answer.approved, reason=reason, policy="nobody" if nobody else None
            )

    async def request_upload(self, question: UploadQuestion) -> ProvidedMedia | None:
        """Wait for the ``answer`` to the question: the file's URL, or None (cancelled). The
        engine logs ``question.asked`` first, which is how a person finds the question."""
        return await self._wait_for_media(question)

    async def request_image(self, question: ImageQuestion) -> ProvidedMedia | None:
        return await self._wait_for_media(question)

    async def _wait_for_media(
        self, question: UploadQuestion | ImageQuestion
    ) -> ProvidedMedia | None:
        got: list[ProvidedMedia | None] = []
        nobody: list[str] = []

        async def take(batch: list[Envelope]) -> bool:
            for envelope in batch:
                reply = question_reply(envelope) if envelope.type == ANSWER_TYPE else None
                if reply is None or reply.question_id != question.id or got:
                    log.info("%s/%s: ignoring a stale or stray answer %s (%s)",
                             self.session, self.agent, envelope.id, envelope.type)  # fmt: skip
                    continue
                if reply.nobody and reply.outcome == "cancelled":
                    nobody.append(reply.reason or "no person could be asked")
                got.append(
                    ProvidedMedia(url=reply.url, name=reply.name, media_type=reply.media_type)
                    if reply.outcome == "provided"
                    else None
                )
            await self._reader.ack([envelope.id for envelope in batch])
            return bool(got)

        await self._waiting(question.id, take)
        if nobody:
            raise InteractionUnavailable(nobody[0])
        media = got[0]
        if media is not None and urlsplit(media.url).scheme.lower() == "file":
            usable_file(media.url, self.file_root)
        return media

    async def _waiting(
        self, question_id: str, take: Callable[[list[Envelope]], Awaitable[bool]]
    ) -> None:
        """Read the answers inbox through ``take`` until it says done; ``cancel_pending``
        ends the wait with ``InteractionCancelled``."""
        scope = anyio.CancelScope()
        self._scopes.add(scope)
        try:
            with scope:
                await self._reader.collect(take, slice_s=WAIT_SLICE_S)
        finally:
            self._scopes.discard(scope)
        if scope in self._cancelled:
            self._cancelled.discard(scope)
            raise InteractionCancelled(question_id)

    def cancel_pending(self) -> None:
        """Release every pending wait: each raises ``InteractionCancelled``."""
        for scope in list(self._scopes):
            self._cancelled.add(scope)
            scope.cancel()


class UnusableAnswer(BatonError):
    """An answer that names what its agent cannot use: the question fails closed, saying why."""


def usable_file(url: str, root: Path | None) -> Path:
    """The file a ``file:`` answer names, when it is a file inside ``root`` on this machine.

    Only a surface that stored a person's upload makes such a URL, in its own media directory;
    an agent on another machine, or whose store is a bucket, cannot open it, and must say so
    rather than tell the model it received a file. Nor may an answer from anyone on the bus
    point an agent at any other file of its machine (which it would then show its model)."""
    if root is None:
        raise UnusableAnswer(
            f"the file {url[:120]!r} is on the answering machine's disk, and this agent keeps "
            "its media elsewhere (a bucket): answer through a store both can read"
        )
    path = Path(unquote(urlsplit(url).path))
    try:
        found = path.resolve(strict=True)
    except (OSError, RuntimeError):
        found = None
    if found is None or not found.is_file():
        raise UnusableAnswer(
            f"the file {url[:120]!r} is not on this agent's disk (its media directory is "
            f"{root}): share the media directory with the answering process, or use a bucket"
        )
    if not found.is_relative_to(root):
        raise UnusableAnswer(f"the file {url[:120]!r} is outside this agent's media directory")
    return found


async def find_pending_approval(bus: Bus, session: str, call_id: str) -> str:
    """The agent waiting for a decision on ``call_id``; raises :class:`ApprovalNotFound`."""
    agent, _ = await _pending_approval(bus, session, call_id)
    return agent


async def _pending_approval(bus: Bus, session: str, call_id: str) -> tuple[str, str]:
    """The agent waiting for a decision on ``call_id``, and the cursor of the request it waits
    on (a call id may be asked again in a later round: each request is answered once)."""
    asker: str | None = None
    asked_at = ""
    decided = False
    async for logged in bus.log.tail(session, follow=False):
        event = logged.event
        if isinstance(event, ApprovalRequested) and any(
            call.call_id == call_id for call in event.calls
        ):  # one the session's policy answers is decided as it is asked
            asker, asked_at, decided = event.agent, logged.cursor, event.policy is not None
        elif isinstance(event, ApprovalDecided) and event.call_id == call_id and asker is not None:
            decided = decided or event.agent == asker
    if asker is None:
        raise ApprovalNotFound(session, call_id, "no approval was requested for this call")
    if decided:
        raise ApprovalNotFound(session, call_id, "this approval was already decided", True)
    return asker, asked_at


async def claim_answer(bus: Bus, session: str, key: str, agent: str) -> bool:
    """Take the one answer a question may have (docs/protocol.md, *Questions*): True for the
    first caller; every other, now or later, gets False and must send nothing. The log says a
    question is answered only once its agent read the answer: two people answering within that
    moment would otherwise both be told they were heard, and one answer silently dropped."""
    return await bus.store.put_new(session, ANSWERS, key, agent)


async def release_answer(bus: Bus, session: str, key: str) -> None:
    """Hand back a claimed answer that could not be sent (a bus or store fault), so that the
    question stays open for another try; shielded, since it runs on the way out of a failure."""
    with anyio.CancelScope(shield=True):
        await bus.store.remove(session, ANSWERS, key)


async def answer_approval(
    bus: Bus, session: str, call_id: str, approved: bool, reason: str = "", *, nobody: bool = False
) -> str:
    """Answer a pending approval; returns the name of the agent that asked. ``nobody``: no
    person could be asked, and the runtime declines on their behalf (said as such).

    Raises :class:`ApprovalNotFound` when the session's log has no undecided request for
    ``call_id``, or another answer to it was sent first (:func:`claim_answer`).
    """
    agent, asked_at = await _pending_approval(bus, session, call_id)
    envelope = Envelope(
        session=session,
        sender="user",
        recipient=approvals_inbox(agent),
        type=APPROVAL_TYPE,
        content="approved" if approved else (reason or "declined"),
        meta=ApprovalAnswer(
            call_id=call_id, approved=approved, reason=reason[:REASON_MAX], nobody=nobody
        ).to_meta(),
    )
    key = f"{call_id}@{asked_at}"
    if not await claim_answer(bus, session, key, agent):
        raise ApprovalNotFound(session, call_id, "this approval was already decided", True)
    try:
        await bus.inboxes.send(envelope)
    except BaseException:
        await release_answer(bus, session, key)
        raise
    log.info("session %s: %s call %s of %s", session, "approved" if approved else "declined",
             call_id, agent)  # fmt: skip
    return agent
