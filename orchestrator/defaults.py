"""The few defaults and vocabularies that several layers name: the model a session uses when
none is given, and the distribution's name on PyPI; the approve mode is re-exported from its home,
the bus's messages (:data:`baton.bus.messages.ApproveMode`).

They live apart, importing nothing up front, because the settings that every ``baton`` command
loads name them too: taking them from :mod:`baton.session` or :mod:`baton.subagents.models` made
``baton post``/``watch``/``approve`` import the whole runtime and the model client (~0.3 s) just
to read a flag.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from baton.bus.messages import ApproveMode as ApproveMode

LEAD_NAME = "lead"
"""The lead's agent name: its inbox, its events' ``agent``. Here, so that what needs only the name
(the lead's keeper, the fold of events) never imports the lead's prompt and, through it, the
model client."""

LEAD_LEASE_S = 10.0
"""How long a session's lead lease lasts unless renewed (the ``lead_lease`` setting's default):
how long ``baton resume`` waits after a lead died, and how soon ``baton watch`` sees it lost."""

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


def __getattr__(name: str) -> object:
    """``ApproveMode``, re-exported from :mod:`baton.bus.messages` (its one definition) only when
    asked for: importing the bus's messages loads pydantic, and ``baton --help`` reads this module
    for the defaults it shows."""
    if name == "ApproveMode":
        from baton.bus.messages import ApproveMode

        return ApproveMode
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
