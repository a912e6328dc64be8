"""Hostile input on the A2A endpoint: no ``500`` and no exception text, for any body or header,
whoever sends it (issue 22).

A session token's malformed JSON-RPC body (``method`` a list or an object, 60,000-deep JSON) got a
plain-text ``500`` from the token guard; with the admin token a body that is not UTF-8, a deep
body or a 5,000-digit ``A2A-Version`` got ``-32603`` carrying the Python exception's text. Here a
table of hostile inputs plus seeded mutations of valid requests (cut short, a field swapped for
another JSON type, a byte flipped) go to both bindings with a session's read and write tokens and
the admin token. Every answer must be JSON, below 500, carry a documented code, and say nothing a
Python exception would; the cases the issue names must get their own codes. The pure functions
behind it (:mod:`baton.server.a2a.wellformed`, :mod:`baton.server.a2a.access`) take ten thousand
more inputs in-process.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.datastructures import Headers

from baton.server.a2a import access, wellformed
from baton.server.a2a.paths import JSONRPC_PATH, REST_PREFIX
from baton.server.access import issue
from tests.conftest import BusFactory
from tests.server.a2a_helpers import root, serving
from tests.server.helpers import TOKEN
from tests.support.profiles import ARTISTS

JSONRPC_CODES = {
    -32700, -32600, -32601, -32602, -32603,  # JSON-RPC's own
    -32001, -32002, -32003, -32004, -32005, -32006, -32007, -32008, -32009,  # A2A's
}  # fmt: skip
EXCEPTION_WORDS = (
    "Traceback", "codec can't", "Exceeds the limit", "set_int_max_str_digits", "recursion",
    "object has no attribute", "unhashable", "is not subscriptable", "NoneType", "Expecting ",
    "Errno", "builtins", "object is not", "invalid start byte", "unknown exception", ".py",
)  # fmt: skip
"""Words of Python's exceptions and the SDK's catch-alls; none may reach a client."""

SESSION = "s-hostile"
VALID: list[dict[str, Any]] = [  # requests that cost nothing when they pass: an unknown task
    {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": SESSION}},
    {"jsonrpc": "2.0", "id": "a", "method": "CancelTask", "params": {"id": SESSION}},
    {"jsonrpc": "2.0", "id": 3, "method": "ListTasks", "params": {"pageSize": 5}},
    {"jsonrpc": "2.0", "id": 4, "method": "SendMessage", "params": {"message": {
        "messageId": "m", "role": "ROLE_USER", "taskId": SESSION, "parts": [{"text": "hi"}]}}},
]  # fmt: skip
DEEP = 60_000


def dumps(value: Any) -> bytes:
    return json.dumps(value).encode()


def table() -> list[tuple[str, bytes, dict[str, str]]]:
    """The hand-made cases: (name, body, extra headers)."""
    get = VALID[0]
    cases: list[tuple[str, bytes, dict[str, str]]] = [
        ("method list", dumps({**get, "method": ["GetTask"]}), {}),
        ("method object", dumps({**get, "method": {"GetTask": 1}}), {}),
        ("method number", dumps({**get, "method": 7}), {}),
        ("method empty", dumps({**get, "method": ""}), {}),
        ("no method", dumps({"jsonrpc": "2.0", "id": 1}), {}),
        ("deep array", b"[" * DEEP + b"]" * DEEP, {}),
        ("deep object", b'{"a":' * DEEP + b"1" + b"}" * DEEP, {}),
        ("deep params", dumps({**get, "params": {"id": SESSION, "x": nest(200)}}), {}),
        ("not utf-8", dumps(get).replace(SESSION.encode(), b"s-\xff\xfe"), {}),
        ("latin-1 body", dumps({**get, "params": {"id": "café"}}).decode().encode("latin-1"), {}),
        ("utf-16 body", json.dumps(get).encode("utf-16"), {}),
        ("lone surrogate", dumps(get).replace(SESSION.encode(), b"\\ud800"), {}),
        ("nul in string", dumps({**get, "params": {"id": "s-\u0000"}}), {}),
        ("NaN id", dumps(get).replace(b'"id": 1', b'"id": NaN'), {}),
        ("Infinity", dumps(get).replace(b'"id": 1', b'"id": -Infinity'), {}),
        ("5000-digit id", dumps(get).replace(b'"id": 1', b'"id": ' + b"9" * 5000), {}),
        ("5000-digit float", dumps(get).replace(b'"id": 1', b'"id": 1.' + b"5" * 5000), {}),
        ("1e999 id", dumps(get).replace(b'"id": 1', b'"id": 1e999'), {}),
        ("huge page size", dumps({**VALID[2], "params": {"pageSize": 10**30}}), {}),
        ("bool id", dumps({**get, "id": True}), {}),
        ("object id", dumps({**get, "id": {"a": 1}}), {}),
        ("float id", dumps({**get, "id": 1.5}), {}),
        ("jsonrpc 1.0", dumps({**get, "jsonrpc": "1.0"}), {}),
        ("no jsonrpc", dumps({k: v for k, v in get.items() if k != "jsonrpc"}), {}),
        ("params list", dumps({**get, "params": [SESSION]}), {}),
        ("params string", dumps({**get, "params": SESSION}), {}),
        ("params null", dumps({**get, "params": None}), {}),
        ("id of params list", dumps({**get, "params": {"id": [SESSION]}}), {}),
        ("id of params object", dumps({**get, "params": {"id": {"a": SESSION}}}), {}),
        ("message a string", dumps({**VALID[3], "params": {"message": "hi"}}), {}),
        ("parts an object", dumps({**VALID[3], "params": {"message": {"parts": {"a": 1}}}}), {}),
        ("role unknown", dumps({**VALID[3], "params": {"message": {"role": 5}}}), {}),
        ("batch", dumps([get, get]), {}),
        ("empty batch", b"[]", {}),
        ("empty body", b"", {}),
        ("whitespace", b"   \n", {}),
        ("not json", b"{not json", {}),
        ("a string", b'"GetTask"', {}),
        ("a number", b"12", {}),
        ("null", b"null", {}),
        ("trailing garbage", dumps(get) + b"}}}", {}),
        ("bom", b"\xef\xbb\xbf" + dumps(get), {}),
        ("duplicate keys", b'{"jsonrpc":"2.0","id":1,"method":"GetTask","method":[1]}', {}),
        ("5000-digit version", dumps(get), {"A2A-Version": "9" * 5000}),
        ("text version", dumps(get), {"A2A-Version": "one point oh"}),
        ("negative version", dumps(get), {"A2A-Version": "-1"}),
        ("version 99", dumps(get), {"A2A-Version": "99.0"}),
        ("empty version", dumps(get), {"A2A-Version": ""}),
        ("content-type text", dumps(get), {"Content-Type": "text/plain"}),
    ]
    return cases


def nest(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


ODD_VALUES: list[Any] = [
    None, True, 0, -1, 2**70, 1.5, "", "x" * 300, [], {}, [1, [2]], {"a": {"b": 1}}, "\u202e",
]  # fmt: skip


def mutations(seed: int, count: int) -> Iterator[tuple[str, bytes]]:
    """Seeded variations of the valid requests: cut short, a field (or a nested one) swapped for
    another JSON type, a byte flipped or dropped."""
    rng = random.Random(seed)
    for n in range(count):
        base = rng.choice(VALID)
        raw = dumps(base)
        kind = n % 4
        if kind == 0:
            yield "cut", raw[: rng.randrange(len(raw))]
        elif kind == 1:
            changed = json.loads(raw)
            target = changed if rng.random() < 0.5 else changed["params"]
            target[rng.choice([*target, "extra"])] = rng.choice(ODD_VALUES)
            yield "swapped", dumps(changed)
        elif kind == 2:
            at = rng.randrange(len(raw))
            yield "flipped", raw[:at] + bytes([rng.randrange(256)]) + raw[at + 1 :]
        else:
            at = rng.randrange(len(raw))
            yield "dropped", raw[:at] + raw[at + 1 :]


def no_exception_text(answer: httpx.Response, what: str) -> None:
    text = answer.text
    for word in EXCEPTION_WORDS:
        assert word not in text, f"{what}: exception text {word!r} in {text[:300]}"


def check_jsonrpc(answer: httpx.Response, what: str) -> int | None:
    """The JSON-RPC error code of the answer (None for a 403/401/413 from the server's own
    guards, which answer in the API's JSON); fails on anything a client should never get."""
    assert answer.status_code < 500, f"{what}: {answer.status_code} {answer.text[:300]}"
    body = answer.json()  # raises on a plain-text answer
    no_exception_text(answer, what)
    if answer.status_code in (401, 403, 413):
        assert isinstance(body.get("detail"), str), what
        return None
    assert answer.status_code == 200, f"{what}: {answer.status_code} {answer.text[:300]}"
    if "error" not in body:
        return 0
    code = body["error"]["code"]
    assert code in JSONRPC_CODES, f"{what}: undocumented code {code}"
    assert code != -32603, f"{what}: an internal error for client input: {answer.text[:300]}"
    return int(code)


def check_rest(answer: httpx.Response, what: str) -> None:
    assert answer.status_code < 500, f"{what}: {answer.status_code} {answer.text[:300]}"
    answer.json()
    no_exception_text(answer, what)


@pytest.fixture
def backend() -> str:
    return "memory"  # session tokens are kept on any bus; the input never reaches Redis


NAMED_CODES = {
    "method list": -32600,
    "method object": -32600,
    "not utf-8": -32700,
    "lone surrogate": -32700,
    "5000-digit id": -32700,
    "5000-digit version": -32009,
    "batch": -32600,
    "params list": -32602,
}
"""What the issue named, each with its own JSON-RPC code, for every token."""


@pytest.mark.parametrize("holder", ["read", "write", "admin"])
async def test_no_input_gets_a_500_or_exception_text(
    make_bus: BusFactory, tmp_path: Path, holder: str
) -> None:
    cases = table()
    async with make_bus() as bus, serving(bus, tmp_path, ARTISTS, token=TOKEN) as server:
        tokens = await issue(bus, SESSION)
        token = {"read": tokens["read"], "write": tokens["write"], "admin": TOKEN}[holder]
        codes: dict[str, int | None] = {}
        async with httpx.AsyncClient(base_url=root(server), trust_env=False, timeout=30) as http:
            auth = {"Authorization": f"Bearer {token}", "A2A-Version": "1.0",
                    "Content-Type": "application/json"}  # fmt: skip
            for name, body, extra in cases:
                what = f"{holder} token, JSON-RPC, {name}"
                answer = await http.post(JSONRPC_PATH, content=body, headers={**auth, **extra})
                codes[name] = check_jsonrpc(answer, what)
                for rest in ("/message:send", f"/tasks/{SESSION}:cancel"):
                    answer = await http.post(
                        REST_PREFIX + rest, content=body, headers={**auth, **extra}
                    )
                    check_rest(answer, f"{holder} token, REST {rest}, {name}")
                if extra:  # a header alone: on a GET too
                    answer = await http.get(
                        f"{REST_PREFIX}/tasks/{SESSION}", headers={**auth, **extra}
                    )
                    check_rest(answer, f"{holder} token, REST GET, {name}")
            assert await bus.log.sessions() == []  # nothing hostile started a session

    assert {name: codes[name] for name in NAMED_CODES} == NAMED_CODES
    if holder == "read":
        assert codes["deep array"] == -32700  # the session token's guard reads 1 MiB
    if holder == "admin":
        assert codes["deep array"] is None  # past max_body_bytes: the 413 first
        assert codes["deep params"] == -32700


@pytest.mark.parametrize(
    "count", [40, pytest.param(160, marks=pytest.mark.stress)], ids=lambda n: f"{n}-mutations"
)
async def test_no_mutated_request_gets_a_500_or_exception_text(
    make_bus: BusFactory, tmp_path: Path, count: int
) -> None:
    """Seeded mutations of the valid requests (a developer's run: the first 40 of the same)."""
    mutated = list(mutations(22, count))
    async with make_bus() as bus, serving(bus, tmp_path, ARTISTS, token=TOKEN) as server:
        tokens = await issue(bus, SESSION)
        who = {"read": tokens["read"], "admin": TOKEN}
        async with httpx.AsyncClient(base_url=root(server), trust_env=False, timeout=30) as http:
            for holder, token in who.items():  # a mutation may be a valid new task: it runs
                auth = {"Authorization": f"Bearer {token}", "A2A-Version": "1.0"}
                for name, body in mutated:
                    answer = await http.post(JSONRPC_PATH, content=body, headers=auth)
                    check_jsonrpc(answer, f"{holder} token, JSON-RPC, {name} {body[:80]!r}")


def test_the_pure_checks_take_anything() -> None:
    """``wellformed.check`` raises only ``Malformed``; ``access.target_of`` never raises."""
    rng = random.Random(7)
    samples: list[bytes] = [body for _, body, _ in table()]
    samples += [body for _, body in mutations(7, 4000)]
    samples += [bytes(rng.randrange(256) for _ in range(rng.randrange(40))) for _ in range(4000)]
    headers = Headers({"a2a-version": "1.0"})
    for body in samples:
        for binding, path in (("jsonrpc", JSONRPC_PATH), ("rest", f"{REST_PREFIX}/message:send")):
            try:
                wellformed.check(binding, "POST", headers, body)  # type: ignore[arg-type]
            except wellformed.Malformed as refused:
                assert refused.code in JSONRPC_CODES and refused.reason
            target = access.target_of("POST", path, body)
            assert target.need in ("read", "write", "admin")
