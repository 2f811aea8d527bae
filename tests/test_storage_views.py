"""The record types of `storage.views` against the tables they are rows of.

`show` prints a record whole, so a column added to a table and not to its record would be
missing from `show`'s output, and a field in the wrong place would move in it: each record
must name every column of its table, in the table's order."""

from __future__ import annotations

import pytest
from sqlalchemy import Table

from raytsystem.storage.views import RECORD_TABLES


@pytest.mark.parametrize(
    ("record", "table"), list(RECORD_TABLES.items()), ids=lambda x: getattr(x, "__name__", "")
)
def test_a_record_has_every_column_of_its_table_in_order(record: type, table: Table) -> None:
    assert record._fields == tuple(c.name for c in table.columns)  # type: ignore[attr-defined]
