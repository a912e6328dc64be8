"""One trace per session across processes: ``baton run --no-local-workers`` and a ``baton worker``
on a real Redis, both exporting OTLP over HTTP to a receiver in this test, configured by the
standard ``OTEL_*`` variables alone.

The worker batches spans briefly (``OTEL_BSP_SCHEDULE_DELAY``), so its spans arrive while it
runs; the test waits on the receiver's condition for them, then stops the worker with SIGTERM
(a drain) so its last metrics are flushed as it exits.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

from baton.testing.otlp import OtlpReceiver, ReceivedSpan
from tests.cli.helpers import Proc

SESSION = "s-traced"
WAIT_S = 30.0


def exported_to(receiver: OtlpReceiver, service: str) -> dict[str, str]:
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
        "OTEL_SERVICE_NAME": service,
        "OTEL_BSP_SCHEDULE_DELAY": "50",
        "OTEL_METRIC_EXPORT_INTERVAL": "200",
        "NO_PROXY": "127.0.0.1",  # the receiver is on loopback, whatever proxy the shell names
    }


def worker_did_its_part(spans: list[ReceivedSpan]) -> bool:
    names = {span.name for span in spans if span.service == "baton-worker"}
    return "execute_tool generate_image" in names and any(
        name.startswith("invoke_agent ") for name in names
    )


def test_run_and_worker_export_one_trace_with_the_lead_span_as_the_agents_parent(
    start: Callable[..., Proc],
    redis_url: str,
    profiles_file: Path,
    env: dict[str, str],
) -> None:
    with OtlpReceiver() as receiver:
        worker = start(
            "worker", "--bus", redis_url, "--profiles", str(profiles_file),
            env={**env, **exported_to(receiver, "baton-worker")},
        )  # fmt: skip
        worker.expect(" ready: ", stream="err")
        run = start(
            "run", "--json", "--bus", redis_url, "--no-local-workers", "--session", SESSION,
            "--profiles", str(profiles_file), "--profile", "painter", "paint a fox",
            env={**env, **exported_to(receiver, "baton-run")},
        )  # fmt: skip
        assert run.wait() == 0, run.transcript()  # its exit flushed its spans
        assert receiver.wait_for(worker_did_its_part, WAIT_S), receiver.spans()
        worker.proc.send_signal(signal.SIGTERM)  # a drain: its metrics are flushed on the way out
        assert worker.wait() == 0, worker.transcript()
        spans = receiver.spans()
        metrics = receiver.metrics()

    lead_side = [span for span in spans if span.service == "baton-run"]
    worker_side = [span for span in spans if span.service == "baton-worker"]
    assert lead_side and worker_side
    assert len({span.trace_id for span in spans}) == 1  # one trace, two processes

    (client,) = [s for s in lead_side if s.kind == "CLIENT" and s.name.startswith("invoke_")]
    agent = str(client.attributes["gen_ai.agent.name"])
    assert client.name == f"invoke_agent {agent}" and agent.startswith("painter")
    assert client.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert client.attributes["gen_ai.conversation.id"] == SESSION
    lead_turns = [s for s in lead_side if s.name == "invoke_agent lead"]
    assert lead_turns and all(s.attributes["gen_ai.conversation.id"] == SESSION for s in lead_turns)
    by_id = {span.span_id: span for span in spans}
    assert by_id[by_id[client.parent_span_id].parent_span_id] in lead_turns  # via send_message

    agent_turns = [s for s in worker_side if s.name == f"invoke_agent {agent}"]
    assert agent_turns and all(s.parent_span_id == client.span_id for s in agent_turns)
    assert all(s.attributes["gen_ai.conversation.id"] == SESSION for s in agent_turns)
    assert all(s.attributes["gen_ai.agent.name"] == agent for s in agent_turns)

    tools = [s for s in worker_side if s.name == "execute_tool generate_image"]
    for tool in tools:
        assert tool.attributes["gen_ai.tool.name"] == "generate_image"
        assert tool.attributes["gen_ai.tool.call.id"]
        assert by_id[tool.parent_span_id] in agent_turns
    chats = [s for s in worker_side if s.name.startswith("chat ")]
    assert chats and all(by_id[s.parent_span_id] in agent_turns for s in chats)
    assert all(s.kind == "CLIENT" and int(s.attributes["gen_ai.usage.input_tokens"]) > 0
               for s in chats)  # fmt: skip

    for name in ("gen_ai.client.token.usage", "baton.worker.agents", "baton.wake.latency"):
        assert "baton-worker" in metrics.get(name, set()), (name, metrics)
