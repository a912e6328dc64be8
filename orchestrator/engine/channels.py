"""Ready-made interaction channels: an in-process one answered by id, and fixed policies.

:class:`MemoryChannel` publishes every question on a bounded memory object stream; whoever shows
questions to a person (the CLI, a test, a bridge to the bus or the HTTP server) reads that stream
and answers by question id. When a question stops waiting without an answer — cancelled, timed out,
withdrawn — a :class:`QuestionClosed` follows on the same stream so an open dialog can be closed.

:class:`PolicyChannel` answers at once from a fixed policy (auto-approve or auto-deny), for
unattended runs where no one could answer anyway; :func:`policy_channel` picks it for a session's
``approve`` setting, for the lead and for every sub-agent (whose spawn request carries it).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Generic, Literal, TypeVar

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from baton.bus.events import ApprovalRequested, ToolCallInfo, utc_now
from baton.bus.messages import ApproveMode
from baton.engine.errors import InteractionCancelled, InteractionUnavailable
from baton.engine.interaction import (
    ApprovalDecision,
    ApprovalQuestion,
    ImageQuestion,
    InteractionChannel,
    ProvidedMedia,
    Question,
    QuestionClosed,
    UploadQuestion,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

ChannelItem = Question | QuestionClosed


def new_question_id() -> str:
    """A fresh question id (random, URL-safe)."""
    return uuid.uuid4().hex


@dataclass(slots=True)
class _Waiter(Generic[T]):
    question: Question
    done: anyio.Event = field(default_factory=anyio.Event)
    answer: T | None = None
    cancelled: bool = False


class MemoryChannel:
    """In-process channel: questions out on ``self.questions``, answers in by id.

    Read questions with ``with channel.listen() as items: async for item in items`` (questions and
    ``QuestionClosed`` notices; the loop ends when the channel closes), or poll :meth:`pending`.
    Several listeners share the stream (each item goes to one of them). Usable as an async context
    manager; ``aclose()`` releases every pending wait and ends the stream. Must be used from the
    event loop that runs the engine.
    """

    def __init__(self, max_buffer: int = 256) -> None:
        send, receive = anyio.create_memory_object_stream[ChannelItem](max_buffer)
        self._send: MemoryObjectSendStream[ChannelItem] = send
        self._receive: MemoryObjectReceiveStream[ChannelItem] = receive
        self._pending: dict[str, _Waiter[object]] = {}

    def listen(self) -> MemoryObjectReceiveStream[ChannelItem]:
        """A receive stream of questions and closing notices; close it (``with``) when done."""
        return self._receive.clone()

    async def __aenter__(self) -> MemoryChannel:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Release every pending wait, then end the question stream (a reader waiting on it gets
        ``EndOfStream``). Idempotent."""
        self.cancel_pending()
        self._send.close()
        self._receive.close()

    # -- the engine's side ----------------------------------------------------------------------

    async def ask_approval(self, question: ApprovalQuestion) -> Mapping[str, ApprovalDecision]:
        answer = await self._ask(question)
        assert isinstance(answer, dict)
        return answer

    async def request_upload(self, question: UploadQuestion) -> ProvidedMedia | None:
        answer = await self._ask(question)
        return answer if isinstance(answer, ProvidedMedia) else None

    async def request_image(self, question: ImageQuestion) -> ProvidedMedia | None:
        answer = await self._ask(question)
        return answer if isinstance(answer, ProvidedMedia) else None

    def cancel_pending(self) -> None:
        """Release every pending wait (it raises ``InteractionCancelled``) and close its dialog."""
        waiters = list(self._pending.values())
        self._pending.clear()
        for waiter in waiters:
            waiter.cancelled = True
            waiter.done.set()
            self._notify_closed(waiter.question.id, "cancelled")

    async def _ask(self, question: Question) -> object:
        waiter: _Waiter[object] = _Waiter(question)
        self._pending[question.id] = waiter
        answered = False
        try:
            try:
                self._send.send_nowait(question)
            except (anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
                raise InteractionUnavailable(
                    f"cannot ask question {question.id}: the channel is closed or its buffer full "
                    f"({type(exc).__name__})"
                ) from exc
            await waiter.done.wait()
            if waiter.cancelled:
                raise InteractionCancelled(question.id)
            answered = True
            return waiter.answer
        finally:
            if self._pending.pop(question.id, None) is not None and not answered:
                self._notify_closed(question.id, "withdrawn")

    def _notify_closed(self, question_id: str, reason: str) -> None:
        try:
            self._send.send_nowait(QuestionClosed(id=question_id, reason=reason))
        except (anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
            log.debug("could not publish the closing of question %s", question_id)

    # -- the human's side -----------------------------------------------------------------------

    def pending(self) -> list[Question]:
        """Questions waiting for an answer now, oldest first."""
        return [waiter.question for waiter in self._pending.values()]

    def decide(
        self, question_id: str, decisions: bool | Mapping[str, ApprovalDecision], reason: str = ""
    ) -> bool:
        """Answer an approval question: one bool for every call, or a decision per call id.

        Returns False when no such question is pending (already answered, closed or unknown).
        """
        waiter = self._pending.get(question_id)
        if waiter is None or not isinstance(waiter.question, ApprovalQuestion):
            return False
        if isinstance(decisions, bool):
            one = ApprovalDecision(approved=decisions, reason=reason)
            decisions = {call.call_id: one for call in waiter.question.calls}
        return self._resolve(question_id, dict(decisions))

    def provide(self, question_id: str, media: ProvidedMedia | None) -> bool:
        """Answer an upload or image question; None means the user cancelled."""
        waiter = self._pending.get(question_id)
        if waiter is None or isinstance(waiter.question, ApprovalQuestion):
            return False
        return self._resolve(question_id, media)

    def _resolve(self, question_id: str, answer: object) -> bool:
        waiter = self._pending.pop(question_id, None)
        if waiter is None:
            return False
        waiter.answer = answer
        waiter.done.set()
        return True


class PolicyChannel:
    """Answers every question at once from a fixed policy; never waits for anyone.

    Its decisions carry the policy (``ApprovalDecision.policy``), so the ``approval.decided``
    event says that no person was asked.
    """

    def __init__(
        self,
        *,
        approve: bool,
        reason: str = "",
        upload: ProvidedMedia | None = None,
        image: ProvidedMedia | None = None,
        asks: InteractionChannel | None = None,
    ) -> None:
        self.approve = approve
        self.policy: Literal["auto", "deny"] = "auto" if approve else "deny"
        self.reason = reason or (
            f"{'approved' if approve else 'declined'} by policy (approve={self.policy})"
        )
        self.upload = upload
        self.image = image
        self.asks = asks
        """Where a question for a file or an image goes: the policy answers approvals only, so a
        person can still be asked for a file (None: the fixed ``upload``/``image`` answers)."""

    @classmethod
    def auto_approve(cls) -> PolicyChannel:
        return cls(approve=True)

    @classmethod
    def auto_deny(cls) -> PolicyChannel:
        return cls(approve=False)

    async def ask_approval(self, question: ApprovalQuestion) -> Mapping[str, ApprovalDecision]:
        decision = ApprovalDecision(approved=self.approve, reason=self.reason, policy=self.policy)
        return {call.call_id: decision for call in question.calls}

    async def request_upload(self, question: UploadQuestion) -> ProvidedMedia | None:
        if self.asks is not None:
            return await self.asks.request_upload(question)
        return self.upload

    async def request_image(self, question: ImageQuestion) -> ProvidedMedia | None:
        if self.asks is not None:
            return await self.asks.request_image(question)
        return self.image

    def cancel_pending(self) -> None:
        """Release the waits of ``asks``; the policy itself never waits."""
        if self.asks is not None:
            self.asks.cancel_pending()


def approval_requested(
    session: str,
    agent: str,
    calls: Sequence[ToolCallInfo],
    *,
    wait_s: float,
    channel: InteractionChannel | None,
) -> ApprovalRequested:
    """The ``approval.requested`` an agent logs before it asks ``channel``: when it stops
    waiting (``wait_s`` from now), and the policy that answers it when ``channel`` is one
    (nobody is asked, so no surface shows the question as open). One place for every asker:
    the engine's gated calls and a remote A2A agent's questions."""
    return ApprovalRequested(
        session=session,
        agent=agent,
        calls=list(calls),
        expires_at=utc_now() + timedelta(seconds=wait_s),
        policy=channel.policy if isinstance(channel, PolicyChannel) else None,
    )


def policy_channel(
    mode: ApproveMode, asks: InteractionChannel | None = None
) -> PolicyChannel | None:
    """The channel that answers for a session's approval policy: None for ``ask`` (a person
    answers, over whatever channel the agent has). ``asks`` still takes the questions for files
    and images, which no approval policy answers."""
    if mode in ("auto", "deny"):
        return PolicyChannel(approve=mode == "auto", asks=asks)
    return None
