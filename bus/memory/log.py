"""Session event logs in process: each a capped list of wire text, parsed again on every read.

Each entry keeps its event's ``type`` beside the text, so a read validates it by that one class:
a process builds the schemas of the events it meets, not the whole union's."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from baton.bus.events import Event, dump_event, parse_event
from baton.bus.memory.core import MemoryCore
from baton.bus.parts.log import EventLog, LoggedEvent


class MemoryEventLog(EventLog):
    """Logs whose cursors are the broker's sequence numbers; a tail waits on the log's
    ``changed`` event. What it logs also tells the broker when a session finished."""

    def __init__(self, core: MemoryCore) -> None:
        self._core = core
        self._broker = core.broker

    async def emit(self, event: Event) -> str:
        self._core.check_open()
        seq = next(self._broker.seq)
        self._broker.log(event.session, self._core.options.event_log_cap).append(
            seq, dump_event(event), event.type
        )
        self._broker.session_touch[event.session] = seq
        self._broker.logged(event.session, (event,))
        return str(seq)

    async def emit_once(
        self, session: str, agent: str, events: Sequence[Event], *, mark: str
    ) -> bool:
        self._core.check_open()
        state = self._broker.agents.setdefault((session, agent), {})
        if state.get("logged") == mark:
            return False
        cap = self._core.options.event_log_cap
        for event in events:  # no await in between: one step, as on Redis
            seq = next(self._broker.seq)
            self._broker.log(session, cap).append(seq, dump_event(event), event.type)
            self._broker.session_touch[session] = seq
        state["logged"] = mark
        self._broker.logged(session, events)
        return True

    async def tail(
        self, session: str, *, after: str | None = None, follow: bool = True
    ) -> AsyncIterator[LoggedEvent]:
        self._core.check_open()
        cursor = int(after) if after else 0
        log = self._broker.log(session, self._core.options.event_log_cap)
        while True:
            changed = log.changed
            fresh = _after(log.entries, cursor)
            for seq, raw, kind in fresh:
                cursor = seq
                yield LoggedEvent(str(seq), parse_event(raw, kind))
            if not follow:
                return
            if not fresh:
                await changed.wait()
                self._core.check_open()

    async def sessions(self) -> list[str]:
        touched = self._broker.session_touch
        return sorted(touched, key=touched.__getitem__, reverse=True)


def _after(entries: Sequence[tuple[int, str, str]], cursor: int) -> list[tuple[int, str, str]]:
    """The entries past ``cursor``, oldest first, found from the newest end: a tail that keeps
    up reads what is new without walking the whole log on every wake-up (which made each
    session's tails quadratic in its events)."""
    fresh: list[tuple[int, str, str]] = []
    for entry in reversed(entries):
        if entry[0] <= cursor:
            break
        fresh.append(entry)
    fresh.reverse()
    return fresh
