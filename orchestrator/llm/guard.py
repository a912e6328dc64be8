"""Where model requests may go: anywhere (the default), or only to this machine.

Why: a test suite that finds ``OPENAI_API_KEY`` in the shell must not quietly call a paid API (or
hang on the network) because some object was built without a scripted model. pydantic-ai answers
this with a global ``ALLOW_MODEL_REQUESTS`` switch; baton's tests need one exception to it, the
scripted OpenAI-compatible server, which they reach over loopback HTTP or in-process (at
``IN_PROCESS_URL``, whose ``.invalid`` host can never resolve). So the switch here confines
requests to those endpoints rather than refusing them all, and a request elsewhere raises
:class:`ModelRequestRefused` before anything is sent — it is not a model failure, so nothing
retries it or turns it into a soft error of the engine.

The seam is :class:`~baton.llm.client.OpenAIChatModel`, through which every model request of
baton goes; :func:`baton.testing.local_model_requests_only` turns the confinement on for a block.
"""

from __future__ import annotations

import ipaddress

import httpx2

from baton.errors import BatonError, ExitCode

_confined = False


class ModelRequestRefused(BatonError, RuntimeError):
    """A model request to an endpoint off this machine while requests are confined.

    A :class:`~baton.bus.errors.BatonError` like every error baton raises on purpose (and still a
    ``RuntimeError``, as before), but not a :class:`~baton.llm.errors.ModelError`: nothing
    retries it. A command stopped by it ends as a usage error, like an endpoint that refuses the
    configuration.
    """

    exit_code = ExitCode.USAGE


def confine_model_requests(confined: bool) -> bool:
    """Confine model requests to loopback (``True``) or let them go anywhere (``False``).

    Returns the previous setting, so a caller can restore it.
    """
    global _confined
    previous, _confined = _confined, confined
    return previous


def model_requests_confined() -> bool:
    return _confined


def check_model_endpoint(url: httpx2.URL | str) -> None:
    """Raise :class:`ModelRequestRefused` when requests are confined and ``url`` is not local."""
    if _confined and not is_local_endpoint(url):
        raise ModelRequestRefused(
            f"model request to {url} refused: model requests are confined to this machine "
            "(the scripted server; see baton.testing)"
        )


def is_local_endpoint(url: httpx2.URL | str) -> bool:
    """True for a loopback host (``localhost``, ``127.0.0.0/8``, ``::1``) or a ``.invalid`` one."""
    host = (httpx2.URL(url) if isinstance(url, str) else url).host.lower().rstrip(".")
    if host == "localhost" or host.endswith(".invalid"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


__all__ = [
    "ModelRequestRefused",
    "check_model_endpoint",
    "confine_model_requests",
    "is_local_endpoint",
    "model_requests_confined",
]
