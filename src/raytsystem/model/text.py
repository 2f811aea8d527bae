"""From raw bytes to text: decoding, line endings, and the findings for bytes that are not text.

A raw "line" is what ends at `\\n`, `\\r\\n` or a lone `\\r` (the same rule markdown-it uses), so
line numbers mean the same thing whatever line endings a file has. Text is decoded strictly:
UTF-8 (a UTF-8 BOM is dropped), or UTF-16 when the file starts with a UTF-16 BOM. Anything else
is not guessed at: a NUL byte makes a file binary, invalid UTF-8 makes it undecodable, and both
are reported as findings instead of being ingested as mojibake.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Finding:
    """Something an operation wants a person to know about, with a stable code."""

    code: str
    subject: str
    message: str
    severity: str = "warning"

    def to_json(self) -> dict[str, str]:
        return {
            "code": self.code,
            "severity": self.severity,
            "subject": self.subject,
            "message": self.message,
        }


class NotText(Exception):
    """The bytes cannot be decoded as text; `code` is the finding code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def decode(data: bytes) -> str:
    """Decode file bytes to text with normalized line endings, or raise NotText."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            text = data.decode("utf-16")
        except UnicodeDecodeError as exc:
            raise NotText("undecodable_text", f"invalid UTF-16 at byte {exc.start}") from None
    else:
        nul = data.find(b"\x00")
        if nul >= 0:
            raise NotText("binary_file", f"NUL byte at offset {nul}: not a text file")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise NotText(
                "undecodable_text", f"invalid UTF-8 at byte {exc.start}: {exc.reason}"
            ) from None
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\x00" in text:
        raise NotText("binary_file", "NUL character in text: not a text file")
    return normalize_newlines(text)


def normalize_newlines(text: str) -> str:
    if "\r" not in text:
        return text
    return text.replace("\r\n", "\n").replace("\r", "\n")
