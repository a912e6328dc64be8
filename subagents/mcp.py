"""MCP servers' tools as baton tools, under the same governance as every other tool.

An MCP server's tool becomes a :class:`McpTool`, an ordinary :class:`~baton.engine.Tool` whose
schema is the server's ``inputSchema`` and whose arguments are validated against it (JSON Schema)
before the call, so the engine's approval gate, per-tool timeout, result truncation, repeat guard
and telemetry treat it like any Python tool: there is no second path for MCP calls. Its
``source`` (``mcp:<server>``) reaches the ``hitl.decision`` counter.

:class:`McpServers` holds the connections of one process's worker (or of a session's lead): one
per declared server, shared by every agent that uses it, started lazily on the first agent that
needs it, and closed with its owner. A connection that dies (the process exited, the HTTP server
went away) fails the calls in flight with an error result the model can read, and is restarted on
the next call, after a backoff that grows while it keeps dying. Every wait is bounded: starting a
server and listing its tools by ``startup_timeout_s``, a call by the engine's per-tool timeout,
closing by :data:`CLOSE_S`. A stdio server runs under :mod:`.mcp_guard` (on POSIX), so it dies
with the process that started it even when that process is killed outright (``kill -9``), when
nothing of the SDK's graceful stop can run.

Images, audio and embedded resources in a result are put in the media store (a sub-agent's
process's, :func:`baton.subagents.context.media_store`; the lead's session's) and handed back as
the tool's media URLs, like the painter's pictures.
"""

from __future__ import annotations

import base64
import binascii
import errno
import hashlib
import json
import logging
import os
import re
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TextIO, cast

import anyio
import httpx2
import mcp_types
from anyio.abc import TaskGroup, TaskStatus
from jsonschema import SchemaError
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for
from mcp import Client, MCPError, StdioServerParameters, stdio_client
from mcp.client.stdio import get_default_environment
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CONNECTION_CLOSED, INVALID_REQUEST
from pydantic_core import InitErrorDetails, PydanticCustomError, ValidationError
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from baton.bus.lifecycle import Service
from baton.bus.redact import redact_text
from baton.engine import Tool, ToolResult, ToolRun
from baton.engine.tools import Arguments
from baton.errors import ConfigError
from baton.media import MediaStore, extension_for
from baton.subagents.context import current_agent
from baton.subagents.mcp_config import McpServerConfig, McpServerUnavailable

log = logging.getLogger(__name__)

MediaSink = Callable[[bytes, str], Awaitable[str]]
"""``put(data, content_type) -> URL``: where a tool's images and resources go (a media store,
under a name the sink gives them)."""

START_ATTEMPTS = 3
"""Tries at starting a server before its caller gets an error (each within its startup bound)."""
RESTART_INITIAL_S = 0.2
RESTART_MAX_S = 5.0
"""The backoff before restarting a server that died: doubling from the first, capped at the
second, reset by a call that succeeds (a server that crashes on every call is not restarted in a
tight loop)."""
CLOSE_S = 5.0
"""How long closing waits for the connections to end on their own before cancelling them (a
stdio server gets its stdin closed, then SIGTERM, then SIGKILL, each bounded by the SDK)."""
LIST_PAGES = 100
"""Pages of a tools listing read at most: a server that paginates for ever cannot hang a start."""
STDERR_TAIL = 600
"""Characters of a stdio server's stderr quoted when it fails: the reason is usually there."""


GUARD = Path(__file__).with_name("mcp_guard.py")
"""The script that starts a stdio server and kills it with its worker (:mod:`.mcp_guard`)."""


def guarded(command: str, args: list[str], env: dict[str, str]) -> tuple[str, list[str]]:
    """The command and arguments that start a stdio server under :mod:`.mcp_guard`, so that it
    dies with this process even when this process is killed outright (``kill -9``); on POSIX.

    A command that cannot be found fails here, as the SDK's own start would, rather than in the
    guard (whose stderr would say it less directly)."""
    if os.name != "posix":
        return command, args
    if os.sep not in command or os.path.isabs(command):
        path = (get_default_environment() | env).get("PATH")
        if shutil.which(command, path=path) is None:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), command)
    return sys.executable, ["-I", str(GUARD), str(os.getpid()), "--", command, *args]


class McpCallFailed(Exception):
    """A call did not get a result from its server; the message is what the model reads."""


class _Unreachable(Exception):
    """A connection could not be started (the message says why)."""


# -- media -------------------------------------------------------------------------------------


def media_key(prefix: str, data: bytes, content_type: str) -> str:
    """``prefix-mcp-<digest><ext>``: the same bytes get the same name, so a re-run replaces its
    own file rather than adding one."""
    digest = hashlib.sha256(data).hexdigest()[:12]
    return f"{prefix}-mcp-{digest}{extension_for(content_type)}"


async def agent_media(data: bytes, content_type: str) -> str:
    """A sub-agent's sink: its process's media store, under its session and name."""
    agent = current_agent()
    name = media_key(f"{agent.session}/{agent.agent}", data, content_type)
    return await agent.media_store().put(data, name, content_type)


def store_media(store: MediaStore, prefix: str) -> MediaSink:
    """A sink into ``store`` with names under ``prefix`` (the lead's: ``<session>/lead``)."""

    async def put(data: bytes, content_type: str) -> str:
        return await store.put(data, media_key(prefix, data, content_type), content_type)

    return put


# -- one connection ------------------------------------------------------------------------------


@dataclass(slots=True)
class _Live:
    """A started connection; ``ended`` is set once it is unusable (it died, or it is closing)."""

    client: Client
    ended: anyio.Event
    tools: list[mcp_types.Tool] | None = None


class McpConnection:
    """One server's connection in this process: started on first use, restarted after it dies.

    The SDK's client owns a task group, so it lives in a task of the owning :class:`McpServers`
    and callers in any agent's task share it (the SDK multiplexes their requests).
    """

    def __init__(self, name: str, config: McpServerConfig, group: TaskGroup) -> None:
        self.name = name
        self.config = config
        self._group = group
        self._lock = anyio.Lock()
        self._live: _Live | None = None
        self._running = 0
        self._gone = anyio.Event()
        self._gone.set()
        self._deaths = 0
        self._errlog: IO[str] | None = None
        self.starts = 0
        """How many times the server was started (a restart counts again)."""

    @property
    def is_open(self) -> bool:
        """Whether a started connection is up now."""
        return self._live is not None and not self._live.ended.is_set()

    # -- the calls ------------------------------------------------------------------------------

    async def list_tools(self) -> list[mcp_types.Tool]:
        """The server's tools (asked once per start); raises ``_Unreachable``."""
        live = await self._connected()
        if live.tools is None:
            try:
                with anyio.fail_after(self.config.startup_timeout_s):
                    live.tools = await _all_tools(live.client)
            except TimeoutError:
                self._died(live)
                raise _Unreachable(
                    f"it did not list its tools within {self.config.startup_timeout_s:g} s"
                ) from None
            except Exception as exc:
                self._died(live)
                raise _Unreachable(f"listing its tools failed: {_why(exc)}{self._tail()}") from exc
        return live.tools

    async def call(self, tool: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        """Call ``tool``; a connection lost meanwhile is an error for this call and a restart for
        the next. Raises :class:`McpCallFailed` with the text the model reads."""
        try:
            live = await self._connected()
        except _Unreachable as exc:
            raise McpCallFailed(f"MCP server {self.name!r} cannot start: {exc}") from exc
        try:
            result = await _unless_ended(live, tool, arguments)
        except MCPError as exc:
            if not _connection_lost(exc):
                raise McpCallFailed(
                    f"MCP server {self.name!r} refused the call: {exc.error.message}"
                ) from exc
            self._died(live)
            raise McpCallFailed(self._lost(exc)) from exc
        except Exception as exc:  # a transport fault: the connection is not to be trusted again
            self._died(live)
            raise McpCallFailed(self._lost(exc)) from exc
        if result is None:  # the connection ended under the call
            raise McpCallFailed(self._lost(ConnectionError("the connection ended")))
        self._deaths = 0
        return result

    def _lost(self, exc: BaseException) -> str:
        return (
            f"MCP server {self.name!r} went away during the call ({_why(exc)}); it is restarted "
            "for the next call"
        )

    # -- starting and stopping ------------------------------------------------------------------

    async def _connected(self) -> _Live:
        live = self._live
        if live is not None and not live.ended.is_set():
            return live
        async with self._lock:  # one start at a time; the others wait for it
            live = self._live
            if live is None or live.ended.is_set():
                live = self._live = await self._start()
            return live

    async def _start(self) -> _Live:
        if self._deaths:
            delay = min(RESTART_INITIAL_S * 2 ** (self._deaths - 1), RESTART_MAX_S)
            log.info("restarting MCP server %s in %.1f s", self.name, delay)
            await anyio.sleep(delay)
        retrying = AsyncRetrying(
            stop=stop_after_attempt(START_ATTEMPTS),
            wait=wait_exponential(multiplier=RESTART_INITIAL_S, max=RESTART_MAX_S),
            retry=retry_if_exception_type(Exception),
            reraise=True,
            sleep=anyio.sleep,
        )
        timeout_s = self.config.startup_timeout_s
        try:
            with anyio.fail_after(timeout_s):
                live: _Live = await retrying(self._start_once)
        except TimeoutError:
            self._deaths += 1
            raise _Unreachable(f"not started within {timeout_s:g} s{self._tail()}") from None
        except Exception as exc:
            self._deaths += 1
            raise _Unreachable(f"{_why(exc)}{self._tail()}") from exc
        self.starts += 1
        log.info("MCP server %s started (%s)", self.name, self.config.where())
        return live

    async def _start_once(self) -> _Live:
        live: _Live = await self._group.start(self._serve)
        return live

    async def _serve(self, *, task_status: TaskStatus[_Live]) -> None:
        """Hold one connection open until it ends (the server died, or closing began)."""
        live: _Live | None = None
        if not self._running:
            self._gone = anyio.Event()
        self._running += 1
        try:
            async with Client(self._transport(), cache=None) as client:
                live = _Live(client, anyio.Event())
                task_status.started(live)
                await live.ended.wait()
        except Exception as exc:
            if live is None:
                raise  # tg.start() hands it to the caller
            log.warning("MCP server %s ended: %s%s", self.name, _why(exc), self._tail())
        finally:
            if live is not None:
                live.ended.set()
            self._running -= 1
            if not self._running:
                self._gone.set()

    def _transport(self) -> Any:
        """The SDK transport (an async context manager of streams) for this server."""
        config = self.config
        if config.url is not None:
            return _http_transport(config.url, config.headers)
        assert config.command is not None
        if self._errlog is None:
            self._errlog = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
        else:  # a restart: only the new process's words are quoted
            os.ftruncate(self._errlog.fileno(), 0)
            self._errlog.seek(0)
        command, args = guarded(config.command, list(config.args), dict(config.env))
        params = StdioServerParameters(command=command, args=args, env=dict(config.env),
                                       cwd=config.cwd)  # fmt: skip
        return stdio_client(params, errlog=cast(TextIO, self._errlog))

    def _died(self, live: _Live) -> None:
        if not live.ended.is_set():
            self._deaths += 1
            log.warning("MCP server %s: connection lost%s", self.name, self._tail())
            live.ended.set()

    def _tail(self) -> str:
        """The end of a stdio server's stderr, as a clause for an error message."""
        errlog = self._errlog
        if errlog is None:
            return ""
        try:  # pread: the server shares the file's offset, so this must not move it
            fd = errlog.fileno()
            size = os.fstat(fd).st_size
            start = max(0, size - 4 * STDERR_TAIL)
            raw = os.pread(fd, size - start, start)
        except (OSError, ValueError):
            return ""
        text = " ".join(raw.decode("utf-8", "replace").split())
        return f" (its stderr: {text[-STDERR_TAIL:]})" if text else ""

    def stop(self) -> None:
        """Signal the connection to close; :meth:`wait_closed` waits for it."""
        if self._live is not None:
            self._live.ended.set()

    async def wait_closed(self) -> None:
        await self._gone.wait()

    def close_log(self) -> None:
        if self._errlog is not None:
            self._errlog.close()
            self._errlog = None


def _connection_lost(exc: MCPError) -> bool:
    """Whether the error says the connection is gone (its end, or an HTTP server that no longer
    knows the session: restarted, or it dropped an idle one), not that the call was refused."""
    if exc.code == CONNECTION_CLOSED:
        return True
    return exc.code == INVALID_REQUEST and exc.message == "Session terminated"


async def _unless_ended(
    live: _Live, tool: str, arguments: dict[str, Any]
) -> mcp_types.CallToolResult | None:
    """The call's result, or None once the connection ended first: whatever the transport does
    with a request in flight when its server goes away, the caller never waits on a dead one."""
    result: mcp_types.CallToolResult | None = None
    async with anyio.create_task_group() as group:

        async def watch() -> None:
            await live.ended.wait()
            group.cancel_scope.cancel()

        group.start_soon(watch)
        result = await live.client.call_tool(tool, arguments)
        group.cancel_scope.cancel()
    return result


@asynccontextmanager
async def _http_transport(url: str, headers: Mapping[str, str]) -> AsyncIterator[Any]:
    """Streamable HTTP with the server's own headers (an ``Authorization`` token, say)."""
    timeout = httpx2.Timeout(30.0, read=300.0)  # the SDK's defaults: a response may stream long
    async with (
        httpx2.AsyncClient(headers=dict(headers), timeout=timeout) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


async def _all_tools(client: Client) -> list[mcp_types.Tool]:
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    for _ in range(LIST_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def _why(exc: BaseException) -> str:
    """An exception in one line (an exception group by its first leaf)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"


# -- the connections of one owner -----------------------------------------------------------------


class McpServers(Service):
    """The MCP connections of one worker (or one lead), closed with it; see the module docstring.

    Servers are keyed by name and configuration, so profiles that declare the same server share
    one connection, and two different servers of one name never do.
    """

    def __init__(self) -> None:
        super().__init__()
        self._group: TaskGroup | None = None
        self._connections: dict[tuple[str, str], McpConnection] = {}

    async def _open(self, stack: AsyncExitStack) -> None:
        self._group = await stack.enter_async_context(anyio.create_task_group())
        stack.push_async_callback(self._close)  # unwound first: then the group exits

    async def _close(self) -> None:
        connections = list(self._connections.values())
        for connection in connections:
            connection.stop()
        with anyio.move_on_after(CLOSE_S, shield=True):
            for connection in connections:
                await connection.wait_closed()
        assert self._group is not None
        self._group.cancel_scope.cancel()  # whatever did not end in time
        for connection in connections:
            connection.close_log()

    @property
    def connections(self) -> list[McpConnection]:
        return list(self._connections.values())

    def connection(self, name: str, config: McpServerConfig) -> McpConnection:
        """The one connection of this server (made now, started on first use)."""
        if self._group is None:
            raise RuntimeError("McpServers is not open: use `async with McpServers()`")
        key = (name, config.model_dump_json())
        found = self._connections.get(key)
        if found is None:
            found = self._connections[key] = McpConnection(name, config, self._group)
        return found

    async def tools_for(
        self,
        owner: str,
        servers: Mapping[str, McpServerConfig],
        media: MediaSink,
        *,
        taken: Collection[str] = (),
    ) -> list[McpTool]:
        """The tools ``owner`` (``profile 'clock'``, ``the lead``) is offered by its servers,
        starting each server to ask it; raises :class:`McpServerUnavailable` naming the owner and
        the server, or ``ConfigError`` when two tools would share a name."""
        made: list[McpTool] = []
        names = set(taken)
        for name, config in servers.items():
            connection = self.connection(name, config)
            try:
                specs = await connection.list_tools()
            except _Unreachable as exc:
                problem = redact_text(str(exc), config.url) if config.url else str(exc)
                raise McpServerUnavailable(owner, name, problem) from exc
            for spec in specs:
                if not config.allows(spec.name):
                    continue
                tool_name = local_name(spec.name)
                if tool_name in names:
                    raise ConfigError(
                        f"{owner}: MCP server {name!r} offers a tool named {tool_name!r}, and "
                        "another tool has that name: narrow the server's `allow`"
                    )
                names.add(tool_name)
                made.append(McpTool(connection, spec, owner=owner, media=media, name=tool_name))
        return made


def local_name(remote: str) -> str:
    """An MCP tool name as a baton tool name (1-64 letters, digits, ``_`` or ``-``)."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", remote)[:64] or "tool"


# -- the tool ------------------------------------------------------------------------------------


class McpTool(Tool):
    """One MCP tool, governed like any :class:`~baton.engine.Tool` (see the module docstring)."""

    __slots__ = ("_connection", "_media", "_owner", "_remote", "_validator", "server")

    def __init__(
        self,
        connection: McpConnection,
        spec: mcp_types.Tool,
        *,
        owner: str,
        media: MediaSink,
        name: str | None = None,
    ) -> None:
        config = connection.config

        async def call_server() -> None:
            """Never called: :meth:`McpTool.invoke` speaks to the server."""

        super().__init__(
            call_server,
            name=name or local_name(spec.name),
            description=spec.description or f"{spec.name} (MCP server {connection.name})",
            needs_approval=config.gated(spec.name),
            run=ToolRun(timeout_s=config.timeout_s, max_result_chars=config.max_result_chars),
        )
        self.source = f"mcp:{connection.name}"
        parameters = _parameters(spec.input_schema)
        self.schema = {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": parameters,
            },
        }
        self._validator = _validator(parameters, spec.name, connection.name)
        self._connection = connection
        self._remote = spec.name
        self._owner = owner
        self._media = media
        self.server = connection.name

    def __repr__(self) -> str:
        return f"McpTool({self.name!r}, server={self.server!r})"

    def parse(self, arguments: str) -> dict[str, object]:
        """Validate the model's JSON arguments against the server's schema; raises
        ``pydantic.ValidationError`` (the engine's recovery hint), as every tool does."""
        try:
            value = json.loads(arguments or "{}")
        except ValueError as exc:
            raise _invalid(self.name, [((), f"not valid JSON: {exc}")], arguments) from None
        if not isinstance(value, dict):
            raise _invalid(self.name, [((), "must be a JSON object")], value)
        errors = sorted(self._validator.iter_errors(value), key=lambda e: list(map(str, e.path)))
        if errors:
            found = [(tuple(e.absolute_path), e.message) for e in errors[:8]]
            raise _invalid(self.name, found, value)
        return value

    async def invoke(self, args: Arguments) -> ToolResult:
        result = await self._connection.call(self._remote, dict(args))
        return await _as_result(result, self._media)


def _parameters(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The server's input schema as a function's parameters (an object, with properties)."""
    parameters = dict(schema)
    parameters.setdefault("type", "object")
    parameters.setdefault("properties", {})
    return parameters


def _validator(schema: dict[str, Any], tool: str, server: str) -> Validator:
    cls = validator_for(schema)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        log.warning("MCP server %s: tool %s has an invalid input schema (%s); only an object "
                    "is required of its arguments", server, tool, exc.message)  # fmt: skip
        loose = {"type": "object"}
        return validator_for(loose)(loose)
    return cls(schema)


def _invalid(
    tool: str, errors: list[tuple[tuple[str | int, ...], str]], value: object
) -> ValidationError:
    details = [
        InitErrorDetails(
            type=PydanticCustomError("mcp_schema", "{reason}", {"reason": message}),
            loc=loc,
            input=value,
        )
        for loc, message in errors
    ]
    return ValidationError.from_exception_data(f"{tool} arguments", details)


async def _as_result(result: mcp_types.CallToolResult, media: MediaSink) -> ToolResult:
    """Text as text; images, audio and resources saved and returned as media URLs; an error
    result raised, so the model is told the call failed."""
    parts: list[str] = []
    urls: list[str] = []
    for block in result.content:
        if isinstance(block, mcp_types.TextContent):
            parts.append(block.text)
        elif isinstance(block, mcp_types.ImageContent | mcp_types.AudioContent):
            url = await media(_decode(block.data), block.mime_type)
            urls.append(url)
            parts.append(f"[{block.type} {block.mime_type}: {url}]")
        elif isinstance(block, mcp_types.EmbeddedResource):
            url, text = await _store_resource(media, block.resource)
            urls.append(url)
            parts.append(f"[resource {block.resource.uri}: {url}]")
            if text is not None:
                parts.append(text)
        elif isinstance(block, mcp_types.ResourceLink):
            parts.append(f"[resource link {block.uri} ({block.name})]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content))
    text = "\n".join(parts)
    if result.is_error:
        raise McpCallFailed(text or "the server reported an error without a message")
    return ToolResult(text or "done", urls)


async def _store_resource(
    media: MediaSink,
    resource: mcp_types.TextResourceContents | mcp_types.BlobResourceContents,
) -> tuple[str, str | None]:
    if isinstance(resource, mcp_types.TextResourceContents):
        kind = resource.mime_type or "text/plain"
        return await media(resource.text.encode(), kind), resource.text
    kind = resource.mime_type or "application/octet-stream"
    return await media(_decode(resource.blob), kind), None


def _decode(data: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise McpCallFailed(f"the server sent undecodable base64 media: {exc}") from exc
