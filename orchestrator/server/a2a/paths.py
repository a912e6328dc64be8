"""Where the A2A endpoint lives on a ``baton serve`` (docs/a2a.md): plain constants, so the token
guard can tell an A2A request without importing the SDK."""

from __future__ import annotations

CARD_PATH = "/.well-known/agent-card.json"
"""The agent card, at the well-known path of the server's root URL (public: see docs/a2a.md)."""
JSONRPC_PATH = "/a2a/jsonrpc"
"""The JSON-RPC binding: one ``POST`` endpoint for every method."""
REST_PREFIX = "/a2a/rest"
"""The HTTP+JSON binding: ``/message:send``, ``/tasks/{id}``, ... under this prefix."""


def is_a2a(path: str) -> bool:
    """True for a path of either binding (not the card, which is public)."""
    return path == JSONRPC_PATH or path == REST_PREFIX or path.startswith(REST_PREFIX + "/")
