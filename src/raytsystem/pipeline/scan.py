"""SCAN: the ingest's screen (`pipeline/screen.py`) over the workspace's files, storing
nothing; for CI and pre-commit hooks (`raytsystem scan`, exit 3 when something is found).

It reads the files an ingest of the same PATHS would read, with the same limits, and
reports each secret (and personal data, by `[ingest] personal_data`) by path, line and kind,
never by value. It opens no ledger: it runs in a fresh clone before any ingest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..discovery import Refusal, Skip, discover
from ..model.adapters import adapter_for, media_type_for
from ..model.personal import PersonalFinding, scan_personal
from ..model.secrets import SecretFinding, scan_text
from ..model.text import Finding, NotText, decode
from ..workspace import Workspace
from .files import run_adapter
from .screen import accepted_secrets


@dataclass
class ScanReport:
    scanned: int = 0
    personal_data: str = "report"  # the policy the scan ran under
    secrets: list[SecretFinding] = field(default_factory=list)
    personal: list[PersonalFinding] = field(default_factory=list)
    not_scanned: list[Finding] = field(default_factory=list)  # refused, unreadable, binary

    @property
    def found(self) -> bool:
        """What makes `scan` fail: a secret, or personal data an ingest would quarantine."""
        return bool(self.secrets) or (self.personal_data == "quarantine" and bool(self.personal))

    def to_json(self) -> dict[str, Any]:
        return {
            "found": self.found,
            "scanned": self.scanned,
            "personal_data": self.personal_data,
            "secrets": [f.to_json() for f in self.secrets],
            "personal": [f.to_json() for f in self.personal],
            "not_scanned": [f.to_json() for f in self.not_scanned],
        }


def scan(ws: Workspace, scope: Sequence[str] = ()) -> ScanReport:
    """Scan the workspace's files (or those of `scope`) as an ingest would, storing nothing."""
    accepted = accepted_secrets(ws)
    config = ws.config.ingest
    report = ScanReport(personal_data=config.personal_data)
    for item in discover(ws, scope):
        if isinstance(item, Skip):
            continue  # never ingested: nothing to keep out
        if isinstance(item, Refusal):
            report.not_scanned.append(Finding(item.code, item.path, item.message))
            continue
        try:
            with open(item.disk, "rb") as handle:
                data = handle.read(config.max_file_bytes + 1)
        except OSError as exc:
            report.not_scanned.append(
                Finding("read_error", item.path, f"cannot read: {exc.strerror}")
            )
            continue
        if len(data) > config.max_file_bytes:
            report.not_scanned.append(
                Finding(
                    "file_too_large",
                    item.path,
                    f"over the limit of {config.max_file_bytes} bytes (never ingested)",
                )
            )
            continue
        text = _readable_text(item.path, data)
        if isinstance(text, Finding):
            report.not_scanned.append(text)
            continue
        report.scanned += 1
        report.secrets.extend(scan_text(item.path, text, accepted))
        if config.personal_data != "allow":
            report.personal.extend(scan_personal(item.path, text))
    return report


def _readable_text(path: str, data: bytes) -> str | Finding:
    """What the ingest's screen reads of a file (`files.process_file`): its text, or the text
    its bytes adapter (PDF) extracts; why there is none otherwise."""
    adapter = adapter_for(media_type_for(path))
    if adapter.reads != "bytes":
        try:
            return decode(data)
        except NotText as exc:
            return Finding(exc.code, path, exc.message)
    ran = run_adapter(adapter, data)
    if isinstance(ran, tuple):
        code, message, _severity = ran
        return Finding(code, path, message)
    return ran.text
