"""How much the lead may delegate in one turn, and the shapes of delegation small models get right.

Small models re-delegate in loops (13-19 ``send_message`` calls in one turn were seen on a 1.5B
model), so every turn of the lead has caps (:class:`DelegationLimits`): sends in all, new agents of
one profile, and sends to one agent. A capped send is refused with a text that says why and what
to do instead, and counts as *blocked* for the engine's blocked-rounds guard.

The same models call a profile as if it were a tool (``{"name": "painter", ...}``).
:func:`delegation_rewriter` turns such a call into the ``send_message`` it meant, and
:func:`profile_tools` can also offer one delegation tool per profile (``painter(task)``), for
models that do better with a tool per target than with a ``to`` parameter.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from baton.engine import Tool
from baton.engine.turn import normalise_text
from baton.llm.types import ToolCall

CONTENT_KEYS = ("content", "task", "prompt", "message", "description", "text")
"""Where a profile-named call's arguments usually hold the task, in order of preference."""
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


class DelegationLimits(BaseModel):
    """Caps on the lead's sends per turn (a turn: one model answer and its tool rounds), and on
    its delegation *waves* per request (a wave: a turn that sent to sub-agents). Small models
    re-delegate turn after turn with new wording each time (painter, helper, writer, painter-2,
    ... for one picture), which per-turn caps and the repeat guard cannot see."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    max_sends_per_turn: int = Field(8, ge=1, description="send_message calls that go through")
    max_new_agents_per_profile: int = Field(4, ge=1, description="agents started from a profile")
    max_sends_per_agent: int = Field(3, ge=1, description="messages to one agent")
    max_waves: int = Field(
        2,
        ge=1,
        description=(
            "lead turns that delegate (start or message sub-agents) per request from a person; "
            "once spent, the lead is asked to answer from the results, without tools"
        ),
    )


class Waves:
    """The lead's delegation waves for the current request, against ``limit``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.spent = 0

    def reset(self) -> None:
        """A new request from a person: its delegation starts over."""
        self.spent = 0

    def count(self, sent: int) -> None:
        """A turn of the lead ended having sent ``sent`` messages; it is a wave when any."""
        if sent:
            self.spent += 1

    @property
    def exhausted(self) -> bool:
        return self.spent >= self.limit


class TurnSends:
    """What the lead sent in the current turn, against its :class:`DelegationLimits`."""

    def __init__(self, limits: DelegationLimits) -> None:
        self.limits = limits
        self.sends = 0
        self.started: Counter[str] = Counter()
        self.to_agent: Counter[str] = Counter()

    def reset(self) -> None:
        """A new turn of the lead: every cap starts over."""
        self.sends = 0
        self.started.clear()
        self.to_agent.clear()

    def refusal(self, target: str, profile: str, start: bool) -> str | None:
        """Why a send to ``target`` would pass a cap (the text for the model), else None."""
        limits = self.limits
        if self.sends >= limits.max_sends_per_turn:
            return (
                f"Did not send: you already sent {self.sends} messages this turn, the most one "
                "turn may send. Do not delegate again now: answer the user with what you have; "
                "the results of what you sent will arrive and you will be called again."
            )
        if start and self.started[profile] >= limits.max_new_agents_per_profile:
            return (
                f"Did not send: you already started {self.started[profile]} {profile} agents this "
                f"turn, the most one turn may start. Give the rest to a running {profile} agent "
                "with type='message', or answer the user now; you will be called again."
            )
        if not start and self.to_agent[target] >= limits.max_sends_per_agent:
            return (
                f"Did not send: you already sent {self.to_agent[target]} messages to {target} "
                "this turn. Do not send it more now: its result will arrive in your inbox."
            )
        return None

    def count(self, target: str, profile: str, start: bool) -> None:
        self.sends += 1
        self.to_agent[target] += 1
        if start:
            self.started[profile] += 1


def content_key(args: Mapping[str, object]) -> str | None:
    """``send_message``'s repeat key: its normalised content, whatever the target, so the same
    task cycled over painter → helper → writer counts as one call repeated; with its ``items``,
    which make a shared instruction ("Paint this bird.") a different send for other items."""
    content = args.get("content", args.get("task"))
    if not isinstance(content, str) or args.get("type") == "shutdown":
        return None
    items = args.get("items")
    listed = [normalise_text(str(item)) for item in items] if isinstance(items, list) else []
    return "\n".join([normalise_text(content), *listed])


def task_of(arguments: str) -> str:
    """The task in a profile-named call's arguments: the first string under a usual key, else the
    arguments themselves (their JSON, or the raw text when it is not JSON)."""
    try:
        parsed = json.loads(arguments or "{}")
    except ValueError:
        return arguments.strip()
    if isinstance(parsed, dict):
        for key in CONTENT_KEYS:
            value = parsed.get(key)
            if isinstance(value, str) and value.strip():
                return value
        return json.dumps(parsed, ensure_ascii=False) if parsed else ""
    return parsed if isinstance(parsed, str) else json.dumps(parsed, ensure_ascii=False)


def delegation_rewriter(
    targets: Callable[[], Collection[str]], tools: Callable[[], Collection[str]], send_name: str
) -> Callable[[ToolCall], ToolCall | None]:
    """The lead's call rewriter: a call named after a profile or a running agent (and not after a
    real tool) becomes ``send_message(to=<that name>, content=<its task>, type="task")``.

    ``targets`` and ``tools`` are read per call, so the rewriter follows the roster.
    """

    def rewrite(call: ToolCall) -> ToolCall | None:
        if call.name in tools() or call.name not in targets():
            return None
        args = {"to": call.name, "content": task_of(call.arguments), "type": "task"}
        return ToolCall(id=call.id, name=send_name, arguments=json.dumps(args))

    return rewrite


Delegate = Callable[[str, str], Awaitable[object]]
"""``delegate(profile, task)`` -> the tool's result (what ``send_message`` would return)."""


def profile_tools(
    profiles: Mapping[str, str], delegate: Delegate, taken: Iterable[str]
) -> list[Tool]:
    """One delegation tool per profile, ``<profile>(task)``, starting a new agent of it.

    Profiles whose name is another tool's (``taken``) or no valid tool name are skipped: the
    ``send_message`` route still reaches them.
    """
    reserved = set(taken)
    made: list[Tool] = []
    for profile, description in profiles.items():
        if profile in reserved or not _TOOL_NAME.fullmatch(profile):
            continue
        made.append(_profile_tool(profile, description, delegate))
    return made


def _profile_tool(profile: str, description: str, delegate: Delegate) -> Tool:
    async def start(task: str) -> object:
        return await delegate(profile, task)

    start.__annotations__ = {
        "task": Annotated[str, Field(description="the task, self-contained")],
        "return": object,
    }
    return Tool(
        start,
        name=profile,
        repeat_key=content_key,
        description=(
            f"Start a new {profile} sub-agent on a task: {description} Give it everything it "
            "needs in `task`; its result arrives in your inbox later (do not wait for it)."
        ),
    )
