"""The report of a `verify`: its findings, what it counted, how fast it re-hashed."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any


@dataclass
class VerifyReport:
    findings: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    raw_bytes: int = 0
    hash_seconds: float = 0.0
    seconds: float = 0.0
    generation: dict[str, Any] | None = None

    def add(self, severity: str, code: str, subject: str, message: str) -> None:
        self.findings.append(
            {"code": code, "severity": severity, "subject": subject, "message": message}
        )

    @property
    def ok(self) -> bool:
        return not any(f["severity"] in ("error", "warning") for f in self.findings)

    def to_json(self) -> dict[str, Any]:
        mb = self.raw_bytes / 1e6
        return {
            "ok": self.ok,
            "generation": self.generation,
            "counts": dict(sorted(self.counts.items())),
            "throughput": {
                "blob_bytes": self.raw_bytes,
                "hash_seconds": round(self.hash_seconds, 3),
                "mb_per_s": round(mb / self.hash_seconds, 1) if self.hash_seconds > 0 else None,
            },
            "findings": sorted(
                self.findings, key=lambda f: (f["severity"] != "error", f["code"], f["subject"])
            ),
            "seconds": round(self.seconds, 3),
        }
