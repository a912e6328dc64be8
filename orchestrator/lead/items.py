"""Deliverables the model declares: ``send_message(..., items=[...])``, one task per item, each
tracked to a result.

Whether an answer covers everything a person asked for cannot be read from its words without
understanding them, and baton does not read them. What it can count is what the model itself
declared in a typed call: ``send_message(to="painter", content="Paint this bird.",
items=["an owl", "a parrot", "a penguin"])`` is three deliverables. The lead fans them out, one new
agent of the profile per item (:func:`item_task` is what each is told), within the delegation caps,
and remembers each item and the agent that holds it (:class:`DeclaredItem`, in the lead's state
and checkpoint, for the current request). At the end, :func:`missing_items` names each item
without a result: its agent (or the one that took its work over) did not finish, or, for a
profile whose tools make media, finished without any. Any such item makes the session
``incomplete`` (exit 4), whatever the answer says (docs/lead.md, *Deliverables*).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from baton.engine.turn import normalise_text
from baton.lead.roster import Roster

MAX_ITEMS = 16
"""Items one send may declare: more than the caps could ever start in one turn is a runaway list,
refused whole (the caps then refuse what one turn cannot start, item by item)."""
MAX_ITEM_CHARS = 2000
"""An item is one deliverable's name or description, not a document."""


class DeclaredItem(BaseModel):
    """One deliverable the model declared, and the agents it went to, in order (none: the caps
    refused its sends). Declared again, it may go to another agent while an earlier one works
    on it or after it failed; its result is any of theirs."""

    model_config = ConfigDict(defer_build=True)

    text: str
    profile: str
    agents: list[str] = Field(default_factory=list)


def declared_items(items: Iterable[str]) -> list[str]:
    """The items as declared: stripped, empty ones dropped, one of each (case and spacing
    aside), in order."""
    kept: dict[str, str] = {}
    for item in items:
        text = item.strip()
        if text:
            kept.setdefault(normalise_text(text), text)
    return list(kept.values())


def items_refusal(items: Sequence[str]) -> str | None:
    """Why a send's ``items`` cannot go out as declared (the text for the model), or None."""
    if len(items) > MAX_ITEMS:
        return (
            f"Did not send: {len(items)} items is more than one send may declare ({MAX_ITEMS}). "
            "Declare the deliverables the user asked for, one item each."
        )
    long = next((item for item in items if len(item) > MAX_ITEM_CHARS), None)
    if long is not None:
        return (
            f"Did not send: an item is longer than {MAX_ITEM_CHARS} characters. An item names "
            "one deliverable; put what every item needs in content."
        )
    return None


def item_task(content: str, item: str) -> str:
    """What the agent of one item is told: the shared instruction, then its own item, so it does
    that one and not the whole list. Nothing in it depends on the other items, so the same item
    sent again with the same instruction is the same task (a failed one's work, redone)."""
    shared = content.strip()
    own = f"Your item:\n{item}\nDeliver this item only; the other items are another agent's."
    return f"{shared}\n\n{own}" if shared else own


class MissingItem(NamedTuple):
    """A declared item without a result, and why."""

    text: str
    why: str


def missing_items(
    items: Sequence[DeclaredItem], roster: Roster, media_profiles: Collection[str]
) -> list[MissingItem]:
    """The declared items without a result: no agent got it, or the agent that holds its work
    now did not finish, or finished without media for a media-making profile (an agent whose
    work was sent again and done counts as done)."""
    missing = [MissingItem(i.text, _no_result(i, roster, media_profiles)) for i in items]
    return [item for item in missing if item.why]


def items_reason(missing: Sequence[MissingItem]) -> str:
    """The judgement on the declared items without a result (the session is ``incomplete``)."""
    listed = "; ".join(f"{item.text} ({item.why})" for item in missing)
    return f"{len(missing)} declared item(s) without a result: {listed}"


def _no_result(item: DeclaredItem, roster: Roster, media_profiles: Collection[str]) -> str:
    """Why none of the agents the item went to delivered it ("" when one did): what the last of
    them (or the one that took its work over) did."""
    why = "not sent"
    for agent in (name for name in item.agents if name in roster.agents):
        why = _why_not(agent, item.profile in media_profiles, roster)
        if not why:
            return ""
    return why


def _why_not(agent: str, media: bool, roster: Roster) -> str:
    """Why ``agent`` (or the agent that holds its work now) did not deliver ("" when it did)."""
    holder = roster.agents[roster.current(agent)]
    if roster.redone(agent) or roster.redone(holder.name):
        return ""
    if holder.state != "done":
        return f"{holder.name} has not reported"
    if holder.exit_reason != "finished":
        return f"{holder.name} did not finish: {holder.exit_reason}"
    if media and not holder.media_urls:
        return f"{holder.name} made no media"
    return ""
