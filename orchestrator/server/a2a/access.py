"""What a session token may do over A2A: the rules of :mod:`baton.server.access`, per operation.

A session token opens one session (docs/http.md, *Session tokens*); over A2A that session is
one task (docs/a2a.md: the task id is the session id). Over HTTP the guard decides from the
method and the path alone; an A2A request names its task in the body too (JSON-RPC always,
HTTP+JSON for ``message:send``), so for a session token the guard reads the body first
(bounded, and handed on unchanged) and decides here, before the SDK or any handler runs:

- read: ``GetTask`` and ``SubscribeToTask`` of its own task;
- write: also ``SendMessage``/``SendStreamingMessage`` to its own task named by ``taskId`` (a
  follow-up, an approval answer) and ``CancelTask`` of it;
- anything else (a new task, a message naming only a context, which may start the context's
  next task or reach another of its tasks, ``ListTasks``, push configs, the extended card): the
  admin token. Another task of the same context is another task: its own token or the admin's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from baton.server.a2a.contexts import context_of
from baton.server.a2a.paths import JSONRPC_PATH, REST_PREFIX
from baton.server.a2a.wellformed import Malformed, read_json

Need = Literal["read", "write", "admin"]

READS = frozenset({"GetTask", "SubscribeToTask"})
WRITES = frozenset({"SendMessage", "SendStreamingMessage", "CancelTask"})
MESSAGES = frozenset({"SendMessage", "SendStreamingMessage"})
_REST_TASK = re.compile(r"^/(?:[^/]+/)?tasks/([^/:]+)(:cancel|:subscribe)?$")
_REST_SEND = re.compile(r"^/(?:[^/]+/)?message:(send|stream)$")


@dataclass(frozen=True, slots=True)
class Target:
    """What an A2A request asks for: the scope it needs and the task (session) it touches."""

    need: Need
    task: str | None = None


def _message_task(params: Any) -> str | None:
    """The task a ``SendMessage`` body continues: its ``taskId`` (with no ``contextId``, or the
    task's own); None (admin only) otherwise.

    A message naming only a ``contextId`` may start the context's next task, or reach whichever
    task of the context runs now (docs/a2a.md, *Ids*): which, only the bus can tell, so it is the
    admin token's. The SDK's protobuf parser takes both spellings of a field (``taskId`` and
    ``task_id``) and keeps whichever comes last, and an empty id starts a new task: so a field
    given twice, or an id that is not a string, makes the request admin-only too, lest the guard
    and the handler read different tasks from one body."""
    message = params.get("message") if isinstance(params, dict) else None
    if not isinstance(message, dict):
        return None
    named: list[str] = []
    for spellings in (("taskId", "task_id"), ("contextId", "context_id")):
        given = [message[key] for key in spellings if key in message]
        if len(given) > 1 or not all(isinstance(value, str) for value in given):
            return None
        named.append(given[0] if given else "")
    task, context = named
    if not task or (context and context != context_of(task)):
        return None
    return task


def jsonrpc_target(body: bytes) -> Target:
    """The target of a JSON-RPC request; unreadable, malformed or unknown: admin only (the
    guard answers a malformed one with its JSON-RPC error before asking: :mod:`.wellformed`)."""
    try:
        request = read_json(body)
    except Malformed:
        return Target("admin")
    if not isinstance(request, dict):  # a batch, or nonsense: only the admin token
        return Target("admin")
    method, params = request.get("method"), request.get("params")
    if not isinstance(method, str):
        return Target("admin")
    if method in MESSAGES:
        task = _message_task(params)
        return Target("write", task) if task else Target("admin")
    task_id = params.get("id") if isinstance(params, dict) else None
    if not isinstance(task_id, str) or not task_id:
        return Target("admin")
    if method in READS:
        return Target("read", task_id)
    if method == "CancelTask":
        return Target("write", task_id)
    return Target("admin")


def rest_target(method: str, rest: str, body: bytes) -> Target:
    """The target of an HTTP+JSON request (``rest`` is the path under the prefix)."""
    found = _REST_TASK.match(rest)
    if found is not None:
        task, action = found.group(1), found.group(2)
        if action == ":cancel" and method == "POST":
            return Target("write", task)
        if action in (None, ":subscribe") and method in ("GET", "POST"):
            return Target("read", task) if action or method == "GET" else Target("admin")
        return Target("admin")
    if _REST_SEND.match(rest) and method == "POST":
        try:
            task = _message_task(read_json(body))
        except Malformed:
            task = None
        return Target("write", task) if task else Target("admin")
    return Target("admin")


def target_of(method: str, path: str, body: bytes) -> Target:
    """What the request at ``path`` (an A2A path) needs."""
    if path == JSONRPC_PATH:
        return jsonrpc_target(body) if method == "POST" else Target("admin")
    return rest_target(method, path.removeprefix(REST_PREFIX), body)


def refusal(session: str, scope: str, target: Target) -> str | None:
    """Why a ``scope`` token of ``session`` may not make the request (the 403); None: it may."""
    if target.need == "admin":
        return (
            f"this token is for session {session!r} only: over A2A it may read that task"
            f"{' and send to it (by its taskId) or cancel it' if scope == 'write' else ''}; "
            "starting a task, a message naming only a contextId (it may start the context's "
            "next task), listing tasks and the rest need the admin token"
        )
    if target.task != session:
        return (
            f"this token is for session {session!r} only; task {target.task!r} needs its own "
            "token or the admin token"
        )
    if target.need == "write" and scope != "write":
        return (
            f"this token of session {session!r} is read-only: it cannot send to or cancel the "
            "task; use the session's write token or the admin token"
        )
    return None
