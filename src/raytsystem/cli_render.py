"""How the CLI shows each command's result as text (with `--json` it prints the JSON instead).

One function per command, each taking what the service layer returned. Every line goes
through `click.echo`, which writes text as text whatever it holds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from .api import FreshAnswer, IngestReport, ScanReport, VerifyReport


def init(workspace: str, created: list[str]) -> None:
    click.echo(f"workspace {workspace}")
    for item in created or ["(nothing to create: already a workspace)"]:
        click.echo(f"  + {item}" if created else f"  {item}")
    click.echo("next: add Markdown under knowledge/ or docs/, then `raytsystem ingest`")


def ingest(report: IngestReport) -> None:
    gen = report.generation
    if report.created and gen is not None:
        click.echo(f"generation {gen.number} {gen.hash[:16]} created")
    elif gen is not None:
        click.echo(f"no change: generation {gen.number} {gen.hash[:16]} stays current")
    else:
        click.echo("no change: nothing to ingest yet")
    click.echo(
        f"  scanned {report.scanned} files: {report.unchanged} unchanged, "
        f"{report.new_revisions} new revisions ({report.new_sources} new sources), "
        f"{report.removed_sources} removed"
        + (
            f", {report.kept_sources} kept at their last revision (see the findings)"
            if report.kept_sources
            else ""
        )
    )
    if report.skipped:
        counts = ", ".join(f"{n} {reason}" for reason, n in sorted(report.skipped.items()))
        click.echo(f"  skipped {sum(report.skipped.values())} files: {counts}")
    click.echo(
        f"  claims +{report.claims_added} -{report.claims_removed} ~{report.claims_changed} "
        f"(added, removed, new status or evidence)  ({report.seconds:.2f}s)"
    )
    for f in sorted(report.findings):
        click.echo(f"  {f.severity}[{f.code}] {f.subject}: {f.message}")


def scan(report: ScanReport) -> None:
    """Where the secrets and personal data are, by kind; never a value."""
    for s in report.secrets:
        click.echo(f"secret  {s.path}:{s.line}  {s.kind}")
    if report.personal_data != "allow":
        label = "personal (quarantined)" if report.personal_data == "quarantine" else "personal"
        for p in report.personal:
            click.echo(f"{label}  {p.path}:{p.line}  {p.kind}")
    for f in report.not_scanned:
        click.echo(f"  not scanned [{f.code}] {f.subject}: {f.message}")
    verdict = "FOUND" if report.found else "clean"
    click.echo(
        f"{verdict}: {report.scanned} files scanned, {len(report.secrets)} secrets, "
        f"{len(report.personal)} personal data"
    )


def purge(r: dict[str, Any]) -> None:
    click.echo(
        f"purged {len(r['raw_blobs'])} raw blob(s) and {len(r['text_blobs'])} normalized "
        f"text(s) of {r['target']}; {len(r['tombstones_recorded'])} new tombstone(s), "
        f"{r['store_files_changed']} store file(s) removed or rewritten"
    )
    click.echo("  the next `raytsystem ingest` makes a generation without them")


def status(r: dict[str, Any]) -> None:
    click.echo(f"workspace  {r['workspace']}")
    click.echo(f"database   {r['database']}")
    if r["id_scheme"] is not None:
        click.echo(f"ID scheme  {r['id_scheme']} (ADR 0030)")
    g = r["generation"]
    if g:
        click.echo(
            f"generation {g['number']} {g['hash'][:16]} ({g['created_at']}): "
            f"{g['active_sources']} sources, {g['active_claims']} claims (any status)"
        )
    else:
        click.echo("generation none yet: run `raytsystem ingest`")
    c = r["ledger_counts"]
    click.echo(
        f"ledger     {c['sources']} sources, {c['revisions']} revisions, "
        f"{c['normalizations']} normalizations, {c['claims']} claims"
    )
    last = r["last_ingest"]
    if last:
        made = "new generation" if last["created_generation"] else "no change"
        click.echo(f"last ingest {last['finished_at']}: {made}, {last['findings']} findings")


def history(r: dict[str, Any]) -> None:
    s = r["source"]
    click.echo(f"{s['path']}  {s['id']}")
    for rev in r["revisions"]:
        spans = (
            ", ".join(
                f"{x['from']}–{x['to'] - 1}" if x["to"] else f"{x['from']}–now"
                for x in rev["active_in_generations"]
            )
            or "never active"
        )
        mark = "*" if rev["id"] == r["current_revision"] else " "
        click.echo(
            f" {mark} {rev['id']}  {rev['first_seen_at']}  {rev['size']} bytes  generations {spans}"
        )
        if t := rev.get("purged"):
            click.echo(f"     purged {t['purged_at']}: {t['reason']}")
    if r["removed_in_generation"]:
        click.echo(f"   removed in generation {r['removed_in_generation']} (revisions kept)")


def generations(rows: list[dict[str, Any]]) -> None:
    if not rows:
        click.echo("no generations yet: run `raytsystem ingest`")
    for g in rows:
        mark = "*" if g["current"] else " "
        s = g["summary"]
        click.echo(
            f"{mark} {g['number']:>4}  {g['hash'][:16]}  {g['created_at']}  {g['sources']} sources  "
            f"{g['claims']} claims  (+{s.get('claims_added', 0)} -{s.get('claims_removed', 0)} "
            f"~{s.get('claims_changed', 0)})"
        )


def diff(r: dict[str, Any]) -> None:
    click.echo(f"generation {r['from']['number']} -> {r['to']['number']}")
    for c in r["added"]:
        click.echo(f"+ {c['id']}  {c['source_path']}: {c['statement']}")
    for c in r["removed"]:
        click.echo(f"- {c['id']}  {c['source_path']}: {c['statement']}")
    for c in r["status_changed"]:
        click.echo(f"~ {c['id']}  {c['from_status']} -> {c['to_status']}: {c['statement']}")
    if r["evidence_changed"]:
        click.echo(f"  ({len(r['evidence_changed'])} claims kept with new evidence)")
    if not (r["added"] or r["removed"] or r["status_changed"]):
        click.echo("no claim added, removed or changed in status")


def freshness(r: dict[str, Any] | None, number: int) -> None:
    """The one line that says whether the workspace still matches the answer's generation."""
    if r is None:
        return
    from .api import Freshness

    click.echo(Freshness(r["state"], r["changed"], tuple(r["examples"]), number).line())


def query(answer: FreshAnswer) -> None:
    g = answer.generation
    fresh = answer.freshness
    missing = ", ".join(answer.unmatched_terms)
    if answer.status == "gap":
        click.echo(f"gap: no confirmed claim answers this (generation {g.number} {g.hash[:16]})")
        if missing:
            click.echo(f"in no source: {missing}")
        if fresh is not None:
            click.echo(fresh.line())
        return
    click.echo(answer.answer)
    click.echo()
    for c in answer.citations:
        # A decision record's part and status: "decision", "considered_option, superseded".
        record = f", {c.role}" if c.role else ""
        if c.role and c.record_status:
            record += f", {c.record_status}"
        for e, role, _ in c.entries():
            where = f"{e.source_path}:{e.line_start}"
            if e.line_end != e.line_start:
                where += f"-{e.line_end}"
            click.echo(
                f"[{c.number}] {where}  ({c.claim.authority}, {role}{record})  "
                f"sha256 {e.sha256[:16]}"
            )
    n, sources = len(answer.citations), answer.source_count()
    click.echo(
        f"{n} citation{'s' * (n != 1)} from {sources} source{'s' * (sources != 1)}, "
        f"verified against generation {g.number} {g.hash[:16]}"
    )
    if missing:
        click.echo(f"in no source: {missing}")
    if fresh is not None:
        click.echo(fresh.line())


def search(r: dict[str, Any]) -> None:
    if not r["hits"]:
        click.echo("no match")
    for h in r["hits"]:
        where = h["source_path"]
        if h.get("lines"):
            where += f":{h['lines']['start']}"
        heading = " > ".join(h["heading_path"])
        click.echo(f"{where}  [{h['kind']}]  {heading}")
        body = " ".join(h["text"].split())
        click.echo(f"    {body[:200]}{'…' if len(body) > 200 else ''}")
    freshness(r.get("freshness"), r["generation"]["number"])


def review(r: dict[str, Any]) -> None:
    g, c = r["generation"], r["counts"]
    click.echo(
        f"review of generation {g['number']} {g['hash'][:16]}: "
        f"{c['error']} error(s), {c['warning']} warning(s), {c['info']} info"
    )
    for f in r["findings"]:
        click.echo(f"  {f['severity']}[{f['code']}] {f['message']}")
        click.echo(f"      {', '.join(f['subjects'])}")
    click.echo("report: " + ", ".join(r["files"]))


def verify(report: VerifyReport) -> None:
    c = report.counts
    hashed = report.hash_seconds
    rate = report.raw_bytes / 1e6 / hashed if hashed > 0 else 0
    click.echo(
        f"{'ok' if report.ok else 'PROBLEMS FOUND'}: {c.get('blobs', 0)} blobs "
        f"({report.raw_bytes / 1e6:.1f} MB at {round(rate, 1):.0f} MB/s), "
        f"{c.get('claims', 0)} claims, {c.get('evidence', 0)} evidence, "
        f"{c.get('generations', 0)} generations, {c.get('indexes', 0)} indexes "
        f"in {report.seconds:.2f}s"
    )
    for f in report.to_json()["findings"]:
        click.echo(f"  {f['severity']}[{f['code']}] {f['subject']}: {f['message']}")


def unpack(r: dict[str, Any]) -> None:
    click.echo(f"unpacked {r['pack']}: {r['kept']} blob(s) kept on their own")
    for address in r["damaged"]:
        click.echo(f"  damaged, not kept: {address}")


_EVAL_ROWS: tuple[tuple[str, str], ...] = (
    ("recall@{k} (sources)", "recall_at_k"),
    ("hit@{k} (sources)", "hit_at_k"),
    ("MRR@{k}", "mrr_at_k"),
    ("top-1", "top1"),
    ("evidence recall@{e}", "evidence_recall_at_e"),
    ("evidence hit@{e}", "evidence_hit_at_e"),
    ("word precision@{e}", "word_precision_at_e"),
    ("gap rate, off-topic", "gap_rate_offtopic"),
    ("gap rate, answerable", "gap_rate_answerable"),
    ("sources in {e} citations", "sources_in_e_citations"),
    ("claim recall@{k}", "claim_recall_at_k"),
    ("citation precision", "citation_precision"),
    ("contamination", "contamination"),
    ("must contain", "must_contain"),
    ("must not contain", "must_not_contain"),
    ("repeatable", "repeatable"),
)


def evaluation(r: dict[str, Any]) -> None:
    """raytsystem's figures beside plain BM25's, with their ratio."""
    m, b = r["metrics"], r["baseline"]["metrics"]
    k, e = r["k"], r["evidence_k"]
    click.echo(
        f"{r['dataset']}: {m['cases']} cases ({m['offtopic_cases']} off-topic), "
        f"generation {r['generation']['number']}"
    )
    click.echo(
        f"  {'':<24} {'raytsystem':>10} {'BM25':>8} {'ratio':>7}   "
        f"(BM25: {b['sources']} sources, {b['sentences']} sentences)"
    )
    for label, key in _EVAL_ROWS:
        value, base, name = m.get(key), b.get(key), label.format(k=k, e=e)
        if value is None:
            continue
        if base is None:
            click.echo(f"  {name:<24} {value:>10.4f}")
            continue
        ratio = f"{value / base:>6.2f}x" if base else f"{'-':>7}"
        click.echo(f"  {name:<24} {value:>10.4f} {base:>8.4f} {ratio}")
    latency = m["latency_ms"]
    click.echo(f"  {'latency p50 / p95':<24} {latency['p50']:.1f} / {latency['p95']:.1f} ms")
    if not r["passed"]:
        click.echo(
            f"FAILED: recall@{k} {m['recall_at_k']:.4f} is below --min-recall {r['min_recall']}"
        )


def bundle(r: dict[str, Any]) -> None:
    b = r["budget"]
    click.echo(
        f"{len(r['items'])} items, ~{b['estimated_tokens']} of {b['max_tokens']} tokens "
        f"(generation {r['generation']['number']}), bundle {r['bundle_sha256'][:16]}"
    )
    for item in r["items"]:
        cut = " (shortened)" if item["shortened"] else ""
        click.echo(
            f"{item['rank']:>3}. {item['source_path']}:{item['lines']['start']}  "
            f"[{item['kind']}]{cut}  {item['why']}"
        )
        click.echo(f"     {' '.join(item['text'].split())[:160]}")
    if r["must_read"]:
        click.echo("read in full before acting: " + ", ".join(r["must_read"]))
    if r["omitted"]:
        click.echo(f"{len(r['omitted'])} more items did not fit the budget")
    freshness(r.get("freshness"), r["generation"]["number"])


def universe(r: dict[str, Any], max_nodes: int) -> None:
    c = r["counts"]
    click.echo(
        f"wrote {r['path']}: {c['nodes']} nodes, {c['edges']} edges "
        f"(generation {r['generation']['number']})"
    )
    if r["truncated"]:
        left = r["truncated"]["claims_left_out"]
        click.echo(f"  {left} claims left out to stay under {max_nodes} nodes")


def rebuilt_index(r: dict[str, Any]) -> None:
    g = r["generation"]
    click.echo(
        f"index of generation {g['number']} {g['hash'][:16]} rebuilt: {r['documents']} documents"
    )
    click.echo(f"  rows digest {r['rows_digest']}")
    if r["previous_rows_digest"]:
        same = "same as" if r["same_as_previous"] else "DIFFERENT from"
        click.echo(f"  {same} the index it replaced")


def hooks(rows: list[dict[str, str]]) -> None:
    for row in rows:
        click.echo(f"{row['action']:>8}  {row['hook']}")
