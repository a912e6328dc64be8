"""Real pictures: ``generate_image`` asks the OpenAI-compatible Images API when an endpoint is
configured (``b64_json`` or ``url`` answers, both mounts of the scripted server), paints offline
without one, and stores either through the media store."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest

from baton.llm import IN_PROCESS_URL, HttpError, ModelSettings, ScriptedServer
from baton.llm.scripted_images import ScriptedImages, tiny_png
from baton.media import DirectoryStore, MediaStore
from baton.subagents.context import AgentContext, enter_agent, media_store
from baton.subagents.errors import NoAgentContext
from baton.subagents.images import (
    ImageError,
    ImageGenerator,
    OpenAIImages,
    Picture,
    ResponseFormat,
    content_type_of,
)
from baton.subagents.png import picture_for
from baton.subagents.tools import generate_image, publish
from baton.testing import ModelRequestRefused
from tests.support.media import file_path

FOX = tiny_png((255, 120, 0))


def painter(prompt: str) -> bytes:
    return FOX if "fox" in prompt else tiny_png()


def in_process(server: ScriptedServer, form: ResponseFormat | None = None) -> OpenAIImages:
    settings = ModelSettings(model="chat", base_url=IN_PROCESS_URL, api_key="sk-test")
    return OpenAIImages(settings, "img-test", response_format=form, transport=server.transport())


@pytest.mark.parametrize("form", ["b64_json", "url"])
async def test_either_answer_of_the_images_api_gives_the_picture(form: ResponseFormat) -> None:
    server = ScriptedServer(images=ScriptedImages(painter=painter), record=True)
    picture = await in_process(server, form).generate("a fox in the snow")
    assert picture == Picture(FOX, "image/png")
    asked = [r for r in server.requests if r.path.endswith("/images/generations")]
    assert len(asked) == 1
    assert asked[0].body == {
        "model": "img-test", "prompt": "a fox in the snow", "n": 1, "response_format": form
    }  # fmt: skip
    assert asked[0].headers["authorization"] == "Bearer sk-test"
    fetched = [r for r in server.requests if r.method == "GET"]
    assert len(fetched) == (1 if form == "url" else 0)  # a url answer is fetched at once


async def test_unasked_the_server_s_own_default_is_taken_and_nothing_is_sent() -> None:
    server = ScriptedServer(images=ScriptedImages(response_format="url"), record=True)
    picture = await in_process(server).generate("a heron")
    assert picture.data == tiny_png()
    assert "response_format" not in server.requests[0].body  # gpt-image-1 rejects the field


async def test_over_loopback_http_a_url_answer_is_fetched_from_the_server() -> None:
    server = ScriptedServer(images=ScriptedImages(painter=painter, response_format="url"))
    async with server.serve() as http:
        settings = ModelSettings(model="chat", base_url=http.base_url, api_key=None)
        picture = await OpenAIImages(settings, "img-test").generate("a fox")
    assert picture.data == FOX and server.images.prompts == ["a fox"]
    assert len(server.images.files) == 1


async def test_a_refusal_is_an_image_error_naming_the_model() -> None:
    refused = HttpError(400, "model img-test does not exist", "invalid_request_error")
    server = ScriptedServer(images=ScriptedImages(error=refused))
    with pytest.raises(ImageError, match=r"img-test at http://scripted\.invalid/v1 made no image"):
        await in_process(server).generate("a fox")


async def test_a_chat_only_server_says_it_has_no_images_api_and_how_to_draw_anyway() -> None:
    """llama-server and Ollama answer 404 on /images/generations: the model reads why, and the
    setting that keeps the demo painter."""
    missing = HttpError(404, "File Not Found", "not_found_error")  # llama-server's answer
    server = ScriptedServer(images=ScriptedImages(error=missing), record=True)
    with pytest.raises(ImageError) as caught:
        await in_process(server).generate("a fox")
    assert "has no Images API" in str(caught.value)
    assert "BATON_IMAGE_MODEL=demo" in str(caught.value)
    assert [r.path for r in server.requests] == ["/v1/images/generations"]


async def test_bytes_that_are_no_picture_are_refused() -> None:
    server = ScriptedServer(images=ScriptedImages(painter=lambda prompt: b"<html>oops</html>"))
    with pytest.raises(ImageError, match="not a PNG, JPEG, WebP or GIF"):
        await in_process(server).generate("a fox")


async def test_an_endpoint_off_this_machine_is_refused_in_tests() -> None:
    settings = ModelSettings(model="chat", base_url="https://images.example.com/v1", api_key="k")
    with pytest.raises(ModelRequestRefused):
        await OpenAIImages(settings).generate("a fox")


def test_pictures_are_told_by_their_first_bytes() -> None:
    assert content_type_of(picture_for("x")) == "image/png"
    assert content_type_of(b"\xff\xd8\xff\xe0rest") == "image/jpeg"
    assert content_type_of(b"RIFF\x00\x00\x00\x00WEBPVP8 ") == "image/webp"
    assert content_type_of(b"GIF89a...") == "image/gif"
    assert content_type_of(b"%PDF-1.7") is None


def agent_context(
    tmp_path: Path, media: MediaStore | None = None, images: ImageGenerator | None = None
) -> AgentContext:
    async def report(content: str) -> None:
        raise AssertionError("no progress expected")

    return AgentContext(
        session="s-img",
        agent="painter",
        lead="lead",
        media_dir=tmp_path / "media",
        report=report,
        record_result=lambda content: None,
        media=media,
        images=images,
    )


async def test_generate_image_with_an_endpoint_stores_the_api_s_picture(tmp_path: Path) -> None:
    server = ScriptedServer(images=ScriptedImages(painter=painter, response_format="url"))
    store = DirectoryStore(tmp_path / "elsewhere")
    enter_agent(agent_context(tmp_path, media=store, images=in_process(server)))
    assert media_store() is store
    result = await generate_image.invoke({"prompt": "a fox"})
    (url,) = result.media_urls
    assert file_path(url).read_bytes() == FOX
    assert file_path(url).parent == (tmp_path / "elsewhere" / "s-img").resolve()
    assert url in result.content


async def test_generate_image_offline_paints_into_the_media_dir(tmp_path: Path) -> None:
    enter_agent(agent_context(tmp_path))
    result = await generate_image.invoke({"prompt": "a fox"})
    (url,) = result.media_urls
    path = file_path(url)
    assert path.read_bytes() == picture_for("a fox")  # as before the store: same bytes, place
    assert path.parent == (tmp_path / "media" / "s-img").resolve()
    assert path.name.startswith("painter-") and path.suffix == ".png"


async def test_an_images_api_failure_is_the_tool_s_error_and_stores_nothing(
    tmp_path: Path,
) -> None:
    server = ScriptedServer(images=ScriptedImages(error=HttpError(429, "slow down", "rate")))
    settings = ModelSettings(model="chat", base_url=IN_PROCESS_URL, api_key="k", max_retries=0)
    images = OpenAIImages(settings, transport=server.transport())
    enter_agent(agent_context(tmp_path, images=images))
    with pytest.raises(ImageError, match="slow down"):
        await generate_image.invoke({"prompt": "a fox"})
    assert not (tmp_path / "media").exists()


async def test_publish_goes_through_the_store_too(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path / "pub")
    enter_agent(agent_context(tmp_path, media=store))
    result = await publish.invoke({"text": "the news"})
    (url,) = result.media_urls
    assert file_path(url).read_text() == "the news\n"
    assert file_path(url).is_relative_to((tmp_path / "pub").resolve())


def test_the_store_accessor_needs_an_agent() -> None:
    with pytest.raises(NoAgentContext):
        media_store()


async def test_a_url_answer_that_is_not_served_fails_clearly() -> None:
    transport = httpx2.MockTransport(
        lambda request: (
            httpx2.Response(200, json={"created": 1, "data": [{"url": "http://127.0.0.1:9/x.png"}]})
            if request.method == "POST"
            else httpx2.Response(404)
        )
    )
    settings = ModelSettings(model="chat", base_url=IN_PROCESS_URL, api_key="k")
    with pytest.raises(ImageError, match="HTTP 404"):
        await OpenAIImages(settings, transport=transport).generate("a fox")


async def test_an_endpoint_s_credentials_stay_out_of_its_errors() -> None:
    """A base URL may carry a password (a proxy's basic auth) or a ``?api_key=``: the errors the
    model and the log read show the endpoint redacted, as every other URL baton shows."""
    refused = HttpError(400, "model img-test does not exist", "invalid_request_error")
    server = ScriptedServer(images=ScriptedImages(error=refused))
    secret = "http://proxy:s3cret@scripted.invalid/v1?api_key=k3y"
    settings = ModelSettings(model="chat", base_url=secret, api_key="sk-test")
    images = OpenAIImages(settings, "img-test", transport=server.transport())
    with pytest.raises(ImageError) as caught:
        await images.generate("a fox")
    said = f"{caught.value} {images!r}"
    assert "s3cret" not in said and "k3y" not in said, said
    assert "img-test at http://proxy:***@scripted.invalid/v1?api_key=***" in str(caught.value)
