"""Envelope signatures, for a bus shared with writers baton does not trust (docs/protocol.md,
*Signed envelopes*).

With a key, every envelope baton writes carries ``sig`` = HMAC-SHA256(key, the ``msg`` text's
UTF-8 bytes) in hex, in its own stream field, and every inbox reader refuses an envelope whose
``sig`` is missing or wrong before it parses it. The signed form is the wire text itself, not a
re-encoding of the parsed JSON: a producer in any language signs exactly what it writes and a
reader checks exactly what it read, so there are no canonicalisation rules to disagree on.
Everything a signature must vouch for (session, recipient, sender, id) is inside that text, and the
readers' other checks (addressing, duplicates) do the rest.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Final

from pydantic import SecretStr

from baton.bus.errors import InvalidEnvelope

SIG_FIELD: Final = "sig"
"""The stream field beside ``msg`` that holds an envelope's signature."""


def _wire_bytes(text: str) -> bytes:
    """``text`` as the bytes Redis holds: a byte that was not UTF-8 came back as a lone surrogate
    (``surrogateescape``) and goes back to that byte, so what is checked is what was stored."""
    return text.encode("utf-8", "surrogateescape")


class Signer:
    """Signs and checks envelopes' wire text with one key (``signing_key`` in the settings)."""

    __slots__ = ("_key",)

    def __init__(self, key: SecretStr | str) -> None:
        secret = key.get_secret_value() if isinstance(key, SecretStr) else key
        if not secret:
            raise ValueError("a signing key must not be empty")
        self._key = secret.encode()

    def __repr__(self) -> str:
        return "Signer(key=**********)"

    def sign(self, raw: str) -> str:
        """The signature of an envelope's wire text: 64 lower-case hex digits."""
        return hmac.new(self._key, _wire_bytes(raw), hashlib.sha256).hexdigest()

    def check(self, raw: str, sig: str | None) -> None:
        """Raise ``InvalidEnvelope`` (its reason for the dead letters) unless ``sig`` is the
        signature of ``raw``; compared in constant time."""
        if sig is None:
            raise InvalidEnvelope(
                f"unsigned envelope: this bus requires signed envelopes (no {SIG_FIELD!r} field)",
                raw,
            )
        expected = self.sign(raw).encode()
        if not hmac.compare_digest(expected, _wire_bytes(sig)):
            raise InvalidEnvelope(
                "wrongly signed envelope: its signature does not match (another key, or the "
                "message was changed after it was signed)",
                raw,
            )
