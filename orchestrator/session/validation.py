"""A failed validation told in one line: what ``baton`` prints for a setting, a session's
config or a request body that does not validate, and what a ``ConfigError`` built from it says.

It lives with the sessions, the lowest layer whose inputs are validated models a person writes
(a session's config, its resumable setup); the server and the CLI above it say theirs the same
way."""

from __future__ import annotations

from pydantic import ValidationError

from baton.bus.redact import redact_url


def describe_validation(exc: ValidationError) -> str:
    """The first problem of a failed validation as ``field: what is wrong (got value)``: the one
    line a ``ConfigError`` built from it says (a secret's value is never shown)."""
    first = exc.errors(include_url=False)[0]
    if not first["loc"] and first["type"] == "value_error":  # a check across fields names its own
        return str(first["msg"]).removeprefix("Value error, ")
    where = ".".join(str(part) for part in first["loc"]) or "value"
    if first["type"] == "extra_forbidden":
        return f"{where}: unknown setting"
    value = first.get("input")
    hidden = isinstance(value, dict | list) or any(
        secret in where for secret in ("key", "token", "password")
    )
    if isinstance(value, str):  # a bus URL quotes its password: never shown (redact_url)
        value = redact_url(value)
    return f"{where}: {first['msg']}" + ("" if hidden else f" (got {value!r})")
