"""The one error hierarchy of baton.

Every error baton raises on purpose derives from :class:`BatonError`, so an embedder can catch the
whole family in one place. Third-party exceptions (redis, openai, httpx2) are mapped once, at the
boundary where they occur, with ``raise ... from exc``. Messages say what happened, the value
involved, and what to do about it. The other packages add their own subclasses in their own
``errors`` modules; this root lives here because ``bus`` is the bottom layer.
"""

from __future__ import annotations


class BatonError(Exception):
    """Root of every error baton raises on purpose."""


class ConfigError(BatonError):
    """A setting, URL or file given by the user cannot be used."""


class BusError(BatonError):
    """The message bus failed to do what was asked."""


class BusUnreachable(BusError):
    """The bus backend could not be reached (e.g. Redis is down or the URL is wrong)."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"cannot reach the bus at {url}: {reason}")
        self.url = url
        self.reason = reason


class BusClosed(BusError):
    """The bus was used after ``aclose()``; open a new one instead."""


class InvalidEnvelope(BusError):
    """A message failed validation; it goes to the dead-letter stream with ``reason``."""

    def __init__(self, reason: str, raw: str | bytes | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.raw = raw
