"""The ledger reads the freshness check needs (`pipeline.freshness`): which revision a path is
in a generation, and which paths differ between two generations.

Plain SQL through a `Reader`, as the query path reads the ledger (no SQLAlchemy import).
"""

from __future__ import annotations

from collections.abc import Sequence

from .reader import Reader, expand

_STEP = 500  # paths per statement

_ACTIVE = "{t}.gen_from <= :{n} AND ({t}.gen_to IS NULL OR {t}.gen_to > :{n})"


def active_blobs(reader: Reader, paths: Sequence[str], number: int) -> dict[str, str]:
    """path -> the raw BLAKE3 of its revision active in generation `number`, for the paths
    that are active sources there."""
    out: dict[str, str] = {}
    unique = sorted(set(paths))
    for i in range(0, len(unique), _STEP):
        marks, params = expand("p", unique[i : i + _STEP])
        for path, blob in reader.rows(
            "SELECT s.path, v.blob FROM sources s "
            "JOIN source_states st ON st.source_id = s.id "
            "JOIN revisions v ON v.id = st.revision_id "
            f"WHERE s.path IN ({marks}) AND " + _ACTIVE.format(t="st", n="n"),
            {**params, "n": number},
        ):
            out[path] = blob
    return out


def active_paths(reader: Reader, number: int) -> list[str]:
    """The paths of every source active in generation `number`."""
    return [
        path
        for (path,) in reader.rows(
            "SELECT s.path FROM source_states st JOIN sources s ON s.id = st.source_id WHERE "
            + _ACTIVE.format(t="st", n="n"),
            {"n": number},
        )
    ]


def paths_differing(reader: Reader, older: int, newer: int) -> list[str]:
    """Sorted paths whose active revision differs between generations `older` and `newer`
    (added, removed or changed): what a workspace that matches `newer` no longer matches of
    `older`."""
    one_side = (
        "SELECT s.path FROM source_states a JOIN sources s ON s.id = a.source_id "
        "WHERE {a_active} AND NOT EXISTS (SELECT 1 FROM source_states b "
        "WHERE b.source_id = a.source_id AND b.revision_id = a.revision_id AND {b_active})"
    )
    sql = (
        one_side.format(
            a_active=_ACTIVE.format(t="a", n="x"), b_active=_ACTIVE.format(t="b", n="y")
        )
        + " UNION "
        + one_side.format(
            a_active=_ACTIVE.format(t="a", n="y"), b_active=_ACTIVE.format(t="b", n="x")
        )
    )
    return sorted(path for (path,) in reader.rows(sql, {"x": older, "y": newer}))
