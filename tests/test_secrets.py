"""Secrets never enter the knowledge base (issue 38, ADR 0040).

The secrets are made up at test time from a seeded generator (a committed literal key would
trip the scanners this feature is about): an AWS-style access key ID and secret key, a
GitHub-style token, an RSA private key block, a password in a URL and a high-entropy
`API_KEY=` assignment, each in a Markdown, a plain-text and a Python file. After an ingest,
none of their bytes is anywhere under `_raw/` or `.raytsystem/` (packs included: the search
is over the files' bytes) nor in any command's output.
"""

from __future__ import annotations

import json
import os
import random
import string
import subprocess
import sys
import time
from pathlib import Path

from conftest import run_cli, write

B64 = string.ascii_letters + string.digits + "+/"
ALNUM = string.ascii_letters + string.digits


def made_up_secrets(seed: int = 38) -> dict[str, tuple[str, str]]:
    """kind -> (the secret's value, the text that holds it), fresh random values."""
    rnd = random.Random(seed)

    def pick(alphabet: str, n: int) -> str:
        return "".join(rnd.choice(alphabet) for _ in range(n))

    key_id = "AKIA" + pick(string.ascii_uppercase + string.digits, 16)
    secret_key = pick(B64, 40)
    token = "ghp_" + pick(ALNUM, 36)
    key_body = "\n".join(pick(B64, 64) for _ in range(6))
    password = pick(ALNUM, 16)
    api_key = pick("0123456789abcdef", 40)
    return {
        "aws_key_id": (key_id, f"The deploy user's key id is {key_id} for now."),
        "aws_secret": (secret_key, f"aws_secret_access_key = {secret_key}"),
        "github_token": (token, f"Use the token {token} to push."),
        "private_key": (
            key_body.split("\n")[2],
            "-----BEGIN RSA PRIVATE KEY-----\n" + key_body + "\n-----END RSA PRIVATE KEY-----",
        ),
        "url_password": (
            password,
            f"The database is at postgres://app:{password}@db.internal/app.",
        ),
        "api_key": (api_key, f"API_KEY={api_key}"),
    }


def embed(rel: str, body: str) -> str:
    """A document of the file's kind with `body` in its middle."""
    if rel.endswith(".py"):
        return f'"""Settings."""\n\nNAME = "deploy"\n{_py_lines(body)}\nRETRIES = 3\n'
    if rel.endswith(".md"):
        return f"# Deploy\n\nThe deploy runs nightly.\n\n{body}\n\nIt takes five minutes.\n"
    return f"Deploy notes.\n\nThe deploy runs nightly.\n{body}\nIt takes five minutes.\n"


def _py_lines(body: str) -> str:
    if "\n" in body:
        return 'KEY = """\n' + body + '\n"""'
    if "=" in body and body.split("=")[0].strip().isidentifier():
        name, value = (part.strip() for part in body.split("=", 1))
        return f'{name.upper()} = "{value}"'
    return f"# {body}"


def plant(ws: Path) -> dict[str, str]:
    """Write every made-up secret into a .md, a .txt and a .py file; path -> secret value."""
    planted: dict[str, str] = {}
    for kind, (value, body) in made_up_secrets().items():
        for ext in ("md", "txt", "py"):
            rel = f"docs/{kind}.{ext}"
            write(ws, rel, embed(rel, body))
            planted[rel] = value
    return planted


def stored_bytes(ws: Path) -> list[tuple[Path, bytes]]:
    return [
        (p, p.read_bytes())
        for top in ("_raw", ".raytsystem")
        for p in sorted((ws / top).rglob("*"))
        if p.is_file()
    ]


def tiny_pdf(line: str) -> bytes:
    """A one-page PDF whose text is `line` (Helvetica, uncompressed), offsets computed."""
    stream = f"BT /F1 12 Tf 72 720 Td ({line}) Tj ET".encode("latin-1")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = b"%PDF-1.4\n"
    offsets = []
    for i, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return out


def test_a_pdf_is_judged_by_the_text_it_holds(workspace: Path) -> None:
    """A PDF's secret is in the text its adapter extracts, not in its binary streams: ingest
    quarantines the one that holds a key and stores the clean one; `scan` reads them alike."""
    ws = workspace
    key_text = made_up_secrets()["aws_key_id"][1]
    (ws / "docs").mkdir(exist_ok=True)
    (ws / "docs" / "keys.pdf").write_bytes(tiny_pdf(key_text))
    (ws / "docs" / "clean.pdf").write_bytes(tiny_pdf("The deploy runs nightly."))
    report = ingest_json(ws)
    quarantined = [f["subject"] for f in report["findings"] if f["code"] == "secret_detected"]
    assert quarantined == ["docs/keys.pdf:1"], report["findings"]
    assert report["counts"]["new_sources"] == 1
    scanned = run_cli("scan", "docs", "--json", cwd=ws)
    assert scanned.code == 3, scanned.stdout
    body = scanned.json()
    assert [s["path"] for s in body["secrets"]] == ["docs/keys.pdf"], body
    assert made_up_secrets()["aws_key_id"][0] not in scanned.stdout


def ingest_json(ws: Path) -> dict:
    result = run_cli("ingest", "--json", cwd=ws)
    assert result.code == 0, result.stdout + result.stderr
    return result.json()


def test_a_file_with_a_secret_is_quarantined_and_its_bytes_are_nowhere(workspace: Path) -> None:
    ws = workspace
    planted = plant(ws)
    write(ws, "docs/clean.md", "# Clean\n\nThe deploy runs nightly from the main branch.\n")
    ingested = run_cli("ingest", "--json", cwd=ws)
    assert ingested.code == 0, ingested.stderr
    report = ingested.json()
    found = {
        f["subject"].rsplit(":", 1)[0] for f in report["findings"] if f["code"] == "secret_detected"
    }
    assert found == set(planted), sorted(set(planted) ^ found)
    for f in report["findings"]:
        if f["code"] == "secret_detected":
            path, line = f["subject"].rsplit(":", 1)
            assert int(line) >= 1 and f["severity"] == "error"
    assert report["counts"]["new_sources"] == 1  # only the clean file became a source

    outputs = [ingested.stdout + ingested.stderr]
    for args in (
        ("status", "--json"),
        ("search", "deploy", "--json"),
        ("query", "deploy token key", "--json"),
        ("verify", "--json"),
        ("generations", "--json"),
        ("history", "docs/github_token.md", "--json"),
        ("review", "--json"),
        ("scan", "--json"),
        ("scan",),
        ("ingest",),
        ("bundle", "deploy key token", "--json"),
        ("universe", "--out", str(ws / "ops" / "universe.html")),
    ):
        result = run_cli(*args, cwd=ws)
        outputs.append(result.stdout + result.stderr)
    values = set(planted.values())
    for out in outputs:
        for value in values:
            assert value not in out
    files = stored_bytes(ws) + [(p, p.read_bytes()) for p in (ws / "ops").rglob("*") if p.is_file()]
    assert any(p.parent.name == "packs" for p, _ in files), "the clean file's pack is there"
    for path, data in files:
        for value in values:
            assert value.encode() not in data, f"{value[:4]}... in {path}"


def write_baseline(ws: Path, path: str) -> str:
    """The workspace's secrets baseline, made by detect-secrets itself from `path`."""
    made = subprocess.run(
        [sys.executable, "-m", "detect_secrets", "scan", path],
        cwd=ws,
        capture_output=True,
        text=True,
        check=True,
    )
    (ws / ".secrets.baseline").write_text(made.stdout, encoding="utf-8")
    return made.stdout


def test_allowlist_comment_and_baseline_accept_a_false_positive(workspace: Path) -> None:
    ws = workspace
    token = made_up_secrets(7)["github_token"][0]
    other = made_up_secrets(8)["github_token"][0]
    write(
        ws, "docs/pragma.md", f"# A\n\nAn example token {token} <!-- pragma: allowlist secret -->\n"
    )
    write(ws, "docs/listed.md", f"# B\n\nThe sample token {other} is revoked.\n")
    first = ingest_json(ws)
    flagged = [f["subject"] for f in first["findings"] if f["code"] == "secret_detected"]
    assert flagged == ["docs/listed.md:3"]
    # The team's baseline, made by detect-secrets itself, accepts the listed one.
    made = write_baseline(ws, "docs/listed.md")
    second = ingest_json(ws)
    assert [f for f in second["findings"] if f["code"] == "secret_detected"] == []
    assert second["counts"]["new_sources"] == 1
    # An audit that marks it a real secret takes the acceptance back.
    baseline = json.loads(made)
    for entries in baseline["results"].values():
        for entry in entries:
            entry["is_secret"] = True
    (ws / ".secrets.baseline").write_text(json.dumps(baseline), encoding="utf-8")
    write(ws, "docs/listed.md", f"# B\n\nThe sample token {other} is revoked, really.\n")
    third = ingest_json(ws)
    assert [f["subject"] for f in third["findings"] if f["code"] == "secret_detected"] == [
        "docs/listed.md:3"
    ]


def test_a_broken_baseline_fails_with_its_code(workspace: Path) -> None:
    write(workspace, "docs/a.md", "Alpha.\n")
    (workspace / ".secrets.baseline").write_text("{not json", encoding="utf-8")
    result = run_cli("ingest", "--json", cwd=workspace)
    assert result.code != 0
    assert result.json()["error"]["code"] == "secrets_baseline_invalid"


def test_a_clean_revision_stays_active_when_an_edit_adds_a_secret(workspace: Path) -> None:
    ws = workspace
    write(ws, "docs/ops.md", "# Ops\n\nThe pager rotates weekly.\n")
    first = ingest_json(ws)
    value, body = made_up_secrets(3)["aws_key_id"]
    write(ws, "docs/ops.md", f"# Ops\n\nThe pager rotates weekly.\n\n{body}\n")
    for _ in range(2):  # and again: the stat cache never vouches for a quarantined file
        again = ingest_json(ws)
        assert [f["subject"] for f in again["findings"] if f["code"] == "secret_detected"] == [
            "docs/ops.md:5"
        ]
        assert again["created"] is False
        assert again["generation"]["hash"] == first["generation"]["hash"]
    answer = run_cli("query", "pager rotates", "--json", cwd=ws).json()
    assert answer["status"] == "answered"
    assert "weekly" in answer["answer"]
    history = run_cli("history", "docs/ops.md", "--json", cwd=ws)
    assert history.code == 0 and value not in history.stdout
    assert len(history.json()["revisions"]) == 1


def test_a_quarantined_file_is_not_read_again_until_it_or_the_screen_changes(
    workspace: Path,
) -> None:
    """The stat cache remembers a refused file's findings: an unchanged file is refused
    again without being read; a new baseline (the screen's fingerprint) or an edit reads it."""
    ws = workspace
    token = made_up_secrets(11)["github_token"][0]
    write(ws, "docs/clean.md", "# Clean\n\nThe deploy runs nightly.\n")
    held = write(ws, "docs/held.md", f"# Held\n\nThe token {token} is live.\n")
    old = time.time_ns() - 10**10  # old enough for the stat cache to trust (not racy)
    for path in (ws / "docs/clean.md", held):
        os.utime(path, ns=(old, old))
    first = ingest_json(ws)
    assert first["counts"]["bytes_read"] > held.stat().st_size
    for _ in range(2):
        again = ingest_json(ws)
        assert [f["subject"] for f in again["findings"] if f["code"] == "secret_detected"] == [
            "docs/held.md:3"
        ]
        assert again["counts"]["bytes_read"] == 0  # neither file was read
        assert again["created"] is False
    write_baseline(ws, "docs/held.md")
    accepted = ingest_json(ws)  # the screen changed: the file is read and now accepted
    assert [f for f in accepted["findings"] if f["code"] == "secret_detected"] == []
    assert accepted["counts"]["new_sources"] == 1
    assert accepted["counts"]["bytes_read"] == held.stat().st_size


def test_scan_finds_what_ingest_would_refuse_and_prints_no_value(workspace: Path) -> None:
    ws = workspace
    planted = plant(ws)
    write(ws, "docs/clean.md", "# Clean\n\nThe deploy runs nightly.\n")
    write(ws, "docs/people.md", "# People\n\nMail ana@example.org or call +44 20 7946 0958.\n")
    for args in (("scan", "--json"), ("scan",)):
        result = run_cli(*args, cwd=ws)
        assert result.code == 3, result.stderr
        for value in planted.values():
            assert value not in result.stdout + result.stderr
        assert "ana@example.org" not in result.stdout and "7946" not in result.stdout
    report = run_cli("scan", "--json", cwd=ws).json()
    assert report["found"] is True
    assert {s["path"] for s in report["secrets"]} == set(planted)
    assert {(p["path"], p["line"], p["kind"]) for p in report["personal"]} == {
        ("docs/people.md", 3, "email"),
        ("docs/people.md", 3, "phone"),
    }
    # Nothing was stored: scan opens no ledger and writes no blob.
    assert not any((ws / "_raw").rglob("*.pack")) and not list((ws / "_raw").rglob("blake3/*/*"))
    # PATHS narrow it; a clean path passes (exit 0) with personal data only reported.
    clean = run_cli("scan", "docs/clean.md", "docs/people.md", "--json", cwd=ws)
    assert clean.code == 0, clean.stdout
    assert clean.json()["found"] is False and len(clean.json()["personal"]) == 2
    # Under the quarantine policy, personal data fails the scan and is kept out by ingest.
    config = ws / "raytsystem.toml"
    config.write_text(
        config.read_text(encoding="utf-8").replace(
            'personal_data = "report"', 'personal_data = "quarantine"'
        ),
        encoding="utf-8",
    )
    assert run_cli("scan", "docs/people.md", cwd=ws).code == 3
    report = ingest_json(ws)
    assert {f["subject"] for f in report["findings"] if f["code"] == "personal_data"} == {
        "docs/people.md:3"
    }
    assert report["counts"]["new_sources"] == 1  # docs/clean.md alone


def test_review_reports_personal_data_by_count_and_line(workspace: Path) -> None:
    ws = workspace
    write(
        ws,
        "docs/team.md",
        "# Team\n\nAsk ana@example.org or bo@example.org.\n\nOn call: +1 415 555 2671.\n",
    )
    write(ws, "docs/plain.md", "# Plain\n\nNothing personal here, version 1.2.3.\n")
    ingest_json(ws)
    result = run_cli("review", "--json", cwd=ws)
    assert result.code == 0, result.stderr
    found = [f for f in result.json()["findings"] if f["code"] == "personal_data"]
    assert [f["subjects"] for f in found] == [["docs/team.md"]]
    assert "2 e-mail addresses (line 3)" in found[0]["message"]
    assert "1 phone number (line 5)" in found[0]["message"]
    written = "".join(p.read_text(encoding="utf-8") for p in (ws / "ops/reviews").iterdir())
    for value in ("ana@example.org", "bo@example.org", "555 2671"):
        assert value not in result.stdout and value not in written
    # "allow": the team decided these belong here; review stops reporting them.
    config = ws / "raytsystem.toml"
    config.write_text(
        config.read_text(encoding="utf-8").replace(
            'personal_data = "report"', 'personal_data = "allow"'
        ),
        encoding="utf-8",
    )
    again = run_cli("review", "--json", cwd=ws).json()
    assert not [f for f in again["findings"] if f["code"] == "personal_data"]


def test_personal_data_policy_must_be_known(workspace: Path) -> None:
    config = workspace / "raytsystem.toml"
    config.write_text(
        config.read_text(encoding="utf-8").replace(
            'personal_data = "report"', 'personal_data = "hide"'
        ),
        encoding="utf-8",
    )
    result = run_cli("scan", "--json", cwd=workspace)
    assert result.code == 5
    assert result.json()["error"]["code"] == "config_invalid"
    assert "ingest.personal_data" in result.json()["error"]["message"]


def test_the_scan_finds_all_that_detect_secrets_own_file_scan_finds(tmp_path: Path) -> None:
    """Whatever detect-secrets' `scan_file` reports, `scan_text` reports too (same line,
    same kind): the per-file gates and the filters' order change the cost, not the result.
    Over the made-up secrets in three formats and this repository's own docs."""
    from detect_secrets.core.scan import scan_file
    from detect_secrets.settings import default_settings

    from raytsystem.model.secrets import scan_text

    files = list(plant(tmp_path).keys())
    repo = Path(__file__).resolve().parents[1]
    docs = [repo / "README.md", repo / "ARCHITECTURE.md"]
    docs += sorted((repo / "ops" / "decisions").glob("*.md"))
    for doc in docs:
        rel = f"docs/{doc.name}"
        write(tmp_path, rel, doc.read_text(encoding="utf-8"))
        files.append(rel)
    ours = {
        (rel, f.line, f.kind)
        for rel in files
        for f in scan_text(str(tmp_path / rel), (tmp_path / rel).read_text(encoding="utf-8"))
    }
    with default_settings() as settings:
        # Never ask a service whether a key is live.
        settings.disable_filters(
            "detect_secrets.filters.common.is_ignored_due_to_verification_policies"
        )
        theirs = {
            (rel, s.line_number, s.type) for rel in files for s in scan_file(str(tmp_path / rel))
        }
    assert theirs, "detect-secrets finds the made-up secrets"
    assert theirs <= ours, sorted(theirs - ours)
    assert {rel for rel, _, _ in ours} == set(plant(tmp_path)), "the docs are clean"


def test_a_notebooks_cell_ids_and_images_are_no_secrets_but_its_code_is_scanned(
    tmp_path: Path,
) -> None:
    """Jupyter writes a random hex `id` per cell and base64 image outputs into every notebook:
    random by nature, they must not quarantine it; a key in a cell's source still does."""
    from raytsystem.model.secrets import scan_text

    rnd = random.Random(7)
    cell_id = "".join(rnd.choice("0123456789abcdef") for _ in range(32))
    image = "".join(rnd.choice(B64) for _ in range(400))

    def notebook(source: str) -> str:
        cell = {
            "cell_type": "code",
            "execution_count": 1,
            "id": cell_id,
            "metadata": {},
            "outputs": [
                {"data": {"image/png": image}, "metadata": {}, "output_type": "display_data"}
            ],
            "source": [source],
        }
        body = {"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
        return json.dumps(body, indent=1)

    assert scan_text("nb/plot.ipynb", notebook("plot(retries)\n")) == []
    found = scan_text("nb/plot.ipynb", notebook(made_up_secrets()["aws_key_id"][1]))
    assert [f.kind for f in found] == ["AWS Access Key"], found
    # The same bytes under another name than a notebook's are what they look like.
    assert scan_text("nb/plot.json", notebook("plot(retries)\n")) != []
