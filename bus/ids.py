"""Ids: time-ordered unique ids for envelopes (UUIDv7, RFC 9562), and the one rule for the names
(session ids, agent names) that address them.

Python 3.11 has no ``uuid.uuid7``; this small generator keeps ids strictly increasing within a
process (a counter in the random bits breaks ties inside one millisecond), so sorting by id sorts by
creation time, and the id doubles as the idempotency key consumers dedupe on.
"""

from __future__ import annotations

import os
import re
import threading
import time

_lock = threading.Lock()
_last_ms = 0
_seq = 0


def new_id() -> str:
    """A new UUIDv7 as a 36-character string."""
    global _last_ms, _seq
    with _lock:
        now_ms = time.time_ns() // 1_000_000
        if now_ms > _last_ms:
            _last_ms = now_ms
            _seq = int.from_bytes(os.urandom(2), "big") & 0x3FF
        else:
            _seq += 1
            if _seq > 0xFFF:  # 4,096 ids in one millisecond: borrow the next millisecond
                _last_ms += 1
                _seq = 0
        ms, seq = _last_ms, _seq
    rand = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
    value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | seq << 64 | 0b10 << 62 | rand
    h = f"{value:032x}"  # formatted by hand: uuid.UUID costs several times more
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$"
"""The one rule for session ids and agent names, wherever they come from (an envelope, a spawn
request, an HTTP path or body). They become parts of Redis keys (``baton:{S}:inbox:A``), so no
``:`` (it separates a key's parts), no ``{``/``}`` (the session's hash tag), no space or slash;
and path segments (a session's media folder), so they start with a letter or digit: never ``.``,
``..`` or a hidden name."""
NAME_MAX = 200


def name_rule(max_len: int = NAME_MAX) -> str:
    """The rule in words, for error messages."""
    return f"1 to {max_len} characters of A-Z a-z 0-9 _ . -, starting with a letter or digit"


NAME_RULE = name_rule()

_NAME = re.compile(NAME_PATTERN)


def name_problem(value: str, what: str, *, max_len: int = NAME_MAX) -> str | None:
    """Why ``value`` cannot be a session id or agent name (``what`` says which; a pool name
    follows the same rule with its own ``max_len``), or None."""
    if len(value) <= max_len and _NAME.fullmatch(value):
        return None
    return f"{what} {value[:80]!r} is not valid: it must be {name_rule(max_len)}"


def check_name(value: str, what: str) -> str:
    """``value`` when it can be a session id or agent name; else ``ValueError`` saying why (a
    pydantic validator turns it into its own error, keeping the words)."""
    problem = name_problem(value, what)
    if problem is not None:
        raise ValueError(problem)
    return value
