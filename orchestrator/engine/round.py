"""One tool round: verdict, interceptor chain, execution, merge.

The pipeline of reference 000, step by step:

1. begin the round on the turn, which returns the verdict;
2. resolve each call's tool and validate its arguments (problems become recovery hints);
3. run the interceptor chain in its fixed order — loop guard → call check → human approval →
   file upload → image reference; each may claim calls, and a claimed call is neither run nor seen
   by the interceptors after it;
4. run the unclaimed calls, concurrently;
5. merge every answer back in the model's original call order, collect media URLs and follow-up
   messages, and note a terminal call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import ValidationError

from baton.engine import messages
from baton.engine.approval import HumanApproval
from baton.engine.calls import Answer, Interceptor, PendingCall, RoundContext
from baton.engine.execute import execute
from baton.engine.guards import CallCheck, LoopGuard
from baton.engine.media import FileUpload, ImageReference
from baton.engine.tools import ToolRegistry
from baton.engine.turn import Verdict
from baton.llm.types import Message, ToolCall

CHAIN: tuple[Interceptor, ...] = (
    LoopGuard(),
    CallCheck(),
    HumanApproval(),
    FileUpload(),
    ImageReference(),
)
"""The interceptors, in their fixed order. They are stateless, so one chain serves every loop."""


@dataclass(frozen=True, slots=True)
class RoundOutcome:
    """What one round produced, in the model's call order."""

    verdict: Verdict
    results: tuple[tuple[ToolCall, Answer], ...]
    terminal_call: ToolCall | None
    media_urls: tuple[str, ...]
    followups: tuple[Message, ...]

    @property
    def news(self) -> bool:
        """A tool asked for the turn to end after this round (``ToolResult.ends_turn``)."""
        return any(answer.ends_turn for _, answer in self.results)

    @property
    def ends_loop(self) -> bool:
        """A terminal call ran, a tool asked for the turn to end, or the verdict ends it."""
        return (
            self.terminal_call is not None
            or self.news
            or self.verdict
            in (
                Verdict.HARD_STOP,
                Verdict.CANCELLED,
            )
        )


def describe_validation(error: ValidationError) -> str:
    """A short, model-readable account of what is wrong with the arguments."""
    parts = []
    for item in error.errors(include_url=False)[:8]:
        where = ".".join(str(part) for part in item["loc"]) or "arguments"
        parts.append(f"{where}: {item['msg']}")
    return "; ".join(parts) + "."


def prepare(index: int, call: ToolCall, tools: ToolRegistry) -> PendingCall:
    """Resolve the tool and validate the arguments; a failure becomes the call's recovery hint."""
    tool = tools.get(call.name)
    if tool is None:
        return PendingCall(index, call, None, None, messages.unknown_tool(call.name, tools.names))
    try:
        args = tool.parse(call.arguments)
    except ValidationError as exc:
        hint = messages.invalid_arguments(call.name, describe_validation(exc))
        return PendingCall(index, call, tool, None, hint)
    return PendingCall(index, call, tool, args)


async def run_round(calls: Sequence[ToolCall], ctx: RoundContext) -> RoundOutcome:
    """Govern and run one round of tool calls; never raises for a call's own fault."""
    ctx.verdict = ctx.turn.begin_round()
    ctx.followups = []
    pending = [prepare(index, call, ctx.tools) for index, call in enumerate(calls)]
    answers: dict[str, Answer] = {}
    remaining: Sequence[PendingCall] = pending
    for interceptor in CHAIN:
        if not remaining:
            break
        claimed = await interceptor.intercept(remaining, ctx)
        if claimed:
            answers.update(claimed)
            remaining = [call for call in remaining if call.id not in claimed]
    if remaining:
        answers.update(await execute(remaining, ctx))
    results = tuple((call, answers[call.id]) for call in calls)
    terminal = next((call for call, answer in results if answer.terminal), None)
    media = tuple(url for _, answer in results for url in answer.media_urls)
    return RoundOutcome(ctx.verdict, results, terminal, media, tuple(ctx.followups))
