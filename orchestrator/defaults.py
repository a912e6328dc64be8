"""The few defaults and vocabularies that several layers name: the model a session uses when
none is given, and the policies that answer approvals.

They live apart, importing nothing, because the settings that every ``baton`` command loads name
them too: taking them from :mod:`baton.session` or :mod:`baton.subagents.models` made ``baton
post``/``watch``/``approve`` import the whole runtime and the model client (~0.3 s) just to read
a flag.
"""

from __future__ import annotations

from typing import Literal

DEFAULT_MODEL = "gpt-4o-mini"
"""The model name for the lead and sub-agents when neither a flag nor ``BATON_MODEL`` names one."""
DEFAULT_IMAGE_MODEL = "gpt-image-1"
"""The model ``generate_image`` asks of the Images API when ``BATON_IMAGE_MODEL`` names none."""
DEMO_IMAGE_MODEL = "demo"
"""``image_model`` that keeps ``generate_image`` on its demo painter with an endpoint configured:
most local chat servers (llama-server, Ollama) have no Images API."""

ApproveMode = Literal["ask", "auto", "deny"]
"""How approvals are answered: ``ask`` a person, or ``auto``-approve / ``deny`` them by policy."""
