"""Canonical JSON and typed IDs: the frozen contract every ID and hash is built on.

The golden values below are the point of this file: if one of them changes, every ID and hash
ever recorded in every ledger changes with it.
"""

from __future__ import annotations

import decimal
import hashlib
import json
import re
import unicodedata
from datetime import date
from typing import Any

import blake3
import pytest
from hypothesis import given
from hypothesis import strategies as st

from raytsystem.canonical import canonical_json, digest, sha256_hex
from raytsystem.errors import UsageError
from raytsystem.ids import (
    IDENTITY,
    NEWEST,
    PARENT,
    PREFIXES,
    SCHEMES,
    IdScheme,
    is_hash,
    kind_of,
    make_id,
    object_hash,
    parse_id,
    scheme,
)

NFC_E = "\u00e9"  # é, one code point
NFD_E = "e\u0301"  # é, e + combining acute accent

# --- golden values -----------------------------------------------------------------------------
# Computed once and hard-coded on purpose. canonical_json is the input of every digest, and
# make_id is BLAKE3-128 over it: a change to either (key order, separators, escaping, NFC, the
# "kind" tag, the prefix, the digest length) changes every ID ever recorded in every ledger and
# breaks every stored citation. If one of these fails, the change is the bug, not the test.

GOLDEN_SOURCE_ID = "src_3fad2a066b085f6238a4ef5682e9e92e"  # make_id("source", path="docs/a.md")
# make_id("claim", source=GOLDEN_SOURCE_ID, authority="extracted", statement="A is B.",
# occurrence=0) by each ID scheme (ADR 0030): scheme 2 starts with the source's 8 hex digits.
GOLDEN_CLAIM_ID = {
    1: "clm_f7f3537c55b61f49f1636f39c2be5d03",
    2: "clm_3fad2a0655b61f49f1636f39c2be5d03",
    3: "clm_3fad2a0655b61f49f1636f39c2be5d03",  # a claim's identity is the same in scheme 3
}


def test_golden_canonical_json_of_a_source_identity() -> None:
    assert (
        canonical_json({"path": "docs/a.md", "kind": "source"})
        == b'{"kind":"source","path":"docs/a.md"}'
    )


def test_golden_canonical_json_of_nested_unicode_value() -> None:
    value = {
        "b": [1, True, None, -7],
        "a": {NFD_E: "日本語", "z": ""},
        "\U0001f600": 0,  # outside the BMP: sorts after U+FF01 by code point (not UTF-16)
        "\uff01": 1,
    }
    assert canonical_json(value) == (
        '{"a":{"z":"","é":"日本語"},"b":[1,true,null,-7],"！":1,"😀":0}'.encode()
    )


@pytest.mark.parametrize("scheme", SCHEMES)
def test_golden_claim_id(scheme: int) -> None:
    assert IdScheme(scheme).make_id("claim", **SAMPLE_IDENTITY["claim"]) == GOLDEN_CLAIM_ID[scheme]


def test_golden_source_id() -> None:
    assert make_id("source", path="docs/a.md") == GOLDEN_SOURCE_ID


def test_source_id_is_blake3_128_over_the_canonical_identity() -> None:
    # The documented recipe, spelled out with nothing but blake3: any client can recompute it.
    body = b'{"kind":"source","path":"docs/a.md"}'
    assert "src_" + blake3.blake3(body).hexdigest(length=16) == GOLDEN_SOURCE_ID


def test_sha256_hex_is_plain_sha256_of_utf8() -> None:
    text = "at most 5 attempts — 最多"
    assert sha256_hex(text) == hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert sha256_hex("at most 5 attempts") == (
        "56c8a30820ffa8f5542143eb2fc54ec5eff6767216f66615209be842379af2b0"
    )


# --- canonical_json ----------------------------------------------------------------------------


def test_canonical_json_sorts_keys_at_every_level() -> None:
    assert canonical_json({"b": 1, "a": {"d": 2, "c": 3}}) == b'{"a":{"c":3,"d":2},"b":1}'


def test_canonical_json_is_compact() -> None:
    out = canonical_json({"a": [1, 2, {"b": None}], "c": "x y"})
    assert out == b'{"a":[1,2,{"b":null}],"c":"x y"}'


def test_canonical_json_is_utf8_without_escapes() -> None:
    out = canonical_json(["Привет", "日本", "😀"])
    assert out == '["Привет","日本","😀"]'.encode()
    assert b"\\u" not in out


def test_canonical_json_escapes_only_what_json_requires() -> None:
    assert canonical_json('q"b\\n\n') == b'"q\\"b\\\\n\\n"'


def test_canonical_json_nfc_normalizes_values_and_keys() -> None:
    assert canonical_json(NFD_E) == canonical_json(NFC_E) == '"é"'.encode()
    assert canonical_json({NFD_E: NFD_E}) == canonical_json({NFC_E: NFC_E})


def test_canonical_json_refuses_keys_that_collide_after_nfc() -> None:
    with pytest.raises(ValueError, match="collide"):
        canonical_json({NFC_E: 1, NFD_E: 2})


def test_canonical_json_encodes_tuples_as_arrays() -> None:
    assert canonical_json((1, "a")) == canonical_json([1, "a"]) == b'[1,"a"]'


def test_canonical_json_keeps_bool_distinct_from_int() -> None:
    assert canonical_json([True, 1, False, 0]) == b"[true,1,false,0]"


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(1.0, id="float"),
        pytest.param(float("nan"), id="nan"),
        pytest.param({"a": [0.5]}, id="nested-float"),
        pytest.param(b"bytes", id="bytes"),
        pytest.param({1, 2}, id="set"),
        pytest.param(decimal.Decimal("1.5"), id="decimal"),
        pytest.param(date(2026, 1, 1), id="date"),
        pytest.param(object(), id="object"),
        pytest.param([{"k": b"v"}], id="nested-bytes"),
    ],
)
def test_canonical_json_refuses_other_types(value: Any) -> None:
    with pytest.raises(TypeError):
        canonical_json(value)


@pytest.mark.parametrize("key", [1, None, True, b"k", ("t",)], ids=repr)
def test_canonical_json_refuses_non_str_keys(key: Any) -> None:
    with pytest.raises(TypeError, match="keys must be str"):
        canonical_json({key: 1})


def test_digest_length_is_in_bytes() -> None:
    assert len(digest({"a": 1})) == 64
    assert len(digest({"a": 1}, length=16)) == 32


# --- make_id, parse_id, kind_of ----------------------------------------------------------------

# One valid identity per kind, with the fields in IDENTITY.
SAMPLE_IDENTITY: dict[str, dict[str, Any]] = {
    "source": {"path": "docs/a.md"},
    "revision": {"source": GOLDEN_SOURCE_ID, "blob": "a" * 64},
    "normalization": {
        "revision": "rev_" + "1" * 32,
        "adapter": "markdown",
        "adapter_version": 1,
        "config": "c" * 64,
    },
    "segment": {
        "normalization": "nrm_" + "2" * 32,
        "ordinal": 0,
        "start": 0,
        "end": 5,
        "sha256": "d" * 64,
    },
    "claim": {
        "source": GOLDEN_SOURCE_ID,
        "authority": "extracted",
        "statement": "A is B.",
        "occurrence": 0,
    },
    "evidence": {
        "claim": "clm_" + "3" * 32,
        "segment": "seg_" + "4" * 32,
        "start": 0,
        "end": 7,
        "sha256": "e" * 64,
        "role": "statement",
    },
    "entity": {"name": "Payments"},
    "relation": {"type": "links", "subject": "ent_a", "object": "ent_b"},
    "review": {"generation": "f" * 64, "findings": []},
}

ID_RE = re.compile(r"^([a-z]{3})_([0-9a-f]{32})\Z")
# Scheme 3's segment identity: also every field a citation shows of the segment (ADR 0036).
SEGMENT_SHOWN: dict[str, Any] = {
    "segment_kind": "paragraph",
    "heading_path": '["Payments","Retries"]',
    "line_start": 3,
    "line_end": 4,
    "page": None,
    "cell": None,
}


GOLDEN_SEGMENT_ID_3 = "seg_22222222e3aecb2d1d4e7f8f6275a621"


def sample(kind: str, number: int) -> dict[str, Any]:
    """SAMPLE_IDENTITY[kind] as scheme `number` takes it."""
    if kind == "segment" and number >= 3:
        return {**SAMPLE_IDENTITY[kind], **SEGMENT_SHOWN}
    return dict(SAMPLE_IDENTITY[kind])


def test_every_kind_has_a_sample_identity() -> None:
    assert set(SAMPLE_IDENTITY) == set(IDENTITY) == set(PREFIXES)
    for kind, identity in SAMPLE_IDENTITY.items():
        assert set(identity) == set(IDENTITY[kind])


def _kind_params() -> list[Any]:
    params = []
    for kind in sorted(IDENTITY):
        marks = []
        if "kind" in IDENTITY[kind]:
            marks.append(
                pytest.mark.xfail(
                    strict=True,
                    reason="BUG: make_id(kind, **identity) takes the object kind as its own "
                    "`kind` parameter, so an identity field named `kind` (relation: kind, "
                    "subject, object) is a TypeError ('multiple values for argument kind'); "
                    "and even if passed, {'kind': kind, **identity} would let it overwrite "
                    "the type tag in the digest",
                )
            )
        params.append(pytest.param(kind, id=kind, marks=marks))
    return params


@pytest.mark.parametrize("number", SCHEMES)
@pytest.mark.parametrize("kind", _kind_params())
def test_make_id_has_the_documented_prefix_and_32_hex(kind: str, number: int) -> None:
    object_id = scheme(number).make_id(kind, **sample(kind, number))
    m = ID_RE.match(object_id)
    assert m is not None, object_id
    assert m.group(1) == PREFIXES[kind]
    assert parse_id(object_id) == (kind, object_id)
    assert kind_of(object_id) == kind


@pytest.mark.parametrize("kind", sorted(IDENTITY))
def test_scheme_2_starts_an_id_with_its_parents_digits_and_keeps_the_rest(kind: str) -> None:
    """Scheme 2 differs from scheme 1 only in the first 8 hex digits of a kind with a parent,
    which are the parent ID's; every other kind's ID is the same in both."""
    old = scheme(1).make_id(kind, **SAMPLE_IDENTITY[kind])
    new = scheme(2).make_id(kind, **SAMPLE_IDENTITY[kind])
    if kind not in PARENT:
        assert new == old == make_id(kind, **SAMPLE_IDENTITY[kind])
        return
    with pytest.raises(TypeError, match="depends on the ID scheme"):
        make_id(kind, **SAMPLE_IDENTITY[kind])
    parent_id = SAMPLE_IDENTITY[kind][PARENT[kind]]
    assert new[4:12] == parent_id[4:12] != old[4:12]
    assert new[12:] == old[12:]


def test_make_id_refuses_a_missing_identity_field() -> None:
    with pytest.raises(TypeError):
        NEWEST.make_id("revision", source=GOLDEN_SOURCE_ID)


def test_make_id_refuses_an_extra_identity_field() -> None:
    with pytest.raises(TypeError):
        make_id("source", path="docs/a.md", title="A")


def test_make_id_refuses_no_identity_at_all() -> None:
    with pytest.raises(TypeError):
        make_id("source")


def test_make_id_refuses_an_unknown_kind() -> None:
    with pytest.raises((KeyError, ValueError)):
        make_id("widget", path="docs/a.md")


def test_make_id_normalizes_the_path_to_nfc() -> None:
    assert make_id("source", path=f"docs/caf{NFD_E}.md") == make_id(
        "source", path=f"docs/caf{NFC_E}.md"
    )


def test_object_hash_is_64_hex_and_tagged_by_kind() -> None:
    content = {"number": 1}
    assert is_hash(object_hash("generation", content))
    assert object_hash("generation", content) != object_hash("review", content)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("src", id="prefix-only"),
        pytest.param("src_", id="no-hex"),
        pytest.param("src_" + "0" * 31, id="31-hex"),
        pytest.param("src_" + "0" * 33, id="33-hex"),
        pytest.param("src_" + "A" * 32, id="uppercase-hex"),
        pytest.param("SRC_" + "0" * 32, id="uppercase-prefix"),
        pytest.param("xyz_" + "0" * 32, id="unknown-prefix"),
        pytest.param("src-" + "0" * 32, id="dash"),
        pytest.param("src" + "0" * 32, id="no-underscore"),
        pytest.param(" src_" + "0" * 32, id="leading-space"),
        pytest.param("src_" + "0" * 32 + " ", id="trailing-space"),
        pytest.param("src_" + "g" * 32, id="not-hex"),
        pytest.param("../src_" + "0" * 32, id="path"),
        pytest.param("a" * 64, id="a-hash-is-not-an-id"),
    ],
)
def test_parse_id_rejects_malformed(text: str) -> None:
    assert kind_of(text) is None
    with pytest.raises(UsageError) as info:
        parse_id(text)
    assert info.value.code == "invalid_id"
    assert info.value.exit_status == 2


def test_parse_id_rejects_trailing_newline() -> None:
    assert kind_of(GOLDEN_SOURCE_ID + "\n") is None
    assert not is_hash("a" * 64 + "\n")


@pytest.mark.parametrize("kind,prefix", sorted(PREFIXES.items()))
def test_parse_id_accepts_every_prefix(kind: str, prefix: str) -> None:
    text = f"{prefix}_{'0123456789abcdef' * 2}"
    assert parse_id(text) == (kind, text)


# --- properties --------------------------------------------------------------------------------

canonical_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=20,
)


def _nfc_keys_unique(value: Any) -> bool:
    if isinstance(value, dict):
        keys = [unicodedata.normalize("NFC", k) for k in value]
        return len(keys) == len(set(keys)) and all(_nfc_keys_unique(v) for v in value.values())
    if isinstance(value, list):
        return all(_nfc_keys_unique(v) for v in value)
    return True


def _reverse_key_order(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _reverse_key_order(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reverse_key_order(v) for v in value]
    return value


def _nfc(value: Any) -> Any:
    if isinstance(value, str):
        return unicodedata.normalize("NFC", value)
    if isinstance(value, dict):
        return {_nfc(k): _nfc(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_nfc(v) for v in value]
    return value


@given(canonical_values.filter(_nfc_keys_unique))
def test_property_canonical_json_parses_back_to_the_nfc_value(value: Any) -> None:
    out = canonical_json(value)
    assert json.loads(out.decode("utf-8")) == _nfc(value)
    assert canonical_json(json.loads(out)) == out  # a fixed point


@given(canonical_values.filter(_nfc_keys_unique))
def test_property_dict_key_order_does_not_matter(value: Any) -> None:
    assert canonical_json(_reverse_key_order(value)) == canonical_json(value)


@given(canonical_values.filter(_nfc_keys_unique))
def test_property_canonical_json_is_the_stdlib_encoding_of_the_nfc_value(value: Any) -> None:
    """The reference: a fresh stdlib encoder with the documented settings, over the NFC value
    (canonical_json keeps one C encoder and skips copies when the value is already NFC)."""
    reference = json.dumps(_nfc(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert canonical_json(value) == reference.encode("utf-8")


@given(
    st.text(),
    st.integers(),
    st.sampled_from(["extracted", "manual", "Ä̈"]),
    st.text("0123456789abcdef", min_size=32, max_size=32),
)
def test_property_make_id_digests_the_reference_encoding(
    text: str, n: int, authority: str, source_hex: str
) -> None:
    source = f"src_{source_hex}"
    identity = {"source": source, "authority": authority, "statement": text, "occurrence": n}
    reference = json.dumps(
        _nfc({"kind": "claim", **identity}),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    digest_hex = blake3.blake3(reference.encode("utf-8")).hexdigest(length=16)
    assert scheme(1).make_id("claim", **dict(identity)) == "clm_" + digest_hex
    assert scheme(2).make_id("claim", **identity) == "clm_" + source_hex[:8] + digest_hex[8:]


_pairs = st.lists(st.tuples(st.text(), st.text()) | st.lists(st.text(), max_size=3), max_size=6)


@given(_pairs, st.booleans())
def test_property_lists_of_pairs_encode_as_the_general_path_does(value: Any, wrap: bool) -> None:
    """The fast path (no copy) for lists of string pairs, alone or under a key, gives the bytes
    of the general path: NFC everywhere, tuples as arrays."""
    from raytsystem.canonical import _ENCODER, _canon

    subject = {"sources": value} if wrap else value
    assert canonical_json(subject) == _ENCODER.encode(_canon(subject)).encode("utf-8")
    assert json.loads(canonical_json(subject)) == _nfc(json.loads(json.dumps(subject)))


@given(st.text())
def test_property_nfd_and_nfc_give_the_same_bytes(text: str) -> None:
    nfd, nfc = unicodedata.normalize("NFD", text), unicodedata.normalize("NFC", text)
    assert canonical_json({"k" + nfd: [nfd]}) == canonical_json({"k" + nfc: [nfc]})


@given(st.text(min_size=1), st.integers(min_value=0))
def test_property_same_input_gives_same_id(statement: str, occurrence: int) -> None:
    fields = {
        "source": GOLDEN_SOURCE_ID,
        "authority": "manual",
        "statement": statement,
        "occurrence": occurrence,
    }
    first = NEWEST.make_id("claim", **fields)
    again = NEWEST.make_id("claim", **dict(reversed(list(fields.items()))))
    assert first == again
    assert ID_RE.match(first)


@given(st.text(min_size=1), st.text(min_size=1))
def test_property_different_paths_give_different_source_ids(a: str, b: str) -> None:
    same = unicodedata.normalize("NFC", a) == unicodedata.normalize("NFC", b)
    assert (make_id("source", path=a) == make_id("source", path=b)) == same


@given(st.text(min_size=1))
def test_property_every_made_id_parses(path: str) -> None:
    object_id = make_id("source", path=path)
    assert parse_id(object_id) == ("source", object_id)


# --- Shape: the precompiled encoder IDs and claim hashes go through -----------------------------

_shape_values = (
    st.text()
    | st.integers()
    | st.none()
    | st.booleans()
    | st.lists(st.text(), max_size=4)
    | st.tuples(st.text(), st.text())
    | st.lists(st.integers(), max_size=2)
    | st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2)
)
_shape_keys = st.lists(
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz_ABC", min_size=1, max_size=8),
    min_size=1,
    max_size=7,
    unique=True,
)


@given(
    _shape_keys.flatmap(
        lambda keys: st.tuples(
            st.just(keys), st.lists(_shape_values, min_size=len(keys), max_size=len(keys))
        )
    )
)
def test_property_a_shape_encodes_the_bytes_of_canonical_json(
    case: tuple[list[str], list[Any]],
) -> None:
    """Whatever the values (NFD text, bools next to ints, nested dicts that take the general
    path), a shape's encoding is canonical_json's, byte for byte."""
    from raytsystem.canonical import Shape

    keys, values = case
    record = dict(zip(keys, values, strict=True))
    assert Shape(reversed(keys)).encode(record) == canonical_json(record)


def test_a_shape_refuses_a_record_with_other_keys() -> None:
    from raytsystem.canonical import Shape

    shape = Shape(("a", "b"))
    with pytest.raises(KeyError):
        shape.encode({"a": 1, "b": 2, "c": 3})
    with pytest.raises(KeyError):
        shape.encode({"a": 1, "c": 3})
    with pytest.raises(ValueError):
        Shape(("a", 'quo"te'))


@given(st.text(), st.text(), st.sampled_from(["confirmed", "disputed"]), st.lists(st.text()))
def test_property_claim_hash_is_the_reference_object_hash(
    statement: str, claim: str, status: str, evidence: list[str]
) -> None:
    from raytsystem.model.objects import claim_hash

    content = {
        "id": claim,
        "statement": statement,
        "authority": "manual",
        "status": status,
        "evidence": sorted(evidence),
    }
    reference = json.dumps(
        _nfc({"kind": "claim", **content}),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    expected = blake3.blake3(reference.encode("utf-8")).hexdigest()
    assert claim_hash(claim, statement, "manual", status, evidence) == expected
    assert object_hash("claim", content) == expected


# --- Templates: the same IDs and hashes for the objects an ingest makes in bulk ---------------


_HEX32 = st.text("0123456789abcdef", min_size=32, max_size=32)


@given(
    st.sampled_from(SCHEMES),
    st.text(),
    st.text(),
    st.integers(min_value=0),
    st.integers(),
    st.text(),
    _HEX32,
    _HEX32,
)
def test_property_bulk_ids_are_make_ids(
    scheme_number: int,
    source: str,
    statement: str,
    occurrence: int,
    number: int,
    other: str,
    source_hex: str,
    other_hex: str,
) -> None:
    """Any text (NFD, quotes, control characters, `%`) in any field: the templated IDs are
    make_id's, and the confirmed claim hash is claim_hash's. By scheme 2 the fields that name a
    parent (`source`, `other`) hold IDs, as they always do in an ingest."""
    from raytsystem.canonical import json_text
    from raytsystem.model.objects import chain_ids, claim_hash, confirmed_claim_hash

    ids = chain_ids(IdScheme(scheme_number))
    make_id = ids.scheme.make_id
    if scheme_number >= 2:
        source, other = f"src_{source_hex}", f"clm_{other_hex}"
    claim = ids.extracted_claim_ids(source)(occurrence, json_text(statement))
    assert claim == make_id(
        "claim", source=source, authority="extracted", statement=statement, occurrence=occurrence
    )
    evidence = ids.statement_evidence_id(
        json_text(other), number, json_text(source), json_text(statement), occurrence
    )
    assert evidence == make_id(
        "evidence",
        claim=other,
        segment=source,
        start=occurrence,
        end=number,
        sha256=statement,
        role="statement",
    )
    shown = (statement, other, occurrence, number, None, number)
    texts = (json_text(statement), json_text(other), occurrence, number, "null", number)
    segment = ids.segment_ids(source)(number, occurrence, json_text(other), -number, *texts)
    extra = dict(zip(tuple(SEGMENT_SHOWN), shown, strict=True)) if scheme_number >= 3 else {}
    assert segment == make_id(
        "segment",
        normalization=source,
        ordinal=occurrence,
        start=-number,
        end=number,
        sha256=other,
        **extra,
    )
    evidence_json = canonical_json([evidence]).decode("utf-8")
    assert evidence_json == f"[{json_text(evidence)}]"
    assert confirmed_claim_hash(evidence_json, json_text(claim), json_text(statement)) == (
        claim_hash(claim, statement, "extracted", "confirmed", [evidence])
    )


@given(st.sampled_from(SCHEMES), st.text(), st.integers(), st.integers(), _HEX32, _HEX32)
def test_property_positional_ids_are_make_ids(
    scheme_number: int, text: str, number: int, other: int, parent_hex: str, other_hex: str
) -> None:
    """The positional derivations (segment_id, evidence_id, claim_id, revision_id,
    normalization_id) give make_id's IDs by either scheme."""
    from raytsystem.model.objects import chain_ids

    ids = chain_ids(IdScheme(scheme_number))
    make_id = ids.scheme.make_id
    evidence_id, claim_id = ids.evidence_id, ids.claim_id
    shown = (text[::-1], text, number, other, None if number % 2 else number, None)
    nrm, clm, seg = f"nrm_{parent_hex}", f"clm_{parent_hex}", f"seg_{other_hex}"
    src = f"src_{other_hex}"
    extra = dict(zip(tuple(SEGMENT_SHOWN), shown, strict=True)) if scheme_number >= 3 else {}
    assert ids.segment_id(nrm, number, other, number, text, *shown) == make_id(
        "segment", normalization=nrm, ordinal=number, start=other, end=number, sha256=text, **extra
    )
    assert evidence_id(clm, seg, number, other, text, text[::-1]) == make_id(
        "evidence", claim=clm, segment=seg, start=number, end=other, sha256=text, role=text[::-1]
    )
    assert claim_id(src, text, text[::-1], number) == make_id(
        "claim", source=src, authority=text, statement=text[::-1], occurrence=number
    )
    rev = f"rev_{other_hex}"
    assert ids.revision_id(src, text) == make_id("revision", source=src, blob=text)
    assert ids.normalization_id(rev, text, number, text[::-1]) == make_id(
        "normalization", revision=rev, adapter=text, adapter_version=number, config=text[::-1]
    )


def test_golden_segment_id_by_scheme_3() -> None:
    assert scheme(3).make_id("segment", **sample("segment", 3)) == GOLDEN_SEGMENT_ID_3


@pytest.mark.parametrize(
    "field, other",
    [
        ("segment_kind", "list_item"),
        ("heading_path", '["Evil","Heading"]'),
        ("line_start", 99),
        ("line_end", 120),
        ("page", 2),
        ("cell", 0),
    ],
)
def test_scheme_3_covers_every_field_a_citation_shows(field: str, other: Any) -> None:
    """A segment row whose kind, heading path, lines, page or cell were changed no longer
    derives its ID by scheme 3 (by schemes 1 and 2 those fields are not in the identity)."""
    kept = scheme(3).make_id("segment", **sample("segment", 3))
    changed = scheme(3).make_id("segment", **{**sample("segment", 3), field: other})
    assert changed != kept
    assert scheme(2).make_id("segment", **sample("segment", 2))[4:12] == kept[4:12]


@pytest.mark.parametrize("parent", ["x", "src_" + "0" * 31, "SRC_" + "0" * 32, 7])
def test_scheme_2_refuses_a_parent_that_is_not_an_id(parent: Any) -> None:
    with pytest.raises(ValueError, match="a revision's source must be an ID"):
        scheme(2).make_id("revision", source=parent, blob="a" * 64)
    assert ID_RE.match(scheme(1).make_id("revision", source=str(parent), blob="a" * 64))


def test_a_template_refuses_fields_it_cannot_fill_in_order() -> None:
    from raytsystem.canonical import Shape

    shape = Shape(("b", "a", "c"))
    assert shape.template(("a", "c"), b="%x") % ('"1"', 2) == canonical_json(
        {"a": "1", "b": "%x", "c": 2}
    ).decode("utf-8")
    with pytest.raises(ValueError, match="sorted order"):
        shape.template(("c", "a"), b=1)
    with pytest.raises(ValueError, match="must make the keys"):
        shape.template(("a",), b=1)
    with pytest.raises(ValueError, match="must make the keys"):
        shape.template(("a", "c"), b=1, d=2)
