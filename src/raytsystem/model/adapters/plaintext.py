"""Plain text: blocks separated by blank lines become paragraph segments."""

from __future__ import annotations

from .base import Adapter, Normalized, SegmentBuilder


def normalize_plaintext(text: str) -> Normalized:
    builder = SegmentBuilder()
    block: list[str] = []
    block_start = 1
    for number, line in enumerate([*text.split("\n"), ""], start=1):
        if line.strip():
            if not block:
                block_start = number
            # Per-line strip keeps one segment line per raw line.
            block.append(line.strip())
        elif block:
            builder.add("paragraph", "\n".join(block), block_start)
            block = []
    return Normalized(text=builder.text(), segments=tuple(builder.segments))


ADAPTER = Adapter(name="text", version=1, run=normalize_plaintext)
