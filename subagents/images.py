"""Real pictures for ``generate_image``: the OpenAI-compatible Images API.

With a model endpoint configured, the built-in ``generate_image`` tool asks its Images API
(``images.generate``) for the picture, with the model ``image_model`` names (``BATON_IMAGE_MODEL``,
``gpt-image-1`` by default); without one (the offline model) it paints its demo picture as before.
Either way the bytes go through the media store, so the URL is one the lead can open.

An endpoint answers one of two ways, and both are taken: the image inline (``b64_json``; what
``gpt-image-1`` always does), or a ``url`` to fetch it from (DALL·E's default, and what many
self-hosted servers do), fetched here at once since such URLs expire. What came back must be a
picture (PNG, JPEG, WebP or GIF, told by its first bytes, not by what the server says), or the
call fails with a clear error the model reads.

One client per call: a picture takes seconds to make, so the milliseconds of a new connection pool
do not count, and nothing is left to close when a worker stops.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

import httpx2
import openai
from openai.types import Image

from baton.bus.redact import redact_text, redact_url
from baton.llm import ModelSettings
from baton.llm.client import OPENAI_API_URL
from baton.llm.defaults import DEFAULT_IMAGE_MODEL
from baton.llm.guard import check_model_endpoint
from baton.media import MediaError

ResponseFormat = Literal["b64_json", "url"]
IMAGE_TIMEOUT_S = 150.0
"""How long a picture may take: the API sends nothing until it is drawn, which takes a large model
up to a minute or more, so the chat requests' read timeout (60 s by default) would cut it off."""
MAX_IMAGE_BYTES = 64 * 1024 * 1024
"""The largest picture taken from a ``url`` response."""

_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


class ImageError(MediaError):
    """The Images API gave no picture: it refused, failed, or sent something else."""


@dataclass(frozen=True, slots=True)
class Picture:
    """A picture's bytes and its content type."""

    data: bytes
    content_type: str


@runtime_checkable
class ImageGenerator(Protocol):
    """What makes a picture of a prompt (``generate_image`` paints offline without one)."""

    async def generate(self, prompt: str) -> Picture:
        """The picture; raises :class:`ImageError`."""
        ...


def content_type_of(data: bytes) -> str | None:
    """The picture's content type by its first bytes, or None when it is no picture known here."""
    for signature, content_type in _SIGNATURES:
        if data.startswith(signature):
            return content_type
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


class OpenAIImages:
    """An :class:`ImageGenerator` on the endpoint ``settings`` names (its key, timeouts and
    retries), asking for ``model``.

    ``response_format`` is sent when given (``b64_json`` or ``url``); by default it is not, and
    the server's own default comes back (``gpt-image-1`` rejects the field). ``transport`` (an
    ``httpx2`` transport, e.g. the scripted server's) carries both the API call and the fetch of a
    ``url`` answer. A request may read nothing for ``timeout_s`` (or the settings' own timeout,
    if longer) while the picture is drawn.
    """

    def __init__(
        self,
        settings: ModelSettings,
        model: str = DEFAULT_IMAGE_MODEL,
        *,
        response_format: ResponseFormat | None = None,
        transport: httpx2.AsyncBaseTransport | None = None,
        timeout_s: float = IMAGE_TIMEOUT_S,
    ) -> None:
        self.settings = settings
        self.model = model
        self.response_format = response_format
        self.timeout_s = max(timeout_s, settings.timeout)
        self._transport = transport
        self.base_url = settings.base_url or OPENAI_API_URL
        self.shown = f"{model} at {redact_url(self.base_url)}"
        """The model and endpoint as messages name them: a base URL's credentials hidden."""

    def __repr__(self) -> str:
        return f"OpenAIImages({self.shown})"

    async def generate(self, prompt: str) -> Picture:
        check_model_endpoint(self.base_url)  # a test's confinement covers pictures too
        async with self._http() as http:
            item = await self._ask(http, prompt)
            if item.b64_json:
                try:
                    data = base64.b64decode(item.b64_json, validate=True)
                except (binascii.Error, ValueError) as exc:
                    raise ImageError(f"{self.model}: b64_json is not base64: {exc}") from exc
            elif item.url:
                data = await self._fetch(http, item.url)
            else:
                raise ImageError(f"{self.shown} answered with no image")
        content_type = content_type_of(data)
        if content_type is None:
            raise ImageError(
                f"{self.shown} sent {len(data)} bytes that are not a PNG, JPEG, WebP or GIF picture"
            )
        return Picture(data, content_type)

    def _http(self) -> httpx2.AsyncClient:
        timeout = httpx2.Timeout(self.timeout_s, connect=self.settings.connect_timeout)
        return httpx2.AsyncClient(transport=self._transport, timeout=timeout)

    async def _ask(self, http: httpx2.AsyncClient, prompt: str) -> Image:
        key = self.settings.api_key.get_secret_value() if self.settings.api_key else ""
        # Every value the SDK would take from OPENAI_* variables is given: a library object reads
        # no environment. A keyless endpoint (a local server) gets no Authorization header.
        headers: dict[str, Any] = {
            "OpenAI-Organization": openai.Omit(),
            "OpenAI-Project": openai.Omit(),
        }
        if not key:
            headers["Authorization"] = openai.Omit()
        client = openai.AsyncOpenAI(
            api_key=key,
            admin_api_key="",
            organization="",
            project="",
            webhook_secret="",
            base_url=self.base_url,
            max_retries=self.settings.max_retries,
            http_client=http,
        )
        try:
            response = await client.images.generate(
                model=self.model,
                prompt=prompt,
                n=1,
                response_format=self.response_format or openai.omit,
                extra_headers=headers,
            )
        except openai.NotFoundError as exc:  # a chat-only server (llama-server, Ollama)
            raise ImageError(
                f"{self.shown} made no image: the endpoint has no Images API "
                f"or no such model (HTTP 404); image_model = 'demo' (BATON_IMAGE_MODEL=demo) "
                "draws the built-in demo pictures instead"
            ) from exc
        except openai.OpenAIError as exc:
            said = redact_text(str(exc), self.base_url)  # an SDK error may quote the URL
            raise ImageError(f"{self.shown} made no image: {said}") from exc
        if not response.data:
            raise ImageError(f"{self.shown} answered with no image")
        return response.data[0]

    async def _fetch(self, http: httpx2.AsyncClient, url: str) -> bytes:
        if url.startswith("data:"):
            _, _, payload = url.partition(",")
            try:
                return base64.b64decode(payload, validate=True)
            except (binascii.Error, ValueError) as exc:
                raise ImageError(f"{self.model}: the image's data: URL is not base64") from exc
        check_model_endpoint(url)
        try:
            async with http.stream("GET", url, follow_redirects=True) as response:
                if response.status_code != 200:
                    raise ImageError(f"fetching {self.model}'s image: HTTP {response.status_code}")
                chunks: list[bytes] = []
                size = 0
                async for chunk in response.aiter_bytes():
                    size += len(chunk)
                    if size > MAX_IMAGE_BYTES:
                        raise ImageError(f"{self.model}'s image is over {MAX_IMAGE_BYTES} bytes")
                    chunks.append(chunk)
        except httpx2.HTTPError as exc:
            raise ImageError(f"cannot fetch {self.model}'s image: {exc}") from exc
        return b"".join(chunks)
