"""Adapters turn a file's content into normalized text and segments, registered by media type.

The contract (`Adapter`, `Normalized`, `SegmentDraft`, `SegmentBuilder`, the segment kinds) lives
in `base.py`; this module holds the registry and re-exports the names the rest of raytsystem
imports from here.
"""

from __future__ import annotations

from typing import Final

from . import markdown, plaintext
from .base import (
    MARKDOWN_SUFFIXES,
    PROSE_KINDS,
    SEGMENT_KINDS,
    Adapter,
    Normalized,
    SegmentBuilder,
    SegmentDraft,
    media_type_for,
)

__all__ = [
    "ADAPTERS",
    "MARKDOWN_SUFFIXES",
    "PROSE_KINDS",
    "SEGMENT_KINDS",
    "Adapter",
    "Normalized",
    "SegmentBuilder",
    "SegmentDraft",
    "adapter_for",
    "media_type_for",
]


ADAPTERS: Final[dict[str, Adapter]] = {
    "text/markdown": markdown.ADAPTER,
    "text/plain": plaintext.ADAPTER,
}


def adapter_for(media_type: str) -> Adapter:
    return ADAPTERS[media_type]
