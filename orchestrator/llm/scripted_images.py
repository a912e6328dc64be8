"""The scripted server's Images API: ``POST /v1/images/generations`` for the tests of
``generate_image`` (:mod:`baton.subagents.images`), on both mounts of the scripted server.

It answers the way real endpoints do, in the form the request asks (``response_format``) or, when
it names none, in the server's own default (:attr:`ScriptedImages.response_format`):

- ``b64_json``: the picture inline, base64 (what ``gpt-image-1`` always does);
- ``url``: a URL on this same server, ``GET /v1/images/files/<n>.png``, that serves the picture
  (DALL·E's default, and many self-hosted servers'), so the client must fetch it.

The picture is ``painter(prompt)`` (by default one tiny valid PNG for every prompt); ``error``
answers every generation with that error instead (a refused model, a rate limit).
"""

from __future__ import annotations

import base64
import itertools
import json
import struct
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from baton.llm.script import HttpError, Json, Rendered, render

FILES = "/images/files/"
GENERATIONS = "/images/generations"
_JSON = [("content-type", "application/json")]


def tiny_png(rgb: tuple[int, int, int] = (200, 120, 40)) -> bytes:
    """A valid 1x1 RGB PNG of one colour."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00" + bytes(rgb))
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


def _one_png(prompt: str) -> bytes:
    return tiny_png()


@dataclass(slots=True)
class ScriptedImages:
    """How the scripted server answers the Images API; see the module docstring."""

    response_format: Literal["b64_json", "url"] = "b64_json"
    painter: Callable[[str], bytes] = _one_png
    error: HttpError | None = None
    files: dict[str, bytes] = field(default_factory=dict)
    """The pictures served for ``url`` answers, by file name."""
    prompts: list[str] = field(default_factory=list)
    """Every prompt asked, in order."""
    _numbers: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def handles(self, method: str, path: str) -> bool:
        return (method == "POST" and path.endswith(GENERATIONS)) or (
            method == "GET" and FILES in path
        )

    def handle(self, method: str, path: str, headers: Mapping[str, str], body: Json) -> Rendered:
        if method == "GET":
            found = self.files.get(path.rsplit("/", 1)[-1])
            if found is None:
                return render(HttpError(404, f"no image at {path}", "invalid_request_error"), {})
            return Rendered(200, [("content-type", "image/png")], [found])
        if self.error is not None:
            return render(self.error, body)
        prompt = body.get("prompt")
        if not isinstance(prompt, str) or not prompt:
            return render(HttpError(400, "prompt: required", "invalid_request_error"), body)
        self.prompts.append(prompt)
        data = self.painter(prompt)
        form = body.get("response_format") or self.response_format
        if form == "url":
            name = f"{next(self._numbers)}.png"
            self.files[name] = data
            root = path[: -len(GENERATIONS)]  # ".../v1"
            item: Json = {"url": f"http://{headers.get('host', '127.0.0.1')}{root}{FILES}{name}"}
        elif form == "b64_json":
            item = {"b64_json": base64.b64encode(data).decode("ascii")}
        else:
            message = f"response_format: {form!r} is not one of 'b64_json', 'url'"
            return render(HttpError(400, message, "invalid_request_error"), body)
        item["revised_prompt"] = prompt
        payload = {"created": int(time.time()), "data": [item]}
        return Rendered(200, list(_JSON), [json.dumps(payload).encode()])
