"""Running the calls governance let through.

Unclaimed calls of a round run concurrently in one task group (the model asked for them together,
so none depends on another's result), each under its tool's timeout and inside an ``execute_tool``
span. A tool that raises is answered with the error text so the model can adapt; a tool that runs
too long is stopped and the model told so. Results longer than the limit are cut, with a note
saying how much was lost. Cancellation of the turn is never caught here: it stops every tool.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import anyio

from baton.engine import messages
from baton.engine.calls import Answer, PendingCall, RoundContext
from baton.engine.errors import ToolTimeout
from baton.engine.tools import ToolResult

log = logging.getLogger(__name__)


def truncate(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, with a note of how much was cut."""
    if len(text) <= limit:
        return text
    return text[:limit] + messages.truncated(limit, len(text))


async def execute(calls: Sequence[PendingCall], ctx: RoundContext) -> dict[str, Answer]:
    """Run every call (concurrently when several); answers keyed by call id."""
    if not calls:
        return {}
    if len(calls) == 1:  # the common case: no task group needed
        return {calls[0].id: await run_call(calls[0], ctx)}
    answers: dict[str, Answer] = {}

    async def run_into(call: PendingCall) -> None:
        answers[call.id] = await run_call(call, ctx)

    async with anyio.create_task_group() as group:
        for call in calls:
            group.start_soon(run_into, call)
    return answers


async def run_call(call: PendingCall, ctx: RoundContext) -> Answer:
    """Run one validated call and turn whatever happens into the model's answer."""
    tool, args = call.tool, call.args
    if tool is None or args is None:  # the call check claims these; defend anyway
        return Answer(
            call.problem or messages.unknown_tool(call.name, ctx.tools.names), is_error=True
        )
    limits = ctx.limits
    timeout_s = tool.run.timeout_s if tool.run.timeout_s is not None else limits.tool_timeout_s
    result: ToolResult | None = None
    with ctx.telemetry.tool_span(tool.name, call.id) as span:
        try:
            if timeout_s is None:
                result = await tool.invoke(args)
            else:
                with anyio.move_on_after(timeout_s):
                    result = await tool.invoke(args)
        except Exception as exc:  # a tool's own fault is the model's information, not a crash
            span.fail(type(exc).__qualname__)
            log.info("tool %s (call %s) raised %r", tool.name, call.id, exc)
            return Answer(messages.tool_failed(tool.name, exc), synthetic=False, is_error=True)
        if result is None:  # the timeout scope cancelled the tool
            error = ToolTimeout(tool.name, timeout_s or 0.0)
            span.fail(type(error).__qualname__)
            log.warning("%s (call %s)", error, call.id)
            return Answer(
                messages.tool_timed_out(tool.name, error.timeout_s), synthetic=False, is_error=True
            )
    limit = tool.run.max_result_chars or limits.max_result_chars
    return Answer(
        truncate(result.content, limit),
        result.media_urls,
        synthetic=False,
        terminal=tool.is_terminal(args),
        blocked=result.blocked,
        ends_turn=result.ends_turn,
    )
