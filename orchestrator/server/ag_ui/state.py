"""The session as AG-UI state: ``STATE_SNAPSHOT`` once a run begins, ``STATE_DELTA`` as it moves.

The state is a projection of the one fold every view shares
(:class:`~baton.session.view.SessionView`, which ``GET /sessions/{id}/state`` projects too), so
what an AG-UI front end shows of the sub-agents, the media and the budget agrees with the page, the
terminal and the API. It is read
straight from the fold's dataclasses (no model built per event: it is recomputed after every
event that can change it). It is run-scoped and owned by the server: a client's ``state`` in its
run input is not read.

Deltas are JSON Patch (RFC 6902) computed here rather than by a library: the state has a fixed
shape two levels deep (one entry per sub-agent), so a patch that replaces what changed — a
top-level value, or one sub-agent's entry — is a few lines, and stays small where a general
diff would descend into lists of media URLs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from baton.session.view import SessionView

JsonObject = dict[str, Any]
SUBAGENTS = "subagents"


def project(
    session: str, view: SessionView, media_url: Callable[[str], str], interrupts: list[str]
) -> JsonObject:
    """The AG-UI state of a session: camelCase keys, media URLs a browser can open, and the ids
    of the interrupts that wait for an answer now."""
    subagents: JsonObject = {
        name: {
            "profile": agent.profile,
            "status": agent.status,
            "progress": agent.progress,
            "result": agent.result,
            "mediaUrls": [media_url(url) for url in agent.media_urls],
            "worker": agent.worker,
            "waitingForWorker": agent.waiting_for_worker,
            "retries": agent.retries,
        }
        for name, agent in view.agents.items()
    }
    budget = view.budget
    return {
        "session": session,
        "status": view.status,
        "task": view.task,
        "model": view.model,
        "offline": view.offline,
        SUBAGENTS: subagents,
        "media": [media_url(url) for url in view.media_urls],
        "budget": None
        if budget is None
        else {
            "calls": budget.calls,
            "tokens": budget.tokens,
            "maxCalls": budget.max_calls,
            "maxTokens": budget.max_tokens,
        },
        "openInterrupts": interrupts,
    }


def pointer(*parts: str) -> str:
    """A JSON Pointer (RFC 6901) to ``parts``, each escaped."""
    return "".join("/" + part.replace("~", "~0").replace("/", "~1") for part in parts)


def patch(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[JsonObject]:
    """The operations that turn ``old`` into ``new`` (empty when equal): each changed top-level
    value replaced, except the sub-agents, patched one entry at a time."""
    ops: list[JsonObject] = []
    for key, value in new.items():
        if key not in old:
            ops.append({"op": "add", "path": pointer(key), "value": value})
        elif old[key] != value:
            if key == SUBAGENTS and isinstance(value, dict) and isinstance(old[key], dict):
                ops.extend(_entries(old[key], value))
            else:
                ops.append({"op": "replace", "path": pointer(key), "value": value})
    ops.extend({"op": "remove", "path": pointer(key)} for key in old if key not in new)
    return ops


def _entries(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[JsonObject]:
    ops: list[JsonObject] = []
    for name, entry in new.items():
        if name not in old:
            ops.append({"op": "add", "path": pointer(SUBAGENTS, name), "value": entry})
        elif old[name] != entry:
            ops.append({"op": "replace", "path": pointer(SUBAGENTS, name), "value": entry})
    ops.extend(
        {"op": "remove", "path": pointer(SUBAGENTS, name)} for name in old if name not in new
    )
    return ops
