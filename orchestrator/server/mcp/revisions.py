"""What a client may be sent, by the protocol revision it negotiated.

The SDK validates every handshake revision's results against the 2025-11-25 schema, so a result
that revision allows goes out unchanged to a client of an older one. The specification's own
schemas (``schema/<revision>/schema.ts``) say what each revision has:

- ``resource_link`` content blocks from **2025-06-18** (before, a tool result's content is text,
  images, audio and embedded resources): a client of 2024-11-05 or 2025-03-26 gets each link as a
  line of text with the URL instead (:func:`links_as_text`);
- elicitation from 2025-06-18 too: a client of an older revision is never asked (the session's
  ``approve`` policy decides), whatever capabilities it declared;
- core tasks from **2025-11-25** (the ``tasks`` capability, ``execution.taskSupport``, a
  task-augmented ``tools/call``, ``tasks/*``): an older client is offered none of it — the
  capability is left out of its ``initialize`` result, its tools carry no ``execution``, a
  ``task`` on its ``tools/call`` is not of its revision and is ignored (the call runs as a call),
  and ``tasks/*`` is ``-32601``. (2026-07-28 has tasks as an extension, decided per request.)

Unknown revision strings count as old (the SDK's :func:`is_version_at_least`).
"""

from __future__ import annotations

from collections.abc import Callable

from mcp_types import CallToolResult, ContentBlock, ResourceLink, TextContent
from mcp_types.version import is_version_at_least

LINKS_SINCE = "2025-06-18"
"""The first revision with ``resource_link`` content (and elicitation, structured content)."""
TASKS_SINCE = "2025-11-25"
"""The first revision with tasks (core tasks, experimental there)."""


def has_links(version: str) -> bool:
    """Whether a client of ``version`` takes ``resource_link`` content."""
    return is_version_at_least(version, LINKS_SINCE)


def has_elicitation(version: str) -> bool:
    """Whether a client of ``version`` can be sent ``elicitation/create`` (whatever it declared:
    an older revision has no such request)."""
    return is_version_at_least(version, LINKS_SINCE)


def has_tasks(version: str) -> bool:
    """Whether a client of ``version`` may be offered tasks."""
    return is_version_at_least(version, TASKS_SINCE)


def links_as_text(result: CallToolResult, url_of: Callable[[str], str]) -> CallToolResult:
    """``result`` with each ``resource_link`` made a text line naming the medium and a URL the
    host can open (``url_of``: a resource URI to that URL), for a client before 2025-06-18."""
    if not any(isinstance(block, ResourceLink) for block in result.content):
        return result
    content: list[ContentBlock] = []
    for block in result.content:
        if not isinstance(block, ResourceLink):
            content.append(block)
            continue
        url = url_of(block.uri)
        also = f" (resource {block.uri})" if url != block.uri else ""
        kind = f", {block.mime_type}" if block.mime_type else ""
        content.append(TextContent(text=f"[{block.name}{kind}] {url}{also}"))
    return result.model_copy(update={"content": content})
