"""Every pydantic model of baton defers its schema to its first use, and every one still builds.

Building a model's validator and serializer costs about 0.75 ms; ``baton run`` imports 80 models
and needs 37 of them before the lead's first token (benchmarks/startup.py), so they are built on
first use, not at import. The price of deferring is that a model whose annotations cannot be
resolved would fail only when first used; building each one here keeps that failure a test's.
"""

from __future__ import annotations

import importlib
import pkgutil

import pydantic
import pytest

import baton

DYNAMIC = "baton.engine.tools"
"""Where tools' argument models are made from signatures: their JSON schema is read at once."""


def _baton_models() -> list[type[pydantic.BaseModel]]:
    for module in pkgutil.walk_packages(baton.__path__, "baton."):
        importlib.import_module(module.name)
    found: list[type[pydantic.BaseModel]] = []
    pending = [pydantic.BaseModel]
    while pending:
        for cls in pending.pop().__subclasses__():
            if cls not in found:
                found.append(cls)
                pending.append(cls)
    return [c for c in found if c.__module__.startswith("baton.") and c.__module__ != DYNAMIC]


MODELS = _baton_models()


def test_there_are_models_to_check() -> None:
    assert len(MODELS) > 80


@pytest.mark.parametrize("model", MODELS, ids=lambda m: f"{m.__module__}.{m.__qualname__}")
def test_a_model_defers_its_schema_and_builds(model: type[pydantic.BaseModel]) -> None:
    assert model.model_config.get("defer_build") is True, "add defer_build=True to its config"
    assert model.model_rebuild(force=True) is True
    assert model.__pydantic_complete__
