"""The ledger schema as SQLAlchemy Core tables.

These `Table`s describe the schema; the tables themselves are created and changed only by the
Alembic migrations in `migrations/` (tests/test_ledger.py checks the two agree). Each is named for
the object its rows are (`Source` is the table `sources`, its columns `Source.c.path`...). The
pipeline works with Core statements and plain tuples, never ORM objects: SQLAlchemy's ORM is not
imported at all, which spares every command that opens the ledger its import (ADR 0023).

Immutable tables (sources, revisions, normalizations, segments, claims, evidence, generations)
are only ever inserted into. The two `*_states` tables record which objects are active in which
generation as half-open intervals `[gen_from, gen_to)` of generation numbers, so a new generation
writes rows in proportion to what changed, not to the size of the corpus. Closing an interval
(setting `gen_to`) is the only update the pipeline ever makes, and it happens in the same
transaction that moves the head.

Secondary indexes exist only where a read needs them (migration 0002 dropped five that none
did): every index costs each ingest one insert per row, and ingest writes millions of rows.

Times are ISO-8601 UTC strings: portable across SQLite and PostgreSQL and never part of an ID.
"""

from __future__ import annotations

from typing import Final

from sqlalchemy import (
    BigInteger,
    Column,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

ID: Final = String(36)
HASH: Final = String(64)
TIME: Final = String(32)

metadata = MetaData()

Source = Table(
    "sources",
    metadata,
    Column("id", ID, primary_key=True),
    Column("path", Text, nullable=False, unique=True),
    Column("first_seen_at", TIME, nullable=False),
)

Revision = Table(
    "revisions",
    metadata,
    Column("id", ID, primary_key=True),
    Column("source_id", ID, ForeignKey("sources.id"), nullable=False),
    Column("blob", HASH, nullable=False),
    Column("size", BigInteger, nullable=False),
    Column("media_type", String(100), nullable=False),
    Column("first_seen_at", TIME, nullable=False),
    UniqueConstraint("source_id", "blob", name="uq_revisions_source_blob"),
)

Normalization = Table(
    "normalizations",
    metadata,
    Column("id", ID, primary_key=True),
    Column("revision_id", ID, ForeignKey("revisions.id"), nullable=False),
    Column("adapter", String(64), nullable=False),
    Column("adapter_version", Integer, nullable=False),
    Column("config_hash", HASH, nullable=False),
    Column("status", String(16), nullable=False),  # "ok" | "failed"
    Column("text_blob", HASH),
    Column("text_length", Integer),
    Column("segment_count", Integer, nullable=False),
    Column("finding_code", String(64)),
    Column("finding_message", Text),
    Column("meta", Text),  # canonical JSON
    Column("created_at", TIME, nullable=False),
    UniqueConstraint(
        "revision_id", "adapter", "adapter_version", "config_hash", name="uq_normalizations_key"
    ),
)

Segment = Table(
    "segments",
    metadata,
    Column("id", ID, primary_key=True),
    Column("normalization_id", ID, ForeignKey("normalizations.id"), nullable=False),
    Column("ordinal", Integer, nullable=False),
    Column("kind", String(32), nullable=False),
    Column("heading_path", Text, nullable=False),  # canonical JSON array of strings
    Column("start", Integer, nullable=False),
    Column("end", Integer, nullable=False),
    Column("line_start", Integer, nullable=False),
    Column("line_end", Integer, nullable=False),
    Column("sha256", HASH, nullable=False),
    Column("page", Integer),  # a PDF's page (1-based); null for other formats
    Column("cell", Integer),  # a notebook's cell (0-based); null for other formats
    UniqueConstraint("normalization_id", "ordinal", name="uq_segments_ordinal"),
)

Claim = Table(
    "claims",
    metadata,
    Column("id", ID, primary_key=True),
    Column("source_id", ID, ForeignKey("sources.id"), nullable=False),
    Column("authority", String(16), nullable=False),  # "extracted" | "manual"
    Column("statement", Text, nullable=False),
    Column("occurrence", Integer, nullable=False),
)

Evidence = Table(
    "evidence",
    metadata,
    Column("id", ID, primary_key=True),
    Column("claim_id", ID, ForeignKey("claims.id"), nullable=False),
    Column("segment_id", ID, ForeignKey("segments.id"), nullable=False),
    Column("start", Integer, nullable=False),
    Column("end", Integer, nullable=False),
    Column("sha256", HASH, nullable=False),
    Column("role", String(16), nullable=False),  # "statement" | "citation"
)

Generation = Table(
    "generations",
    metadata,
    Column("hash", HASH, primary_key=True),
    Column("number", Integer, nullable=False, unique=True),
    Column("parent_hash", HASH),
    Column("manifest_digest", HASH, nullable=False),
    Column("created_at", TIME, nullable=False),
    Column("source_count", Integer, nullable=False),
    Column("claim_count", Integer, nullable=False),
    Column("summary", Text, nullable=False),  # canonical JSON: counts and changes
    Column("index_digest", HASH),  # its index's rows digest (null before migration 0004)
)

# The current-generation pointer: one row, moved last, in the generation's transaction.
Head = Table(
    "head",
    metadata,
    Column("name", String(16), primary_key=True),
    Column("generation_hash", HASH, ForeignKey("generations.hash"), nullable=False),
    Column("number", Integer, nullable=False),
)

SourceState = Table(
    "source_states",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("source_id", ID, ForeignKey("sources.id"), nullable=False),
    Column("revision_id", ID, ForeignKey("revisions.id"), nullable=False),
    Column("normalization_id", ID, ForeignKey("normalizations.id")),
    Column("digest", HASH, nullable=False),
    Column("gen_from", Integer, nullable=False),
    Column("gen_to", Integer),
    Column("index_digest", HASH),  # its rows digest in the index (null before migration 0004)
    Index("ix_source_states_open", "gen_to", "source_id"),
    Index("ix_source_states_source", "source_id", "gen_from"),
)

ClaimState = Table(
    "claim_states",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("claim_id", ID, ForeignKey("claims.id"), nullable=False),
    Column("source_id", ID, ForeignKey("sources.id"), nullable=False),
    Column("status", String(16), nullable=False),
    Column("claim_hash", HASH, nullable=False),
    Column("evidence_ids", Text, nullable=False),  # canonical JSON array, sorted
    Column("gen_from", Integer, nullable=False),
    Column("gen_to", Integer),
    Index("ix_claim_states_source", "source_id", "gen_to"),
)

IngestRun = Table(
    "ingest_runs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("started_at", TIME, nullable=False),
    Column("finished_at", TIME, nullable=False),
    Column("generation_hash", HASH),
    Column("summary", Text, nullable=False),  # JSON: counts and findings
)

Review = Table(
    "reviews",
    metadata,
    Column("id", ID, primary_key=True),
    Column("generation_hash", HASH, ForeignKey("generations.hash"), nullable=False, index=True),
    Column("created_at", TIME, nullable=False),
    Column("report", Text, nullable=False),  # canonical JSON of the findings
)

# The ledger's own settings. `id_scheme`: the scheme its IDs are derived by (ADR 0030), recorded
# by an ingest and fixed from the ledger's first source on (migration 0003 recorded 1 for a
# ledger that already had rows).
Setting = Table(
    "settings",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

# A purged blob (ADR 0040): its bytes were removed from the store on purpose, for `reason`,
# while generation `generation_number` (`generation_hash`) was current (null: none yet).
# `raw` is the raw blob whose purge removed it (itself, for a raw blob; the raw blob a
# normalized text was made from, for a text). verify accepts a missing blob that has one; a
# query that would cite one fails closed (`blob_purged`); ingest never stores it again.
Tombstone = Table(
    "tombstones",
    metadata,
    Column("address", HASH, primary_key=True),
    Column("kind", String(8), nullable=False),  # "raw" | "text"
    Column("raw", HASH, nullable=False, index=True),
    Column("reason", Text, nullable=False),
    Column("purged_at", TIME, nullable=False),
    Column("generation_number", Integer, nullable=True),
    Column("generation_hash", HASH, nullable=True),
)

TABLES = metadata.tables
