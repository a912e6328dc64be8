"""Questions on the live page, in headless Chromium: a file input answers a sub-agent's
``request_file_upload``, and an image question's picker offers the session's own pictures.

As in :mod:`tests.server.test_browser`, Playwright drives the Chromium on ``PATH`` (or its own) and
every wait is for something on the page or in the log, never a sleep.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path

import pytest
from playwright.async_api import Browser, Page, async_playwright

from baton.bus.events import (
    AgentResult,
    AgentSpawned,
    QuestionAnswered,
    QuestionAsked,
    SessionFinished,
    SessionStarted,
    utc_now,
)
from baton.bus.memory import MemoryBus
from baton.bus.payloads import QuestionReply
from baton.engine.bus_channel import approvals_inbox
from baton.server import BatonServer, ServerConfig
from baton.subagents.png import picture_for
from baton.subagents.profiles import builtin_profiles
from tests.server.helpers import TOKEN, client, start_session
from tests.server.test_browser import WAIT_MS, chromium, launch
from tests.support.events import wait_for_event

pytestmark = pytest.mark.browser


__all__ = ["chromium"]  # the module fixture that finds a Chromium, or fails in one line


@asynccontextmanager
async def headless() -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        browser = await launch(playwright)
        try:
            yield browser
        finally:
            await browser.close()


async def _live(browser: Browser, url: str, errors: list[str]) -> Page:
    page = await browser.new_page()
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    await page.goto(url)
    await page.wait_for_function(
        "() => document.querySelector('#connection').textContent === 'live'", timeout=WAIT_MS
    )
    return page


async def test_a_file_chosen_on_the_page_reaches_the_reviewer_and_is_used(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("a heron, a fox\n")
    config = ServerConfig(port=0, media_dir=tmp_path / "media", token=TOKEN)
    async with (
        MemoryBus() as bus,
        BatonServer(config, bus=bus, profiles=builtin_profiles()) as server,
        client(server, headers={"Authorization": f"Bearer {TOKEN}"}) as http,
        headless() as browser,
    ):
        session = await start_session(http, "review my notes", profiles=["reviewer"])
        errors: list[str] = []
        page = await _live(browser, f"{server.url}/sessions/{session}?token={TOKEN}", errors)
        question = page.locator(".question[data-kind=upload]")
        await question.wait_for(timeout=WAIT_MS)
        asked = await wait_for_event(bus, session, QuestionAsked)
        assert await question.locator("samp").text_content() == asked.question_id
        assert "reviewer asks for a file: review my notes" in (
            await question.locator("p").text_content() or ""
        )
        assert await page.locator("#no-approvals").is_hidden()

        await question.locator("button.upload").click()  # nothing chosen yet: says so, sends none
        assert await question.locator(".note").text_content() == "choose a file first"
        await question.locator("input.file").set_input_files(str(notes))
        await question.locator("button.upload").click()
        await page.wait_for_selector(".question", state="detached", timeout=WAIT_MS)

        answered = await wait_for_event(bus, session, QuestionAnswered)
        assert answered.outcome == "provided" and answered.name == "notes.txt"
        [stored] = (tmp_path / "media").rglob("reviewer-upload-*-notes.txt")
        assert stored.read_text() == "a heron, a fox\n"
        result = await wait_for_event(bus, session, AgentResult)
        assert stored.as_uri() in result.media_urls
        await page.wait_for_selector("#status[data-status=completed]", timeout=WAIT_MS)
        link = page.locator('.agent[data-agent="reviewer"] .media a')
        assert (await link.get_attribute("href") or "").endswith(f"-{stored.name.split('-')[-1]}")
        assert await page.locator("#no-approvals").is_visible()
        assert errors == []
        finished = await wait_for_event(bus, session, SessionFinished)
        assert finished.status == "completed"


async def test_an_image_question_is_answered_from_the_picker(tmp_path: Path) -> None:
    """The picker lists the pictures the session's agents made; a click answers the question
    with a copy stored for it (the asking agent reads the store, not the page)."""
    session = "s-picker"
    media = tmp_path / "media"
    (media / session).mkdir(parents=True)
    fox = media / session / "fox.png"
    fox.write_bytes(picture_for("a fox"))
    config = ServerConfig(port=0, media_dir=media, token=TOKEN)
    async with (
        MemoryBus() as bus,
        BatonServer(config, bus=bus, profiles=builtin_profiles()) as server,
        headless() as browser,
    ):
        for event in (
            SessionStarted(session=session, agent="lead", task="paint and look", model="m"),
            AgentSpawned(session=session, agent="painter", profile="painter"),
            AgentResult(session=session, agent="painter", content="a fox",
                        media_urls=[fox.resolve().as_uri()]),
            QuestionAsked(session=session, agent="looker", question_id="q-img", call_id="c1",
                          kind="image", prompt="which picture?",
                          expires_at=utc_now() + timedelta(minutes=3)),
        ):  # fmt: skip
            await bus.log.emit(event)

        bare = await browser.new_context(java_script_enabled=False)  # the server's paint
        painted = await bare.new_page()
        await painted.goto(f"{server.url}/sessions/{session}?token={TOKEN}")
        shown = painted.locator(".question[data-kind=image]")
        assert await shown.locator("samp").text_content() == "q-img"
        assert await shown.locator("input.file").get_attribute("accept") == "image/*"

        errors: list[str] = []
        page = await _live(browser, f"{server.url}/sessions/{session}?token={TOKEN}", errors)
        pick = page.locator(".question[data-question=q-img] .picker button.pick")
        await pick.wait_for(timeout=WAIT_MS)
        assert await pick.count() == 1
        assert await pick.locator("img").get_attribute("src") == f"/media/{session}/fox.png"
        await pick.click()
        note = page.locator(".question[data-question=q-img] .note")
        await page.wait_for_function(
            "() => document.querySelector('.question .note').textContent.startsWith('sent')",
            timeout=WAIT_MS,
        )
        assert await note.text_content() == "sent, waiting for the agent…"
        [envelope] = await bus.inboxes.read(session, approvals_inbox("looker"))
        reply = QuestionReply.model_validate(envelope.meta)
        assert reply.outcome == "provided" and reply.media_type == "image/png"
        [copy] = media.rglob("looker-upload-*-fox.png")
        assert reply.url == copy.as_uri() and copy.read_bytes() == fox.read_bytes()

        await bus.log.emit(QuestionAnswered(session=session, agent="looker",
                                            question_id="q-img", outcome="provided",
                                            url=reply.url))  # fmt: skip
        await page.wait_for_selector(".question", state="detached", timeout=WAIT_MS)
        assert errors == []
