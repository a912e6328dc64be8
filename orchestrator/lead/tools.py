"""The lead's ``send_message`` tool: how it delegates, follows up and stops sub-agents.

Its semantics, in the tool's description and the system prompt: ``type="task"`` to a *profile*
name starts a new sub-agent of that profile (so independent tasks run in parallel); to an *agent*
name (``painter-2``, or ``painter`` with ``type="message"``) it is a follow-up to that agent.

Its ``to`` parameter is a plain string on purpose. The schema advertises the profile names and the
running agents as an ``enum`` (so a model — and the offline model, which assigns tasks round-robin
over that enum — picks real names, and can reach ``painter-2``); the lead rebuilds the tool as the
roster changes. Validation accepts any string, so a model that invents a name gets the lead's own
recovery hint listing the profiles and what each does, not a bare validation error.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Annotated, Any, Literal

from pydantic import Field

from baton.engine import Tool, ToolResult
from baton.lead.delegation import content_key
from baton.lead.items import MAX_ITEM_CHARS, MAX_ITEMS

SendKind = Literal["task", "message", "shutdown"]
Deliver = Callable[[str, str, SendKind, list[str] | None], Awaitable[str | ToolResult]]
"""``deliver(to, content, type, items)`` -> the text the model gets back."""

SEND_MESSAGE = "send_message"

ITEMS_SAID = (
    "the separate things the user asked for, one entry each (one thing: one entry); each entry "
    "gets its own new agent, told content and its entry"
)
"""The ``items`` parameter as the model reads it."""


def send_message_tool(deliver: Deliver, targets: Iterable[str]) -> Tool:
    """``send_message(to, content, type)`` bound to one lead's ``deliver``; ``targets`` (the
    profile names, then the running agents) become the ``to`` enum."""

    async def send_message(
        to: str, content: str, type: SendKind = "task", items: list[str] | None = None
    ) -> str | ToolResult:
        return await deliver(to, content, type, items)

    template = _send_message_template()
    names = list(dict.fromkeys(targets))
    parameters: dict[str, Any] = copy.deepcopy(dict(template.schema["function"]["parameters"]))
    # ``items`` is offered as a required plain list, after ``to`` and before ``content``, and
    # accepted missing or null: see _send_message_template.
    # Bounded as the runtime bounds them (lead/items.py): a server that decodes under the schema
    # (llama-server) then cannot loop in the list or in one item.
    declared = {
        "description": ITEMS_SAID,
        "items": {"maxLength": MAX_ITEM_CHARS, "type": "string"},
        "maxItems": MAX_ITEMS,
        "type": "array",
    }
    properties = parameters["properties"]
    parameters["properties"] = {
        "to": properties["to"],
        "items": declared,
        "content": properties["content"],
        "type": properties["type"],
    }
    parameters["required"] = ["to", "items", "content"]
    if names:  # where pydantic would put it: its schemas' keys are sorted
        to = {**parameters["properties"]["to"], "enum": names}
        parameters["properties"]["to"] = dict(sorted(to.items()))
    return template.bound_to(send_message, parameters=parameters)


async def _send_message(
    to: Annotated[
        str,
        Field(
            description=(
                "a profile name (type='task' starts a new agent of it) or a running agent's name "
                "(a follow-up to that agent)"
            )
        ),
    ],
    content: Annotated[str, Field(description="the task or message, self-contained")],
    type: Annotated[
        SendKind,
        Field(description="'task' for new work, 'message' to follow up, 'shutdown' to stop it"),
    ] = "task",
    items: Annotated[list[str] | None, Field(description=ITEMS_SAID)] = None,
) -> str | ToolResult:
    """Delegate to a sub-agent, follow one up, or stop one.

    type="task" to a profile name starts a NEW sub-agent of that profile, so independent tasks
    run in parallel (one call per task). To a running agent's name (e.g. "painter-2", or
    "painter" with type="message") it is a follow-up to that agent, which keeps its context.
    type="shutdown" stops an agent. For several separate deliverables, one call with items=[...]
    starts one agent per item; each item must get its result. Results come back to you later as
    "[result from <name>] ..." blocks: do not wait or poll for them.
    """
    raise RuntimeError("the template of send_message is bound to a lead before it runs")


@functools.cache
def _send_message_template() -> Tool:
    """``send_message`` without a lead or an ``enum``: built once, then bound to each lead and
    each roster (:meth:`~baton.engine.Tool.bound_to`) with the same argument model.

    The schema offered asks for ``items`` (required, before ``content``), while the argument
    model accepts a call without it as one plain send. Asked for, a model declares what it
    delivers before it writes the task: Qwen2.5-Coder 1.5B under llama-server's grammar listed
    an owl, a parrot and a penguin as three items in 3 of 3 probes, where with ``items``
    optional (described, and shown in an example) it declared none in 6 of 6 and in every
    session measured. Accepting it missing keeps every model and client that sends without it
    working (a capable model is never refused for a field it may leave out)."""
    return Tool(_send_message, name=SEND_MESSAGE, repeat_key=content_key)


def unknown_agent_hint(name: str, profiles: Mapping[str, str]) -> str:
    """The recovery hint for a name no profile matches: what exists, and what to do next."""
    if not profiles:
        return (
            f"Did not send: there is no sub-agent named {name!r} and no profiles are configured. "
            "Do not retry; answer the user yourself."
        )
    listing = "; ".join(f"{p} ({d})" for p, d in profiles.items())
    return (
        f"Did not send: there is no sub-agent or profile named {name!r}. Available profiles: "
        f"{listing}. Call send_message again with `to` set to one of these names."
    )


def not_a_subagent_hint(name: str) -> str:
    return (
        f"Did not send: {name!r} is not a sub-agent. You are the lead: answer the user directly "
        "in your reply text."
    )
