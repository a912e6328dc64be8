"""An A2A request's parameters, parsed the way the SDK is about to parse them, so that a bad one
is refused in our words (``-32602``, REST ``400``) naming the field.

The SDK answers a parameter protobuf cannot take with the parser's text (``'NoneType' object is
not iterable``, ``expected string or bytes-like object, got 'list'``) in the error's data. The
parse here is the SDK's own (``ParseDict`` into the method's request type, unknown fields
ignored), so what passes here parses there; what fails is described by its field path alone,
taken from protobuf's "Failed to parse X field" chain.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from typing import Any

from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.types import a2a_pb2

from baton.server.a2a.wellformed import INVALID_PARAMS, INVALID_REQUEST, Binding, Malformed

_parse_dict: Callable[..., object] = importlib.import_module(
    "google.protobuf.json_format"
).ParseDict
"""The SDK's parser (protobuf ships no type stubs; ``types-protobuf`` retypes the SDK's own
classes elsewhere, so it is not installed for this one call)."""
_FIELD = re.compile(r"Failed to parse (\w+) field")
_REST_BODIES: dict[str, type[Any]] = {
    "/message:send": a2a_pb2.SendMessageRequest,
    "/message:stream": a2a_pb2.SendMessageRequest,
    "/pushNotificationConfigs": a2a_pb2.TaskPushNotificationConfig,
}
"""The HTTP+JSON routes whose body the SDK parses, by how their path ends, and into what."""


def check_params(binding: Binding, method: str, path: str, request: Any) -> None:
    """``Malformed`` (``-32602``) when the SDK could not parse the request's parameters;
    ``request`` is the body as :func:`~.wellformed.check` read it."""
    if binding == "jsonrpc":
        if not isinstance(request, dict):
            return
        model = JsonRpcDispatcher.METHOD_TO_MODEL.get(request["method"])
        if model is None:  # the SDK answers -32601
            return
        request_id = request.get("id") if isinstance(request.get("id"), str | int) else None
        _parse(request.get("params", {}), model, "params", str(request["method"]), request_id)
        return
    if method != "POST":
        return
    for ending, rest_model in _REST_BODIES.items():
        if path.endswith(ending):
            if request is None:  # no body at all: the SDK would parse b""
                raise Malformed(INVALID_REQUEST, f"{ending.lstrip('/')} needs a JSON object body")
            _parse(request, rest_model, "body", ending.lstrip("/"), None)
            return


def _parse(
    params: Any, model: type[Any], root: str, what: str, request_id: str | int | None
) -> None:
    try:
        _parse_dict(params, model(), ignore_unknown_fields=True)
    except Exception as exc:  # whatever protobuf raised, said in our words
        where = ".".join([root, *_FIELD.findall(str(exc))])
        raise Malformed(
            INVALID_PARAMS, f"{where}: not a value {what} takes there", request_id
        ) from None
