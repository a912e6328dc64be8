"""A painter whose store fails (a real S3-compatible server, a bucket that does not exist) does not
report "Done": the tool's error reaches the lead in its context and the user in the session's
result, and the session is not completed, whatever words the sub-agent's model chose."""

from __future__ import annotations

from pathlib import Path

import anyio

from baton.bus.events import AgentResult
from baton.media import open_store
from baton.session import Session, SessionConfig
from tests.support.events import logged_events
from tests.support.models import scripted


async def test_a_failed_store_reaches_the_lead_and_the_user_and_is_not_done(
    aws_env: dict[str, str], tmp_path: Path
) -> None:
    server, lead_model = scripted()  # the offline lead (a scripted server, recorded)
    config = SessionConfig(
        task="paint a fox", media=open_store("s3://no-such-bucket/x"), media_dir=tmp_path
    )
    with anyio.fail_after(60):
        async with lead_model, Session(config, model=lead_model) as session:
            result = await session.run()
            log = await logged_events(session.bus, session.id)
    [reported] = [e for e in log if isinstance(e, AgentResult) and e.agent == "painter"]
    assert not reported.content.startswith("Done")
    assert "NoSuchBucket" in reported.content  # the offline sub-agent said what failed
    assert result.status == "incomplete" and result.media_urls == []
    assert "painter's tools failed: generate_image failed with MediaError" in result.error
    assert "NoSuchBucket" in result.error
    told = [
        m["content"]
        for m in server.requests[-1].messages
        if m["role"] == "user" and "[result from painter]" in str(m["content"])
    ]
    assert told and "tools failed: generate_image failed" in told[-1]
