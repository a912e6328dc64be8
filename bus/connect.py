"""Choose a backend from a URL: ``memory://`` (the default) or ``redis://``/``rediss://``/``unix://``.

A Redis URL carries everything its connections need, credentials and TLS files included
(:func:`redis_url`): the URL is what every command, session and server already hands on, so a
password or a CA file set apart from it (``REDIS_PASSWORD``, ``redis_ca_file``) is folded into it
once, where the settings are read, and reaches every connection without a second path.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from baton.bus.base import Bus, BusOptions
from baton.bus.errors import redact_url
from baton.errors import ConfigError

REDIS_SCHEMES = frozenset({"redis", "rediss", "unix", "redis+cluster", "rediss+cluster"})
TLS_SCHEMES = frozenset({"rediss", "rediss+cluster"})

TLS_QUERY = {"ca_file": "ssl_ca_certs", "cert_file": "ssl_certfile", "key_file": "ssl_keyfile"}
"""Where each TLS file goes in a ``rediss://`` URL: redis-py's own query parameters, so a URL
written by hand (``rediss://host:6380/0?ssl_ca_certs=/etc/ca.pem``) works the same."""


def redis_url(
    url: str,
    *,
    password: str | None = None,
    ca_file: str | Path | None = None,
    cert_file: str | Path | None = None,
    key_file: str | Path | None = None,
) -> str:
    """``url`` with a password and TLS files added; a ``memory://`` URL is returned as it is.

    Precedence: what the URL says itself wins. A password is added only to a URL without one
    (``redis://baton@host/0`` becomes ``redis://baton:PW@host/0``), a TLS file only where the URL
    has no such query parameter, so ``REDIS_PASSWORD`` can serve as the default of a deployment
    while one URL still names its own. TLS files need ``rediss://`` (a ``ConfigError`` otherwise:
    on ``redis://`` they would be ignored and the traffic sent in clear); their paths are made
    absolute, since the URL travels to processes that may run elsewhere in the tree.
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in REDIS_SCHEMES:
        return url
    files = {
        name: os.path.abspath(path)
        for name, path in (("ca_file", ca_file), ("cert_file", cert_file), ("key_file", key_file))
        if path is not None and str(path)
    }
    if files and scheme not in TLS_SCHEMES:
        given = ", ".join(f"redis_{name}" for name in files)
        raise ConfigError(
            f"{given} set, but the bus URL {redact_url(url)!r} does not use TLS: "
            "use rediss://HOST:PORT/DB"
        )
    if "key_file" in files and "cert_file" not in files:
        raise ConfigError("redis_key_file is set without redis_cert_file: a client key needs its "
                          "certificate")  # fmt: skip
    netloc = parts.netloc
    if password and parts.password is None:
        userinfo, at, host = netloc.rpartition("@")
        user = userinfo if at else ""
        netloc = f"{user}:{quote(password, safe='')}@{host}"
    query = parts.query
    present = {key for key, _ in parse_qsl(query, keep_blank_values=True)}
    added = [
        (TLS_QUERY[name], path) for name, path in files.items() if TLS_QUERY[name] not in present
    ]
    if added:
        query = "&".join(filter(None, [query, urlencode(added, safe="/")]))
    if (netloc, query) == (parts.netloc, parts.query):
        return url
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def open_bus(
    url: str = "memory://", options: BusOptions | None = None, *, prefix: str = "baton"
) -> Bus:
    """A not-yet-started bus for ``url``; use it as ``async with open_bus(url) as bus``.

    ``prefix`` is the Redis key prefix (the memory bus has no keys). Raises ``ConfigError`` for
    a URL no backend understands. The Redis backend is imported only when asked for, so the
    in-process default does not pay for it.
    """
    scheme = urlsplit(url).scheme.lower()
    if scheme == "memory":
        from baton.bus.memory import MemoryBus

        return MemoryBus(options, url=url)
    if scheme in REDIS_SCHEMES:
        from baton.bus.redis import RedisBus

        return RedisBus(url, options, prefix=prefix)
    raise ConfigError(
        f"unknown bus URL {redact_url(url)!r}: use memory://, redis://HOST:PORT/DB, rediss://..., "
        "unix://PATH or redis+cluster://HOST:PORT[,HOST:PORT...]"
    )
