"""Text read from Redis that was not UTF-8: how it is told apart, named, and shown.

Redis stores bytes, and anyone with access can put any bytes in a stream. The Redis bus decodes
replies with ``surrogateescape`` (:mod:`baton.bus.redis.adapter`), so a byte that is not UTF-8
arrives as a lone surrogate (``\\xff`` → ``'\\udcff'``) instead of raising inside a pipelined
round trip, where it would fail every command sharing it. Such text is never valid input: the
readers refuse it here, as a malformed entry, with a reason that says which field and which byte.
"""

from __future__ import annotations

from baton.bus.errors import InvalidEnvelope


def utf8_problem(text: str) -> str | None:
    """Where ``text`` stops being UTF-8 (``byte 0xff at character 3``), or None when it is.

    O(1) for ASCII text (CPython knows a string is ASCII), one encode otherwise.
    """
    if text.isascii():
        return None
    try:
        text.encode()
    except UnicodeEncodeError as exc:
        return _where(text, exc)
    return None


def _where(text: str, exc: UnicodeEncodeError) -> str:
    code = ord(text[exc.start])
    if 0xDC80 <= code <= 0xDCFF:  # a byte surrogateescape could not decode
        return f"byte 0x{code - 0xDC00:02x} at character {exc.start}"
    return f"lone surrogate U+{code:04X} at character {exc.start}"


def not_utf8(text: str, field: str, exc: UnicodeEncodeError | None = None) -> InvalidEnvelope:
    """The error that refuses an entry whose ``field`` holds ``text``, which is not UTF-8."""
    where = _where(text, exc) if exc is not None else utf8_problem(text) or "unknown position"
    return InvalidEnvelope(f"not UTF-8: field {field!r} has {where}", printable(text))


def printable(text: str) -> str:
    """``text`` with each byte that was not UTF-8 written as a ``\\xNN`` escape: safe to log,
    print, serialise as JSON or store again, and still says exactly which bytes they were."""
    if text.isascii():
        return text
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate no byte became (from Python, not from Redis)
        return text.encode("utf-8", "backslashreplace").decode()
