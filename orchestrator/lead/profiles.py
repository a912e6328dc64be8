"""Which lead policy a session runs: by setting, or by the model's profile.

``lead_policy`` is ``structural`` (the default judgement, lead/policy.py), ``guided`` (its aids for
small models, lead/guided.py) or ``auto``: the model's profile decides. A model profile, as
pydantic-ai keeps one per model family, says what a family of models needs; here the one thing it
says is whether the model is *small*, read from the parameter count its name carries
(``qwen2.5-coder-1.5b``, ``llama3.2:1b``, ``gemma-2-2b-it``, ``Phi-3-mini``): up to
:data:`SMALL_MAX_BILLIONS` billion parameters is small, and gets the guided policy. A name that
says no size (``gpt-4o``, ``claude-…``, ``baton-offline``) is not small. docs/small-models.md has
the table and why the bound is where it is.
"""

from __future__ import annotations

import re
from typing import Literal

from baton.lead.guided import GuidedPolicy
from baton.lead.policy import LeadPolicy, StructuralPolicy

PolicyName = Literal["auto", "structural", "guided"]

SMALL_MAX_BILLIONS = 4.0
"""The largest model, in billions of parameters, that ``auto`` gives the guided policy: the two
measured (0.5B, 1.5B) needed it; a 7B model was not measured, so it is left to the default."""

_SIZE = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s*b(?![a-z])", re.IGNORECASE)
"""A parameter count in a model name: ``1.5b``, ``7B``, ``0.5b`` (between separators)."""
_SMALL_FAMILIES = re.compile(r"(?<![a-z])(?:phi-?[1-3](?:\.5)?-mini|smollm|tinyllama)", re.I)
"""Families whose names carry no size but whose models are small."""


def billions_of(model: str) -> float | None:
    """The parameter count a model name carries, in billions (None: it names none). Mixtures
    (``8x7b``) count their active size, which is what speaks for the model's judgement."""
    sizes = [float(match.group(1)) for match in _SIZE.finditer(model.replace("_", "-"))]
    return min(sizes) if sizes else None


def is_small(model: str) -> bool:
    """Whether ``model`` is a small model by its name (see the module docstring)."""
    size = billions_of(model)
    if size is not None:
        return size <= SMALL_MAX_BILLIONS
    return _SMALL_FAMILIES.search(model) is not None


def lead_policy(name: PolicyName, model: str) -> LeadPolicy:
    """The policy a lead on ``model`` runs under the ``lead_policy`` setting ``name``."""
    if name == "guided" or (name == "auto" and is_small(model)):
        return GuidedPolicy()
    return StructuralPolicy()
