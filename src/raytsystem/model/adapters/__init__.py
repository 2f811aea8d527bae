"""Adapters turn a file's content into normalized text and segments, registered by media type.

The contract (`Adapter`, `Normalized`, `SegmentDraft`, `SegmentBuilder`, the segment kinds) lives
in `base.py`; this module holds the registry and re-exports the names the rest of raytsystem
imports from here.
"""

from __future__ import annotations

from typing import Final

from . import html, markdown, notebook, pdf, plaintext, python, rst, treesitter
from .base import (
    MARKDOWN_SUFFIXES,
    MEDIA_TYPES,
    PROSE_KINDS,
    SEGMENT_KINDS,
    Adapter,
    AdapterRefused,
    Normalized,
    SegmentBuilder,
    SegmentDraft,
    Symbol,
    media_type_for,
    names_a_format,
)

__all__ = [
    "ADAPTERS",
    "MARKDOWN_SUFFIXES",
    "MEDIA_TYPES",
    "PROSE_KINDS",
    "SEGMENT_KINDS",
    "Adapter",
    "AdapterRefused",
    "Normalized",
    "SegmentBuilder",
    "SegmentDraft",
    "Symbol",
    "adapter_for",
    "media_type_for",
    "names_a_format",
]


ADAPTERS: Final[dict[str, Adapter]] = {
    "text/markdown": markdown.ADAPTER,
    "text/plain": plaintext.ADAPTER,
    "text/html": html.ADAPTER,
    "text/x-rst": rst.ADAPTER,
    "application/x-ipynb+json": notebook.ADAPTER,
    "application/pdf": pdf.ADAPTER,
    "text/x-python": python.ADAPTER,
    "text/javascript": treesitter.JAVASCRIPT,
    "text/x-typescript": treesitter.TYPESCRIPT,
    "text/x-tsx": treesitter.TSX,
    "text/x-go": treesitter.GO,
    "text/x-rust": treesitter.RUST,
}


def adapter_for(media_type: str) -> Adapter:
    return ADAPTERS[media_type]
