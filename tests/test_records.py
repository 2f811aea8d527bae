"""Decision records (model/records.py, ADR 0041): templates recognised, each sentence's role and
the record's status in the JSON of query, search and bundle, and how QUERY ranks them; end to
end through the CLI on real files, plus the pure reading of a record's segments."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli, write

from raytsystem.model.records import read_record, section, status_word

MADR = """---
status: accepted
date: 2026-11-02
---
# Which license for the template

## Context and Problem Statement

Projects copy the template into their own repositories, so the template needs a license.

## Considered Options

* No license
* Other open source licenses
* Dual license with MIT and CC0

## Decision Outcome

Chosen option: "Dual license with MIT and CC0", because anyone may copy the template then.

### Consequences

* Good, because the template can be copied without asking.
* Bad, because two license texts must be kept.
"""

NYGARD = """# 7. Orders database

Date: 2026-10-01

## Status

Accepted

## Context

The orders service needs a database for orders that survives a restart of the service.

## Decision

We will keep orders in PostgreSQL 16.

## Consequences

Backups of the orders database run every night.
"""

OLD_QUEUE = """# 3. Job queue

Status: superseded by ADR 5, which states the decision in force.

## Context

Jobs need a queue between the web servers and the workers.

## Decision

Jobs go through a queue of Redis lists between the web servers and the workers.
"""

NEW_QUEUE = """# 5. Job queue on RabbitMQ

Status: accepted. Supersedes ADR 3.

## Context

Redis lists lost queued jobs when the server restarted.

## Decision

Jobs go through a RabbitMQ queue, which keeps them across a restart.
"""

LOGGING = """# Logging library

## Context and Problem Statement

Services write logs in many formats, and nobody on call can search what the services write.

## Considered Options

* structlog
* loguru

## Decision Outcome

Chosen option: "structlog", because its events are JSON.
"""

BACKUPS = """# Backups

PostgreSQL backups keep a retention of thirty days.
"""

PLAIN = """# Operations

The job queue is watched by the operations team, who page on a backlog of jobs.
"""


@pytest.fixture
def records(workspace: Path) -> Path:
    write(workspace, "decisions/0004-license.md", MADR)
    write(workspace, "decisions/0007-orders-database.md", NYGARD)
    write(workspace, "decisions/0003-job-queue.md", OLD_QUEUE)
    write(workspace, "decisions/0005-job-queue-on-rabbitmq.md", NEW_QUEUE)
    write(workspace, "decisions/0008-logging.md", LOGGING)
    write(workspace, "docs/operations.md", PLAIN)
    result = run_cli("ingest", cwd=workspace)
    assert result.code == 0, result.stderr
    return workspace


def ask(ws: Path, question: str, *args: str) -> list[dict[str, Any]]:
    result = run_cli("query", question, "--json", "--limit", "10", *args, cwd=ws)
    assert result.code == 0, result.stderr
    body = result.json()
    assert body["status"] == "answered", body
    citations: list[dict[str, Any]] = body["citations"]
    return citations


def path_of(citation: dict[str, Any]) -> str:
    return str(citation["evidence"][0]["source_path"])


def test_madr_chosen_option_is_cited_before_the_considered_options(records: Path) -> None:
    cited = ask(records, "Which license does the template use?")
    first = cited[0]["claim"]
    assert first["statement"].startswith('Chosen option: "Dual license with MIT and CC0"')
    assert first["role"] == "decision"
    assert first["record_status"] == "accepted"  # from the front matter
    options = [c for c in cited if c["claim"].get("role") == "considered_option"]
    assert options, "the options are still cited, after the outcome"
    assert {o["claim"]["statement"] for o in options} <= {
        "No license",
        "Other open source licenses",
        "Dual license with MIT and CC0",
    }
    roles = {c["claim"]["statement"]: c["claim"]["role"] for c in cited}
    if "Bad, because two license texts must be kept." in roles:
        assert roles["Bad, because two license texts must be kept."] == "consequence"


def test_a_short_outcome_is_cited_with_its_record_even_without_the_questions_words(
    records: Path,
) -> None:
    """Only the record's context holds the question's words; its outcome is cited before it."""
    cited = ask(records, "How do services write logs?")
    statements = [c["claim"]["statement"] for c in cited]
    assert statements[0] == 'Chosen option: "structlog", because its events are JSON.'
    assert cited[0]["claim"]["role"] == "decision" and "record_status" not in cited[0]["claim"]
    assert cited[1]["claim"]["role"] == "context"


def test_nygard_decision_sentence_comes_first_with_its_role(records: Path) -> None:
    # Two words, both in the context too ("keeps" would be in the decision alone, and a
    # three-word question is answered by the lines holding all three: ADR 0012).
    cited = ask(records, "Which database for the orders?")
    first = cited[0]["claim"]
    assert first["statement"] == "We will keep orders in PostgreSQL 16."
    assert (first["role"], first["record_status"]) == ("decision", "accepted")
    context = [c for c in cited if c["claim"].get("role") == "context"]
    assert context and cited.index(context[0]) > 0


def test_superseded_record_is_marked_and_ranks_below_its_successor(records: Path) -> None:
    cited = ask(records, "Which queue do jobs go through between the web servers and workers?")
    paths = [path_of(c) for c in cited]
    assert "decisions/0003-job-queue.md" in paths
    assert "decisions/0005-job-queue-on-rabbitmq.md" in paths
    old = [c for c in cited if path_of(c) == "decisions/0003-job-queue.md"]
    assert all(c["claim"]["record_status"] == "superseded" for c in old)
    new_first = paths.index("decisions/0005-job-queue-on-rabbitmq.md")
    assert new_first < paths.index("decisions/0003-job-queue.md")
    # Below every claim of a record in force and of any other file.
    last_current = max(i for i, p in enumerate(paths) if p != "decisions/0003-job-queue.md")
    assert last_current < paths.index("decisions/0003-job-queue.md")


def test_a_decision_holding_one_word_of_the_question_is_not_promoted(workspace: Path) -> None:
    """A record's decision ranks with the manual claims when it answers; one that holds a
    single word of a longer question (its record has no sentence holding two) is a passing
    mention, cited after another source's sentence that holds the question."""
    write(workspace, "decisions/0007-orders-database.md", NYGARD)
    write(workspace, "docs/backups.md", BACKUPS)
    assert run_cli("ingest", cwd=workspace).code == 0
    # The record holds two of the three words, each in a sentence of its own: its decision
    # (postgresql) and a consequence (night); backups.md says two of them together.
    citations = ask(workspace, "postgresql night retention")
    assert [path_of(c) for c in citations] == [
        "docs/backups.md",
        "decisions/0007-orders-database.md",
        "decisions/0007-orders-database.md",
    ]
    assert citations[2]["claim"]["role"] == "decision"


def test_a_file_that_is_not_a_record_has_no_role(records: Path) -> None:
    cited = ask(records, "Who watches the job queue?")
    plain = [c for c in cited if path_of(c) == "docs/operations.md"]
    assert plain
    for c in plain:
        assert "role" not in c["claim"] and "record_status" not in c["claim"]


def test_search_and_bundle_carry_the_role(records: Path) -> None:
    found = run_cli("search", "orders PostgreSQL", "--claims", "--json", cwd=records)
    assert found.code == 0, found.stderr
    hits = found.json()["hits"]
    decision = [h for h in hits if h["text"] == "We will keep orders in PostgreSQL 16."]
    assert decision and decision[0]["role"] == "decision"
    assert decision[0]["record_status"] == "accepted"
    blocks = run_cli("search", "job queue operations", "--json", cwd=records)
    assert blocks.code == 0, blocks.stderr
    for hit in blocks.json()["hits"]:
        assert ("role" in hit) == hit["source_path"].startswith("decisions/"), hit
    bundled = run_cli("bundle", "Which database keeps the orders?", "--json", cwd=records)
    assert bundled.code == 0, bundled.stderr
    items = [i for i in bundled.json()["items"] if i["kind"] == "claim"]
    by_text = {i["text"]: i for i in items}
    assert by_text["We will keep orders in PostgreSQL 16."]["role"] == "decision"


# --- the pure reading of a record ------------------------------------------------------------


def segs(*rows: tuple[str, list[str], str]) -> list[tuple[str, str, str, str]]:
    """(kind, heading path, text) rows as segments with IDs s0, s1, ..."""
    return [(f"s{i}", kind, json.dumps(path), text) for i, (kind, path, text) in enumerate(rows)]


def test_sections_and_status_words() -> None:
    assert section("2. Decision:") == "decision"
    assert section("  Decision   Outcome ") == "decision outcome"
    assert status_word("Superseded by ADR 0031 and ADR 0032") == "superseded"
    assert status_word("accepted. Supersedes ADR 0024") == "accepted"
    assert status_word("see below") is None


def test_status_section_takes_an_appended_retired_status() -> None:
    record = read_record(
        segs(
            ("heading", [], "1. Use X"),
            ("heading", ["1. Use X"], "Status"),
            ("paragraph", ["1. Use X", "Status"], "Accepted"),
            ("paragraph", ["1. Use X", "Status"], "Superseded by 4. Use Y"),
            ("heading", ["1. Use X"], "Decision"),
            ("paragraph", ["1. Use X", "Decision"], "We use X."),
        )
    )
    assert record is not None and record.template == "nygard"
    assert record.status == "superseded" and record.retired
    assert record.role("s2", ["1. Use X", "Status"]) == "status"
    assert record.role("s5", ["1. Use X", "Decision"]) == "decision"


def test_a_decision_heading_alone_is_not_a_record() -> None:
    """Meeting notes with a `Decision` section, no status and no other section of a template."""
    assert (
        read_record(
            segs(
                ("heading", [], "Weekly meeting"),
                ("heading", ["Weekly meeting"], "Decision"),
                ("paragraph", ["Weekly meeting", "Decision"], "Ship on Friday."),
            )
        )
        is None
    )
    # A status line inside a section of some other document is not a record's.
    deploy = ["Runbook", "Deploy"]
    assert (
        read_record(
            segs(
                ("heading", [], "Runbook"),
                ("heading", ["Runbook"], "Deploy"),
                ("paragraph", deploy, "Status: accepted once the checks pass."),
            )
        )
        is None
    )


def test_a_status_line_under_the_title_makes_a_record_whose_body_is_its_decision() -> None:
    record = read_record(
        segs(
            ("heading", [], "9. Crash points"),
            ("paragraph", ["9. Crash points"], "Status: accepted."),
            ("paragraph", ["9. Crash points"], "Tests kill the process at named points."),
            ("heading", ["9. Crash points"], "Consequences"),
            ("paragraph", ["9. Crash points", "Consequences"], "No mocks are needed."),
        )
    )
    assert record is not None and (record.template, record.status) == ("status_line", "accepted")
    assert record.role("s1", ["9. Crash points"]) == "status"
    assert record.role("s2", ["9. Crash points"]) == "decision"
    assert record.role("s4", ["9. Crash points", "Consequences"]) == "consequence"


def test_madr_2_list_status_and_roles() -> None:
    record = read_record(
        segs(
            ("heading", [], "Use Markdown"),
            ("list_item", ["Use Markdown"], "Status: deprecated"),
            ("heading", ["Use Markdown"], "Considered Options"),
            ("list_item", ["Use Markdown", "Considered Options"], "Markdown"),
            ("heading", ["Use Markdown"], "Decision Outcome"),
            ("paragraph", ["Use Markdown", "Decision Outcome"], 'Chosen option: "Markdown".'),
            ("heading", ["Use Markdown", "Decision Outcome"], "Positive Consequences"),
            ("list_item", ["Use Markdown", "Decision Outcome", "Positive Consequences"], "Easy"),
            ("heading", ["Use Markdown"], "Links"),
            ("list_item", ["Use Markdown", "Links"], "See ADR 2"),
        )
    )
    assert record is not None and (record.template, record.status) == ("madr", "deprecated")
    assert record.role("s1", ["Use Markdown"]) == "status"
    assert record.role("s3", ["Use Markdown", "Considered Options"]) == "considered_option"
    assert record.role("s5", ["Use Markdown", "Decision Outcome"]) == "decision"
    path = ["Use Markdown", "Decision Outcome", "Positive Consequences"]
    assert record.role("s7", path) == "consequence"
    assert record.role("s9", ["Use Markdown", "Links"]) == "other"
