"""A2A tasks read from the sessions' event logs: one folded as its log has it now, a context's
earlier exchange, and the list of tasks.

A task *is* a session on the bus (task id = session id), so nothing is stored for A2A: a task is
its session's log folded by a :class:`~.mapping.TaskTracker`, and any ``baton serve`` on the same
bus reads it the same way, across restarts. Media URLs in a task are made absolute against the
root URL the client reached the server at (``ROOT`` in the call context's state).
"""

from __future__ import annotations

from datetime import UTC

from a2a.server.context import ServerCallContext
from a2a.types import ListTasksRequest, ListTasksResponse, Task
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE, MAX_LIST_TASKS_PAGE_SIZE
from a2a.utils.errors import InternalError, InvalidParamsError, TaskNotFoundError

from baton.bus.errors import BusError
from baton.bus.ids import name_problem
from baton.server.a2a.contexts import Turn, context_of, exchange_text
from baton.server.a2a.mapping import TaskTracker
from baton.server.context import ServerContext
from baton.server.media import public_url

MAX_SCAN = 1000
"""``ListTasks`` with a status or time filter looks at the newest this many sessions."""
ROOT = "baton.root"
"""The key of the request's root URL in the call context's state (set by :mod:`.routes`)."""


class TaskReader:
    """Reads tasks from the bus, the feeds and the session host of a running server (``ctx``)."""

    __slots__ = ("_ctx",)

    def __init__(self, ctx: ServerContext) -> None:
        self._ctx = ctx

    def tracker(self, session: str, context: ServerCallContext) -> TaskTracker:
        """A tracker of ``session`` with nothing folded yet, its media URLs made public."""
        root = str(context.state.get(ROOT, ""))
        media_root = self._ctx.media_root

        def public(url: str) -> str:
            path = public_url(url, media_root)
            return root + path if path.startswith("/") else path

        return TaskTracker(session, public)

    async def fold(self, session: str, context: ServerCallContext) -> TaskTracker:
        """The task of ``session`` as its log has it now; TaskNotFound for an unknown one."""
        problem = name_problem(session, "session id")
        if problem is not None:
            raise TaskNotFoundError(f"no task {session[:80]!r}: {problem}")
        tracker = self.tracker(session, context)
        try:
            async for logged in self._ctx.bus.log.tail(session, follow=False):
                tracker.apply(logged.cursor, logged.event)
        except BusError as exc:
            raise InternalError(f"the bus does not answer: {exc}") from exc
        if tracker.events == 0 and not self._ctx.host.is_hosted(session):
            raise TaskNotFoundError(f"no task {session!r} on this server's bus")
        return tracker

    async def sessions(self) -> list[str]:
        """Every session on the bus, newest first."""
        try:
            return await self._ctx.bus.log.sessions()
        except BusError as exc:
            raise InternalError(f"the bus does not answer: {exc}") from exc

    async def exchange(self, tasks: list[str], context: ServerCallContext) -> str | None:
        """The earlier tasks' requests and final answers, for the next task's lead."""
        turns = []
        for task in tasks:
            try:
                tracker = await self.fold(task, context)
            except TaskNotFoundError:  # expired meanwhile
                continue
            answer = tracker.finished.answer if tracker.finished is not None else ""
            turns.append(Turn(task=task, request=tracker.task_text, answer=answer))
        return exchange_text(turns)

    async def page(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        """One page of tasks, newest first: a context's, or all; filtered by status and time."""
        size = params.page_size if params.HasField("page_size") else DEFAULT_LIST_TASKS_PAGE_SIZE
        if not 1 <= size <= MAX_LIST_TASKS_PAGE_SIZE:
            raise InvalidParamsError(f"page_size: from 1 to {MAX_LIST_TASKS_PAGE_SIZE}")
        token = params.page_token or "0"
        if not (token.isascii() and token.isdigit() and len(token) <= 9):  # int() takes "²"
            raise InvalidParamsError("page_token: use the next_page_token of the previous page")
        sessions = await self.sessions()
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
                tracker = await self.fold(session, context)
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
