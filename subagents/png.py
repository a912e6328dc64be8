"""A tiny PNG encoder (zlib + struct), so the demo image tool writes real images without Pillow.

The picture is a deterministic function of the prompt (a two-colour gradient with a band), so the
same prompt always gives the same bytes: a tool re-run after a crash writes an identical file.
"""

from __future__ import annotations

import hashlib
import struct
import zlib

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _chunk(kind: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(kind + data) & 0xFFFFFFFF
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)


def encode_png(width: int, height: int, rgb_rows: list[bytes]) -> bytes:
    """An 8-bit RGB PNG from ``height`` rows of ``3 * width`` bytes each."""
    if len(rgb_rows) != height or any(len(row) != 3 * width for row in rgb_rows):
        raise ValueError(f"need {height} rows of {3 * width} bytes for a {width}x{height} image")
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit truecolour
    raw = b"".join(b"\x00" + row for row in rgb_rows)  # filter type 0 on every row
    return (
        PNG_SIGNATURE
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(raw, 9))
        + _chunk(b"IEND", b"")
    )


def picture_for(prompt: str, size: int = 64) -> bytes:
    """A ``size`` x ``size`` PNG whose colours are derived from the prompt."""
    digest = hashlib.sha256(prompt.encode()).digest()
    top, bottom, band = digest[0:3], digest[3:6], digest[6:9]
    rows = []
    for y in range(size):
        mix = y / max(size - 1, 1)
        colour = bytes(int(a + (b - a) * mix) for a, b in zip(top, bottom, strict=True))
        row = bytearray(colour * size)
        if size // 3 <= y < size // 3 + max(size // 8, 1):
            row = bytearray(band * size)
        rows.append(bytes(row))
    return encode_png(size, size, rows)
