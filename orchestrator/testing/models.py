"""Keep a test's model requests on this machine: see :mod:`baton.llm.guard` for why and how."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from baton.llm.guard import confine_model_requests


@contextmanager
def local_model_requests_only() -> Iterator[None]:
    """Inside the block, a model request to anything but loopback or the in-process scripted
    server raises :class:`~baton.llm.guard.ModelRequestRefused` before it is sent; the previous
    setting comes back on exit."""
    previous = confine_model_requests(True)
    try:
        yield
    finally:
        confine_model_requests(previous)
