"""Media links an AG-UI client can open: no ``file://`` URL of the server goes out.

The tools write their files under the media directory and report ``file://`` URLs, which the
agents repeat everywhere — in their text, their tool calls' arguments and results, their results,
the lead's answer. A web client opens none of them, and they name the server's paths. So every
``file://`` URL a run sends is rewritten (:class:`Links`):

- a file of the media directory: the URL this server serves it at (``<server>/media/<session>/
  <name>``, with the run's read token of the session when the server checks tokens);
- any other ``file://`` URL: :data:`MARKER`, which says a file was named and names no path.

Where a client keeps what it was sent — a message's text, a tool call's arguments, a result —
the translation rewrites it (:mod:`.texts`, :mod:`.tool_calls`), so that what it compares with
the client's holdings is what the client was sent; a text streamed in pieces holds back a
trailing URL until it ends (:func:`ready`), or a piece could carry half a path. Everything else
(the state, subagent results, interrupts, the answer) is rewritten on the wire
(:meth:`Links.wire`), which also keeps any field added later from leaking a path.

A URL ends at white space, a quote, a bracket or a backslash (a JSON escape on the wire);
sentence punctuation that ends one (``.``, ``,``, ``;``…) is taken as the sentence's.
"""

from __future__ import annotations

import re
from collections.abc import Callable

MARKER = "[a file of the server, not served]"
"""What a ``file://`` URL outside the media directory becomes."""
_STOPS = r"\s\"'<>()\[\]{}\\`|^"
FILE_URL = re.compile(rf"file://[^{_STOPS}]*", re.IGNORECASE)
FILE_URL_BYTES = re.compile(rf"file://[^{_STOPS}]*".encode(), re.IGNORECASE)
TRAILING = ".,;:!?"
"""Punctuation that ends a sentence rather than a URL."""
SCHEME = "file://"
TOKEN = re.compile(r"\?token=[^\s\"'<>&#\\]*")
"""A media link's read token: fresh for every run, so left out where links are compared."""


def ready(text: str) -> int:
    """How much of ``text`` — a message streamed in pieces — can be rewritten and sent now: all
    of it but a ``file://`` URL it ends in (the next piece may go on with it) or a trailing
    start of one (``fi``, ``file:/``)."""
    urls = list(FILE_URL.finditer(text)) if "file:" in text.lower() else []
    if urls and urls[-1].end() == len(text):
        return urls[-1].start()
    for size in range(min(len(SCHEME) - 1, len(text)), 0, -1):
        if text[-size:].lower() == SCHEME[:size]:
            return len(text) - size
    return len(text)


def comparable(text: str) -> str:
    """``text`` without its media links' read tokens: what a client holds from an earlier run
    (another token) compared with what this run would send."""
    return TOKEN.sub("", text) if "?token=" in text else text


class Links:
    """One session's ``file://`` URLs as the client opens them (see the module docstring), from
    ``media_url``: the server's URL of a file of the media directory, anything else as given."""

    __slots__ = ("_known", "_public")

    def __init__(self, media_url: Callable[[str], str]) -> None:
        self._public = media_url
        self._known: dict[str, str] = {}
        """Each URL met, rewritten (the state names each again and again, and resolving a path
        under the media directory is not free)."""

    def url(self, url: str) -> str:
        """One URL as the client gets it."""
        found = self._known.get(url)
        if found is None:
            found = self._public(url)
            if found[: len(SCHEME)].lower() == SCHEME:
                found = MARKER
            self._known[url] = found
        return found

    def text(self, text: str) -> str:
        """``text`` with every ``file://`` URL in it rewritten."""
        return FILE_URL.sub(lambda match: self._rewrite(match.group()), text)

    def wire(self, chunk: bytes) -> bytes:
        """SSE frames with every ``file://`` URL in them rewritten (the JSON of each event: a
        URL there ends at its string's quote or at an escape)."""
        if FILE_URL_BYTES.search(chunk) is None:
            return chunk
        return FILE_URL_BYTES.sub(
            lambda match: self._rewrite(match.group().decode(errors="replace")).encode(), chunk
        )

    def _rewrite(self, found: str) -> str:
        url = found.rstrip(TRAILING)
        return self.url(url) + found[len(url) :]
