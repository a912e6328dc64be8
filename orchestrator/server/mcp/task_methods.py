"""``run`` as an MCP task, in both protocol revisions, over the records of :mod:`.tasks`.

**2026-07-28: the tasks extension** (``io.modelcontextprotocol/tasks``, SEP-2663), built on the
SDK's extension API (:class:`TasksExtension`: its ``tools/call`` interceptor and its methods).
When a request's client capabilities declare the extension, ``run`` answers at once with a
``CreateTaskResult`` (``resultType: "task"``) — the server decides per call, and it decides so
for every valid ``run``; a call with bad arguments is answered with the tool error instead, no
task. ``tasks/get`` gives the task with what its status carries inline (``inputRequests`` for a
question to a person, ``result`` once completed), ``tasks/update`` delivers ``inputResponses``,
``tasks/cancel`` acknowledges and cancels the session. A request without the extension declared
is refused with ``-32021`` (the spec's missing client capability).

**2025-11-25: core tasks** (experimental in that revision). ``run`` says ``taskSupport:
"optional"`` and the server declares ``tasks.requests.tools.call`` and ``tasks.cancel`` (not
``tasks.list``: one token cannot tell callers apart, so a list would show every caller's tasks).
A ``tools/call`` with ``task`` gets a ``CreateTaskResult`` (``{task}``), from
:class:`LegacyTasks` acting as a server middleware: that revision's ``tools/call`` result is
validated as a ``CallToolResult`` further in. ``tasks/get`` and ``tasks/cancel`` answer the task
(cancelling one that ended is ``-32602``), and ``tasks/result`` waits for the end, putting the
session's questions to the person in ``elicitation/create`` requests of its own (related to the
task), then returns the tool's result.

Either way the task is its session on the bus (:mod:`.tasks`): any server sharing the bus
answers for it, after a restart too. A watcher in the server that created the task
(:class:`TaskWatch`) follows its session: when the host declared no elicitation it declines the
session's questions as they come (fail closed); on 2025-11-25 it also puts each question to the
host on the connection's own channel once the client has named the task (the stdio pipe, the
client's ``GET`` stream: that revision lets a server side-channel a task's requests, and a client
that only polls ``tasks/get`` is asked too; ``tasks/result`` takes a question over when it comes),
and it carries progress lines to the creating call's ``progressToken``, which that revision
keeps valid for the task's life.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    CallToolRequestParams,
    CallToolResult,
    ClientCapabilities,
    ElicitResult,
    MissingRequiredClientCapabilityErrorData,
    RequestParams,
    TextContent,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ConfigDict, Field, ValidationError

from baton.bus.errors import BusError
from baton.server.mcp.askers import ElicitAsker, NobodyAsker, deliver
from baton.server.mcp.asking import elicitation_params, reply_of
from baton.server.mcp.backend import CallRefused, McpBackend
from baton.server.mcp.call import RELATED_TASK, TASKS_EXTENSION, Call, elicit_on
from baton.server.mcp.follow import Asker, follow_session
from baton.server.mcp.results import run_result
from baton.server.mcp.revisions import has_tasks
from baton.server.mcp.schemas import RunArguments
from baton.server.mcp.tasks import (
    POLL_MS,
    TERMINAL,
    Asked,
    TaskRecord,
    TaskStatus,
    TaskView,
    cancel_task,
    create_task,
    iso,
    load_task,
    view_task,
)
from baton.server.mcp.tools import NOBODY, arguments_of, error_result, spec_of

log = logging.getLogger(__name__)

MODERN = frozenset(MODERN_PROTOCOL_VERSIONS)
IMMEDIATE = "io.modelcontextprotocol/model-immediate-response"
SEED_FIELDS = frozenset(
    {"taskId", "status", "statusMessage", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"}
)
"""A 2026-07-28 ``CreateTaskResult``'s fields: the ``Task`` alone."""
RESULT_WAIT_S = 10.0
"""How long ``tasks/result`` of a task cancelled before its session ended waits for that end."""


class TaskParams(RequestParams):
    model_config = ConfigDict(defer_build=True)

    task_id: str = Field(alias="taskId")


class UpdateParams(TaskParams):
    input_responses: dict[str, Any] = Field(alias="inputResponses")


def not_found(task_id: str) -> MCPError:
    return MCPError(
        code=INVALID_PARAMS, message=f"Failed to retrieve task: Task not found ({task_id[:80]!r})"
    )


def bus_down(exc: Exception) -> MCPError:
    return MCPError(code=INTERNAL_ERROR, message=f"the bus does not answer: {exc}")


# -- making a task --------------------------------------------------------------------------------


async def start_task(call: Call, args: RunArguments) -> tuple[str, TaskRecord]:
    """Start ``run``'s session and record its task (durably: ``tasks/get`` finds it at once)."""
    backend = call.backend
    session = await backend.start(args)
    timeout = backend.session_config(args).timeout_s
    ttl_ms = round((timeout + backend.retention_s()) * 1000)
    asked: Asked = "host" if call.can_elicit else "nobody"
    task_id = await create_task(backend.bus, session, ttl_ms, asked)
    record = await load_task(backend.bus, task_id)
    assert record is not None
    legacy = not call.modern
    if asked == "nobody" or legacy:
        watch = TaskWatch(backend, task_id, session, asked, call.ctx.session)
        token = call.progress_token if legacy else None
        backend.host.group.start_soon(watch.run, token, legacy, name=f"task watch {session}")
    return task_id, record


class TaskWatch:
    """A task's session followed from the server (see the module docstring) until it ends:
    its questions declined when nobody can be asked; on 2025-11-25 also put to the host on the
    connection's own channel (related to the task; left for ``tasks/result`` when that channel
    reaches nobody), and its progress lines sent to the creating call's ``progressToken``.

    A question goes on that channel only once the client has named the task in a task request
    (its first ``tasks/get``, say): before that it may not have the ``CreateTaskResult`` yet — the
    channel and the call's response are two streams — and cannot relate the request to a task.
    The TypeScript client answers such a request ``cancel``, which would decline the call
    unasked."""

    def __init__(
        self, backend: McpBackend, task_id: str, session: str, asked: Asked, peer: ServerSession
    ) -> None:
        self.backend = backend
        self.task_id = task_id
        self.session = session
        self.asked = asked
        self.peer = peer
        self._lines = 0
        self._known = backend.known[task_id] = anyio.Event()

    async def run(self, token: str | int | None, legacy: bool) -> None:
        backend, session = self.backend, self.session
        notes: list[str] = []
        asker: Asker | None = None
        if self.asked == "nobody":
            asker = NobodyAsker(backend.bus, session, NOBODY, notes)
        elif legacy:
            asker = ElicitAsker(backend.bus, session, self._elicit, notes,
                                claims=backend.asking, leave=True)  # fmt: skip
        report = self._report(token)
        try:
            await follow_session(backend.bus, session, report=report, asker=asker,
                                 outage_s=backend.config.bus_outage_s)  # fmt: skip
        except BusError as exc:  # gone past bus_outage_s: tasks/get still reads the task later
            log.warning("task of session %s: no longer watched: %s", session, exc)
        except Exception:  # it runs in the server's own task group: nothing may escape it
            log.exception("task of session %s: no longer watched", session)
        finally:
            del backend.known[self.task_id]

    async def _elicit(self, params: dict[str, Any]) -> ElicitResult:
        await self._known.wait()  # bounded by the question's expiry (ElicitAsker)
        return await elicit_on(self.peer, params, self.task_id)

    def _report(self, token: str | int | None) -> Callable[[str], Awaitable[None]]:
        reporting = token is not None

        async def report(line: str) -> None:
            nonlocal reporting
            if not reporting or token is None:
                return
            self._lines += 1
            try:
                await self.peer.send_progress_notification(token, float(self._lines), None, line)
            except Exception as exc:  # the connection went: the task goes on without progress
                log.debug("task of session %s: progress not sent: %s", self.session, exc)
                reporting = False

        return report


# -- what a task looks like -----------------------------------------------------------------------


async def viewed(call: Call, task_id: str) -> TaskView:
    bus = call.backend.bus
    try:
        record = await load_task(bus, task_id)
        if record is None:
            raise not_found(task_id)
        return await view_task(bus, task_id, record)
    except BusError as exc:
        raise bus_down(exc) from exc


def _common(view: TaskView, status: TaskStatus) -> dict[str, Any]:
    return {
        "taskId": view.task_id,
        "status": status,
        "statusMessage": view.message(status),
        "createdAt": iso(view.record.created_at),
        "lastUpdatedAt": iso(view.updated),
    }


def legacy_task(view: TaskView) -> dict[str, Any]:
    """The 2025-11-25 ``Task``."""
    status = view.status(failed_is_failure=True)
    return {**_common(view, status), "ttl": view.record.ttl_ms, "pollInterval": POLL_MS}


async def modern_task(call: Call, view: TaskView) -> dict[str, Any]:
    """The 2026-07-28 ``DetailedTask``: what the status carries, inline."""
    status = view.status(failed_is_failure=False)
    task = {**_common(view, status), "ttlMs": view.record.ttl_ms, "pollIntervalMs": POLL_MS}
    if status == "input_required":
        task["inputRequests"] = {
            question.id: {"method": "elicitation/create", "params": elicitation_params(question)}
            for question in view.questions()
        }
    elif status == "completed":
        result = await _result_of(call, view)
        task["result"] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return task


async def _result_of(call: Call, view: TaskView) -> CallToolResult:
    """The tool's result of a task that ended (or was cancelled before its session ended)."""
    if view.fold.finished is not None:
        return await run_result(view.fold, [], call.media())
    session = view.record.session
    return CallToolResult(
        content=[TextContent(text=f"session {session}: cancelled by tasks/cancel")],
        structured_content={"session": session, "status": "cancelled", "answer": "",
                            "media_urls": [], "notes": ["cancelled by tasks/cancel"]},
    )  # fmt: skip


# -- 2026-07-28: the extension --------------------------------------------------------------------


def require_extension(call: Call) -> None:
    if not call.declared_tasks:
        data = MissingRequiredClientCapabilityErrorData(
            required_capabilities=ClientCapabilities(extensions={TASKS_EXTENSION: {}})
        )
        raise MCPError(
            code=MISSING_REQUIRED_CLIENT_CAPABILITY,
            message=f"Missing required client capability: the {TASKS_EXTENSION} extension",
            data=data.model_dump(by_alias=True, mode="json", exclude_none=True),
        )


class TasksExtension(Extension):
    """``io.modelcontextprotocol/tasks`` (see the module docstring)."""

    identifier = TASKS_EXTENSION

    def __init__(self, backend: McpBackend) -> None:
        self.backend = backend

    def methods(self) -> list[MethodBinding]:
        return [
            MethodBinding("tasks/get", TaskParams, self._get, MODERN),
            MethodBinding("tasks/update", UpdateParams, self._update, MODERN),
            MethodBinding("tasks/cancel", TaskParams, self._cancel, MODERN),
        ]

    async def intercept_tool_call(
        self,
        params: CallToolRequestParams,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
    ) -> HandlerResult:
        call = Call(ctx, self.backend)
        if not (call.modern and call.declared_tasks and params.request_state is None):
            return await call_next(ctx)
        spec = spec_of(params.name)
        if not spec.tasks:
            return await call_next(ctx)
        args = arguments_of(spec, params)
        if not isinstance(args, RunArguments):
            return args  # bad arguments: the tool error, no task
        try:
            task_id, _record = await start_task(call, args)
        except CallRefused as exc:
            return error_result(str(exc))
        except BusError as exc:
            return error_result(f"run: the bus does not answer ({exc}); try again")
        view = await viewed(call, task_id)  # the seed state: a Task, nothing inline (the spec)
        task = await modern_task(call, view)
        return {"resultType": "task", **{k: v for k, v in task.items() if k in SEED_FIELDS}}

    async def _get(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> dict[str, Any]:
        call = Call(ctx, self.backend)
        require_extension(call)
        return await modern_task(call, await viewed(call, params.task_id))

    async def _update(
        self, ctx: ServerRequestContext[Any, Any], params: UpdateParams
    ) -> dict[str, Any]:
        call = Call(ctx, self.backend)
        require_extension(call)
        view = await viewed(call, params.task_id)
        open_now = {question.id: question for question in view.questions()}
        for key, raw in params.input_responses.items():
            question = open_now.get(key)
            if question is None:  # never asked, answered, or superseded: ignored (the spec)
                continue
            try:
                answer = ElicitResult.model_validate(raw)
            except ValidationError:
                answer = ElicitResult(action="decline")
            reply = reply_of(question, answer.action, answer.content)
            try:
                refused = await deliver(call.backend.bus, view.record.session, question, reply)
            except BusError as exc:
                raise bus_down(exc) from exc
            if refused is not None:
                raise MCPError(code=INVALID_PARAMS, message=f"inputResponses.{key}: {refused}")
        return {}

    async def _cancel(
        self, ctx: ServerRequestContext[Any, Any], params: TaskParams
    ) -> dict[str, Any]:
        call = Call(ctx, self.backend)
        require_extension(call)
        await _cancel(call, await viewed(call, params.task_id), legacy=False)
        return {}


async def _cancel(call: Call, view: TaskView, *, legacy: bool) -> TaskView:
    """Record the cancel, then cancel the session (a task that ended: ``-32602`` on
    2025-11-25, a no-op on 2026-07-28, where cancelling is cooperative)."""
    status = view.status(failed_is_failure=legacy)
    if status in TERMINAL:
        if legacy:
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"Cannot cancel task: already in terminal status '{status}'",
            )
        return view
    bus = call.backend.bus
    try:
        record = await cancel_task(bus, view.task_id, view.record)
        try:
            await call.backend.cancel(record.session)
        except CallRefused as exc:  # nothing runs it: the task is cancelled all the same
            log.info("task of session %s: %s", record.session, exc)
    except BusError as exc:
        raise bus_down(exc) from exc
    return TaskView(view.task_id, record, view.fold, view.lead_gone)


# -- 2025-11-25: core tasks -----------------------------------------------------------------------


class LegacyTasks:
    """The 2025-11-25 task methods, and the middleware that makes ``run`` a task there."""

    def __init__(self, backend: McpBackend) -> None:
        self.backend = backend

    def handlers(self) -> dict[str, MethodBinding]:
        versions = None  # every handshake version: the router below sends modern ones elsewhere
        return {
            "tasks/get": MethodBinding("tasks/get", TaskParams, self._get, versions),
            "tasks/result": MethodBinding("tasks/result", TaskParams, self._result, versions),
            "tasks/cancel": MethodBinding("tasks/cancel", TaskParams, self._cancel, versions),
        }

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """The middleware: a 2025-11-25 ``tools/call`` carrying ``task`` becomes a task; a client
        of an older revision is offered no tasks (:mod:`.revisions`): its ``initialize`` result
        has no ``tasks`` capability, and a ``task`` on its call is not of its revision (ignored:
        the call runs as a call)."""
        params = ctx.params
        if ctx.method == "initialize":
            return _without_tasks_before_them(await call_next(ctx))
        if (
            ctx.method != "tools/call"
            or ctx.protocol_version in MODERN
            or not has_tasks(ctx.protocol_version)
            or not isinstance(params, Mapping)
            or params.get("task") is None
        ):
            return await call_next(ctx)
        try:
            request = CallToolRequestParams.model_validate(params, by_name=False)
        except ValidationError as exc:
            raise MCPError(code=INVALID_PARAMS, message="Invalid request parameters") from exc
        spec = spec_of(request.name)
        if not spec.tasks:
            raise MCPError(
                code=METHOD_NOT_FOUND,
                message=f"tool {request.name!r} cannot run as a task (taskSupport: forbidden)",
            )
        args = arguments_of(spec, request)
        if isinstance(args, CallToolResult):  # bad arguments: no task, and the same line
            first = args.content[0]
            raise MCPError(code=INVALID_PARAMS, message=getattr(first, "text", "bad arguments"))
        assert isinstance(args, RunArguments)
        call = Call(ctx, self.backend)
        try:
            task_id, _record = await start_task(call, args)
        except CallRefused as exc:
            raise MCPError(code=INVALID_PARAMS, message=str(exc)) from exc
        except BusError as exc:
            raise bus_down(exc) from exc
        task = legacy_task(await viewed(call, task_id))
        meta = {IMMEDIATE: f"baton runs this as task {task_id}; its result comes with tasks/result"}
        return {"task": task, "_meta": meta}

    async def _get(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> dict[str, Any]:
        self.backend.task_known(params.task_id)
        call = Call(ctx, self.backend)
        return legacy_task(await viewed(call, params.task_id))

    async def _cancel(
        self, ctx: ServerRequestContext[Any, Any], params: TaskParams
    ) -> dict[str, Any]:
        self.backend.task_known(params.task_id)
        call = Call(ctx, self.backend)
        view = await _cancel(call, await viewed(call, params.task_id), legacy=True)
        return legacy_task(view)

    async def _result(
        self, ctx: ServerRequestContext[Any, Any], params: TaskParams
    ) -> dict[str, Any]:
        """Wait for the end, asking the session's questions on this request; then the result."""
        call = Call(ctx, self.backend)
        if not call.can_elicit:  # else this request asks, and the side channel need not start
            self.backend.task_known(params.task_id)
        view = await viewed(call, params.task_id)
        if view.status(failed_is_failure=True) not in TERMINAL:
            await self._wait(call, view)
            view = await viewed(call, params.task_id)
        if view.fold.finished is None and view.record.cancelled_at is not None:
            with anyio.move_on_after(RESULT_WAIT_S):
                await self._wait(call, view)
                view = await viewed(call, params.task_id)
        result = await _result_of(call, view)
        dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        return {**dumped, "_meta": {RELATED_TASK: {"taskId": view.task_id}}}

    async def _wait(self, call: Call, view: TaskView) -> None:
        session = view.record.session
        notes: list[str] = []
        asker = None
        if view.record.asked == "host" and call.can_elicit:

            async def elicit(params: dict[str, Any]) -> ElicitResult:
                return await call.elicit(params, view.task_id)

            asker = ElicitAsker(call.backend.bus, session, elicit, notes,
                                claims=call.backend.asking, takes_over=True)  # fmt: skip
        try:
            await follow_session(call.backend.bus, session, report=_quiet, asker=asker,
                                 outage_s=call.backend.config.bus_outage_s)  # fmt: skip
        except BusError as exc:
            raise bus_down(exc) from exc


def _without_tasks_before_them(result: HandlerResult) -> HandlerResult:
    """An ``initialize`` result (the wire dict) without the ``tasks`` capability when the
    revision it negotiated predates tasks."""
    if not isinstance(result, dict):
        return result
    version = result.get("protocolVersion")
    capabilities = result.get("capabilities")
    if isinstance(version, str) and not has_tasks(version) and isinstance(capabilities, dict):
        return {**result, "capabilities": {k: v for k, v in capabilities.items() if k != "tasks"}}
    return result


async def _quiet(line: str) -> None:
    """``tasks/result`` reports nothing: its task's status carries the progress."""
