"""The initial ledger: sources, revisions, normalizations, segments, claims, evidence,
generations with their head pointer and membership intervals, ingest runs and reviews.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

ID = sa.String(36)
HASH = sa.String(64)
TIME = sa.String(32)


def upgrade() -> None:
    op.create_table(
        "sources",
        sa.Column("id", ID, primary_key=True),
        sa.Column("path", sa.Text, nullable=False, unique=True),
        sa.Column("first_seen_at", TIME, nullable=False),
    )
    op.create_table(
        "revisions",
        sa.Column("id", ID, primary_key=True),
        sa.Column("source_id", ID, sa.ForeignKey("sources.id"), nullable=False, index=True),
        sa.Column("blob", HASH, nullable=False),
        sa.Column("size", sa.BigInteger, nullable=False),
        sa.Column("media_type", sa.String(100), nullable=False),
        sa.Column("first_seen_at", TIME, nullable=False),
        sa.UniqueConstraint("source_id", "blob", name="uq_revisions_source_blob"),
    )
    op.create_table(
        "normalizations",
        sa.Column("id", ID, primary_key=True),
        sa.Column("revision_id", ID, sa.ForeignKey("revisions.id"), nullable=False, index=True),
        sa.Column("adapter", sa.String(64), nullable=False),
        sa.Column("adapter_version", sa.Integer, nullable=False),
        sa.Column("config_hash", HASH, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("text_blob", HASH, nullable=True),
        sa.Column("text_length", sa.Integer, nullable=True),
        sa.Column("segment_count", sa.Integer, nullable=False),
        sa.Column("finding_code", sa.String(64), nullable=True),
        sa.Column("finding_message", sa.Text, nullable=True),
        sa.Column("meta", sa.Text, nullable=True),
        sa.Column("created_at", TIME, nullable=False),
        sa.UniqueConstraint(
            "revision_id", "adapter", "adapter_version", "config_hash", name="uq_normalizations_key"
        ),
    )
    op.create_table(
        "segments",
        sa.Column("id", ID, primary_key=True),
        sa.Column("normalization_id", ID, sa.ForeignKey("normalizations.id"), nullable=False),
        sa.Column("ordinal", sa.Integer, nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("heading_path", sa.Text, nullable=False),
        sa.Column("start", sa.Integer, nullable=False),
        sa.Column("end", sa.Integer, nullable=False),
        sa.Column("line_start", sa.Integer, nullable=False),
        sa.Column("line_end", sa.Integer, nullable=False),
        sa.Column("sha256", HASH, nullable=False),
        sa.UniqueConstraint("normalization_id", "ordinal", name="uq_segments_ordinal"),
    )
    op.create_table(
        "claims",
        sa.Column("id", ID, primary_key=True),
        sa.Column("source_id", ID, sa.ForeignKey("sources.id"), nullable=False, index=True),
        sa.Column("authority", sa.String(16), nullable=False),
        sa.Column("statement", sa.Text, nullable=False),
        sa.Column("occurrence", sa.Integer, nullable=False),
    )
    op.create_table(
        "evidence",
        sa.Column("id", ID, primary_key=True),
        sa.Column("claim_id", ID, sa.ForeignKey("claims.id"), nullable=False, index=True),
        sa.Column("segment_id", ID, sa.ForeignKey("segments.id"), nullable=False, index=True),
        sa.Column("start", sa.Integer, nullable=False),
        sa.Column("end", sa.Integer, nullable=False),
        sa.Column("sha256", HASH, nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
    )
    op.create_table(
        "generations",
        sa.Column("hash", HASH, primary_key=True),
        sa.Column("number", sa.Integer, nullable=False, unique=True),
        sa.Column("parent_hash", HASH, nullable=True),
        sa.Column("manifest_digest", HASH, nullable=False),
        sa.Column("created_at", TIME, nullable=False),
        sa.Column("source_count", sa.Integer, nullable=False),
        sa.Column("claim_count", sa.Integer, nullable=False),
        sa.Column("summary", sa.Text, nullable=False),
    )
    op.create_table(
        "head",
        sa.Column("name", sa.String(16), primary_key=True),
        sa.Column("generation_hash", HASH, sa.ForeignKey("generations.hash"), nullable=False),
        sa.Column("number", sa.Integer, nullable=False),
    )
    op.create_table(
        "source_states",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("source_id", ID, sa.ForeignKey("sources.id"), nullable=False),
        sa.Column("revision_id", ID, sa.ForeignKey("revisions.id"), nullable=False),
        sa.Column("normalization_id", ID, sa.ForeignKey("normalizations.id"), nullable=True),
        sa.Column("digest", HASH, nullable=False),
        sa.Column("gen_from", sa.Integer, nullable=False),
        sa.Column("gen_to", sa.Integer, nullable=True),
    )
    op.create_index("ix_source_states_open", "source_states", ["gen_to", "source_id"])
    op.create_index("ix_source_states_source", "source_states", ["source_id", "gen_from"])
    op.create_table(
        "claim_states",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("claim_id", ID, sa.ForeignKey("claims.id"), nullable=False),
        sa.Column("source_id", ID, sa.ForeignKey("sources.id"), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("claim_hash", HASH, nullable=False),
        sa.Column("evidence_ids", sa.Text, nullable=False),
        sa.Column("gen_from", sa.Integer, nullable=False),
        sa.Column("gen_to", sa.Integer, nullable=True),
    )
    op.create_index("ix_claim_states_claim", "claim_states", ["claim_id", "gen_from"])
    op.create_index("ix_claim_states_source", "claim_states", ["source_id", "gen_to"])
    op.create_table(
        "ingest_runs",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("started_at", TIME, nullable=False),
        sa.Column("finished_at", TIME, nullable=False),
        sa.Column("generation_hash", HASH, nullable=True),
        sa.Column("summary", sa.Text, nullable=False),
    )
    op.create_table(
        "reviews",
        sa.Column("id", ID, primary_key=True),
        sa.Column("generation_hash", HASH, sa.ForeignKey("generations.hash"), nullable=False),
        sa.Column("created_at", TIME, nullable=False),
        sa.Column("report", sa.Text, nullable=False),
    )
    op.create_index("ix_reviews_generation_hash", "reviews", ["generation_hash"])


def downgrade() -> None:
    raise NotImplementedError("the ledger is append-only: restore a backup instead of downgrading")
