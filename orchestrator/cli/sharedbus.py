"""The one check of every command that only makes sense on a bus other processes share.

``memory://`` (the default) is a bus inside one process: ``baton run`` alone uses it well, but a
``baton worker`` on it serves nobody, forever; ``baton post``, ``watch``, ``approve``,
``sessions``, ``clean`` and ``cancel`` reach nothing of another process; ``baton resume`` finds
nothing to resume; ``baton run --no-local-workers`` waits for workers that cannot reach it. Each
refuses it here, before anything starts, as a usage error (exit 2) saying what to give instead.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from baton.errors import ConfigError

GIVE_A_SHARED_BUS = "give --bus redis://HOST:PORT/DB (or set BATON_BUS / REDIS_URL)"


def in_process(url: str) -> bool:
    """Whether ``url`` names the in-process bus (``memory://``, any spelling of the scheme)."""
    try:
        return urlsplit(url.strip()).scheme.lower() == "memory"
    except ValueError:
        return False


def require_shared_bus(url: str, why: str = "this command needs a shared bus") -> None:
    """Raise ``ConfigError`` (exit 2) when ``url`` is the in-process bus; ``why`` says what the
    command needs the bus for."""
    if in_process(url):
        raise ConfigError(f"{why}, and memory:// lives inside one process: {GIVE_A_SHARED_BUS}")
