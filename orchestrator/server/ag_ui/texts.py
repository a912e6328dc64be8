"""Each agent's rounds as AG-UI text messages: one assistant message per round, opened by its
first text in the run, streamed as deltas, closed when the round ends or the run stops.

A round's message id is ``<session>.<agent>.<cursor of round.started>`` (or of the round's first
text or tool call, when its ``round.started`` is older than what the log kept). Text the client
already holds (:class:`~.holdings.Holdings`) is not sent again; text taken back ends the message
where it is, and what follows is a new message (AG-UI cannot take text back).

A message belongs to one invocation from its start to its end (the client's verifier holds every
event of a message id, and the tool calls it carries, to the owner it opened with). An agent's
work belongs to its newest invocation, and a follow-up can start a new one in the middle of the
agent's round: the round's message then ends where it is, and the round goes on in a new message
of the new invocation, ``<message>.<cursor>`` (as after text taken back).

Text goes out with its ``file://`` URLs rewritten (:mod:`.links`): a piece that ends in one (or
in what may begin one) keeps it back until the URL ends — in the next piece, or when the message
ends — and what the client holds is counted in the text as it was sent.
"""

from __future__ import annotations

from ag_ui.core import (
    BaseEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)

from baton.server.ag_ui.holdings import HeldMark, Holdings
from baton.server.ag_ui.links import Links, ready


class TextMessages:
    """The text messages of one session's rounds, as the translation meets them."""

    __slots__ = (
        "_chars", "_held", "_holdings", "_kept", "_links", "_open", "_owners", "_rounds",
        "_session",
    )  # fmt: skip

    def __init__(self, session: str, holdings: Holdings, held: HeldMark, links: Links) -> None:
        self._session = session
        self._holdings = holdings
        self._held = held
        self._links = links
        self._rounds: dict[str, str] = {}
        """Each agent's round message now."""
        self._chars: dict[str, int] = {}
        """How much text each message has had, in the whole log, as it is sent (rewritten)."""
        self._kept: dict[str, tuple[str, str | None]] = {}
        """Each message's text kept back (a URL that may go on), with its invocation."""
        self._open: dict[str, str | None] = {}
        """The messages open in this run, with the invocation each belongs to."""
        self._owners: dict[str, str | None] = {}
        """The invocation each round's message belongs to (None: the lead's), in the whole log."""

    def round_started(self, agent: str, cursor: str) -> list[BaseEvent]:
        """A new round of ``agent``: its last round's message ends."""
        out = self.close(self._rounds.get(agent))
        self._rounds[agent] = self._message_id(agent, cursor)
        return out

    def round_ended(self, agent: str) -> list[BaseEvent]:
        return self.close(self._rounds.get(agent))

    def current(self, agent: str, cursor: str) -> str:
        """The message of ``agent``'s round, begun at ``cursor`` when it has none yet."""
        message = self._rounds.get(agent)
        if message is None:
            message = self._rounds[agent] = self._message_id(agent, cursor)
        return message

    def attributed(self, agent: str, cursor: str, owner: str | None) -> tuple[list[BaseEvent], str]:
        """The message of ``agent``'s round for work of the invocation ``owner``: the round's
        message, or — when it belongs to another invocation — a new one, the other ended where
        it is; returns the ended message's events and the message."""
        message = self.current(agent, cursor)
        if self._owners.setdefault(message, owner) == owner:
            return [], message
        out = self.close(message)
        message = self._rounds[agent] = f"{message}.{cursor}"
        self._owners[message] = owner
        return out, message

    def stream(self, message: str, text: str, owner: str | None) -> list[BaseEvent]:
        """Append ``text`` to ``message``, opening it in this run first; a ``file://`` URL it
        ends in is kept back until it ends (:mod:`.links`)."""
        kept, _ = self._kept.pop(message, ("", owner))
        text = kept + text
        cut = ready(text)
        if cut < len(text):
            self._kept[message] = (text[cut:], owner)
        return self._send(message, self._links.text(text[:cut]), owner)

    def _send(self, message: str, text: str, owner: str | None) -> list[BaseEvent]:
        """Append ``text`` (rewritten) to ``message``; what the client holds of it already is
        left out."""
        if not text:
            return []
        start = self._chars.get(message, 0)
        self._chars[message] = start + len(text)
        held = self._holdings.text.get(message, 0)
        if start + len(text) <= held:
            self._held.note(True)
            return []
        self._held.note(False)
        delta = text[max(held - start, 0) :]
        out: list[BaseEvent] = []
        if message not in self._open:
            self._open[message] = owner
            out.append(
                TextMessageStartEvent(message_id=message, role="assistant", subagent_run_id=owner)
            )
        out.append(TextMessageContentEvent(message_id=message, delta=delta, subagent_run_id=owner))
        return out

    def close(self, message: str | None, *, ended: bool = True) -> list[BaseEvent]:
        """End ``message`` if it is open in this run. When its text ``ended`` (not merely this
        run), what it kept back goes out first: a URL at the end of a text has ended."""
        if message is None:
            return []
        out: list[BaseEvent] = []
        if ended and message in self._kept:
            kept, owner = self._kept.pop(message)
            out = self._send(message, self._links.text(kept), owner)
        if message not in self._open:
            return out
        owner = self._open.pop(message)
        out.append(TextMessageEndEvent(message_id=message, subagent_run_id=owner))
        return out

    def close_all(self, *, ended: bool = True) -> list[BaseEvent]:
        """End every message open in this run (``ended``: as :meth:`close`; a run that stops
        for an interrupt keeps what a round still streaming kept back, for the next run)."""
        out: list[BaseEvent] = []
        for message in list(self._open):
            out.extend(self.close(message, ended=ended))
        if ended:
            for message in list(self._kept):
                out.extend(self.close(message))
        return out

    def new_run(self) -> None:
        """A run begins: nothing is open in it yet (what the fold opened before was not sent)."""
        self._open.clear()

    def retract(self, agent: str, cursor: str) -> tuple[list[BaseEvent], str] | None:
        """``agent``'s round took text back: its message ends where it is and the round goes on
        in a new one; the ended message's events and id (None: the agent has no round)."""
        message = self._rounds.get(agent)
        if message is None:
            return None
        out = self.close(message)
        self._rounds[agent] = f"{message}.{cursor}"
        return out, message

    def _message_id(self, agent: str, cursor: str) -> str:
        return f"{self._session}.{agent}.{cursor}"
