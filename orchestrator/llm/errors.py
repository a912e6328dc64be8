"""The model's errors, under the one root :class:`baton.errors.BatonError`: the model could not
answer (:class:`ModelError`), its stream broke (:class:`StreamBroken`), or the session's budget
refused the call (:class:`BudgetExhausted`). The client raises them (:mod:`baton.llm.client`);
the engine ends a turn on them."""

from __future__ import annotations

from baton.errors import BatonError, ExitCode

REFUSED_CONFIGURATION = frozenset({401, 403, 404})
"""HTTP statuses that mean a wrong key, model name or endpoint path: a configuration to fix."""


class ModelError(BatonError):
    """The model could not answer: retries spent, the endpoint refused, or the stream broke.

    ``retryable`` tells whether the fault was of the kind that retries address (rate limit, 5xx,
    connection, timeout); ``attempts`` is how many requests were made; ``status_code`` is the HTTP
    status of the last refusal, when there was one (e.g. 400 for a context that is too long).
    A refusal of the configuration itself (401, 403, 404) ends a command as a usage error.
    """

    def __init__(
        self,
        message: str,
        *,
        retryable: bool = False,
        attempts: int = 1,
        status_code: int | None = None,
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.attempts = attempts
        self.status_code = status_code
        if status_code in REFUSED_CONFIGURATION:
            self.exit_code = ExitCode.USAGE


class StreamBroken(ModelError):
    """The stream ended before the server said it was done: the partial answer is discarded.

    ``text_delivered`` is True when some of its text had already reached ``on_text`` and the caller
    gave no ``on_retract`` to take it back: a retry would have shown that text twice, so the client
    did not retry and the turn should end with an error instead. (With ``on_retract`` the client
    retracts and retries, and raises this only once retries are spent.)
    """

    def __init__(
        self,
        message: str,
        *,
        retryable: bool = True,
        attempts: int = 1,
        text_delivered: bool = False,
    ) -> None:
        super().__init__(message, retryable=retryable, attempts=attempts)
        self.text_delivered = text_delivered


class BudgetExhausted(ModelError):
    """The session's budget of model calls or tokens is spent: the call was refused before it
    was made (never retried; the turn ends with ``StopReason.BUDGET``)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False, attempts=0)
