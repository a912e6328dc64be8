"""A remote A2A agent's card: fetched once per process, and what the lead is told of it.

The card says where the agent takes requests (its interfaces) and what it does (its description
and skills). Both the session (for a profile that gives no description) and every worker that
hosts the profile need it; neither should fetch it again for every agent, so each process keeps
the cards it fetched, by URL. A failed fetch is not kept: the next agent tries again.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import httpx
from a2a.client import A2ACardResolver
from a2a.types import AgentCard

from baton.subagents.a2a_config import A2AConfig

log = logging.getLogger(__name__)

_CARDS: dict[str, AgentCard] = {}
"""The cards this process fetched, by the agent's URL."""

CONNECT_TIMEOUT_S = 10.0
REQUEST_TIMEOUT_S = 30.0


def http_client(config: A2AConfig) -> httpx.AsyncClient:
    """The HTTP client of one remote agent: its headers (and token) on every request. Reading a
    stream has no timeout of its own: the relay bounds each exchange (``timeout_s``)."""
    timeout = httpx.Timeout(
        connect=min(CONNECT_TIMEOUT_S, config.timeout_s),
        read=None,
        write=REQUEST_TIMEOUT_S,
        pool=REQUEST_TIMEOUT_S,
    )
    return httpx.AsyncClient(headers=config.request_headers(), timeout=timeout)


async def agent_card(
    http: httpx.AsyncClient, config: A2AConfig, headers: Mapping[str, str] | None = None
) -> AgentCard:
    """The agent's card, from this process's cache or fetched now, within
    ``REQUEST_TIMEOUT_S`` (raises the SDK's ``AgentCardResolutionError`` when it cannot be
    fetched or read)."""
    cached = _CARDS.get(config.url)
    if cached is not None:
        return cached
    resolver = A2ACardResolver(http, config.url)
    bounded = {"headers": dict(headers or {}), "timeout": httpx.Timeout(REQUEST_TIMEOUT_S)}
    card = await resolver.get_agent_card(http_kwargs=bounded)
    _CARDS[config.url] = card
    log.info("fetched the A2A card of %s (%s)", config.shown_url, card.name or "unnamed")
    return card


def forget_cards() -> None:
    """Drop every cached card (tests; a process that knows a remote agent changed)."""
    _CARDS.clear()


def describe(card: AgentCard) -> str:
    """What the lead is told of the agent: its description, then its skills."""
    skills = "; ".join(
        f"{skill.name or skill.id}: {skill.description}".rstrip(": ") for skill in card.skills
    )
    description = card.description.strip() or f"The remote agent {card.name or 'at its URL'}."
    return f"{description} Skills: {skills}." if skills else description


async def card_description(config: A2AConfig) -> str:
    """The card's description, or one line saying why there is none (a session still starts:
    the agent is refused with its error once the lead delegates to it)."""
    try:
        async with http_client(config) as http:
            return describe(await agent_card(http, config))
    except Exception as exc:  # any fault of the remote or its card: say so, start anyway
        why = config.redacted(str(exc))
        log.warning("cannot read the A2A card of %s: %s", config.shown_url, why)
        return f"A remote A2A agent at {config.shown_url} (its card could not be read: {why})."
