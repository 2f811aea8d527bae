"""The ledger schema as SQLAlchemy 2 typed models.

These classes describe the tables; the tables themselves are created and changed only by the
Alembic migrations in `migrations/` (tests/test_ledger.py checks the two agree). Rows never leave
the storage layer as ORM objects: the pipeline works with Core statements over `Model.__table__`
and plain tuples, which keeps bulk ingest fast and the layers honest.

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

from sqlalchemy import BigInteger, ForeignKey, Index, Integer, String, Table, Text, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

ID = String(36)
HASH = String(64)


class Base(DeclarativeBase):
    pass


class Source(Base):
    __tablename__ = "sources"
    id: Mapped[str] = mapped_column(ID, primary_key=True)
    path: Mapped[str] = mapped_column(Text, unique=True)
    first_seen_at: Mapped[str] = mapped_column(String(32))


class Revision(Base):
    __tablename__ = "revisions"
    __table_args__ = (UniqueConstraint("source_id", "blob", name="uq_revisions_source_blob"),)
    id: Mapped[str] = mapped_column(ID, primary_key=True)
    source_id: Mapped[str] = mapped_column(ForeignKey("sources.id"))
    blob: Mapped[str] = mapped_column(HASH)
    size: Mapped[int] = mapped_column(BigInteger)
    media_type: Mapped[str] = mapped_column(String(100))
    first_seen_at: Mapped[str] = mapped_column(String(32))


class Normalization(Base):
    __tablename__ = "normalizations"
    __table_args__ = (
        UniqueConstraint(
            "revision_id", "adapter", "adapter_version", "config_hash", name="uq_normalizations_key"
        ),
    )
    id: Mapped[str] = mapped_column(ID, primary_key=True)
    revision_id: Mapped[str] = mapped_column(ForeignKey("revisions.id"))
    adapter: Mapped[str] = mapped_column(String(64))
    adapter_version: Mapped[int] = mapped_column(Integer)
    config_hash: Mapped[str] = mapped_column(HASH)
    status: Mapped[str] = mapped_column(String(16))  # "ok" | "failed"
    text_blob: Mapped[str | None] = mapped_column(HASH, nullable=True)
    text_length: Mapped[int | None] = mapped_column(Integer, nullable=True)
    segment_count: Mapped[int] = mapped_column(Integer)
    finding_code: Mapped[str | None] = mapped_column(String(64), nullable=True)
    finding_message: Mapped[str | None] = mapped_column(Text, nullable=True)
    meta: Mapped[str | None] = mapped_column(Text, nullable=True)  # canonical JSON
    created_at: Mapped[str] = mapped_column(String(32))


class Segment(Base):
    __tablename__ = "segments"
    __table_args__ = (UniqueConstraint("normalization_id", "ordinal", name="uq_segments_ordinal"),)
    id: Mapped[str] = mapped_column(ID, primary_key=True)
    normalization_id: Mapped[str] = mapped_column(ForeignKey("normalizations.id"))
    ordinal: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(32))
    heading_path: Mapped[str] = mapped_column(Text)  # canonical JSON array of strings
    start: Mapped[int] = mapped_column(Integer)
    end: Mapped[int] = mapped_column(Integer)
    line_start: Mapped[int] = mapped_column(Integer)
    line_end: Mapped[int] = mapped_column(Integer)
    sha256: Mapped[str] = mapped_column(HASH)


class Claim(Base):
    __tablename__ = "claims"
    id: Mapped[str] = mapped_column(ID, primary_key=True)
    source_id: Mapped[str] = mapped_column(ForeignKey("sources.id"))
    authority: Mapped[str] = mapped_column(String(16))  # "extracted" | "manual"
    statement: Mapped[str] = mapped_column(Text)
    occurrence: Mapped[int] = mapped_column(Integer)


class Evidence(Base):
    __tablename__ = "evidence"
    id: Mapped[str] = mapped_column(ID, primary_key=True)
    claim_id: Mapped[str] = mapped_column(ForeignKey("claims.id"))
    segment_id: Mapped[str] = mapped_column(ForeignKey("segments.id"))
    start: Mapped[int] = mapped_column(Integer)
    end: Mapped[int] = mapped_column(Integer)
    sha256: Mapped[str] = mapped_column(HASH)
    role: Mapped[str] = mapped_column(String(16))  # "statement" | "citation"


class Generation(Base):
    __tablename__ = "generations"
    hash: Mapped[str] = mapped_column(HASH, primary_key=True)
    number: Mapped[int] = mapped_column(Integer, unique=True)
    parent_hash: Mapped[str | None] = mapped_column(HASH, nullable=True)
    manifest_digest: Mapped[str] = mapped_column(HASH)
    created_at: Mapped[str] = mapped_column(String(32))
    source_count: Mapped[int] = mapped_column(Integer)
    claim_count: Mapped[int] = mapped_column(Integer)
    summary: Mapped[str] = mapped_column(Text)  # canonical JSON: counts and changes


class Head(Base):
    """The current-generation pointer: one row, moved last, in the generation's transaction."""

    __tablename__ = "head"
    name: Mapped[str] = mapped_column(String(16), primary_key=True)
    generation_hash: Mapped[str] = mapped_column(ForeignKey("generations.hash"))
    number: Mapped[int] = mapped_column(Integer)


class SourceState(Base):
    __tablename__ = "source_states"
    __table_args__ = (
        Index("ix_source_states_open", "gen_to", "source_id"),
        Index("ix_source_states_source", "source_id", "gen_from"),
    )
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    source_id: Mapped[str] = mapped_column(ForeignKey("sources.id"))
    revision_id: Mapped[str] = mapped_column(ForeignKey("revisions.id"))
    normalization_id: Mapped[str | None] = mapped_column(
        ForeignKey("normalizations.id"), nullable=True
    )
    digest: Mapped[str] = mapped_column(HASH)
    gen_from: Mapped[int] = mapped_column(Integer)
    gen_to: Mapped[int | None] = mapped_column(Integer, nullable=True)


class ClaimState(Base):
    __tablename__ = "claim_states"
    __table_args__ = (Index("ix_claim_states_source", "source_id", "gen_to"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    claim_id: Mapped[str] = mapped_column(ForeignKey("claims.id"))
    source_id: Mapped[str] = mapped_column(ForeignKey("sources.id"))
    status: Mapped[str] = mapped_column(String(16))
    claim_hash: Mapped[str] = mapped_column(HASH)
    evidence_ids: Mapped[str] = mapped_column(Text)  # canonical JSON array, sorted
    gen_from: Mapped[int] = mapped_column(Integer)
    gen_to: Mapped[int | None] = mapped_column(Integer, nullable=True)


class IngestRun(Base):
    __tablename__ = "ingest_runs"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    started_at: Mapped[str] = mapped_column(String(32))
    finished_at: Mapped[str] = mapped_column(String(32))
    generation_hash: Mapped[str | None] = mapped_column(HASH, nullable=True)
    summary: Mapped[str] = mapped_column(Text)  # JSON: counts and findings


class Review(Base):
    __tablename__ = "reviews"
    id: Mapped[str] = mapped_column(ID, primary_key=True)
    generation_hash: Mapped[str] = mapped_column(ForeignKey("generations.hash"), index=True)
    created_at: Mapped[str] = mapped_column(String(32))
    report: Mapped[str] = mapped_column(Text)  # canonical JSON of the findings


TABLES = Base.metadata.tables


def table(model: type[Base]) -> Table:
    """A model's Table, typed as one (`Model.__table__` is typed as a FromClause)."""
    return TABLES[model.__tablename__]
