"""The resumable part of a session's setup: what its lead's record keeps of it, and how a resume
reads that back.

A new session claims its lead's lease and stores its settings (less what belongs to the process:
:data:`PROCESS_FIELDS`); a resume takes the lease over from the dead lead and rebuilds the config
from the stored settings, what the resumer gave again and may change, and the process's own
fields, refusing what cannot be continued (a memory bus, another signing key, profiles the dead
lead was offered that the resumer lacks, a changed task or pool).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from contextlib import AsyncExitStack
from dataclasses import dataclass

from pydantic import ValidationError

from baton.bus.base import Bus, BusOptions
from baton.bus.connect import open_bus
from baton.bus.signing import SETUP_KEY_ID, key_mismatch, stored_key_id
from baton.errors import ConfigError
from baton.lead.keeper import LeadKeeper, LeadRecord, ResumeRefused
from baton.session.config import SessionConfig
from baton.session.validation import describe_validation
from baton.subagents.profiles import Profile

PROCESS_FIELDS = frozenset(
    {
        "bus_url", "bus_prefix", "bus_signing_key", "model", "profiles", "resume", "session_id",
        "media", "images", "lead_mcp",
    }
)  # fmt: skip
"""What a session's stored setup never holds: it belongs to the process that runs the session
(the model's endpoint and key above all, and the profiles' code)."""
FIXED_FIELDS = ("task", "local_workers", "pool")
"""What a resume cannot change: the work, and where its sub-agents' spawn requests went."""


def setup_of(
    config: SessionConfig, profiles: Iterable[str], model: str, *, key_id: str = ""
) -> str:
    """The session's settings as its lead's record keeps them (``setup``), with the id of the
    key its envelopes are signed with (never the key): what a sender checks its own against."""
    stored = config.model_dump(mode="json", exclude=set(PROCESS_FIELDS))
    stored["media_dir"] = str(config.media_dir.absolute())  # the resumer's cwd may differ
    setup = {"config": stored, "profiles": list(profiles), "model": model, SETUP_KEY_ID: key_id}
    return json.dumps({**setup, "started_at": time.time()}, ensure_ascii=False)


def resumed_config(
    config: SessionConfig, record: LeadRecord
) -> tuple[SessionConfig, list[str], float]:
    """A resumed session's config (its stored setup, what the resumer set and may change, and
    the process's own fields), the profiles its lead was offered, and the time it has left
    (what was left of its own timeout, or a new ``timeout_s`` from now)."""
    session = config.session_id
    try:
        setup = json.loads(record.setup)
        stored, offered = dict(setup["config"]), [str(p) for p in setup["profiles"]]
        started_at = float(setup["started_at"])
    except (ValueError, TypeError, KeyError) as exc:
        raise ResumeRefused(f"session {session}: its setup cannot be read: {exc!r}") from exc
    given = {name: getattr(config, name) for name in config.model_fields_set}
    for name in FIXED_FIELDS:
        if given.get(name) not in (None, "", stored.get(name)):
            raise ConfigError(
                f"session {session} ran with {name}={stored.get(name)!r}; a resume cannot "
                f"change it (got {given[name]!r})"
            )
    fields = {k: v for k, v in stored.items() if k in SessionConfig.model_fields}
    fields.update({k: v for k, v in given.items() if k not in FIXED_FIELDS})
    fields.update({name: getattr(config, name) for name in PROCESS_FIELDS})
    try:
        resumed = SessionConfig.model_validate(fields)
    except ValidationError as exc:
        raise ResumeRefused(
            f"session {session}: its setup does not fit: {describe_validation(exc)}"
        ) from exc
    if "timeout_s" in given:
        return resumed, offered, resumed.timeout_s
    return resumed, offered, max(0.0, started_at + resumed.timeout_s - time.time())


def offered_profiles(
    session: str, profiles: dict[str, Profile], offered: list[str] | None
) -> dict[str, Profile]:
    """A resumed session's profiles: those its lead was offered, each of which the resumer must
    have (``offered`` None: a new session's, as given)."""
    if offered is None:
        return profiles
    missing = [name for name in offered if name not in profiles]
    if missing:
        raise ResumeRefused(
            f"session {session}: its lead was offered the profiles {', '.join(missing)}, which "
            "the given profiles lack; give the profiles it ran with (--profiles)"
        )
    return {name: profiles[name] for name in offered}


async def session_bus(stack: AsyncExitStack, config: SessionConfig, given: Bus | None) -> Bus:
    """The bus the session runs on: the one given, else opened from ``bus_url`` (and closed with
    ``stack``). A resume from a ``memory://`` URL is refused before anything opens: an
    in-process bus ends with its process, so there is nothing to continue."""
    if given is not None:
        return given
    if config.resume and config.bus_url.startswith("memory:"):
        raise ResumeRefused(
            f"session {config.session_id} cannot be resumed from a memory:// bus: an in-process "
            "bus ends with its process; run sessions on Redis (--bus redis://...) to resume them"
        )
    options = BusOptions(signing_key=config.bus_signing_key, outage_s=config.bus_outage_s)
    opened = open_bus(config.bus_url, options, prefix=config.bus_prefix)
    return await stack.enter_async_context(opened)


@dataclass(frozen=True)
class Resumed:
    """A session continued from its dead lead's record: the record, the config rebuilt from it,
    the profiles its lead was offered and the time the session has left."""

    record: LeadRecord
    config: SessionConfig
    offered: list[str]
    time_left: float


async def hold_the_lead(keeper: LeadKeeper, config: SessionConfig, bus: Bus) -> Resumed | None:
    """Take the lead's lease: claim it for a new session (None), or take it over from the dead
    lead of the session a resume continues, refusing one signed with another key (its agents
    could not read this lead, nor it their results)."""
    if not config.resume:
        await keeper.claim()
        return None
    record = await keeper.take_over()
    resumed, offered, time_left = resumed_config(config, record)
    stored = stored_key_id(record.setup)
    session = config.session_id
    mismatch = None if stored is None else key_mismatch(
        stored, bus.key_id, they=f"session {session}", we="this resume"
    )  # fmt: skip
    if mismatch is not None:
        raise ResumeRefused(f"session {session} cannot be resumed: {mismatch}")
    return Resumed(record, resumed, offered, time_left)
