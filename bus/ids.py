"""Time-ordered unique ids for envelopes (UUIDv7, RFC 9562).

Python 3.11 has no ``uuid.uuid7``; this small generator keeps ids strictly increasing within a
process (a counter in the random bits breaks ties inside one millisecond), so sorting by id sorts by
creation time, and the id doubles as the idempotency key consumers dedupe on.
"""

from __future__ import annotations

import os
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
