"""The models a session asks for when none is named: the chat model and the Images API's model.

Here, importing nothing, because the settings that every ``baton`` command loads name them too
(``baton --help`` shows them): taking them from :mod:`baton.subagents.models` or the model client
made ``baton post``/``watch``/``approve`` import the whole runtime and ``openai`` (~0.3 s) just to
read a flag.
"""

from __future__ import annotations

DEFAULT_MODEL = "gpt-4o-mini"
"""The model name for the lead and sub-agents when neither a flag nor ``BATON_MODEL`` names one."""
DEFAULT_IMAGE_MODEL = "gpt-image-1"
"""The model ``generate_image`` asks of the Images API when ``BATON_IMAGE_MODEL`` names none."""
DEMO_IMAGE_MODEL = "demo"
"""``image_model`` that keeps ``generate_image`` on its demo painter with an endpoint configured:
most local chat servers (llama-server, Ollama) have no Images API."""
