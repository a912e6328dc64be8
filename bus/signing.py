"""Envelope signatures, for a bus shared with writers baton does not trust (docs/protocol.md,
*Signed envelopes*).

With a key, every envelope baton writes carries ``sig`` = HMAC-SHA256(key, the ``msg`` text's
UTF-8 bytes) in hex, in its own stream field, and every inbox reader refuses an envelope whose
``sig`` is missing or wrong before it parses it. The signed form is the wire text itself, not a
re-encoding of the parsed JSON: a producer in any language signs exactly what it writes and a
reader checks exactly what it read, so there are no canonicalisation rules to disagree on.
Everything a signature must vouch for (session, recipient, sender, id) is inside that text, and the
readers' other checks (addressing, duplicates) do the rest.

A signed envelope also carries ``kid``, the key's *id*: an HMAC of a fixed text under the key,
shortened (:func:`key_id`). It names a key without revealing it (anyone who reads the bus already
sees HMACs under that key, the signatures), so a reader can tell "signed with another key" (a
deployment whose processes were given different keys: a configuration error to name at once)
from "changed after it was signed", and a sender can compare its key with the one a session
records (``key_id`` in its stored setup; spawn requests carry it as their ``key_id``) before it
sends anything the session would refuse.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Final

from pydantic import SecretStr

from baton.bus.errors import InvalidEnvelope

SIG_FIELD: Final = "sig"
"""The stream field beside ``msg`` that holds an envelope's signature."""
KID_FIELD: Final = "kid"
"""The stream field beside ``sig`` that names the key it was made with (:func:`key_id`)."""
KEY_ID_TEXT: Final = b"baton signing key id"
"""What a key's id is the HMAC of."""
KEY_ID_HEX: Final = 16
"""Hex digits of a key id: 64 bits, plenty to tell a deployment's keys apart."""
UNSIGNED: Final = ""
"""The key id of a process without a signing key."""
SETUP_KEY_ID: Final = "key_id"
"""The key of a session's stored setup (its lead's record) that holds its key id."""


def _wire_bytes(text: str) -> bytes:
    """``text`` as the bytes Redis holds: a byte that was not UTF-8 came back as a lone surrogate
    (``surrogateescape``) and goes back to that byte, so what is checked is what was stored."""
    return text.encode("utf-8", "surrogateescape")


def _secret(key: SecretStr | str) -> bytes:
    secret = key.get_secret_value() if isinstance(key, SecretStr) else key
    if not secret:
        raise ValueError("a signing key must not be empty")
    return secret.encode()


def key_id(key: SecretStr | str | None) -> str:
    """The id of a signing key: HMAC-SHA256(key, ``baton signing key id``), its first 16 hex
    digits; :data:`UNSIGNED` (``""``) for no key. Never the key, and it cannot be turned back
    into one."""
    if key is None:
        return UNSIGNED
    return hmac.new(_secret(key), KEY_ID_TEXT, hashlib.sha256).hexdigest()[:KEY_ID_HEX]


def describe_key(kid: str) -> str:
    """A key id in words, for messages: ``key id 1a2b…`` or ``no signing key``."""
    return f"key id {kid}" if kid else "no signing key"


def key_mismatch(theirs: str, ours: str, *, they: str, we: str) -> str | None:
    """Why two parties cannot read each other's envelopes (one line that says what to do), or
    None when their keys are the same. ``they``/``we`` name the parties (``the session``,
    ``this worker``)."""
    if theirs == ours:
        return None
    return (
        f"signing key mismatch: {they} signs with {describe_key(theirs)}, {we} with "
        f"{describe_key(ours)}; give every baton process of the deployment the same signing key "
        "(BATON_SIGNING_KEY or signing_key in the config file)"
    )


def stored_key_id(setup: str) -> str | None:
    """The key id a session's stored setup records (``""``: it signs nothing), or None when it
    records none (a session started before key ids were kept, or no setup at all)."""
    try:
        value = json.loads(setup).get(SETUP_KEY_ID)
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


class Signer:
    """Signs and checks envelopes' wire text with one key (``signing_key`` in the settings)."""

    __slots__ = ("_key", "key_id")

    def __init__(self, key: SecretStr | str) -> None:
        self._key = _secret(key)
        self.key_id = key_id(key)
        """This key's id (:func:`key_id`), written beside every signature as ``kid``."""

    def __repr__(self) -> str:
        return f"Signer(key=**********, key_id={self.key_id!r})"

    def sign(self, raw: str) -> str:
        """The signature of an envelope's wire text: 64 lower-case hex digits."""
        return hmac.new(self._key, _wire_bytes(raw), hashlib.sha256).hexdigest()

    def fields(self, raw: str) -> tuple[str, str, str, str]:
        """The stream fields that go beside ``msg``: ``sig`` and ``kid``."""
        return (SIG_FIELD, self.sign(raw), KID_FIELD, self.key_id)

    def check(self, raw: str, sig: str | None, kid: str | None = None) -> None:
        """Raise ``InvalidEnvelope`` (its reason for the dead letters) unless ``sig`` is the
        signature of ``raw``; compared in constant time. ``kid``, the key id written beside it
        (None when the writer gave none), names the other key when the signature is wrong."""
        if sig is None:
            raise InvalidEnvelope(
                f"unsigned envelope: this bus requires signed envelopes (no {SIG_FIELD!r} field)",
                raw,
            )
        expected = self.sign(raw).encode()
        if hmac.compare_digest(expected, _wire_bytes(sig)):
            return
        if kid is not None and kid != self.key_id:
            theirs = kid[: KEY_ID_HEX * 2]  # what a foreign writer put there, kept short
            raise InvalidEnvelope(
                f"signed with another key: the envelope's {KID_FIELD} is {theirs!r}, this "
                f"reader's key id is {self.key_id!r} (give every baton process of the deployment "
                "the same signing key)",
                raw,
            )
        if kid is not None:  # this reader's own key id: the text is not what was signed
            raise InvalidEnvelope(
                "wrongly signed envelope: its signature does not match, though it names this "
                "reader's key: the message was changed after it was signed",
                raw,
            )
        raise InvalidEnvelope(
            "wrongly signed envelope: its signature does not match (another key, or the message "
            "was changed after it was signed)",
            raw,
        )
