"""Which model a sub-agent talks to: the session's model settings with its profile's overrides, or
the built-in offline model when no API key is configured.

Reading the environment is the caller's choice, never a default: ``baton worker`` passes a
:class:`ProfileModels` built from its settings, and a :class:`~baton.subagents.worker.Worker`
built without a factory uses :func:`offline_models`, so an embedding application (or a test) with
``OPENAI_API_KEY`` in its shell does not reach a paid API unless it says so. The one exception is
the variable a profile names itself (``api_key_env``): naming it is the profile author's consent.

One model client per distinct settings serves every agent of the worker (a client holds a
connection pool; one per agent would cost thousands of pools). The offline model is said to be in
use, in the log and in :attr:`ProfileModels.label`, because its answers are canned.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pydantic import SecretStr

from baton.bus.redact import redact_url
from baton.errors import ConfigError
from baton.llm import OFFLINE_LABEL, ModelSettings, OpenAIChatModel, offline_model
from baton.llm.client import OPENAI_API_URL
from baton.llm.defaults import DEFAULT_MODEL
from baton.llm.types import ChatModel
from baton.subagents.profiles import Profile, ProfileModel

log = logging.getLogger(__name__)

ModelFactory = Callable[[Profile], ChatModel]
"""Gives the model a profile's agents use; called once per agent run, so cache inside."""

_PLAIN_OVERRIDES = ("temperature", "top_p", "timeout", "max_retries", "parallel_tool_calls")
""":class:`ProfileModel` fields that replace the :class:`ModelSettings` field of the same name."""


def describe_model(settings: ModelSettings | None) -> str:
    """Which model at which endpoint ``settings`` reach, in words for start lines and logs:
    ``llama3.1 at http://localhost:11434/v1 (no API key)``, the endpoint's credentials hidden;
    ``offline model`` for None. One wording for ``baton run``'s header, ``baton worker``'s ready
    line and ``baton serve``'s start line."""
    if settings is None:
        return "offline model"
    keyless = settings.api_key is None or not settings.api_key.get_secret_value()
    where = redact_url(settings.base_url or OPENAI_API_URL)
    return f"{settings.model} at {where}" + (" (no API key)" if keyless else "")


class ProfileModels:
    """A :data:`ModelFactory`: ``base`` settings (None: the offline model) with each profile's
    :class:`~baton.subagents.profiles.ProfileModel` overrides applied.

    ``env`` is where a profile's ``api_key_env`` is looked up (default: the process environment).
    With ``base=None`` a profile that names an endpoint of its own still reaches it, unless
    ``offline_only``. Use as an async context manager (or call :meth:`aclose`) so the clients
    are closed; call :meth:`check` at start-up so a profile that cannot be served is a
    configuration error then, not a failed agent later.
    """

    def __init__(
        self,
        base: ModelSettings | None,
        *,
        env: Mapping[str, str] | None = None,
        offline_only: bool = False,
    ) -> None:
        self.base = base
        self._env: Mapping[str, str] = os.environ if env is None else env
        self._offline_only = offline_only
        self._models: dict[tuple[str, str], ChatModel] = {}
        if base is None:
            log.warning("using the %s", OFFLINE_LABEL)

    @property
    def offline(self) -> bool:
        """True when the session's own model is the offline one (a profile may still name an
        endpoint of its own)."""
        return self.base is None

    @property
    def label(self) -> str:
        """The session model as :func:`describe_model` words it; the offline one at length."""
        return OFFLINE_LABEL if self.base is None else describe_model(self.base)

    def settings_for(self, profile: Profile) -> ModelSettings | None:
        """The settings ``profile``'s agents use; None for the offline model.

        Raises ``ConfigError`` when the profile names a key variable that is not set.
        """
        overrides = profile.model_overrides
        if overrides is None:
            return self.base
        if self.base is None and (overrides.base_url is None or self._offline_only):
            return None  # no endpoint of its own: the profile shares the offline model
        fields: dict[str, Any] = (
            {"model": DEFAULT_MODEL} if self.base is None else dict(self.base.model_dump())
        )
        if overrides.base_url is not None and overrides.base_url != fields.get("base_url"):
            # Another host: the session's key must not travel there.
            fields["base_url"] = overrides.base_url
            fields["api_key"] = None
        if overrides.api_key_env is not None:
            fields["api_key"] = SecretStr(self._key(profile.name, overrides))
        if overrides.name is not None:
            fields["model"] = overrides.name
        for name in _PLAIN_OVERRIDES:
            value = getattr(overrides, name)
            if value is not None:
                fields[name] = value
        if overrides.max_tokens is not None:
            fields["max_tokens"] = overrides.max_tokens or None
        fields["extra_body"] = {**fields.get("extra_body", {}), **overrides.extra_body}
        return ModelSettings.model_validate(fields)

    def _key(self, profile: str, overrides: ProfileModel) -> str:
        variable = overrides.api_key_env or ""
        key = self._env.get(variable, "")
        if not key:
            raise ConfigError(
                f"profile {profile!r}: its model's api_key_env names {variable}, which is not set"
            )
        return key

    def check(self, profiles: Iterable[Profile]) -> None:
        """Resolve every profile's settings once; raises ``ConfigError`` for the first bad one."""
        for profile in profiles:
            self.settings_for(profile)

    def __call__(self, profile: Profile) -> ChatModel:
        settings = self.settings_for(profile)
        if settings is None:
            cache_key = ("offline", "")
        else:
            secret = settings.api_key.get_secret_value() if settings.api_key else ""
            cache_key = (settings.model_dump_json(), secret)
        model = self._models.get(cache_key)
        if model is None:
            model = offline_model() if settings is None else OpenAIChatModel(settings)
            self._models[cache_key] = model
        return model

    async def __aenter__(self) -> ProfileModels:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        models, self._models = list(self._models.values()), {}
        for model in models:
            aclose = getattr(model, "aclose", None)
            if aclose is not None:
                await aclose()


class EnvModels(ProfileModels):
    """:class:`ProfileModels` whose base is set by ``OPENAI_API_KEY``, ``OPENAI_BASE_URL`` and
    ``BATON_MODEL`` in ``env`` (a mapping in the environment's form; :meth:`from_environ` for the
    process's own). No key means the offline model.

    The request settings (temperature, ``max_tokens``, …) keep :class:`ModelSettings`' defaults
    here; ``baton worker`` reads them with every other setting and builds a
    :class:`ProfileModels` itself.
    """

    def __init__(self, env: Mapping[str, str], *, offline_only: bool = False) -> None:
        key = env.get("OPENAI_API_KEY") or None
        base = None
        if key is not None:
            base = ModelSettings(
                model=env.get("BATON_MODEL") or DEFAULT_MODEL,
                base_url=env.get("OPENAI_BASE_URL") or None,
                api_key=SecretStr(key),
            )
        super().__init__(base, env=env, offline_only=offline_only)

    @classmethod
    def from_environ(cls) -> EnvModels:
        """The models the process environment names."""
        return cls(os.environ)


def offline_models() -> EnvModels:
    """The built-in offline model for every profile, whatever the environment says: the default
    of a :class:`~baton.subagents.worker.Worker` given no factory."""
    return EnvModels({}, offline_only=True)
