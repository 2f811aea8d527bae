"""Where a segment is in a paged or celled file, and the index rows each source state has.

- `segments.page` (a PDF's page, 1-based) and `segments.cell` (a notebook's cell, 0-based):
  null for every other format. Under ID scheme 3 they are part of a segment's identity, with
  its kind, heading path and lines, so every field a citation shows is covered by an ID.
- `source_states.index_digest`: the digest of the source's rows in the generation's index
  (`index_file.source_rows_digest`), and `generations.index_digest`: the digest of all of
  them (`index_file.rows_digest`). A query checks the index rows of the sources it cites
  against them. Null in rows written before this migration: a query then checks those rows
  against the digests the index file records itself.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Nullable columns appended in place (ALTER TABLE ADD COLUMN): no table is copied. A
    # column already there is left as it is.
    inspector = sa.inspect(op.get_bind())
    for table, column in (
        ("segments", sa.Column("page", sa.Integer, nullable=True)),
        ("segments", sa.Column("cell", sa.Integer, nullable=True)),
        ("source_states", sa.Column("index_digest", sa.String(64), nullable=True)),
        ("generations", sa.Column("index_digest", sa.String(64), nullable=True)),
    ):
        if column.name not in {c["name"] for c in inspector.get_columns(table)}:
            op.add_column(table, column)


def downgrade() -> None:
    raise NotImplementedError("the ledger is append-only: restore a backup instead of downgrading")
