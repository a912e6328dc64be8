"""Keeping the HTTP client's own log lines out of what a user reads.

httpx logs one INFO line per request ("HTTP Request: POST …/chat/completions 200 OK"): a worker,
which logs at INFO by default, would print one per model call. They are for someone debugging
the model connection, so they show only when DEBUG is asked for (``--log-level DEBUG`` or
``BATON_LOG_LEVEL=DEBUG``).
"""

from __future__ import annotations

import logging

HTTP_LOGGERS = ("httpx", "httpcore", "httpx2", "httpcore2")
"""The HTTP client's loggers under either distribution's name (the openai client may be installed
against ``httpx`` or its ``httpx2`` fork)."""


def quiet_http_loggers(level: str) -> None:
    """Set the HTTP client's loggers to WARNING, unless ``level`` is DEBUG (or finer)."""
    asked = logging.getLevelName(level.upper())
    verbose = isinstance(asked, int) and asked <= logging.DEBUG
    for name in HTTP_LOGGERS:
        logging.getLogger(name).setLevel(logging.NOTSET if verbose else logging.WARNING)
