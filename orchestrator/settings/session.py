"""Which :class:`~baton.session.SessionConfig` fields the settings give, from which settings, and
the one way a command or ``baton serve`` turns its settings into a session's fields.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from baton.settings import made
from baton.settings.fields import BatonSettings

_MODEL = ("openai_api_key", "openai_base_url", "model", "model_timeout", "model_retries",
          "temperature", "top_p", "max_tokens", "parallel_tool_calls", "extra_body")  # fmt: skip
_DELEGATION = ("max_sends_per_turn", "max_new_agents_per_profile", "max_sends_per_agent",
               "max_waves")  # fmt: skip
SESSION_SOURCES: dict[str, tuple[str, ...]] = {
    "bus_url": ("bus", "redis_password", "redis_ca_file", "redis_cert_file", "redis_key_file"),
    "bus_prefix": ("prefix",),
    "bus_signing_key": ("signing_key",),
    "model": _MODEL,
    "profiles": ("profiles",),
    "lead_mcp": ("profiles",),
    "approve": ("approve",),
    "pool": ("pool",),
    "timeout_s": ("session_timeout",),
    "media_dir": ("media_dir",),  # `media` naming a directory sets media_dir too
    "media": ("media",),  # media_base_url and media_url_expiry tune the store it names
    "images": (*_MODEL, "image_model", "image_response_format"),
    "tool_choice": ("tool_choice",),
    "budget": ("budget_tokens", "budget_calls"),
    "delegation": _DELEGATION,
    "profile_tools": ("profile_tools",),
    "lead_policy": ("lead_policy",),
    "bus_outage_s": ("bus_outage",),
    "lead_lease_s": ("lead_lease",),
    "retention_s": ("retention",),
    "unclaimed_s": ("unclaimed_timeout",),
    "upload_max_bytes": ("upload_max_bytes",),
}
"""Each :class:`~baton.session.SessionConfig` field the settings give, with the settings that
set it (:func:`session_fields` makes it from them; ``baton resume`` changes a field
of the session's own only when one of them was given)."""
NOT_FROM_SETTINGS: dict[str, str] = {
    **dict.fromkeys(
        ("task", "context", "session_id", "local_workers", "resume"),
        "what each session is asked: a command's arguments, a request's body",
    ),
    **dict.fromkeys(
        (
            "worker_concurrency",
            "instructions",
            "limits",
            "text_flush_s",
            "shutdown_grace_s",
            "failure_grace_s",
        ),
        "the embedding API's (and the HTTP request's instructions); the CLI keeps the defaults",
    ),
}
"""The :class:`~baton.session.SessionConfig` fields no setting gives, and why;
``tests/cli/test_declared_once.py`` keeps this and :data:`SESSION_SOURCES` covering every field
once."""
_SESSION_MADE: dict[str, Callable[[BatonSettings], object]] = {
    "model": made.model_settings,
    "profiles": made.profile_set,
    "lead_mcp": made.lead_servers,
    "media": made.media_store,
    "images": made.image_generator,
    "budget": made.budget,
    "delegation": made.delegation,
}
"""The session fields the settings make (:mod:`baton.settings.made`); every other one is a
setting as is."""
_SESSION_AS_IS = {
    field: sources[0] for field, sources in SESSION_SOURCES.items() if field not in _SESSION_MADE
}


def session_fields(
    settings: BatonSettings, names: Iterable[str] = SESSION_SOURCES
) -> dict[str, object]:
    """The :class:`~baton.session.SessionConfig` fields ``names`` as the settings give them
    (:data:`SESSION_SOURCES`), leaving out those that are None (the config's own default
    decides): the one way a command or ``baton serve`` turns its settings into a session's."""
    fields: dict[str, object] = {}
    for name in names:
        made = _SESSION_MADE.get(name)
        value = made(settings) if made else getattr(settings, _SESSION_AS_IS[name])
        if value is not None:
            fields[name] = value
    return fields
