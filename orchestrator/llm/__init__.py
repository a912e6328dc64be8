"""The model side: the streaming chat client over the ``openai`` package, the scripted
OpenAI-compatible server used by tests and the offline model.

The engine needs only :mod:`baton.llm.types` (the ``ChatModel`` seam); composition roots
build an :class:`OpenAIChatModel` from :class:`ModelSettings`, or :func:`offline_model` when no API
key is configured.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from baton.llm._lazy import lazy_attributes

if TYPE_CHECKING:
    from baton.llm.client import ModelSettings, OpenAIChatModel
    from baton.llm.offline import OFFLINE_LABEL, OFFLINE_MODEL_NAME, offline_model
    from baton.llm.script import (
        Call,
        HttpError,
        Reply,
        Script,
        Stall,
        answer,
        parse_failure,
        runaway,
    )
    from baton.llm.scripted import IN_PROCESS_URL, RecordedRequest, ScriptedServer

_HOMES = {
    "baton.llm.client": ("ModelSettings", "OpenAIChatModel"),
    "baton.llm.offline": ("OFFLINE_LABEL", "OFFLINE_MODEL_NAME", "offline_model"),
    "baton.llm.script": (
        "Call",
        "HttpError",
        "Reply",
        "Script",
        "Stall",
        "answer",
        "parse_failure",
        "runaway",
    ),
    "baton.llm.scripted": ("IN_PROCESS_URL", "RecordedRequest", "ScriptedServer"),
}

__all__ = [
    "IN_PROCESS_URL",
    "OFFLINE_LABEL",
    "OFFLINE_MODEL_NAME",
    "Call",
    "HttpError",
    "ModelSettings",
    "OpenAIChatModel",
    "RecordedRequest",
    "Reply",
    "Script",
    "ScriptedServer",
    "Stall",
    "answer",
    "offline_model",
    "parse_failure",
    "runaway",
]


__getattr__ = lazy_attributes(__name__, _HOMES)
