"""The A2A hop keeps one trace: a ``baton serve`` exporting OTLP (configured by the standard
``OTEL_*`` variables alone) handles an A2A request in the request's ``traceparent``, so the SDK's
spans and the session it starts (the lead's ``invoke_agent`` turns) descend from the caller's
span, all in the caller's trace."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from baton.testing.otlp import OtlpReceiver, ReceivedSpan
from tests.cli.helpers import clean_env, processes
from tests.server.a2a_helpers import collect
from tests.server.a2a_helpers import user_message as message

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER = "00f067aa0ba902b7"
WAIT_S = 30.0


def lead_turns(spans: list[ReceivedSpan]) -> list[ReceivedSpan]:
    return [s for s in spans if s.name == "invoke_agent lead" and s.trace_id == TRACE]


@pytest.mark.process
async def test_the_session_of_an_a2a_request_continues_the_callers_trace(tmp_path: Path) -> None:
    import httpx
    from a2a.client import ClientConfig, create_client

    env = clean_env(tmp_path, OTEL_SERVICE_NAME="baton-serve", OTEL_BSP_SCHEDULE_DELAY="50",
                    NO_PROXY="127.0.0.1")  # fmt: skip
    with OtlpReceiver() as receiver, processes() as start:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.url
        serve = start("serve", "--port", "0", env=env)
        line = serve.expect("baton serve: http", stream="err")
        found = re.search(r"(http://[^/\s]+)", line)
        assert found, line
        headers = {"traceparent": f"00-{TRACE}-{CALLER}-01"}
        async with httpx.AsyncClient(timeout=30.0, headers=headers, trust_env=False) as http:
            config = ClientConfig(httpx_client=http)
            client = await create_client(found.group(1), client_config=config)
            responses = await collect(client.send_message(message("paint a fox")))
            await client.close()
        assert responses[-1].status_update.status.state == 3  # COMPLETED
        assert receiver.wait_for(lambda spans: bool(lead_turns(spans)), WAIT_S), receiver.spans()
        spans = receiver.spans()

    turns = lead_turns(spans)
    by_id = {span.span_id: span for span in spans}
    chain, span = [], turns[0]  # from the lead's first turn up to the caller's span
    while span.parent_span_id in by_id:
        span = by_id[span.parent_span_id]
        chain.append(span.name)
    assert span.parent_span_id == CALLER, chain  # the caller's span is the session's root
    assert any(name.endswith("JsonRpcDispatcher.handle_requests") for name in chain), chain
    session = responses[0].task.id
    assert all(s.attributes["gen_ai.conversation.id"] == session for s in turns)
    assert {s.trace_id for s in spans if s.service == "baton-serve"} == {TRACE}  # one trace
