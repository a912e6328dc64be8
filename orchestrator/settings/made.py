"""What the settings make: the objects a session, a worker or the server is handed.

The library never reads the settings (:mod:`baton.settings`); a command turns them into these —
the model endpoint, the media store, the Images API, the lead's delegation caps, the session's
budget, the profiles and the lead's MCP servers — here, each importing what it builds only when
asked (a ``baton watch`` must not load the model client to read a flag).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from baton.llm.defaults import DEMO_IMAGE_MODEL
from baton.media import MediaStore, media_directory, open_store
from baton.settings.fields import BatonSettings

if TYPE_CHECKING:
    from baton.engine.spend import SpendLimits
    from baton.lead.delegation import DelegationLimits
    from baton.llm import ModelSettings
    from baton.subagents.images import ImageGenerator
    from baton.subagents.mcp_config import McpServerConfig
    from baton.subagents.profiles import Profile


def model_label(settings: BatonSettings) -> str:
    """Which model and endpoint the commands use, in words, for their start lines:
    ``llama3.1 at http://localhost:11434/v1 (no API key)``; the offline model says so."""
    from baton.subagents.models import describe_model

    return describe_model(model_settings(settings))


def model_settings(settings: BatonSettings) -> ModelSettings | None:
    """The model endpoint and request settings every agent starts from (a profile may
    override them), or None for the offline model (neither a key nor a base URL)."""
    if settings.offline:
        return None
    from baton.llm import ModelSettings

    return ModelSettings.model_validate(
        {
            "model": settings.model,
            "base_url": settings.openai_base_url,
            "api_key": None if settings.keyless else settings.openai_api_key,
            "timeout": settings.model_timeout,
            "max_retries": settings.model_retries,
            "temperature": settings.temperature,
            "top_p": settings.top_p,
            "max_tokens": settings.max_tokens or None,
            "parallel_tool_calls": settings.parallel_tool_calls,
            "extra_body": dict(settings.extra_body),
        }
    )


def media_store(settings: BatonSettings) -> MediaStore:
    """The store the ``media`` setting names (a directory: ``media_dir``); raises
    ``ConfigError`` for one that cannot be used here (no ``s3`` extra for a bucket)."""
    bucket = settings.media if settings.media and media_directory(settings.media) is None else None
    return open_store(
        bucket or settings.media_dir,
        base_url=settings.media_base_url,
        url_expiry_s=settings.media_url_expiry,
    )


def image_generator(settings: BatonSettings) -> ImageGenerator | None:
    """The Images API of the configured endpoint for ``generate_image``; None offline (the
    tool paints its demo picture)."""
    endpoint = model_settings(settings)
    if endpoint is None or settings.image_model == DEMO_IMAGE_MODEL:
        return None
    from baton.subagents.images import OpenAIImages

    return OpenAIImages(
        endpoint, settings.image_model, response_format=settings.image_response_format
    )


def delegation(settings: BatonSettings) -> DelegationLimits | None:
    """The lead's delegation caps, or None when none is set (the lead's defaults)."""
    given = {
        name: getattr(settings, name)
        for name in (
            "max_sends_per_turn",
            "max_new_agents_per_profile",
            "max_sends_per_agent",
            "max_waves",
        )
        if getattr(settings, name) is not None
    }
    if not given:
        return None
    from baton.lead.delegation import DelegationLimits

    return DelegationLimits(**given)


def budget(settings: BatonSettings) -> SpendLimits | None:
    """The session-wide caps, or None when neither is set."""
    if settings.budget_tokens is None and settings.budget_calls is None:
        return None
    from baton.engine.spend import SpendLimits

    return SpendLimits(max_tokens=settings.budget_tokens, max_model_calls=settings.budget_calls)


def profile_set(settings: BatonSettings) -> dict[str, Profile]:
    """The profiles by name: the profiles file's, or the built-in ones."""
    from baton.session.compose import resolve_profiles

    return resolve_profiles(settings.profiles)


def lead_servers(settings: BatonSettings) -> dict[str, McpServerConfig]:
    """The lead's MCP servers: the profiles file's ``[lead.mcp.<server>]`` tables."""
    from baton.session.compose import lead_servers

    return lead_servers(settings.profiles)
