"""What an A2A request must be before anything reads it: its bytes, its JSON, its JSON-RPC shape
and its ``A2A-Version``, each refused with the binding's own error and one line of our words.

Why here and not in the SDK: its dispatchers handle the happy path and a few failures, and pass
everything else on as ``-32603`` (or a REST ``500``) carrying the Python exception's text — a body
that is not UTF-8 (``'utf-8' codec can't decode…``), one nested past the recursion limit, a
5,000-digit ``A2A-Version`` (``Exceeds the limit (4300 digits) for integer string conversion…``)
— and the token guard, which reads a session token's body for its task, answered some of them
with a plain-text ``500`` (issue 22). So the one reading of an A2A body happens here, for the
guard and in front of both bindings, with bounds a client can see:

- the body must be UTF-8 JSON with no ``NaN``/``Infinity``, no lone surrogate, nested at most
  :data:`MAX_DEPTH` deep, each number at most :data:`MAX_NUMBER_CHARS` characters: otherwise
  ``-32700`` (REST: ``400``), since the server does not read it as JSON;
- a JSON-RPC body must be one request object: ``jsonrpc`` ``"2.0"``, ``method`` a non-empty
  string, ``id`` a string, an integer or null, no other members: otherwise ``-32600`` (a batch
  too: the SDK serves none); ``params``, if given, an object (``-32602`` for an array: A2A names
  its parameters); a REST body must be an object (``400``);
- and its parameters must parse as the SDK will parse them (:mod:`.params`, on the routes):
  otherwise ``-32602`` (REST ``400``) naming the field;
- ``A2A-Version``, when given, must look like a version (``1.0``): otherwise
  ``VersionNotSupported`` (``-32009``; REST ``400``).

What passes is handed to the SDK unchanged, which then meets only input it handles. Pure
functions over bytes (no SDK import: the token guard uses them without the ``a2a`` extra).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Literal

from starlette.responses import JSONResponse, Response

from baton.server.a2a.paths import JSONRPC_PATH

Binding = Literal["jsonrpc", "rest"]

MAX_DEPTH = 64
"""How deeply arrays and objects may nest in a body (an A2A request needs a handful)."""
MAX_NUMBER_CHARS = 100
"""The longest number literal read (Python refuses integers past 4,300 digits with an error)."""
VERSION_HEADER = "a2a-version"
_VERSION = re.compile(r"^[0-9]{1,6}(\.[0-9]{1,6}){0,2}$")

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
VERSION_NOT_SUPPORTED = -32009
"""The A2A code of ``VersionNotSupportedError`` (the SDK's ``JSON_RPC_ERROR_CODE_MAP``)."""

_REST = {  # JSON-RPC code → the HTTP+JSON binding's status, gRPC status and reason (the SDK's)
    PARSE_ERROR: (400, "INVALID_ARGUMENT", "INVALID_REQUEST"),
    INVALID_REQUEST: (400, "INVALID_ARGUMENT", "INVALID_REQUEST"),
    INVALID_PARAMS: (400, "INVALID_ARGUMENT", "INVALID_PARAMS"),
    VERSION_NOT_SUPPORTED: (400, "FAILED_PRECONDITION", "VERSION_NOT_SUPPORTED"),
}
_MESSAGES = {
    PARSE_ERROR: "Parse error",
    INVALID_REQUEST: "Invalid Request",
    INVALID_PARAMS: "Invalid params",
    VERSION_NOT_SUPPORTED: "Version not supported",
}


class Malformed(Exception):
    """A request refused before any handler: the JSON-RPC ``code``, one line saying what is
    wrong in our words (never an exception's), and the request's id where it had a valid one."""

    def __init__(self, code: int, reason: str, request_id: str | int | None = None) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason
        self.request_id = request_id


def _number(kind: str) -> Any:
    convert = int if kind == "integer" else float

    def parse(text: str) -> int | float:
        if len(text) > MAX_NUMBER_CHARS:
            raise Malformed(PARSE_ERROR, f"a number longer than {MAX_NUMBER_CHARS} characters")
        return convert(text)

    return parse


def _constant(name: str) -> Any:
    raise Malformed(PARSE_ERROR, f"{name} is not JSON")


_parse_int = _number("integer")
_parse_float = _number("float")


def read_json(body: bytes) -> Any:
    """The JSON value of ``body``; ``Malformed`` (``-32700``) saying why it is not read."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Malformed(PARSE_ERROR, f"the body is not UTF-8 (byte {exc.start})") from None
    try:
        value = json.loads(
            text, parse_int=_parse_int, parse_float=_parse_float, parse_constant=_constant
        )
    except Malformed:
        raise
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise Malformed(PARSE_ERROR, f"the body is not JSON (at {where})") from None
    except RecursionError:
        raise Malformed(PARSE_ERROR, f"the body nests deeper than {MAX_DEPTH} levels") from None
    except ValueError:  # any other refusal of the parser: said in our words
        raise Malformed(PARSE_ERROR, "the body is not JSON") from None
    _check_tree(value)
    return value


def _check_tree(value: Any) -> None:
    """Depth and text of a parsed value, without recursion (the value may nest ~1,000 deep)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, str):
            _check_text(node)
            continue
        if not isinstance(node, dict | list):
            continue
        if depth > MAX_DEPTH:
            raise Malformed(PARSE_ERROR, f"the body nests deeper than {MAX_DEPTH} levels")
        if isinstance(node, dict):
            for key, item in node.items():
                _check_text(key)
                stack.append((item, depth + 1))
        else:
            stack.extend((item, depth + 1) for item in node)


def _check_text(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a "\\ud800" escape: JSON's syntax allows it, Unicode does not
        raise Malformed(PARSE_ERROR, "a string holds a lone surrogate (\\ud800-\\udfff)") from None


_MEMBERS = frozenset({"jsonrpc", "method", "params", "id"})


def _request_id(request: Mapping[str, Any]) -> str | int | None:
    found = request.get("id")
    return found if isinstance(found, str | int) and not isinstance(found, bool) else None


def jsonrpc_request(body: bytes) -> dict[str, Any]:
    """The request object of a JSON-RPC body; ``Malformed`` (``-32700``, ``-32600``) otherwise."""
    request = read_json(body)
    if isinstance(request, list):
        raise Malformed(INVALID_REQUEST, "batch requests are not supported: send one request")
    if not isinstance(request, dict):
        raise Malformed(INVALID_REQUEST, "the body must be a JSON-RPC request object")
    request_id = _request_id(request)
    if request.get("jsonrpc") != "2.0":
        raise Malformed(INVALID_REQUEST, '"jsonrpc" must be "2.0"', request_id)
    if "id" in request and request["id"] is not None and request_id is None:
        raise Malformed(INVALID_REQUEST, '"id" must be a string, an integer or null')
    method = request.get("method")
    if not isinstance(method, str) or not method:
        raise Malformed(INVALID_REQUEST, '"method" must be a non-empty string', request_id)
    extra = sorted(set(request) - _MEMBERS)
    if extra:
        shown = ", ".join(json.dumps(name)[:40] for name in extra[:3])
        raise Malformed(INVALID_REQUEST, f"not a member of a JSON-RPC request: {shown}", request_id)
    if "params" in request:
        params = request["params"]
        if isinstance(params, list):
            reason = '"params" must be an object: A2A names them'
            raise Malformed(INVALID_PARAMS, reason, request_id)
        if not isinstance(params, dict):
            raise Malformed(INVALID_REQUEST, '"params" must be an object', request_id)
    return request


def check_version(headers: Mapping[str, str]) -> None:
    """``Malformed`` (``VersionNotSupported``) for an ``A2A-Version`` that is not a version."""
    given = headers.get(VERSION_HEADER)
    if given and not _VERSION.match(given):
        shown = given if len(given) <= 20 else given[:20] + "…"
        raise Malformed(
            VERSION_NOT_SUPPORTED, f"A2A-Version {shown!r} is not a version: send A2A-Version: 1.0"
        )


def binding_of(path: str) -> Binding:
    """The binding an A2A path belongs to."""
    return "jsonrpc" if path == JSONRPC_PATH else "rest"


def check(binding: Binding, method: str, headers: Mapping[str, str], body: bytes) -> Any:
    """The body's JSON (None when there is none to read); ``Malformed`` unless the A2A request
    is one the SDK may be handed."""
    value: Any = None
    if binding == "jsonrpc":
        if method == "POST":
            value = jsonrpc_request(body)
    elif body:
        value = read_json(body)
        if not isinstance(value, dict):
            raise Malformed(INVALID_REQUEST, "the body must be a JSON object")
    check_version(headers)
    return value


def error_response(binding: Binding, refused: Malformed) -> Response:
    """``refused`` as ``binding`` words an error (the SDK's formats)."""
    if binding == "jsonrpc":
        error = {"code": refused.code, "message": f"{_MESSAGES[refused.code]}: {refused.reason}"}
        body = {"jsonrpc": "2.0", "id": refused.request_id, "error": error}
        return JSONResponse(body)  # JSON-RPC answers its errors with 200
    status, grpc, reason = _REST[refused.code]
    detail = {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason,
              "domain": "a2a-protocol.org", "metadata": {}}  # fmt: skip
    payload = {"code": status, "status": grpc, "message": refused.reason, "details": [detail]}
    return JSONResponse({"error": payload}, status_code=status)


def refusal(
    binding: Binding, method: str, headers: Mapping[str, str], body: bytes
) -> Response | None:
    """The answer to a malformed A2A request; None for one the SDK may be handed."""
    try:
        check(binding, method, headers, body)
    except Malformed as refused:
        return error_response(binding, refused)
    return None
