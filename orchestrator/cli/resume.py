"""``baton resume SESSION``: carry on a session whose lead process died (``kill -9`` of ``baton
run``, a lost host), through :meth:`~baton.session.Session.resume`.

It is ``baton run`` without a task: the session's task and its settings come from the lead's
checkpoint on the bus; this command gives what belongs to a process (the bus, the model endpoint
and key, the profiles, where media go) and shows the session the same way (the views, approvals,
Ctrl-C, the exit codes). It first shows where the session stood (:mod:`baton.cli.catchup`: its
running sub-agents, the approvals they wait for with their ``baton approve`` lines), then what
happens from the resume on; ``baton watch SESSION --from-start`` replays the whole story. Each
sub-agent keeps the approval policy it was spawned with, so ``--approve auto|deny`` is also
applied here to what the older ones wait for, or ask later (:mod:`baton.cli.approvals`).

Refused, with exit 2 and one line: a session that finished, one whose lead is alive (known
within one lead lease, 10 s: a live lead renews it), one the bus holds no lead record of, and any
on a ``memory://`` bus.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import ValidationError

from baton.bus.errors import BusUnreachable
from baton.cli.run import configure_logging, exit_for, interrupted_exit, view_session
from baton.cli.sharedbus import require_shared_bus
from baton.errors import BatonError, ConfigError
from baton.session.validation import describe_validation
from baton.settings import SESSION_SOURCES, BatonSettings, session_fields

if TYPE_CHECKING:
    from baton.session import Session

PROCESS_FIELDS = (
    "bus_url",
    "bus_prefix",
    "bus_signing_key",
    "model",
    "profiles",
    "lead_mcp",
    "bus_outage_s",
    "lead_lease_s",
    "images",
)
"""Session fields that belong to the process that resumes: always this one's settings."""
RESUMABLE = ("approve", "media", "media_dir", "timeout_s", "retention_s")
"""Session fields a resume may change, when one of their settings is given (a flag, the
environment or the config file: :data:`~baton.settings.SESSION_SOURCES`). The rest of the
session's settings are its own, from its checkpoint."""


@dataclass(frozen=True, slots=True)
class ResumeOptions:
    """What ``baton resume`` was told beyond the shared settings."""

    session: str
    as_json: bool = False


def resumed_session(settings: BatonSettings, session_id: str) -> Session:
    """The session to resume, with what this process gives it (as ``Session.resume`` would)."""
    from baton.session import Session, SessionConfig

    given = settings.model_fields_set
    changed = [name for name in RESUMABLE if given.intersection(SESSION_SOURCES[name])]
    fields: dict[str, object] = {
        **session_fields(settings, (*PROCESS_FIELDS, *changed)),
        "session_id": session_id,
        "resume": True,
    }
    try:
        config = SessionConfig.model_validate(fields)
    except ValidationError as exc:
        raise ConfigError(f"bad session setting: {describe_validation(exc)}") from exc
    return Session(config)


async def resume_session(settings: BatonSettings, options: ResumeOptions) -> int:
    """Carry the session on to its end; returns the exit code (as ``baton run``'s)."""
    configure_logging(settings.log_level)
    require_shared_bus(settings.bus, "a session cannot be resumed from a memory:// bus")
    session = resumed_session(settings, options.session)
    interrupted, finished = await view_session(
        session, settings, as_json=options.as_json, command="baton resume"
    )
    if interrupted:
        return interrupted_exit(interrupted, finished, "baton resume")
    error = session.error
    if isinstance(error, BusUnreachable) or (isinstance(error, BatonError) and not session.result):
        raise error  # the bus failed (exit 3), or another lead took the session over (exit 1)
    return exit_for(finished, session.result, "baton resume")
