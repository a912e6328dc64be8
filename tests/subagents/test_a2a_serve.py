"""One ``baton serve`` delegating to another over A2A, in two processes: the front server's only
profile is the other server (``kind = "a2a"``), a client speaks A2A to the front one, and the
picture the far server's painter made comes back to it as an artifact, in one trace."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.types import TaskState

from baton.testing.otlp import OtlpReceiver, ReceivedSpan
from tests.cli.helpers import Proc, clean_env, processes
from tests.server.a2a_helpers import collect, state_of
from tests.server.a2a_helpers import user_message as message

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER = "00f067aa0ba902b7"
WAIT_S = 60.0


def root_of(serve: Proc) -> str:
    line = serve.expect("baton serve: http", stream="err")
    found = re.search(r"(http://[^/\s]+)", line)
    assert found, line
    return found.group(1).replace("0.0.0.0", "127.0.0.1")


def span_named(
    spans: list[ReceivedSpan], service: str, name: str, kind: str = "INTERNAL"
) -> list[ReceivedSpan]:
    return [s for s in spans if (s.service, s.name, s.kind) == (service, name, kind)]


def relayed(spans: list[ReceivedSpan]) -> bool:
    """Every span the test reads is in (each process exports in batches, in its own time): the
    far lead's turn and its painter's tool, and the front's relay."""
    wanted = [
        ("far", "invoke_agent lead"),
        ("far", "execute_tool generate_image"),
        ("front", "invoke_agent painter"),
    ]
    return all(span_named(spans, service, name) for service, name in wanted)


@pytest.mark.process
async def test_a_baton_serve_delegates_to_another_over_a2a(tmp_path: Path) -> None:
    with OtlpReceiver() as receiver, processes() as start:

        def env(service: str, media: str) -> dict[str, str]:
            return clean_env(
                tmp_path,
                OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url,
                OTEL_SERVICE_NAME=service,
                OTEL_BSP_SCHEDULE_DELAY="50",
                BATON_MEDIA_DIR=str(tmp_path / media),
                NO_PROXY="127.0.0.1",
            )

        far = root_of(start("serve", "--port", "0", env=env("far", "far-media")))
        profiles = tmp_path / "front.toml"  # the offline lead sends "paint ..." to "painter"
        profiles.write_text(f'[profiles.painter]\nkind = "a2a"\nurl = "{far}"\n')
        front_serve = start("serve", "--port", "0", "--profiles", str(profiles),
                            env=env("front", "front-media"))  # fmt: skip
        front = root_of(front_serve)
        headers = {"traceparent": f"00-{TRACE}-{CALLER}-01"}
        async with httpx.AsyncClient(timeout=WAIT_S, headers=headers, trust_env=False) as http:
            client = await create_client(front, client_config=ClientConfig(httpx_client=http))
            responses = await collect(client.send_message(message("paint a fox")))
            await client.close()
            assert state_of(responses[-1]) == TaskState.TASK_STATE_COMPLETED, responses[-1]
            urls = [
                part.url
                for response in responses
                if response.HasField("artifact_update")
                for part in response.artifact_update.artifact.parts
                if part.HasField("url")
            ]
            assert urls, responses
            assert all(url.startswith(far) for url in urls), urls  # the far server's picture
            picture = await http.get(urls[0])
        assert picture.status_code == 200 and picture.content.startswith(b"\x89PNG")
        assert receiver.wait_for(relayed, WAIT_S), receiver.spans()
        spans = receiver.spans()

    # one trace: the caller's span -> the front session -> its lead's send (CLIENT) -> the
    # relay to the far server (the painter's turn) -> the far session's lead and its painter
    assert {s.trace_id for s in spans if s.service in ("front", "far")} == {TRACE}
    by_id = {span.span_id: span for span in spans}
    (relay,) = span_named(spans, "front", "invoke_agent painter")
    (send,) = span_named(spans, "front", "invoke_agent painter", kind="CLIENT")
    assert relay.parent_span_id == send.span_id
    far_lead = span_named(spans, "far", "invoke_agent lead")[0]
    chain, span = [], far_lead
    while span.parent_span_id in by_id and span.span_id != relay.span_id:
        span = by_id[span.parent_span_id]
        chain.append(span.name)
    assert span.span_id == relay.span_id, chain  # the far lead's turn descends from the relay
    assert span_named(spans, "far", "execute_tool generate_image"), sorted({s.name for s in spans})
