"""Errors of the sub-agent layer, under the one root ``baton.errors.BatonError``."""

from __future__ import annotations

from pathlib import Path

from baton.errors import BatonError, ConfigError


class ProfileError(ConfigError):
    """A profile cannot be used; the message names the file, the profile and the field."""

    def __init__(
        self, problem: str, *, source: Path | str | None, profile: str | None, field: str | None
    ) -> None:
        where = [f"file {source}" if source is not None else "Python profile"]
        if profile is not None:
            where.append(f"profile {profile!r}")
        if field is not None:
            where.append(f"field {field!r}")
        super().__init__(f"bad agent profile ({', '.join(where)}): {problem}")
        self.source = source
        self.profile = profile
        self.field = field
        self.problem = problem


class NoAgentContext(BatonError):
    """A sub-agent tool was called outside a sub-agent's turn."""


class LostOwnership(BatonError):
    """Another worker took this agent over (our lease lapsed); this copy must stop quietly."""

    def __init__(self, session: str, agent: str, owner: str) -> None:
        super().__init__(
            f"agent {session}/{agent} is now owned by {owner or 'nobody'}; this copy stops "
            "without reporting, the owner finishes the work"
        )
        self.owner = owner
