"""The agent card: what a client learns from ``/.well-known/agent-card.json`` before it sends.

Built per request from the URL the client used (a server on port 0, or behind a proxy that
keeps the ``Host``, does not know its own address beforehand), which is why the SDK's static
card route is not used; the card is still serialised by the SDK. It names both bindings, one
skill per profile (as ``GET /profiles`` lists them), streaming, and the bearer scheme when the
server has a token.
"""

from __future__ import annotations

from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentProvider,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from a2a.utils.constants import PROTOCOL_VERSION_1_0, TransportProtocol

from baton.errors import installed_version
from baton.server.a2a.paths import JSONRPC_PATH, REST_PREFIX
from baton.subagents.profiles import Profile

BEARER = "bearer"
INPUT_MODES = ["text/plain"]
OUTPUT_MODES = ["text/plain", "image/png"]


def build_card(root: str, profiles: list[Profile], *, token: bool) -> AgentCard:
    """The card of the server whose root URL is ``root`` (``http://host:port``, no slash)."""
    names = ", ".join(profile.name for profile in profiles) or "none"
    card = AgentCard(
        name="baton",
        description=(
            "A lead agent that splits a task and delegates it to sub-agents, then answers with "
            f"their results and media. Sub-agents: {names}."
        ),
        version=installed_version(),
        provider=AgentProvider(organization="baton", url=root),
        documentation_url=f"{root}/openapi.json",
        supported_interfaces=[
            AgentInterface(
                url=root + JSONRPC_PATH,
                protocol_binding=TransportProtocol.JSONRPC,
                protocol_version=PROTOCOL_VERSION_1_0,
            ),
            AgentInterface(
                url=root + REST_PREFIX,
                protocol_binding=TransportProtocol.HTTP_JSON,
                protocol_version=PROTOCOL_VERSION_1_0,
            ),
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=INPUT_MODES,
        default_output_modes=OUTPUT_MODES,
        skills=[
            AgentSkill(
                id=profile.name,
                name=profile.name,
                description=profile.description,
                tags=["baton", "sub-agent"],
            )
            for profile in profiles
        ],
    )
    if token:
        scheme = HTTPAuthSecurityScheme(
            scheme="Bearer",
            description="the server's token (--token / BATON_TOKEN), or a session's own token "
            "for that session's task",
        )
        card.security_schemes[BEARER].CopyFrom(SecurityScheme(http_auth_security_scheme=scheme))
        card.security_requirements.append(
            SecurityRequirement(schemes={BEARER: StringList(list=[])})
        )
    return card
