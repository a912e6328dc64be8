"""The fan-out of declared items: ``send_message(..., items=[...])``, one new agent per item.

:class:`FanOut` turns one send with ``items`` (lead/items.py) into one task per item, each made
through :meth:`Dispatcher.deliver <baton.lead.dispatch.Dispatcher.deliver>` so each is capped
and checked as any other send, and remembers every item with the agent that holds it (the
lead's state, its checkpoint) so the answer is judged against all of them. It is apart from the
dispatcher because it is a layer over single sends: it decides nothing a send does not.
"""

from __future__ import annotations

from collections.abc import Sequence

from baton.engine import ToolResult
from baton.engine.turn import normalise_text
from baton.lead.dispatch import WAIT_HINT, Delivered, Dispatcher
from baton.lead.items import DeclaredItem, declared_items, item_task, items_refusal
from baton.lead.roster import Route
from baton.lead.tools import SendKind, unknown_agent_hint

ECHO_CHARS = 32
"""How much of an item the fan-out's reply repeats: under the quote check's 40 characters, so
that sending a long item again (to a new agent, its first one having failed) quotes nothing."""


def echo(item: str) -> str:
    """An item as the fan-out's reply names it (see :data:`ECHO_CHARS`)."""
    return item if len(item) <= ECHO_CHARS else item[: ECHO_CHARS - 1].rstrip() + "…"


class FanOut:
    """One send's declared items, fanned out through ``dispatcher``; see the module docstring.
    Like the dispatcher, it holds no lock: its caller (lead/team.py) serialises the sends."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher
        self.state = dispatcher.state
        self.roster = dispatcher.roster

    async def deliver_items(
        self, to: str, content: str, items: Sequence[str], kind: SendKind = "task"
    ) -> Delivered:
        """``send_message`` with ``items``: one new agent of ``to``'s profile per item, each
        told the shared ``content`` and its own item (lead/items.py), each send capped and
        checked as any other; every item is remembered with the agent that holds it, so the
        answer is judged against all of them. An item the caps refuse is declared all the same:
        it stays without a result unless a later send gets it out. An item that itself quotes
        the runtime is not: it is no task, so nothing is owed for it (a 0.5B lead declared a
        media URL from a note as an item); one refused because the shared ``content`` quotes is
        still owed."""
        declared = declared_items(items)
        if not declared:  # items=[]: a plain send
            return await self.dispatcher.deliver(to, content, kind)
        refusal = items_refusal(declared)
        if refusal is not None:
            return Delivered(ToolResult(refusal, blocked=True))
        profile = self.roster.resolve(to)
        if profile is None:
            return Delivered(unknown_agent_hint(to, self.roster.profiles))
        lines: list[str] = []
        started: list[Route] = []
        for item in declared:
            task = item_task(content, item)
            done = await self.dispatcher.deliver(profile, task, "task")
            started.extend(done.started)
            if self.dispatcher.quotes_the_runtime(item) is None:
                self._declare(item, profile, self.state.tasks.get(normalise_text(task), ""))
            said = done.reply.content if isinstance(done.reply, ToolResult) else done.reply
            lines.append(f"- {echo(item)}: {said.removesuffix(WAIT_HINT).strip()}")
        reply = "\n".join([f"{len(declared)} item(s), one agent each:", *lines])
        if started:
            reply = f"{reply}\n{WAIT_HINT}"
        told = reply if started else ToolResult(reply, blocked=True)
        # The items are declared whatever went out: the state changed, so it is checkpointed.
        return Delivered(told, tuple(started), sent=True)

    def _declare(self, text: str, profile: str, agent: str) -> None:
        """Remember a declared item and the agent it went to (none: refused). One declared
        again keeps its place and adds the agent that got it now, which takes over the work of
        an earlier one that failed (its successor), as a send to the failed agent's name would
        have: its result is any of theirs."""
        key = normalise_text(text)
        item = next(
            (i for i in self.state.items if normalise_text(i.text) == key and i.profile == profile),
            None,
        )
        if item is None:
            item = DeclaredItem(text=text, profile=profile)
            self.state.items.append(item)
        if not agent or agent in item.agents:
            return
        for earlier in (self.roster.agents.get(name) for name in item.agents):
            if (
                earlier is not None
                and earlier.state == "done"
                and earlier.exit_reason != "finished"
            ):
                self.roster.successors.setdefault(earlier.name, agent)
        item.agents.append(agent)
