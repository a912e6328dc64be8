"""Which model a sub-agent talks to: an OpenAI-compatible endpoint from the environment, or the
built-in offline model when no API key is configured.

Reading the environment is the caller's choice, never a default: ``baton worker`` passes an
:class:`EnvModels` built from its settings, and a :class:`~baton.subagents.worker.Worker` built
without a factory uses :func:`offline_models`, so an embedding application (or a test) with
``OPENAI_API_KEY`` in its shell does not reach a paid API unless it says so.

One model client per model name serves every agent of the worker (a client holds a connection
pool; one per agent would cost thousands of pools). The offline model is said to be in use, in
the log and in :attr:`EnvModels.label`, because its answers are canned.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping

from pydantic import SecretStr

from baton.defaults import DEFAULT_MODEL
from baton.llm import OFFLINE_LABEL, ModelSettings, OpenAIChatModel, offline_model
from baton.llm.types import ChatModel
from baton.subagents.profiles import Profile

log = logging.getLogger(__name__)

"""The model the lead and sub-agents use when none is named (baton.settings defaults to it too)."""
ModelFactory = Callable[[Profile], ChatModel]
"""Gives the model a profile's agents use; called once per agent run, so cache inside."""


class EnvModels:
    """A :data:`ModelFactory` set by ``OPENAI_API_KEY``, ``OPENAI_BASE_URL`` and ``BATON_MODEL``
    in ``env`` (a mapping in the environment's form; :meth:`from_environ` for the process's own).

    A profile's own ``model`` wins over ``BATON_MODEL``. Use as an async context manager (or call
    :meth:`aclose`) so the clients are closed.
    """

    def __init__(self, env: Mapping[str, str]) -> None:
        self._key = env.get("OPENAI_API_KEY") or None
        self._base_url = env.get("OPENAI_BASE_URL") or None
        self._default = env.get("BATON_MODEL") or DEFAULT_MODEL
        self._models: dict[str, OpenAIChatModel] = {}
        if self.offline:
            log.warning("using the %s", OFFLINE_LABEL)

    @classmethod
    def from_environ(cls) -> EnvModels:
        """The models the process environment names (what ``baton worker`` uses)."""
        return cls(os.environ)

    @property
    def offline(self) -> bool:
        return self._key is None

    @property
    def label(self) -> str:
        if self.offline:
            return OFFLINE_LABEL
        return f"{self._default} at {self._base_url or 'api.openai.com'}"

    def __call__(self, profile: Profile) -> ChatModel:
        name = "offline" if self.offline else (profile.model or self._default)
        model = self._models.get(name)
        if model is None:
            if self.offline:
                model = offline_model()
            else:
                settings = ModelSettings(
                    model=name, base_url=self._base_url, api_key=SecretStr(self._key or "")
                )
                model = OpenAIChatModel(settings)
            self._models[name] = model
        return model

    async def __aenter__(self) -> EnvModels:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        models, self._models = list(self._models.values()), {}
        for model in models:
            await model.aclose()


def offline_models() -> EnvModels:
    """The built-in offline model for every profile, whatever the environment says: the default
    of a :class:`~baton.subagents.worker.Worker` given no factory."""
    return EnvModels({})
