"""The CLI's configuration: flag > environment variable > config file > default.

One :class:`BatonSettings` object carries everything a command was told, resolved in that order by
pydantic-settings. Every command builds it the same way (:func:`baton.cli.options.settings_from`,
from the options marked with the setting they give), ``worker`` and ``serve`` included, so
processes started alike agree on the bus and key prefix; :data:`NO_FLAG` lists the settings no
flag sets, and why.
The library itself (sessions, workers, the server) never reads it: it is handed what it needs,
which the settings make (:mod:`baton.settings.made`, :func:`session_fields`).

The config file is TOML with the fields below as top-level keys; its path comes
from ``--config`` or ``BATON_CONFIG``::

    # baton.toml
    bus = "redis://localhost:6379/0"
    prefix = "baton"
    pool = "default"             # the pool `baton worker` serves, `run --no-local-workers` uses
    model = "gpt-4o-mini"
    openai_base_url = "http://localhost:11434/v1"
    profiles = "profiles.toml"
    approve = "ask"
    lead_policy = "auto"         # what judges the lead's answers: auto | structural | guided
    temperature = 0.2            # the model's request settings, for the lead and every sub-agent
    max_tokens = 1024            # per reply; 0 sends none
    model_timeout = 120          # seconds a request may read nothing
    model_retries = 3
    tool_choice = "required"     # the lead's; sub-agents take theirs from their profile
    budget_tokens = 200000       # the whole session: every agent's tokens and model calls
    budget_calls = 100
    bus_outage = 120             # seconds of bus outage run, watch and serve ride out (then exit 3)
    lead_lease = 10              # seconds a lead lease lasts: how long a resume waits after a crash
    unclaimed_timeout = 15       # seconds a sub-agent waits for a worker before a warning
    signing_key = "…"            # sign envelopes, refuse unsigned ones (off unless set)
    retention = 604800           # seconds a finished session's keys stay on Redis (7 days)
    media = "s3://bucket/prefix" # where tools put media (a directory by default; docs/media.md)
    image_model = "gpt-image-1"  # generate_image's model on the endpoint's Images API

    [extra_body]                 # the one key that may be a table: merged into every request
    cache_prompt = true

Environment variables: ``OPENAI_API_KEY``, ``OPENAI_BASE_URL``, ``BATON_MODEL``, ``BATON_BUS`` (or
``REDIS_URL``), ``BATON_REDIS_PASSWORD`` (or ``REDIS_PASSWORD``), ``BATON_REDIS_CA_FILE``,
``BATON_REDIS_CERT_FILE``, ``BATON_REDIS_KEY_FILE`` (docs/securing-redis.md), ``BATON_PROFILES``,
``BATON_MEDIA_DIR``, ``BATON_MEDIA``, ``BATON_MEDIA_BASE_URL``, ``BATON_MEDIA_URL_EXPIRY``,
``BATON_IMAGE_MODEL``, ``BATON_IMAGE_RESPONSE_FORMAT`` (docs/media.md), ``BATON_APPROVE``,
``BATON_PREFIX``, ``BATON_POOL``, ``BATON_SESSION_TIMEOUT``, ``BATON_UNCLAIMED_TIMEOUT``,
``BATON_BUS_OUTAGE``, ``BATON_RETENTION``, ``BATON_SIGNING_KEY``, ``BATON_LOG_LEVEL``,
``BATON_CONFIG``, and ``BATON_`` + the upper-cased name of each model and session setting
(``BATON_TEMPERATURE``, ``BATON_TOP_P``, ``BATON_MAX_TOKENS``, ``BATON_MODEL_TIMEOUT``,
``BATON_MODEL_RETRIES``, ``BATON_TOOL_CHOICE``, ``BATON_LEAD_POLICY``,
``BATON_PARALLEL_TOOL_CALLS``, ``BATON_EXTRA_BODY`` (a JSON object), ``BATON_BUDGET_TOKENS``,
``BATON_BUDGET_CALLS``, ``BATON_PROFILE_TOOLS``, ``BATON_MAX_SENDS_PER_TURN``,
``BATON_MAX_NEW_AGENTS_PER_PROFILE``, ``BATON_MAX_SENDS_PER_AGENT``, ``BATON_MAX_WAVES``). A
variable set to the empty string counts as unset (compose's ``${VAR:-}`` passes empty ones),
falling through to the config file and the default.

Every problem — an unreadable or invalid file, an unknown key, a value of the wrong kind — is one
:class:`~baton.errors.ConfigError` whose message names the source and the key, because the CLI
prints it as the single line a user sees.

The package, a module per job: :mod:`~baton.settings.fields` (the settings), :mod:`~.checks` (what
a single value must be), :mod:`~.sources` and :mod:`~.load` (where they come from, and the line a
bad one is refused with), :mod:`~.made` and :mod:`~.session` (what they make for a session).
"""

from __future__ import annotations

from baton.settings.fields import NO_FLAG, TABLE_KEYS, BatonSettings, ToolChoiceSetting
from baton.settings.load import load_settings, read_config_file
from baton.settings.made import (
    budget,
    delegation,
    image_generator,
    lead_servers,
    media_store,
    model_label,
    model_settings,
    profile_set,
)
from baton.settings.session import NOT_FROM_SETTINGS, SESSION_SOURCES, session_fields

__all__ = [
    "NOT_FROM_SETTINGS",
    "NO_FLAG",
    "SESSION_SOURCES",
    "TABLE_KEYS",
    "BatonSettings",
    "ToolChoiceSetting",
    "budget",
    "delegation",
    "image_generator",
    "lead_servers",
    "load_settings",
    "media_store",
    "model_label",
    "model_settings",
    "profile_set",
    "read_config_file",
    "session_fields",
]
