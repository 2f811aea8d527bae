"""Shared pieces of the tamper suites (issue 34): a small ingested workspace made once per test
module, the CLI run on copies of it, and what a query or a verify is allowed to answer once
something was tampered with.

The rule every case checks: a query never exits 0 with an answer other than the one the
untampered workspace gives (the tampered content never reaches stdout), and neither command
ever ends with `internal_error`.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conftest import Result, run_cli, write

# Every run here is on the embedded SQLite ledger: the tampering is done on its file.
SQLITE = {"RAYTSYSTEM_DATABASE_URL": ""}

# The exit status of each error code a tampered workspace may answer with (README).
EXIT = {
    "raw_blob_corrupt": 3,
    "normalized_text_corrupt": 3,
    "blob_missing": 3,
    "excerpt_mismatch": 3,
    "ledger_mismatch": 3,
    "not_a_member": 3,
    "index_row_mismatch": 3,
    "index_generation_mismatch": 3,
    "index_corrupt": 3,
    "generation_stale": 3,
    "generation_moved": 3,
    "index_missing": 4,
    "no_generation": 4,
    "usage_error": 2,
    "invalid_generation": 2,
    "config_invalid": 5,
    "workspace_not_found": 5,
    "database_error": 6,
    "no_ledger": 6,
    "schema_outdated": 6,
    # Issue 34: one code for a ledger SQLite cannot read (a damaged page), exit 6. The name is
    # this suite's proposal; the fix may choose another, here and in the cases.
    "database_corrupt": 6,
}

FILES_1 = {
    "docs/payments.md": """# Payments

## Retries

Retries stop after at most 5 attempts. The backoff doubles each time.

- Refunds take 3 business days.
- Chargebacks go to the risk team.
""",
    "docs/onboarding.md": "# Onboarding\n\nNew engineers get a laptop on day one.\n",
    "knowledge/manual/retries.md": """# Retries

The gateway gives up after five tries.[^p]

[^p]: docs/payments.md "at most 5 attempts"
""",
    # A manual claim whose citation cannot be verified: `unverified`, never an answer.
    "knowledge/manual/rumours.md": """# Rumours

The vault door opens with a brass key.[^q]

[^q]: docs/payments.md "a quote that is nowhere"
""",
}
# Generation 2: one file changed, one added.
FILES_2 = {
    "docs/onboarding.md": "# Onboarding\n\nNew engineers get a laptop on day two.\n",
    "docs/security.md": "# Security\n\nPasswords rotate every ninety days.\n",
}
# A change an ingest after the tampering takes (generation 3 of "two", 2 of "one").
FILES_3 = {"docs/onboarding.md": "# Onboarding\n\nNew engineers get a laptop on day three.\n"}


def ingest(ws: Path) -> dict[str, Any]:
    result = run_cli("ingest", "--json", cwd=ws, env=SQLITE)
    assert result.code == 0, result.stdout + result.stderr
    body: dict[str, Any] = result.json()
    return body


def build_one(target: Path, init_template: Path) -> Path:
    """A workspace with one generation of `FILES_1` (and the spare index it leaves)."""
    shutil.copytree(init_template, target, symlinks=True)
    for rel, text in FILES_1.items():
        write(target, rel, text)
    assert ingest(target)["index"]["spare_made"] is True
    return target


def build_templates(root: Path, init_template: Path) -> dict[str, Path]:
    """ "one": one generation, with the spare index the first ingest leaves; "two": two
    generations (indexes of both, no spare)."""
    one = build_one(root / "one", init_template)
    two = root / "two"
    shutil.copytree(one, two, symlinks=True)
    for rel, text in FILES_2.items():
        write(two, rel, text)
    assert ingest(two)["index"]["built_from"] == "spare"
    return {"one": one, "two": two}


def copy_of(template: Path, target: Path) -> Path:
    shutil.copytree(template, target, symlinks=True)
    return target


# --- reading the outcome ---------------------------------------------------------------------


def without_timing(body: Any) -> Any:
    """The answer itself: without its timing, nor its freshness, which says how the files
    compare with the generation (a killed ingest or a damaged stat cache changes it) and never
    changes the answer."""
    if isinstance(body, dict):
        body = dict(body)
        body.pop("timing", None)
        body.pop("freshness", None)
    return body


def error_code(result: Result) -> str | None:
    try:
        body = json.loads(result.stdout)
    except ValueError:
        return None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        code = body["error"].get("code")
        return code if isinstance(code, str) else None
    return None


def no_internal_error(result: Result) -> None:
    assert error_code(result) != "internal_error", result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert result.code >= 0, f"killed by signal {-result.code}: {result.stderr[-2000:]}"


@dataclass(frozen=True)
class Query:
    """What a query may answer: the untampered answer (`same`), or fail with one of `codes`."""

    same: bool = False
    codes: frozenset[str] = frozenset()

    def describe(self) -> str:
        parts = (["same answer"] if self.same else []) + [
            f"exit {EXIT[c]} {c}" for c in sorted(self.codes)
        ]
        return " or ".join(parts)


SAME = Query(same=True)


def fails(*codes: str, same: bool = False) -> Query:
    return Query(same=same, codes=frozenset(codes))


def check_query(result: Result, baseline: dict[str, Any], expected: Query) -> None:
    """`result` is allowed by `expected`; above all, never an answer other than `baseline`
    with exit 0."""
    no_internal_error(result)
    if result.code == 0:
        body = without_timing(result.json())
        assert body == without_timing(baseline), (
            "a tampered workspace answered with exit 0, and not what the untampered one "
            f"answers:\n{json.dumps(body, indent=1)[:3000]}"
        )
        assert expected.same, f"answered, but expected {expected.describe()}"
        return
    code = error_code(result)
    assert code in expected.codes, (
        f"exit {result.code} {code}, expected {expected.describe()}: {result.stdout[-1500:]}"
    )
    assert result.code == EXIT[code], (result.code, code)
    assert set(result.json()) == {"error"}, "a failed query carries no answer at all"


def verify_codes(result: Result) -> tuple[set[str], dict[str, Any]]:
    body = result.json()
    assert isinstance(body, dict) and "findings" in body, result.stdout[-2000:]
    return {f["code"] for f in body["findings"] if f["severity"] != "info"}, body


@dataclass
class Baselines:
    """Answers of the untampered templates, asked once per module."""

    templates: dict[str, Path]
    scratch: Path
    _answers: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)

    def answer(self, template: str, question: str, steps: tuple[str, ...] = ()) -> dict[str, Any]:
        """The untampered answer, after `steps` (names of `STEPS`) if any."""
        steps = tuple(s for s in steps if s)
        key = (template, question, "+".join(steps))
        if key not in self._answers:
            ws = self.templates[template]
            if steps:
                ws = copy_of(ws, self.scratch / f"{template}-{len(self._answers)}")
                for step in steps:
                    STEPS[step](ws)
            result = run_cli("query", question, "--json", cwd=ws, env=SQLITE)
            assert result.code == 0, result.stdout + result.stderr
            self._answers[key] = result.json()
        return self._answers[key]


def ingest_change(ws: Path) -> None:
    for rel, text in FILES_3.items():
        write(ws, rel, text)
    ingest(ws)


def remove_a_source(ws: Path) -> None:
    (ws / "docs" / "onboarding.md").unlink()
    assert ingest(ws)["counts"]["removed_sources"] == 1


# Steps a case runs before its tampering (`prepare`) or after it (`after`); the untampered
# answer it is compared with is asked after the same steps.
STEPS: dict[str, Callable[[Path], None]] = {
    "ingest a change": ingest_change,
    "remove a source": remove_a_source,
}


def flip(column: str) -> str:
    """SQL for a hex digest with its first digit changed, whatever it was."""
    return f"CASE WHEN substr({column}, 1, 1) = '0' THEN '1' ELSE '0' END || substr({column}, 2)"


# --- where things are ------------------------------------------------------------------------


def ledger(ws: Path) -> Path:
    return ws / ".raytsystem" / "ledger.sqlite3"


def indexes(ws: Path) -> Path:
    return ws / ".raytsystem" / "indexes"


def index_of(ws: Path, number: int | None = None) -> Path:
    """The index file of generation `number` (default: the newest)."""
    found = sorted(indexes(ws).glob("0*.sqlite3"))
    if number is not None:
        found = [p for p in found if p.name.startswith(f"{number:06d}-")]
    return found[-1]


def sql(path: Path, statement: str, params: tuple[Any, ...] = (), *, rows: int | None = 1) -> None:
    """Run one tampering statement on a SQLite file; `rows`: how many rows it must change."""
    path.chmod(0o644)
    conn = sqlite3.connect(path)
    try:
        changed = conn.execute(statement, params).rowcount
        conn.commit()
    finally:
        conn.close()
    if rows is not None:
        assert changed == rows, f"{statement}: {changed} rows changed, not {rows}"


def one(path: Path, query: str, params: tuple[Any, ...] = ()) -> Any:
    conn = sqlite3.connect(path)
    try:
        found = conn.execute(query, params).fetchall()
    finally:
        conn.close()
    assert len(found) == 1, (query, found)
    row = found[0]
    return row[0] if len(row) == 1 else row


def claim_of(ws: Path, statement_start: str) -> str:
    claim: str = one(
        ledger(ws), "SELECT id FROM claims WHERE statement LIKE ?", (statement_start + "%",)
    )
    return claim


def evidence_segment(ws: Path, claim: str) -> str:
    segment: str = one(
        ledger(ws),
        "SELECT segment_id FROM evidence WHERE claim_id = ? AND role = 'statement'",
        (claim,),
    )
    return segment


def current_revision(ws: Path, path: str) -> tuple[str, str]:
    """(raw blob, normalized text blob) of a source's current revision."""
    found: tuple[str, str] = one(
        ledger(ws),
        "SELECT r.blob, n.text_blob FROM source_states s JOIN sources src ON src.id = s.source_id "
        "JOIN revisions r ON r.id = s.revision_id "
        "JOIN normalizations n ON n.id = s.normalization_id "
        "WHERE src.path = ? AND s.gen_to IS NULL",
        (path,),
    )
    return found
