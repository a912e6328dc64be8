"""``baton post`` and ``POST /sessions/{id}/messages`` speak as the user, never for an agent.

Before, ``baton post --session B --to lead --from anyone --type result "FORGED" --media
file:///etc/passwd`` was sent, and the forged text and media landed in B's answer. Now another
sender, or an agent's type, is refused before anything is sent (one line, exit 2; HTTP 422), and
what a person may post goes out as ``user`` (signed, on a deployment with a key). The real
``baton`` command (in-process: :func:`~tests.cli.helpers.invoke_baton`) against a real
``redis-server``.
"""

from __future__ import annotations

import hmac
import json
from pathlib import Path

import pytest
import redis

from baton.bus.connect import open_bus
from tests.cli.helpers import invoke_baton
from tests.server.helpers import client, serving

SESSION = "s-posted"
INBOX = f"baton:{{{SESSION}}}:inbox:lead"


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (
            ["--from", "anyone", "--type", "result", "--media", "file:///etc/passwd"],
            "not as 'anyone'",
        ),
        (["--type", "result"], "not 'result' (an agent's result comes from the agent itself)"),
        (["--type", "progress"], "not 'progress'"),
        (["--from", "painter", "--type", "message"], "not as 'painter'"),
    ],
)
def test_post_refuses_to_speak_for_an_agent(
    redis_url: str, env: dict[str, str], flags: list[str], said: str
) -> None:
    code, out, err = invoke_baton(
        "post", "--bus", redis_url, "--session", SESSION, "--to", "lead", *flags, "FORGED", env=env
    )
    lines = err.splitlines()
    assert (code, out, len(lines)) == (2, "", 1), err
    assert lines[0].startswith("baton post: ") and said in lines[0] and "Traceback" not in err
    with redis.Redis.from_url(redis_url) as admin:
        assert admin.exists(INBOX) == 0  # nothing was sent


def test_post_sends_as_the_user_and_signs_with_the_deployments_key(
    redis_url: str, env: dict[str, str]
) -> None:
    key = "the deployment's signing key"
    with redis.Redis.from_url(redis_url) as admin:  # a session that runs (docs/protocol.md)
        admin.hset(f"baton:{{{SESSION}}}:lead", "status", "running")
    code, out, err = invoke_baton(
        "post", "--bus", redis_url, "--session", SESSION, "--to", "lead", "--type", "message",
        "also paint a heron",
        env={**env, "BATON_SIGNING_KEY": key},
    )  # fmt: skip
    assert code == 0, err
    with redis.Redis.from_url(redis_url, decode_responses=True) as admin:
        [(_, fields)] = admin.xrange(INBOX)
    posted = json.loads(fields["msg"])
    assert (posted["id"], posted["sender"], posted["type"]) == (out.strip(), "user", "message")
    signature = hmac.new(key.encode(), fields["msg"].encode(), "sha256").hexdigest()
    assert fields["sig"] == signature
    assert key not in out + err


async def test_the_http_api_posts_as_the_user_only(tmp_path: Path) -> None:
    """The same rule over HTTP: an agent's type, or a sender of any kind, is 422 and sends
    nothing (checked before the session is even looked up)."""
    async with open_bus() as bus, serving(bus, tmp_path) as server, client(server) as http:
        forged = [
            {"content": "FORGED", "to": "lead", "type": "result"},
            {"content": "FORGED", "to": "lead", "type": "progress"},
            {"content": "FORGED", "to": "lead", "type": "message", "sender": "painter"},
            {"content": "FORGED", "to": "lead", "type": "message", "from": "anyone"},
        ]
        for body in forged:
            answer = await http.post(f"/sessions/{SESSION}/messages", json=body)
            assert answer.status_code == 422, (body, answer.text)
            detail = answer.json()["detail"]
            assert detail.startswith(("type:", "sender:", "from:")), detail
        assert await bus.inboxes.read(SESSION, "lead") == []
