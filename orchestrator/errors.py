"""Errors of the orchestrator layer, under the one root ``bus.errors.BatonError``."""

from __future__ import annotations

from bus.errors import BatonError


class ModelError(BatonError):
    """The model could not answer: retries spent, the endpoint refused, or the stream broke.

    ``retryable`` tells whether the fault was of the kind that retries address (rate limit, 5xx,
    connection, timeout); ``attempts`` is how many requests were made.
    """

    def __init__(self, message: str, *, retryable: bool = False, attempts: int = 1) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.attempts = attempts


class StreamBroken(ModelError):
    """The stream ended before the server said it was done: the partial answer is discarded."""
