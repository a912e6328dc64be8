"""The A2A request handler: each A2A operation done with what the HTTP API already does.

It implements the SDK's :class:`~a2a.server.request_handlers.RequestHandler` over the server's
:class:`~baton.server.context.ServerContext`, with no task store of its own: a task *is* a
session on the bus (task id = session id; its context is written in the id, :mod:`.contexts`;
docs/a2a.md), so ``GetTask``, ``ListTasks`` and ``SubscribeToTask`` fold the session's event log
(:mod:`.mapping`) and any ``baton serve`` on the same bus answers them, across restarts.

- A message starts a task or continues one (:mod:`.sending` says how); tasks are read from the
  sessions' logs (:mod:`.reading`).
- ``CancelTask`` cancels a session this server runs (as ``POST /sessions/{id}/cancel``) and
  returns the task once it is CANCELED.
- Streams (``SendStreamingMessage``, ``SubscribeToTask``) start with the task's snapshot and then
  follow its log live, ending at a terminal state or INPUT_REQUIRED; a client that lost its
  stream subscribes again and gets the snapshot as of now and everything after it.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing

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
from a2a.utils.errors import (
    ExtendedAgentCardNotConfiguredError,
    InternalError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    UnsupportedOperationError,
)

from baton.bus.base import LoggedEvent
from baton.bus.errors import BusError
from baton.bus.tail import tail_events
from baton.server.a2a.mapping import TaskTracker, Update
from baton.server.a2a.reading import TaskReader
from baton.server.a2a.sending import MessageIntake
from baton.server.context import ServerContext

CANCEL_WAIT_S = 10.0
"""How long ``CancelTask`` waits for the session's end before answering with the task as is."""


class BatonRequestHandler(RequestHandler):
    """A2A over a running server's bus, feeds and session host (see the module docstring)."""

    def __init__(self, ctx: ServerContext) -> None:
        self.ctx = ctx
        self._tasks = TaskReader(ctx)
        self._intake = MessageIntake(ctx, self._tasks)

    # -- reading tasks --------------------------------------------------------------------------

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
        tracker = await self._tasks.fold(params.id, context)
        length = params.history_length if params.HasField("history_length") else None
        return tracker.snapshot(length)

    @validate_request_params
    async def on_list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        return await self._tasks.page(params, context)

    # -- sending --------------------------------------------------------------------------------

    @validate_request_params
    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Task | Message:
        tracker, _ = await self._intake.accept(params, context)
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
        tracker, changed = await self._intake.accept(params, context)
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
        tracker = await self._tasks.fold(params.id, context)
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
        tracker = await self._tasks.fold(params.id, context)
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
