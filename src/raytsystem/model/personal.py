"""Personal data in text: e-mail addresses and phone numbers, found where, never what.

Phone numbers are found by `phonenumbers` (Google's libphonenumber): only numbers written in
international form (`+` and a country code), which it can tell from version strings, dates
and IDs without guessing a country. E-mail addresses by the address pattern of the HTML
standard's `type=email` (a maintained, simple definition), with a dotted domain.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# The "valid e-mail address" of the WHATWG HTML standard, with at least one dot in the domain
# (`user@localhost` in a runbook is a login, not an address to protect), and not the
# credentials of a URL (`scheme://user:password@host`, which the secret scan judges).
_EMAIL = re.compile(
    r"(?<![:/a-zA-Z0-9.!#$%&'*+=?^_`{|}~-])[a-zA-Z0-9.!#$%&'*+/=?^_`{|}~-]+@[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?"
    r"(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)+"
)


@dataclass(frozen=True, order=True)
class PersonalFinding:
    """Personal data at a line of a file: the kind, never the value."""

    path: str
    line: int
    kind: str  # "email" | "phone"

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "line": self.line, "kind": self.kind}


def scan_personal(path: str, text: str) -> list[PersonalFinding]:
    """Where `text` holds e-mail addresses or phone numbers: one finding each, in order."""
    found: list[PersonalFinding] = []
    starts = _line_starts(text)
    for match in _EMAIL.finditer(text):
        found.append(PersonalFinding(path, _line_of(starts, match.start()), "email"))
    if "+" in text:
        import phonenumbers

        for number in phonenumbers.PhoneNumberMatcher(
            text, None, leniency=phonenumbers.Leniency.VALID
        ):
            found.append(PersonalFinding(path, _line_of(starts, number.start), "phone"))
    return sorted(found)


def _line_starts(text: str) -> list[int]:
    starts = [0]
    starts.extend(m.end() for m in re.finditer("\n", text))
    return starts


def _line_of(starts: list[int], offset: int) -> int:
    import bisect

    return bisect.bisect_right(starts, offset)
