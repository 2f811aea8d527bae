"""The ledger's settings, and the ID scheme its rows were derived by (ADR 0030).

`settings` holds values the ledger fixes once and never changes. The first is `id_scheme`: a
ledger that already has rows was made before scheme 2 existed, so it records 1 here and keeps
deriving its IDs that way (they are inside its claim hashes and generation hashes). An empty
ledger records nothing yet: its first ingest records the scheme its workspace names.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    settings = op.create_table(
        "settings",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
    )
    if op.get_bind().execute(sa.text("SELECT 1 FROM sources LIMIT 1")).first() is not None:
        op.bulk_insert(settings, [{"name": "id_scheme", "value": "1"}])


def downgrade() -> None:
    raise NotImplementedError("the ledger is append-only: restore a backup instead of downgrading")
