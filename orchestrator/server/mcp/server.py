"""The MCP server itself: the SDK's low-level ``Server`` with baton's tools, resources and tasks.

One server object answers clients of every protocol revision the SDK speaks: 2025-11-25 (and
older) through the ``initialize`` handshake, 2026-07-28 through the per-request envelope. What
differs per revision — how a question reaches the person, what a task looks like — is decided per
request (:class:`~.call.Call`). The pieces are put together here, on the SDK's public surfaces:

- the tools (:mod:`.tools`) and the media as resources (:mod:`.media`), as handlers;
- the 2026-07-28 tasks extension (:class:`~.task_methods.TasksExtension`), applied as the SDK
  applies an ``Extension`` (its interceptor folded around ``tools/call`` with
  :func:`~mcp.server.extension.compose_tool_call_handler`, its methods registered, its
  identifier advertised) — beside the 2025-11-25 task methods of the same names, each request
  routed by its revision;
- the SDK's ``RequestStateBoundary`` middleware, which seals ``run``'s 2026-07-28
  ``requestState`` (:func:`~.backend.state_security`), and the 2025-11-25 task middleware;
- the ``tasks`` capability of 2025-11-25 beside the extension's entry of 2026-07-28 (each
  revision's schema keeps its own: the SDK drops the other's field).
"""

from __future__ import annotations

from typing import Any

from mcp.server.context import HandlerResult, ServerRequestContext
from mcp.server.extension import MethodBinding, compose_tool_call_handler
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.request_state import RequestStateBoundary
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    CallToolRequestParams,
    CallToolResult,
    InputRequiredResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListToolsResult,
    PaginatedRequestParams,
    ReadResourceRequestParams,
    ReadResourceResult,
    ServerCapabilities,
    ServerTasksCapability,
    ServerTasksRequestsCapability,
    TasksCallCapability,
    TasksCancelCapability,
    TasksToolsCapability,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from baton.bus.errors import BusError
from baton.errors import installed_version
from baton.server.mcp import media
from baton.server.mcp.backend import STATE_AUDIENCE, McpBackend, state_security
from baton.server.mcp.call import Call
from baton.server.mcp.revisions import has_tasks
from baton.server.mcp.task_methods import LegacyTasks, TasksExtension
from baton.server.mcp.tools import call_tool, tool_list

RESOURCE_NOT_FOUND_LEGACY = -32002
"""2025-11-25's code for an unknown resource (2026-07-28 uses ``-32602``)."""
LIST_SESSIONS = 20
"""``resources/list`` names the media of the newest this many sessions of the bus."""

INSTRUCTIONS = (
    "baton runs multi-agent sessions: `run` hands a task to a lead agent that delegates to "
    "sub-agents (see `profiles`) and returns the final answer with the media they made. "
    "`state`, `post` and `cancel` reach any session of the bus by its id."
)


class BatonMcpServer(Server[Any]):
    """The SDK's server, declaring 2025-11-25's ``tasks`` capability beside the handlers'."""

    def get_capabilities(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
        *,
        protocol_version: str | None = None,
    ) -> ServerCapabilities:
        capabilities = super().get_capabilities(
            notification_options,
            experimental_capabilities,
            extensions,
            protocol_version=protocol_version,
        )
        tasks = ServerTasksCapability(
            cancel=TasksCancelCapability(),
            requests=ServerTasksRequestsCapability(
                tools=TasksToolsCapability(call=TasksCallCapability())
            ),
        )
        return capabilities.model_copy(update={"tasks": tasks})


def build_server(backend: McpBackend) -> BatonMcpServer:
    """The MCP server over ``backend`` (see the module docstring)."""

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        return ListToolsResult(tools=tool_list(ctx.protocol_version))

    async def on_call_tool(
        ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams
    ) -> CallToolResult | InputRequiredResult:
        return await call_tool(Call(ctx, backend), params)

    async def list_resources(
        ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListResourcesResult:
        try:
            sessions = (await backend.bus.log.sessions())[:LIST_SESSIONS]
        except BusError:
            sessions = []
        return ListResourcesResult(
            resources=await media.list_resources(backend.media_root, sessions)
        )

    async def list_templates(
        ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListResourceTemplatesResult:
        return ListResourceTemplatesResult(resource_templates=[media.template()])

    async def read_resource(
        ctx: ServerRequestContext[Any, Any], params: ReadResourceRequestParams
    ) -> ReadResourceResult:
        contents = await media.read_resource(backend.media_root, params.uri)
        if contents is None:
            modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
            raise MCPError(
                code=INVALID_PARAMS if modern else RESOURCE_NOT_FOUND_LEGACY,
                message="Resource not found",
                data={"uri": params.uri[:300]},
            )
        return ReadResourceResult(contents=[contents])

    server = BatonMcpServer(
        "baton",
        version=installed_version(),
        title="baton",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=on_call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
    )
    boundary = RequestStateBoundary(
        state_security(backend.config.token), default_audience=STATE_AUDIENCE
    )
    legacy = LegacyTasks(backend)
    server.middleware.extend([boundary, legacy])
    extension = TasksExtension(backend)
    server.add_request_handler(
        "tools/call", CallToolRequestParams, compose_tool_call_handler([extension], on_call_tool)
    )
    modern = {binding.method: binding for binding in extension.methods()}
    older = legacy.handlers()
    for method in sorted(modern.keys() | older.keys()):
        binding = modern.get(method) or older[method]
        server.add_request_handler(
            method, binding.params_type, _by_era(modern.get(method), older.get(method))
        )
    server.extensions[extension.identifier] = extension.settings()
    return server


def _by_era(modern: MethodBinding | None, legacy: MethodBinding | None) -> Any:
    """One handler for a method both revisions name (``tasks/get``): each request goes to its
    own revision's, and a method the request's revision lacks is ``-32601``."""

    async def route(ctx: ServerRequestContext[Any, Any], params: Any) -> HandlerResult:
        binding = modern if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS else legacy
        if binding is legacy and not has_tasks(ctx.protocol_version):
            binding = None  # a revision before tasks: not offered (:mod:`.revisions`)
        if binding is None:
            raise MCPError(code=METHOD_NOT_FOUND, message="Method not found", data=ctx.method)
        return await binding.handler(ctx, params)

    return route
