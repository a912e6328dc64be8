"""The few defaults and vocabularies that several layers name: the model a session uses when
none is given, the policies that answer approvals, and the distribution's name on PyPI.

They live apart, importing nothing, because the settings that every ``baton`` command loads name
them too: taking them from :mod:`baton.session` or :mod:`baton.subagents.models` made ``baton
post``/``watch``/``approve`` import the whole runtime and the model client (~0.3 s) just to read
a flag.
"""

from __future__ import annotations

from typing import Literal

DISTRIBUTION = "baton-orchestrator"
"""baton's name on PyPI, which its install hints name: ``baton`` there is an unrelated project
(and several ``baton-*`` names are other agent tools). The import name and the command stay
``baton``."""


def install_hint(extra: str) -> str:
    """The command that installs an optional extra: ``pip install 'baton-orchestrator[s3]'``."""
    return f"pip install '{DISTRIBUTION}[{extra}]'"


def installed_version() -> str:
    """The installed distribution's version; ``0`` for a checkout run without installing."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "0"


DEFAULT_MODEL = "gpt-4o-mini"
"""The model name for the lead and sub-agents when neither a flag nor ``BATON_MODEL`` names one."""
DEFAULT_IMAGE_MODEL = "gpt-image-1"
"""The model ``generate_image`` asks of the Images API when ``BATON_IMAGE_MODEL`` names none."""
DEMO_IMAGE_MODEL = "demo"
"""``image_model`` that keeps ``generate_image`` on its demo painter with an endpoint configured:
most local chat servers (llama-server, Ollama) have no Images API."""

ApproveMode = Literal["ask", "auto", "deny"]
"""How approvals are answered: ``ask`` a person, or ``auto``-approve / ``deny`` them by policy."""
