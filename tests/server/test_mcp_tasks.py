"""``run`` as an MCP task, driven by a client that speaks tasks: the official TypeScript client
(``@modelcontextprotocol/client``) with ``@modelcontextprotocol/ext-tasks``, both protocol
revisions (V2: the 2026-07-28 tasks extension; V1: 2025-11-25 core tasks), against two
``baton serve`` processes on one Redis.

One Node process runs every case (``tests/clients/mcp/tasks.mjs``) and prints what each saw;
the cases here assert on it. Its packages are installed on first use, outside the checkout, as
``tests/clients/mcp``'s lock file pins them (:mod:`tests.support.node`); when they cannot be,
the tests fail in one line saying why. The last case kills the first server
with SIGKILL while its task waits for a person, and asks the second server for the task.
"""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from baton.testing import RedisServer
from tests.cli.helpers import REPO, clean_env, processes
from tests.support.node import client, node
from tests.support.profiles import GALLERY

pytestmark = [pytest.mark.process, pytest.mark.browser, pytest.mark.timeout(400)]

CLIENT = REPO / "tests" / "clients" / "mcp"
TOKEN = "mcp-task-tests-token-0123456789"
SECRET = re.compile(r"^s-[0-9a-f]{12}~[A-Za-z0-9_-]{43}$")
"""A task id: its session, then 32 random bytes (base64url)."""
NODE_TIMEOUT_S = 300


@pytest.fixture(scope="module")
def seen(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Two servers on one Redis (a fresh key prefix), then the Node client's cases: what each
    case saw, by name."""
    folder = client("mcp")  # installed once, outside the checkout (tests/support/node.py)
    tmp = tmp_path_factory.mktemp("mcp-tasks")
    profiles = tmp / "gallery.toml"
    profiles.write_text(GALLERY)
    env = clean_env(tmp, BATON_TOKEN=TOKEN)
    prefix = f"mcp{uuid.uuid4().hex[:8]}"
    common = ["--bus", redis_server.url, "--prefix", prefix, "--profiles", str(profiles)]
    with processes() as start:
        servers = [start("serve", "--port", "0", *common, env=env) for _ in range(2)]
        urls = [_url(server.expect("baton serve: ", stream="err")) for server in servers]
        config = {"a": urls[0], "b": urls[1], "token": TOKEN, "pidA": servers[0].pid}
        done = subprocess.run(
            [node(), str(folder / "tasks.mjs"), json.dumps(config)],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=NODE_TIMEOUT_S,
        )
        assert done.returncode == 0, done.stderr
        yield json.loads(done.stdout)


def _url(line: str) -> str:
    found = re.search(r"(http://\S+?)/ ", line)
    assert found is not None, line
    return found[1] + "/mcp"


def _case(seen: Any, name: str) -> dict[str, Any]:
    case: dict[str, Any] = seen[name]
    assert case["ok"], case.get("error")
    return case


def _statuses(case: dict[str, Any]) -> list[str]:
    """The statuses the client observed, each change once."""
    statuses: list[str] = []
    for view in case["seen"]:
        if not statuses or statuses[-1] != view["status"]:
            statuses.append(view["status"])
    return statuses


@pytest.mark.parametrize("era", ["v2", "v1"])
def test_an_approval_is_input_required_answered_through_the_client_then_completed(
    seen: Any, era: str
) -> None:
    case = _case(seen, f"{era}_approved")
    assert case["kind"] == "task" and SECRET.match(case["taskId"])
    assert case["outcome"] == "completed"
    statuses = _statuses(case)
    assert statuses[0] == "working" and statuses[-1] == "completed"
    [asked] = case["asked"]  # one approval, asked once, related to this task
    assert asked["kind"] == "elicitation" and asked["taskId"] == case["taskId"]
    assert asked["params"]["requestedSchema"]["properties"]["approved"]["type"] == "boolean"
    during = asked["during"]["result"]  # the task while its question waited
    assert during["status"] == "input_required" and during["taskId"] == case["taskId"]
    if era == "v2":  # answered with tasks/update, the question inline in tasks/get
        assert asked["delivery"] == "task-update"
        assert asked["inputId"] in during["inputRequests"]
        assert "input_required" in statuses
    else:  # 2025-11-25: the server's elicitation request, related to the task
        assert asked["delivery"] == "peer-request"
    structured = case["structured"]
    assert structured["status"] == "completed" and case["isError"] is False
    assert structured["session"] == case["taskId"].split("~")[0]
    [card] = structured["media_urls"]  # the approved tool made its card, linked
    assert card.endswith("/publisher-card.txt") and "resource_link" in case["content"]


@pytest.mark.parametrize("era", ["v2", "v1"])
def test_a_declined_approval_completes_the_task_with_an_incomplete_session(
    seen: Any, era: str
) -> None:
    case = _case(seen, f"{era}_declined")
    assert case["outcome"] == "completed"  # the tool call completed: its result says how
    structured = case["structured"]
    assert structured["status"] == "incomplete" and case["isError"] is False
    assert structured["media_urls"] == []
    assert any("no media was produced" in note for note in structured["notes"])


@pytest.mark.parametrize("era", ["v2", "v1"])
def test_a_task_paints_two_pictures(seen: Any, era: str) -> None:
    case = _case(seen, f"{era}_painted")
    assert case["outcome"] == "completed" and case["asked"] == []
    structured = case["structured"]
    assert structured["status"] == "completed"
    assert len(structured["media_urls"]) == 2
    assert case["content"].count("image") == 2 and case["content"].count("resource_link") == 2
    assert any(view["statusMessage"] for view in case["seen"] if view["status"] == "working")
    first = case["seen"][0]
    assert first["pollInterval"] == 500 and first["createdAt"].endswith("Z")


@pytest.mark.parametrize("era", ["v2", "v1"])
def test_tasks_cancel_cancels_the_session(seen: Any, era: str) -> None:
    case = _case(seen, f"{era}_cancel")
    assert case["outcome"] == "cancelled"
    after = case["after"]
    assert after["kind"] == "result", after
    assert after["result"]["status"] == "cancelled"
    assert after["result"]["statusMessage"] == "cancelled by tasks/cancel"


def test_a_task_outlives_its_server_killed_another_server_on_the_bus_answers(seen: Any) -> None:
    case = _case(seen, "kill9")
    answer = case["fromB"]
    assert answer["kind"] == "result", answer
    task = answer["result"]
    assert task["taskId"] == case["taskId"]
    # The lead died with its server: within its lease the task still waits for the person;
    # after it, it is working, and says `baton resume` continues it.
    assert task["status"] in ("input_required", "working")
    assert task["createdAt"].endswith("Z") and task["ttlMs"] > 0
    if task["status"] == "input_required":
        assert task["inputRequests"]
    else:
        assert "baton resume" in task["statusMessage"]


def test_an_unknown_task_and_an_undeclared_extension_are_the_specs_errors(seen: Any) -> None:
    case = _case(seen, "kill9")
    assert case["unknown"]["kind"] == "error"
    assert case["unknown"]["error"]["code"] == -32602
    assert "Task not found" in case["unknown"]["error"]["message"]
    undeclared = case["undeclared"]["error"]
    assert undeclared["code"] == -32021
    assert (
        "io.modelcontextprotocol/tasks" in undeclared["data"]["requiredCapabilities"]["extensions"]
    )


def test_the_package_lock_pins_what_package_json_names() -> None:
    package = json.loads((CLIENT / "package.json").read_text())
    lock = json.loads((CLIENT / "package-lock.json").read_text())
    for name, version in package["dependencies"].items():
        assert re.fullmatch(r"\d+\.\d+\.\d+", version), f"{name} is not pinned: {version}"
        assert lock["packages"][f"node_modules/{name}"]["version"] == version
