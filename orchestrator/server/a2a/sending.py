"""What a client's A2A message does, each with what the HTTP API already does.

- Without a task or context id it starts a session (as ``POST /sessions``, approvals asked of the
  client), in the request's trace (:mod:`.tracing`): a new context.
- Naming a live task (its ``taskId``, or only the ``contextId`` of a context whose newest task
  runs) it is a follow-up posted to its lead (as ``POST /sessions/{id}/messages``), or, while the
  task is INPUT_REQUIRED, the answer to its pending approvals (as ``POST
  /sessions/{id}/approvals/{call}``; only a clear yes approves).
- Naming only the context of an ended task it starts the context's next task: a new session whose
  lead is given the context's earlier exchange (requests and final answers).
- Naming an ended task by ``taskId`` it is refused: an A2A task in a terminal state cannot be
  restarted (the error says to send only the ``contextId``).
"""

from __future__ import annotations

from a2a.server.context import ServerCallContext
from a2a.types import Message, SendMessageRequest
from a2a.utils.errors import (
    InternalError,
    InvalidParamsError,
    TaskNotFoundError,
    UnsupportedOperationError,
)

from baton.bus.errors import BusError, InvalidEnvelope
from baton.bus.ids import name_problem
from baton.bus.messages import make_envelope
from baton.bus.user_post import USER
from baton.engine.bus_channel import ApprovalNotFound, answer_approval
from baton.lead.keeper import SessionExists
from baton.server.a2a.contexts import (
    context_of,
    exchange_note,
    id_problem,
    parse,
    task_id,
    tasks_of,
)
from baton.server.a2a.mapping import TaskTracker, Update
from baton.server.a2a.messages import refuse_other_parts, text_of, verdict_of
from baton.server.a2a.reading import TaskReader
from baton.server.approval_policy import session_approve
from baton.server.context import ServerContext
from baton.session import SessionConfig

MAX_TEXT = 20_000
"""The most text a message may carry: a task or a follow-up, as ``POST /sessions/{id}/messages``."""
MAX_EARLIER = 20
"""A context's next task is given the exchange of at most this many tasks before it."""


class MessageIntake:
    """Takes clients' messages in on a running server (``ctx``), reading tasks with ``reader``."""

    __slots__ = ("_ctx", "_reader")

    def __init__(self, ctx: ServerContext, reader: TaskReader) -> None:
        self._ctx = ctx
        self._reader = reader

    async def accept(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> tuple[TaskTracker, list[Update]]:
        """Start a task or continue one; returns its tracker and what the message changed."""
        message = params.message
        text = text_of(message)
        if len(text) > MAX_TEXT:
            raise InvalidParamsError(
                f"the message's text is {len(text)} characters; at most {MAX_TEXT} are taken"
            )
        if message.task_id:
            session = message.task_id
            if message.context_id and message.context_id != context_of(session):
                raise InvalidParamsError(
                    f"task {session} is in context {context_of(session)}, not "
                    f"{message.context_id}: send its own contextId, or none"
                )
            tracker = await self._reader.fold(session, context)
            if tracker.finished is not None:
                raise UnsupportedOperationError(
                    f"task {session} has ended ({tracker.finished.status.replace('_', ' ')}): a "
                    "task in a terminal state cannot be continued; send the message with only "
                    f"contextId {tracker.context} (no taskId) to start a new task in its "
                    "context, or with neither to start a new context"
                )
            return await self._continue(tracker, message, text)
        if message.context_id:
            return await self._in_context(message.context_id, message, text, context)
        refuse_other_parts(message, answering=False)
        if not text:
            raise InvalidParamsError("the message has no text part: say what to get done")
        tracker = self._reader.tracker(await self._start(text), context)
        tracker.seed(text)
        return tracker, []

    async def _start(self, text: str, *, session_id: str | None = None, context: str = "") -> str:
        """A new session for ``text``, as ``POST /sessions`` starts one, approvals asked of the
        client (INPUT_REQUIRED), unless the server's approval policy is ``deny``. ``session_id``:
        the next task of a context (its id says which, :mod:`.contexts`); a clash then raises
        ``SessionExists`` (another message started that task meanwhile)."""
        ctx = self._ctx
        chosen: dict[str, str] = {} if session_id is None else {"session_id": session_id}
        config = SessionConfig(
            task=text,
            context=context,
            bus_url=ctx.bus.url,
            model=ctx.model,
            profiles=ctx.host.profiles,
            approve=session_approve(None, ctx.config.approve),
            timeout_s=min(ctx.config.session_timeout_s, ctx.config.max_session_timeout_s),
            media_dir=ctx.media_root,
            media=ctx.config.media,
            images=ctx.config.images,
            **chosen,
        )
        try:  # in the request's trace context (.tracing): the session continues its trace
            return await ctx.host.start(config)
        except SessionExists as exc:
            if session_id is not None:
                raise
            raise InternalError(str(exc)) from exc  # a drawn id clashed: the client may retry

    async def _in_context(
        self, context_id: str, message: Message, text: str, context: ServerCallContext
    ) -> tuple[TaskTracker, list[Update]]:
        """A message naming only a context: a follow-up to its newest task while that runs,
        else the context's next task, its lead given the earlier exchange (A2A: a message with
        a contextId and no taskId starts a new task in that context)."""
        problem = name_problem(context_id, "context id")
        if problem is not None:
            raise TaskNotFoundError(f"no context {context_id[:80]!r}: {problem}")
        owner, number = parse(context_id)
        if number > 1:
            raise InvalidParamsError(
                f"{context_id} is task {number} of context {owner}, not a context: send "
                f"contextId {owner} (with taskId {context_id} to continue that task while it runs)"
            )
        host = self._ctx.host
        for _attempt in range(2):
            tasks = tasks_of(context_id, await self._reader.sessions())
            if not tasks and host.is_hosted(context_id):
                tasks = [context_id]  # started here a moment ago, nothing logged yet
            if not tasks:
                raise TaskNotFoundError(
                    f"no context {context_id!r} on this server's bus: baton makes its contexts "
                    "(a task's contextId); send the message without contextId to start one"
                )
            number = parse(tasks[-1])[1]
            if host.is_hosted(task_id(context_id, number + 1)):
                number += 1  # started here a moment ago, not in the index yet
            newest = await self._reader.fold(task_id(context_id, number), context)
            if newest.finished is None:
                return await self._continue(newest, message, text)
            refuse_other_parts(message, answering=False)
            if not text:
                raise InvalidParamsError("the message has no text part: say what to get done")
            too_long = id_problem(context_id, number + 1)
            if too_long is not None:
                raise InvalidParamsError(too_long)
            earlier = await self._reader.exchange(tasks[-MAX_EARLIER:], context)
            try:
                session = await self._start(
                    text,
                    session_id=task_id(context_id, number + 1),
                    context=exchange_note(context_id, earlier),
                )
            except SessionExists:  # another message started it meanwhile: look again
                continue
            tracker = self._reader.tracker(session, context)
            tracker.seed(text)
            return tracker, []
        raise InternalError(f"context {context_id}: its next task could not be started; retry")

    async def _continue(
        self, tracker: TaskTracker, message: Message, text: str
    ) -> tuple[TaskTracker, list[Update]]:
        """A message to a live task: the answer to its pending approvals, else a follow-up."""
        session = tracker.session
        refuse_other_parts(message, answering=bool(tracker.pending))
        if tracker.pending:
            return tracker, [await self._answer(tracker, message)]
        if not text:
            raise InvalidParamsError("the message has no text part: say what to add")
        try:
            envelope = make_envelope(session=session, sender=USER, recipient="lead",
                                     type="task", content=text)  # fmt: skip
            await self._ctx.bus.inboxes.send(envelope)
        except InvalidEnvelope as exc:
            raise InvalidParamsError(exc.reason) from exc
        except BusError as exc:
            raise InternalError(f"the bus does not answer: {exc}") from exc
        return tracker, []

    async def _answer(self, tracker: TaskTracker, message: Message) -> Update:
        """The message answers every approval the task waits for (one verdict for all)."""
        verdict = verdict_of(message)
        keys = list(tracker.pending)
        for _agent, call_id in keys:
            try:
                await answer_approval(self._ctx.bus, tracker.session, call_id, verdict.approved,
                                      verdict.reason)  # fmt: skip
            except ApprovalNotFound:  # decided meanwhile (another client, baton approve)
                continue
            except InvalidEnvelope as exc:
                raise InvalidParamsError(exc.reason) from exc
            except BusError as exc:
                raise InternalError(f"the bus does not answer: {exc}") from exc
        said = "approved" if verdict.approved else f"declined ({verdict.reason})"
        return tracker.answered(keys, f"{len(keys)} approval(s) {said}")
