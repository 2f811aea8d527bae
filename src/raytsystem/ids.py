"""Typed object IDs: a prefix that names the kind, then a digest of the canonical identity.

`src_` + 32 hex digits is a Source, `clm_` a Claim, and so on. The digest is BLAKE3-128 over
the canonical JSON (see `canonical.py`) of the fields listed in `IDENTITY`, so the same input
always gives the same ID on every machine. 128 bits keep IDs short enough to paste while making
accidental collisions practically impossible; integrity hashes (claim hash, generation hash)
use the full 256 bits.

An ID is validated (`parse_id`) before it is used anywhere it could become a path or SQL.

Two ID schemes exist (ADR 0030). In scheme 1 the 32 hex digits are all the digest's. In scheme
2 an ID of a kind that belongs to one source (`PARENT`) starts with the first 8 hex digits of
its parent's ID and keeps the last 24 of its own digest, so one file's rows sit together in
the ledger's indexes. A ledger records the scheme its IDs are made with, fixed from its first
source on. The scheme is a value (`IdScheme`) carried by whatever opened the ledger and passed
to whatever derives IDs, as git passes a repository's hash algorithm to its object stores. The
kinds without a parent (sources, entities, relations, reviews) have the same ID by every
scheme (`make_id`). A scheme-2 ID keeps 96 bits of its own digest: ADR 0030 says why that is
plenty.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import blake3

from .canonical import Shape, digest
from .errors import UsageError

ID_HEX: Final = 32
HASH_HEX: Final = 64

# kind -> prefix. The prefix is part of the contract: changing it changes every ID.
PREFIXES: Final[dict[str, str]] = {
    "source": "src",
    "revision": "rev",
    "normalization": "nrm",
    "segment": "seg",
    "claim": "clm",
    "evidence": "evd",
    "entity": "ent",
    "relation": "rel",
    "review": "rvw",
}
KINDS_BY_PREFIX: Final[dict[str, str]] = {v: k for k, v in PREFIXES.items()}

# The identity fields of each kind (documented in ops/decisions/0003-ids-and-canonical-json.md).
IDENTITY: Final[dict[str, tuple[str, ...]]] = {
    "source": ("path",),
    "revision": ("source", "blob"),
    "normalization": ("revision", "adapter", "adapter_version", "config"),
    "segment": ("normalization", "ordinal", "start", "end", "sha256"),
    "claim": ("source", "authority", "statement", "occurrence"),
    "evidence": ("claim", "segment", "start", "end", "sha256", "role"),
    "entity": ("name",),
    "relation": ("type", "subject", "object"),
    "review": ("generation", "findings"),
}

# Scheme 3: a segment's identity holds every field a citation shows of it (ADR 0036), so a
# changed line number, heading path, kind, page or cell no longer derives the segment's ID.
SEGMENT_3: Final = (
    "normalization",
    "ordinal",
    "start",
    "end",
    "sha256",
    "segment_kind",  # the segment's kind (paragraph, heading, code...)
    "heading_path",  # its canonical JSON text, as the ledger stores it
    "line_start",
    "line_end",
    "page",
    "cell",
)
IDENTITY_3: Final[dict[str, tuple[str, ...]]] = {**IDENTITY, "segment": SEGMENT_3}

SCHEMES: Final = (1, 2, 3)
NEWEST_SCHEME: Final = 3
# Scheme 2: the kind -> the identity field whose ID's first `PARENT_HEX` hex digits it starts with.
PARENT: Final[dict[str, str]] = {
    "revision": "source",
    "normalization": "revision",
    "segment": "normalization",
    "claim": "source",
    "evidence": "claim",
}
PARENT_HEX: Final = 8
_P: Final = 4  # where the hex digits start in an ID (after "clm_")
_Q: Final = _P + PARENT_HEX

# The canonical form of each kind's identity (its fields and "kind"), worked out once.
_SHAPES: Final = {kind: Shape((*fields, "kind")) for kind, fields in IDENTITY.items()}
_SHAPES_3: Final = {**_SHAPES, "segment": Shape((*SEGMENT_3, "kind"))}

_ID_RE: Final = re.compile(r"(?P<prefix>[a-z]{3})_(?P<hex>[0-9a-f]{32})")
_HASH_RE: Final = re.compile(r"[0-9a-f]{64}")


def _digest(kind: str, identity: dict[str, Any], shapes: dict[str, Shape] = _SHAPES) -> str:
    shape = shapes[kind]
    if identity.keys() != shape.keys - {"kind"}:
        fields = tuple(f for f in shape.fields if f != "kind")
        raise TypeError(f"{kind} identity needs {fields}, got {tuple(identity)}")
    identity["kind"] = kind  # the caller's own dict
    return blake3.blake3(shape.encode(identity)).hexdigest(length=ID_HEX // 2)


def make_id(kind: str, **identity: Any) -> str:
    """The ID of an object of a kind that has no parent (`PARENT`): a source, an entity, a
    relation, a review. Its ID is the same by every scheme. The other kinds' IDs depend on
    the ledger's scheme: `IdScheme.make_id`."""
    if kind in PARENT:
        raise TypeError(f"a {kind}'s ID depends on the ID scheme: use IdScheme.make_id")
    return f"{PREFIXES[kind]}_{_digest(kind, identity)}"


@dataclass(frozen=True)
class IdScheme:
    """How a ledger's IDs are derived (ADR 0030): a value of the ledger, passed to whatever
    derives IDs (`Ledger.ids`, a reader's `ids`, an ingest's workers through their tasks)."""

    number: int

    def __post_init__(self) -> None:
        if self.number not in SCHEMES:
            raise ValueError(f"unknown ID scheme {self.number!r}")

    @property
    def identity(self) -> dict[str, tuple[str, ...]]:
        """Each kind's identity fields by this scheme."""
        return IDENTITY_3 if self.number >= 3 else IDENTITY

    @property
    def _shapes(self) -> dict[str, Shape]:
        return _SHAPES_3 if self.number >= 3 else _SHAPES

    @property
    def _parented(self) -> bool:
        return self.number >= 2

    def make_id(self, kind: str, **identity: Any) -> str:
        """Derive the ID of an object of `kind` from exactly its identity fields."""
        h = _digest(kind, identity, self._shapes)
        if self._parented and kind in PARENT:
            parent = identity[PARENT[kind]]
            if not (isinstance(parent, str) and _ID_RE.fullmatch(parent)):
                raise ValueError(f"a {kind}'s {PARENT[kind]} must be an ID, not {parent!r}")
            h = parent[_P:_Q] + h[PARENT_HEX:]
        return f"{PREFIXES[kind]}_{h}"

    def positional(self, kind: str) -> Callable[..., str]:
        """A fast `make_id(kind, ...)` for IDs made in bulk: it takes the identity's values
        positionally, in the order `self.identity[kind]` lists them, and gives the same ID."""
        names = self.identity[kind]
        shape = Shape((*names, "kind"))
        prefix = f"{PREFIXES[kind]}_"
        hasher = blake3.blake3
        at = names.index(PARENT[kind]) if self._parented and kind in PARENT else None
        fields = len(names)

        def make(*values: Any) -> str:
            if len(values) != fields:
                raise TypeError(f"{kind} identity needs {names}, got {len(values)} values")
            h = hasher(shape.values(*values, kind)).hexdigest(ID_HEX // 2)
            if at is not None:
                head: str = values[at][_P:_Q]
                return prefix + head + h[PARENT_HEX:]
            return prefix + h

        return make

    def template(self, kind: str, free: tuple[str, ...], /, **fixed: Any) -> Callable[..., str]:
        """`make_id(kind, ...)` for IDs made by the hundred thousand that share some identity
        fields (`fixed`): it takes the other fields' canonical JSON texts (`json_text(s)`, or
        an int as it is) in sorted key order, the order `free` lists them in, and gives the
        same ID (`Shape.template`)."""
        template = self._shapes[kind].template(free, kind=kind, **fixed)
        prefix = f"{PREFIXES[kind]}_"
        hasher = blake3.blake3
        # Scheme 2's parent: a fixed field's ID, or a free field's JSON text (its quote first).
        parent = PARENT.get(kind) if self._parented else None
        fixed_parent: str | None = fixed[parent][_P:_Q] if parent in fixed else None
        at = free.index(parent) if parent in free else -1

        def make(*texts: str | int) -> str:
            h = hasher((template % texts).encode("utf-8")).hexdigest(ID_HEX // 2)
            if parent is None:
                return prefix + h
            if fixed_parent is not None:
                return prefix + fixed_parent + h[PARENT_HEX:]
            return prefix + str(texts[at])[_P + 1 : _Q + 1] + h[PARENT_HEX:]

        return make


@functools.cache
def scheme(number: int) -> IdScheme:
    """The ID scheme `number` (one object per scheme, so what it derives is worked out once)."""
    return IdScheme(number)


NEWEST: Final = scheme(NEWEST_SCHEME)


def object_hash(kind: str, content: dict[str, Any], shape: Shape | None = None) -> str:
    """Full 256-bit hash of an object's canonical content (claims, generations, manifests).

    `shape`, for hashes made in bulk: the content's keys and "kind", worked out once."""
    record = {"kind": kind, **content}
    if shape is None:
        return digest(record, length=HASH_HEX // 2)
    return blake3.blake3(shape.encode(record)).hexdigest(length=HASH_HEX // 2)


def shaped_hash(shape: Shape, *values: Any) -> str:
    """`object_hash` for hashes made in bulk: the content's values (and the kind, where the
    shape has it) positionally, in the order of `shape.fields`."""
    return blake3.blake3(shape.values(*values)).hexdigest(length=HASH_HEX // 2)


def kind_of(object_id: str) -> str | None:
    m = _ID_RE.fullmatch(object_id)
    return KINDS_BY_PREFIX.get(m.group("prefix")) if m else None


def parse_id(text: str) -> tuple[str, str]:
    """Return (kind, id) for a well-formed ID, or raise a UsageError."""
    kind = kind_of(text)
    if kind is None:
        raise UsageError(f"not a raytsystem ID: {text!r}", code="invalid_id")
    return kind, text


def is_hash(text: str) -> bool:
    return bool(_HASH_RE.fullmatch(text))
