"""The A2A request handler: each A2A operation done with what the HTTP API already does.

It implements the SDK's :class:`~a2a.server.request_handlers.RequestHandler` over the server's
:class:`~baton.server.context.ServerContext`, with no task store of its own: a task *is* a
session on the bus (task id = session id; its context is written in the id, :mod:`.contexts`;
docs/a2a.md), so ``GetTask``, ``ListTasks`` and ``SubscribeToTask`` fold the session's event log
(:mod:`.mapping`) and any ``baton serve`` on the same bus answers them, across restarts.

- A message without a task or context id starts a session (as ``POST /sessions``, approvals
  asked of the client), in the request's trace (:mod:`.tracing`): a new context.
- A message naming a live task (its ``taskId``, or only the ``contextId`` of a context whose
  newest task runs) is a follow-up posted to its lead (as ``POST /sessions/{id}/messages``), or,
  while the task is INPUT_REQUIRED, the answer to its pending approvals (as ``POST
  /sessions/{id}/approvals/{call}``; only a clear yes approves).
- A message naming only the context of an ended task starts the context's next task: a new
  session whose lead is given the context's earlier exchange (requests and final answers).
- A message naming an ended task by ``taskId`` is refused: an A2A task in a terminal state
  cannot be restarted (the error says to send only the ``contextId``).
- ``CancelTask`` cancels a session this server runs (as ``POST /sessions/{id}/cancel``) and
  returns the task once it is CANCELED.
- Streams (``SendStreamingMessage``, ``SubscribeToTask``) start with the task's snapshot and then
  follow its log live, ending at a terminal state or INPUT_REQUIRED; a client that lost its
  stream subscribes again and gets the snapshot as of now and everything after it.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from datetime import UTC

import anyio
from a2a.server.context import ServerCallContext
from a2a.server.events.event_queue import Event
from a2a.server.request_handlers.request_handler import RequestHandler, validate_request_params
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
)
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE, MAX_LIST_TASKS_PAGE_SIZE
from a2a.utils.errors import (
    ExtendedAgentCardNotConfiguredError,
    InternalError,
    InvalidParamsError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)

from baton.bus.base import LoggedEvent
from baton.bus.errors import BusError, InvalidEnvelope
from baton.bus.ids import name_problem
from baton.bus.messages import make_envelope
from baton.bus.tail import tail_events
from baton.bus.user_post import USER
from baton.engine.bus_channel import ApprovalNotFound, answer_approval
from baton.lead.keeper import SessionExists
from baton.server.a2a.contexts import (
    Turn,
    context_of,
    exchange_note,
    exchange_text,
    id_problem,
    parse,
    task_id,
    tasks_of,
)
from baton.server.a2a.mapping import TaskTracker, Update
from baton.server.a2a.messages import refuse_other_parts, text_of, verdict_of
from baton.server.context import ServerContext
from baton.server.media import public_url
from baton.session import SessionConfig

CANCEL_WAIT_S = 10.0
"""How long ``CancelTask`` waits for the session's end before answering with the task as is."""
MAX_TEXT = 20_000
"""The most text a message may carry: a task or a follow-up, as ``POST /sessions/{id}/messages``."""
MAX_SCAN = 1000
"""``ListTasks`` with a status or time filter looks at the newest this many sessions."""
MAX_EARLIER = 20
"""A context's next task is given the exchange of at most this many tasks before it."""
ROOT = "baton.root"
"""The key of the request's root URL in the call context's state (set by :mod:`.routes`)."""


class BatonRequestHandler(RequestHandler):
    """A2A over a running server's bus, feeds and session host (see the module docstring)."""

    def __init__(self, ctx: ServerContext) -> None:
        self.ctx = ctx

    # -- reading tasks --------------------------------------------------------------------------

    def _tracker(self, session: str, context: ServerCallContext) -> TaskTracker:
        root = str(context.state.get(ROOT, ""))
        media_root = self.ctx.media_root

        def public(url: str) -> str:
            path = public_url(url, media_root)
            return root + path if path.startswith("/") else path

        return TaskTracker(session, public)

    async def _fold(self, session: str, context: ServerCallContext) -> TaskTracker:
        """The task of ``session`` as its log has it now; TaskNotFound for an unknown one."""
        problem = name_problem(session, "session id")
        if problem is not None:
            raise TaskNotFoundError(f"no task {session[:80]!r}: {problem}")
        tracker = self._tracker(session, context)
        try:
            async for logged in self.ctx.bus.log.tail(session, follow=False):
                tracker.apply(logged.cursor, logged.event)
        except BusError as exc:
            raise InternalError(f"the bus does not answer: {exc}") from exc
        if tracker.events == 0 and not self.ctx.host.is_hosted(session):
            raise TaskNotFoundError(f"no task {session!r} on this server's bus")
        return tracker

    async def _follow(self, tracker: TaskTracker) -> AsyncGenerator[Update, None]:
        """The task's updates after what ``tracker`` has folded, until a stream ends (terminal
        or INPUT_REQUIRED)."""
        tail = tail_events(self.ctx.bus, tracker.session, after=tracker.cursor, follow=True,
                           outage_s=self.ctx.config.bus_outage_s)  # fmt: skip
        try:
            async for logged in tail:
                for update in tracker.apply(logged.cursor, logged.event):
                    yield update
                if tracker.stopped:
                    return
        except BusError as exc:
            raise InternalError(f"lost the task's event log: {exc}") from exc
        finally:
            await _aclose(tail)

    @validate_request_params
    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task:
        tracker = await self._fold(params.id, context)
        length = params.history_length if params.HasField("history_length") else None
        return tracker.snapshot(length)

    @validate_request_params
    async def on_list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        size = params.page_size if params.HasField("page_size") else DEFAULT_LIST_TASKS_PAGE_SIZE
        if not 1 <= size <= MAX_LIST_TASKS_PAGE_SIZE:
            raise InvalidParamsError(f"page_size: from 1 to {MAX_LIST_TASKS_PAGE_SIZE}")
        token = params.page_token or "0"
        if not (token.isascii() and token.isdigit() and len(token) <= 9):  # int() takes "²"
            raise InvalidParamsError("page_token: use the next_page_token of the previous page")
        sessions = await self._sessions()
        if params.context_id:  # every task of the context, newest first (as the whole list)
            sessions = [s for s in sessions if context_of(s) == params.context_id]
        after = None
        if params.HasField("status_timestamp_after"):
            after = params.status_timestamp_after.ToDatetime(tzinfo=UTC)
        length = params.history_length if params.HasField("history_length") else None
        artifacts = params.include_artifacts if params.HasField("include_artifacts") else True
        start = int(token)
        filtered = bool(params.status) or after is not None
        # Unfiltered, only the page is folded; filtered, the newest MAX_SCAN sessions are.
        scan = sessions[:MAX_SCAN] if filtered else sessions[start : start + size]
        tasks: list[Task] = []
        for session in scan:
            try:
                tracker = await self._fold(session, context)
            except TaskNotFoundError:  # listed but its log is gone (retention): not a task now
                continue
            if params.status and tracker.state != params.status:
                continue
            if after is not None and tracker.timestamp < after:
                continue
            tasks.append(tracker.snapshot(length, artifacts=artifacts))
        total = len(tasks) if filtered else len(sessions)
        page = tasks[start : start + size] if filtered else tasks
        following = str(start + size) if start + size < total else ""
        return ListTasksResponse(tasks=page, next_page_token=following, page_size=size,
                                 total_size=total)  # fmt: skip

    # -- sending --------------------------------------------------------------------------------

    async def _start(self, text: str, *, session_id: str | None = None, context: str = "") -> str:
        """A new session for ``text``, as ``POST /sessions`` starts one, approvals asked of the
        client (INPUT_REQUIRED). ``session_id``: the next task of a context (its id says which,
        :mod:`.contexts`); a clash then raises ``SessionExists`` (another message started that
        task meanwhile)."""
        ctx = self.ctx
        chosen: dict[str, str] = {} if session_id is None else {"session_id": session_id}
        config = SessionConfig(
            task=text,
            context=context,
            bus_url=ctx.bus.url,
            model=ctx.model,
            profiles=ctx.host.profiles,
            approve="ask",
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

    async def _sessions(self) -> list[str]:
        try:
            return await self.ctx.bus.log.sessions()
        except BusError as exc:
            raise InternalError(f"the bus does not answer: {exc}") from exc

    async def _accept(
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
            tracker = await self._fold(session, context)
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
        tracker = self._tracker(await self._start(text), context)
        tracker.seed(text)
        return tracker, []

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
        for _attempt in range(2):
            tasks = tasks_of(context_id, await self._sessions())
            if not tasks and self.ctx.host.is_hosted(context_id):
                tasks = [context_id]  # started here a moment ago, nothing logged yet
            if not tasks:
                raise TaskNotFoundError(
                    f"no context {context_id!r} on this server's bus: baton makes its contexts "
                    "(a task's contextId); send the message without contextId to start one"
                )
            number = parse(tasks[-1])[1]
            if self.ctx.host.is_hosted(task_id(context_id, number + 1)):
                number += 1  # started here a moment ago, not in the index yet
            newest = await self._fold(task_id(context_id, number), context)
            if newest.finished is None:
                return await self._continue(newest, message, text)
            refuse_other_parts(message, answering=False)
            if not text:
                raise InvalidParamsError("the message has no text part: say what to get done")
            too_long = id_problem(context_id, number + 1)
            if too_long is not None:
                raise InvalidParamsError(too_long)
            earlier = await self._exchange(tasks[-MAX_EARLIER:], context)
            try:
                session = await self._start(
                    text,
                    session_id=task_id(context_id, number + 1),
                    context=exchange_note(context_id, earlier),
                )
            except SessionExists:  # another message started it meanwhile: look again
                continue
            tracker = self._tracker(session, context)
            tracker.seed(text)
            return tracker, []
        raise InternalError(f"context {context_id}: its next task could not be started; retry")

    async def _exchange(self, tasks: list[str], context: ServerCallContext) -> str | None:
        """The earlier tasks' requests and final answers, for the next task's lead."""
        turns = []
        for task in tasks:
            try:
                tracker = await self._fold(task, context)
            except TaskNotFoundError:  # expired meanwhile
                continue
            answer = tracker.finished.answer if tracker.finished is not None else ""
            turns.append(Turn(task=task, request=tracker.task_text, answer=answer))
        return exchange_text(turns)

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
            await self.ctx.bus.inboxes.send(envelope)
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
                await answer_approval(self.ctx.bus, tracker.session, call_id, verdict.approved,
                                      verdict.reason)  # fmt: skip
            except ApprovalNotFound:  # decided meanwhile (another client, baton approve)
                continue
            except InvalidEnvelope as exc:
                raise InvalidParamsError(exc.reason) from exc
            except BusError as exc:
                raise InternalError(f"the bus does not answer: {exc}") from exc
        said = "approved" if verdict.approved else f"declined ({verdict.reason})"
        return tracker.answered(keys, f"{len(keys)} approval(s) {said}")

    @validate_request_params
    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Task | Message:
        tracker, _ = await self._accept(params, context)
        if not params.configuration.return_immediately and not tracker.terminal:
            async for _update in self._follow(tracker):
                pass
        config = params.configuration
        length = config.history_length if config.HasField("history_length") else None
        return tracker.snapshot(length)

    @validate_request_params
    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event, None]:
        tracker, changed = await self._accept(params, context)
        yield tracker.snapshot()
        for update in changed:
            yield update
        async with aclosing(self._follow(tracker)) as updates:  # closed with the stream
            async for update in updates:
                yield update

    @validate_request_params
    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event, None]:
        tracker = await self._fold(params.id, context)
        if tracker.finished is not None:
            raise UnsupportedOperationError(
                f"task {params.id} has ended ({tracker.finished.status}); GetTask gives its "
                "final state"
            )
        yield tracker.snapshot()
        if tracker.stopped:  # waiting for input: the snapshot says so, and a stream ends there
            return
        async with aclosing(self._follow(tracker)) as updates:  # closed with the stream
            async for update in updates:
                yield update

    @validate_request_params
    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task:
        tracker = await self._fold(params.id, context)
        if tracker.finished is not None:
            raise TaskNotCancelableError(
                f"task {params.id} has already ended ({tracker.finished.status})"
            )
        if not self.ctx.host.cancel(params.id):
            raise TaskNotCancelableError(
                f"task {params.id} runs in another process (baton run, or another server): "
                "cancel it there"
            )
        with anyio.move_on_after(CANCEL_WAIT_S):
            while not tracker.terminal:  # past an INPUT_REQUIRED on the way, to the end
                async for _update in self._follow(tracker):
                    pass
        return tracker.snapshot()

    # -- what baton does not offer --------------------------------------------------------------

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError()

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError()

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        raise PushNotificationNotSupportedError()

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        raise PushNotificationNotSupportedError()

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        raise ExtendedAgentCardNotConfiguredError()


async def _aclose(events: AsyncIterator[LoggedEvent]) -> None:
    """Close a bus tail even when cancelled (a Redis tail holds a watch until closed)."""
    aclose = getattr(events, "aclose", None)
    if aclose is not None:
        with anyio.CancelScope(shield=True):
            await aclose()
