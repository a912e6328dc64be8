"""A worker's remote A2A agents (:class:`WorkerA2A`), and their descriptions for the lead.

Kept apart from :mod:`baton.subagents.a2a_remote` so that a process whose profiles name no remote
agent never imports the ``a2a-sdk`` (an optional extra), and one whose profiles do, but lacks it,
refuses those agents with one line naming the profile and what to install.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING

from baton.subagents.a2a_config import A2ANotInstalled
from baton.subagents.loop import TurnMaker
from baton.subagents.profiles import Profile

if TYPE_CHECKING:
    from baton.subagents.a2a_remote import RemoteAgent


class WorkerA2A:
    """The remote agents of one worker's profiles: one :class:`RemoteAgent` (HTTP client, SDK
    client, card) per profile, made on its first agent and closed with the worker."""

    def __init__(self) -> None:
        self._remotes: dict[str, RemoteAgent] = {}
        self._stack: AsyncExitStack | None = None

    async def __aenter__(self) -> WorkerA2A:
        self._stack = AsyncExitStack()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        stack, self._stack = self._stack, None
        self._remotes.clear()
        if stack is not None:
            await stack.aclose()

    def turns(self, profile: Profile) -> TurnMaker | None:
        """What runs the rounds of ``profile``'s agents: None for a local agent (the engine),
        its remote's relay for ``kind = "a2a"``. Raises ``A2ANotInstalled`` without the SDK, and
        ``ConfigError`` when its token's variable is unset."""
        config = profile.a2a
        if config is None:
            return None
        remote = self._remotes.get(profile.name)
        if remote is None:
            if self._stack is None:
                raise RuntimeError(
                    "the worker's remote agents are not open (Worker.run opens them)"
                )
            try:
                from baton.subagents.a2a_remote import RemoteAgent
            except ImportError as exc:
                raise A2ANotInstalled(repr(profile.name)) from exc
            config.request_headers()  # its token's variable is set, or it is refused now
            remote = self._remotes[profile.name] = RemoteAgent(profile.name, config)
            self._stack.push_async_callback(remote.aclose)
        return remote.turn


async def with_card_descriptions(profiles: Mapping[str, Profile]) -> dict[str, Profile]:
    """``profiles``, each remote agent without a description given one from its card (its
    description and skills; fetched once per process). A card that cannot be read says so in
    the description: the session starts anyway, and the agent's error comes when it is asked."""
    found = dict(profiles)
    wanted = [p for p in profiles.values() if p.a2a is not None and not p.description.strip()]
    if not wanted:
        return found
    try:
        from baton.subagents.a2a_card import card_description
    except ImportError as exc:
        raise A2ANotInstalled(", ".join(repr(p.name) for p in wanted)) from exc
    for profile in wanted:
        assert profile.a2a is not None
        description = await card_description(profile.a2a)
        found[profile.name] = dataclasses.replace(profile, description=description)
    return found
