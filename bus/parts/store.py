"""A small key-value store per session, for what a server keeps beside the session's own data.

Kept on the bus (not in a server's memory) so that every server sharing the bus sees the same
values, and scoped to the session so they go when it goes (retention gives them the session's
lifetime). It holds four tables: ``tokens``, the session's HTTP tokens, as token digest → scope
(``docs/http.md``, *Session tokens*); ``mcp_tasks``, the MCP tasks that run the session, as task
id digest → the task's record (``docs/mcp-server.md``, *Tasks*) — only digests of those bearer
secrets are kept, so whoever can read the bus cannot use what it reads; and ``answers``, one
entry per question a person answered (docs/protocol.md, *Questions*), claimed before the answer
is sent so that of two people answering at once exactly one is heard: the log learns of an
answer only once the asking agent reads it; and ``agui``, what the AG-UI endpoint keeps of the
session as a thread's conversation (``docs/ag-ui.md``: the client messages it already took, how
far its runs delivered the log).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Literal, get_args

StoreTable = Literal["tokens", "mcp_tasks", "answers", "agui"]
"""The tables a session's store holds; each is one hash on Redis (``baton:{S}:<table>``)."""
STORE_TABLES: tuple[StoreTable, ...] = get_args(StoreTable)


class SessionStore(ABC):
    """Tables of string keys and values, one set per session.

    Both methods may raise ``BusUnreachable`` when the backend cannot be reached after its
    retries, and ``BusClosed`` after the bus was closed.
    """

    @abstractmethod
    async def put(self, session: str, table: StoreTable, values: Mapping[str, str]) -> None:
        """Merge ``values`` into the session's ``table``. Written after the session ended, they
        expire with the rest of it."""

    @abstractmethod
    async def get(self, session: str, table: StoreTable, key: str) -> str | None:
        """The value of ``key`` in the session's ``table``; None when it has none."""

    @abstractmethod
    async def put_new(self, session: str, table: StoreTable, key: str, value: str) -> bool:
        """Set ``key`` to ``value`` unless the table has it: True when this call set it (one
        atomic step, so of many callers at once exactly one gets True)."""

    @abstractmethod
    async def remove(self, session: str, table: StoreTable, key: str) -> None:
        """Drop ``key`` from the session's ``table`` (nothing when it has none)."""
