"""Tombstones: the record of each purged blob (ADR 0040).

`raytsystem purge` removes a blob's bytes from the store (loose and in packs) and records
here why and when, and which generation was current. The chain stays verifiable: verify
accepts a missing blob that has a tombstone, and still fails on one without.

Idempotent: a ledger that has the table already keeps it as it is.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if "tombstones" in sa.inspect(op.get_bind()).get_table_names():
        return
    op.create_table(
        "tombstones",
        sa.Column("address", sa.String(64), primary_key=True),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("raw", sa.String(64), nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("purged_at", sa.String(32), nullable=False),
        sa.Column("generation_number", sa.Integer, nullable=True),
        sa.Column("generation_hash", sa.String(64), nullable=True),
    )
    op.create_index("ix_tombstones_raw", "tombstones", ["raw"])


def downgrade() -> None:
    raise NotImplementedError("the ledger is append-only: restore a backup instead of downgrading")
