"""The door of the store: what a file must pass before its bytes are written (ADR 0040).

`Screen.refuse` runs in the ingest's workers on each new file's decoded text, after the
stat cache and before anything is stored. A file it refuses is quarantined: no raw blob, no
normalization, no claim, no index row; its findings say where and what kind, never the
value; its source keeps the revision it had (its last clean one), or stays absent.

Refused are: a secret (detect-secrets' plugins, less what the baseline and the inline
`pragma: allowlist secret` accept), personal data when `[ingest] personal_data` is
"quarantine", and bytes whose raw blob was purged (a tombstone: purged content never comes
back by being ingested again).
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..canonical import digest
from ..errors import WorkspaceError
from ..model.personal import scan_personal
from ..model.secret_gates import table_gates
from ..model.secrets import (
    Accepted,
    BaselineError,
    SecretFinding,
    load_baseline,
    scan_text,
)
from ..model.text import Finding
from ..workspace import Workspace


@dataclass(frozen=True)
class Screen:
    accepted: Accepted = field(default_factory=Accepted)
    personal_data: str = "report"  # `[ingest] personal_data`
    purged: frozenset[str] = frozenset()  # raw blob addresses that have a tombstone
    # The installed detect-secrets' version (`detectors_version`); None: every file is scanned
    # in full, none cleared by the gate table alone (`model.secret_gates.table_gates`).
    detectors: str | None = None

    def fingerprint(self) -> str:
        """What the screen's verdicts depend on besides the file's bytes: a file it refused
        is refused again, without being read, while this and the file's stat are unchanged
        (the stat cache's `held` entries)."""
        return digest(
            {
                "accepted": sorted(map(list, self.accepted.entries)),
                "personal_data": self.personal_data,
                "purged": sorted(self.purged),
                "detectors": self.detectors or _distribution_version(),
                "rules": SCREEN_RULES,
            }
        )

    def refuse(self, path: str, blob: str, text: str) -> list[Finding]:
        """Why the file at `path` (raw address `blob`, decoded `text`) must not be stored;
        empty when it may."""
        if blob in self.purged:
            return [
                Finding(
                    "purged_content",
                    path,
                    f"these bytes were purged (raw blob {blob}); they are not stored again",
                )
            ]
        opened = table_gates(path, text, self.detectors)
        refused = (
            []
            if opened == frozenset()  # cleared: no gate opens
            else [secret_finding(f) for f in scan_text(path, text, self.accepted, opened)]
        )
        if self.personal_data == "quarantine":
            refused.extend(
                Finding(
                    "personal_data",
                    f"{path}:{f.line}",
                    f"{_KIND_WORDS[f.kind]} on line {f.line} ([ingest] personal_data = "
                    '"quarantine"): the file is not stored',
                )
                for f in scan_personal(path, text)
            )
        return refused


# Raise when what the screen refuses changes (a filter, a detector's setting): the verdicts an
# earlier version recorded are then not trusted.
SCREEN_RULES = 1

_KIND_WORDS = {"email": "an e-mail address", "phone": "a phone number"}


def secret_finding(f: SecretFinding) -> Finding:
    return Finding(
        "secret_detected",
        f"{f.path}:{f.line}",
        f"{f.kind} on line {f.line}: the file is not stored. Remove the secret, or accept a "
        "false positive with a `pragma: allowlist secret` comment on the line or in the "
        "secrets baseline",
        "error",
    )


def accepted_secrets(ws: Workspace) -> Accepted:
    """The workspace's baseline (`[ingest] secrets_baseline`), or an error naming it."""
    try:
        return load_baseline(ws.root / ws.config.ingest.secrets_baseline)
    except BaselineError as exc:
        raise WorkspaceError(
            f"[ingest] secrets_baseline: {exc}", code="secrets_baseline_invalid"
        ) from None


def screen_for(ws: Workspace, purged: frozenset[str] = frozenset()) -> Screen:
    return Screen(accepted_secrets(ws), ws.config.ingest.personal_data, purged, detectors_version())


def detectors_version() -> str | None:
    """The installed detect-secrets' version, from the name of its distribution's folder
    beside the package, without importing either: `importlib.metadata` alone costs more to
    import than most files cost to screen. None unless exactly one such folder is there."""
    spec = importlib.util.find_spec("detect_secrets")
    if spec is None or spec.origin is None:
        return None
    prefix, suffix = "detect_secrets-", ".dist-info"
    try:
        names = os.listdir(Path(spec.origin).parent.parent)
    except OSError:
        return None
    found = [
        n[len(prefix) : -len(suffix)] for n in names if n.startswith(prefix) and n.endswith(suffix)
    ]
    return found[0] if len(found) == 1 else None


def _distribution_version() -> str:
    from importlib import metadata

    return metadata.version("detect-secrets")


def findings_text(findings: Sequence[Finding]) -> str:
    """A refused file's findings, as the stat cache keeps them (they hold no secret value)."""
    return json.dumps([[f.code, f.subject, f.message, f.severity] for f in findings])


def findings_from_text(text: str) -> list[Finding]:
    return [Finding(*fields) for fields in json.loads(text)]
