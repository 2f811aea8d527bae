"""Canonical JSON and the digests built on it: a contract, not a convenience.

Every ID and every hash in raytsystem is a digest over `canonical_json(value)`. Changing this
function changes every ID and hash ever recorded, so it is frozen:

- objects have their keys sorted by code point; separators are `,` and `:` with no spaces;
- the output is UTF-8 with no escaping of non-ASCII characters (`ensure_ascii=False`);
- every string (keys too) is normalized to Unicode NFC before encoding;
- allowed values: dict with str keys, list/tuple (encoded as arrays), str, int, bool, None;
- floats are refused (their text form is not stable across languages), and so is anything else.

Raw blobs and object IDs use BLAKE3; excerpt hashes use SHA-256 so that any client can check a
citation with its standard library.
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from collections.abc import Callable, Iterable
from typing import Any, Final

import blake3

__all__ = ["Shape", "blake3_hex", "canonical_json", "digest", "json_text", "sha256_hex"]


def _nfc(text: str) -> str:
    # is_normalized is a fast C check; most strings (IDs, hex, ASCII) are already NFC.
    return text if unicodedata.is_normalized("NFC", text) else unicodedata.normalize("NFC", text)


def _canon(value: Any) -> Any:
    if isinstance(value, str):
        return _nfc(value)
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"canonical JSON keys must be str, got {type(key).__name__}")
            nkey = _nfc(key)
            if nkey in out:
                raise ValueError(f"canonical JSON keys collide after NFC: {key!r}")
            out[nkey] = _canon(item)
        return out
    if isinstance(value, list | tuple):
        return [_canon(item) for item in value]
    raise TypeError(f"canonical JSON does not allow {type(value).__name__}")


_ENCODER: Final = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
_SCALARS: Final = (int, bool, type(None))
_is_nfc: Final = unicodedata.is_normalized


def _make_encode() -> Callable[[Any], str]:
    """`_ENCODER.encode` without building a new C encoder on every call (a third of its cost).

    The same C function with the same settings `JSONEncoder.encode` uses, minus the cycle check:
    every value it gets is acyclic (a value that passes `_flat_ok` is at most two lists deep,
    and `_canon` builds fresh containers). Falls back to `_ENCODER.encode` without the C module.
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - CPython always has it
        return _ENCODER.encode

    def refuse(value: Any) -> Any:
        raise TypeError(f"canonical JSON does not allow {type(value).__name__}")

    encoder = make(None, refuse, json.encoder.encode_basestring, None, ":", ",", True, False, False)

    def encode(value: Any) -> str:
        return "".join(encoder(value, 0))

    return encode


_encode: Final = _make_encode()


def canonical_json(value: Any) -> bytes:
    """Encode `value` in the canonical form described in the module docstring."""
    t = type(value)
    if t is dict:
        fast = True
        for k, v in value.items():
            if type(k) is not str or not (k.isascii() or _is_nfc("NFC", k)):
                fast = False
                break
            tv = type(v)  # the common values checked here, the rest by _flat_ok
            if tv is str:
                if not (v.isascii() or _is_nfc("NFC", v)):
                    fast = False
                    break
            elif tv is not int and v is not None and not _flat_ok(v):
                fast = False
                break
    else:
        fast = (t is list or t is tuple) and _flat_ok(value)
    if fast:
        # The common cases (a flat identity of NFC strings, ints and lists of strings or of
        # string pairs; a list of pairs) need no copy: the encoder's output is already canonical.
        return _encode(value).encode("utf-8")
    return _encode(_canon(value)).encode("utf-8")


def _flat_ok(v: Any) -> bool:
    """Whether `v` is a scalar, an NFC string, or a list of them or of lists of NFC strings.

    Written out loop by loop: it runs for every ID and hash, hundreds of times per file. ASCII
    is always NFC, and asking is far cheaper than asking for NFC."""
    t = type(v)
    if t is str:
        return v.isascii() or _is_nfc("NFC", v)
    if t is list or t is tuple:
        for x in v:
            tx = type(x)
            if tx is str:
                if not (x.isascii() or _is_nfc("NFC", x)):
                    return False
            elif tx is list or tx is tuple:
                for y in x:
                    if type(y) is not str or not (y.isascii() or _is_nfc("NFC", y)):
                        return False
            else:
                return False
        return True
    return t in _SCALARS


_encode_str: Final = json.encoder.encode_basestring  # what the encoder above escapes with


def json_text(value: str) -> str:
    """The canonical JSON of one string, quotes included: NFC, escaped as the encoder does."""
    if not (value.isascii() or _is_nfc("NFC", value)):
        value = unicodedata.normalize("NFC", value)
    return _encode_str(value)


class Shape:
    """`canonical_json` of dicts with one fixed set of keys, several times faster.

    IDs and claim hashes are digests of small dicts whose keys never change (an identity's
    fields): their order and their `"key":` text are worked out once, and each value is
    written with the encoder's own string escaping. The bytes are the same as
    `canonical_json`'s (a property test compares the two); a value outside the common case (a
    string not in NFC, a float, a nested dict) goes through `canonical_json` itself.

    `fields` is the order `values()` takes them in; the encoding sorts them, as always.
    """

    def __init__(self, fields: Iterable[str]) -> None:
        self.fields = tuple(fields)
        order = sorted(self.fields)  # code point order, as the encoder's sort_keys gives
        if not order or len(set(order)) != len(order):
            raise ValueError("a shape has distinct keys")
        if any(not k.isascii() or _encode_str(k) != f'"{k}"' for k in order):
            raise ValueError("a shape's keys are plain ASCII names")
        self.keys = frozenset(order)
        self._slots = tuple(
            (("{" if i == 0 else ",") + f'"{k}":', self.fields.index(k))
            for i, k in enumerate(order)
        )

    def encode(self, record: dict[str, Any]) -> bytes:
        """canonical_json(record), for a record with exactly this shape's keys."""
        if len(record) != len(self.fields):  # with every key looked up below: the same keys
            raise KeyError(f"expected the keys {sorted(self.keys)}, got {sorted(record)}")
        return self.values(*[record[k] for k in self.fields])

    def values(self, *values: Any) -> bytes:
        """canonical_json of the record these values make, given in the order of `fields`."""
        parts: list[str] = []
        for prefix, i in self._slots:
            value = values[i]
            t = type(value)
            if t is str:
                if not (value.isascii() or _is_nfc("NFC", value)):
                    return canonical_json(dict(zip(self.fields, values, strict=True)))
                text = _encode_str(value)
            elif t is int:
                text = int.__repr__(value)
            elif value is None:
                text = "null"
            elif (t is list or t is tuple) and all(
                type(x) is str and (x.isascii() or _is_nfc("NFC", x)) for x in value
            ):
                text = "[" + ",".join(map(_encode_str, value)) + "]"
            else:
                return canonical_json(dict(zip(self.fields, values, strict=True)))
            parts.append(prefix)
            parts.append(text)
        parts.append("}")
        return "".join(parts).encode("utf-8")

    def template(self, free: Iterable[str], /, **fixed: Any) -> str:
        """The canonical JSON of this shape's records as a `%` format, for objects made by the
        hundred thousand with some fields the same (a file's claims share source and kind).

        `fixed` fields are written out; each field of `free` is a `%s`, in sorted key order,
        which is the order `free` must list them in (checked here, so a caller cannot fill
        them in another). Fill each with its canonical JSON: `json_text(s)` for a string, an
        int (never a bool) as it is. Property tests (tests/test_canonical_ids.py) compare what
        is made with it against `make_id` and `claim_hash`.
        """
        free = tuple(free)
        if sorted(free) != sorted(self.keys - fixed.keys()) or fixed.keys() - self.keys:
            raise ValueError(f"fixed and free fields must make the keys {sorted(self.keys)}")
        if list(free) != sorted(free):
            raise ValueError(f"free fields are filled in sorted order: {sorted(free)}")
        parts: list[str] = []
        for prefix, i in self._slots:
            key = self.fields[i]
            parts.append(prefix.replace("%", "%%"))
            if key in fixed:
                parts.append(canonical_json(fixed[key]).decode("utf-8").replace("%", "%%"))
            else:
                parts.append("%s")
        parts.append("}")
        return "".join(parts)


def blake3_hex(data: bytes) -> str:
    return blake3.blake3(data).hexdigest()


def sha256_hex(text: str) -> str:
    """SHA-256 of the UTF-8 encoding of `text`: the excerpt hash clients re-check."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def digest(value: Any, *, length: int = 32) -> str:
    """BLAKE3 over the canonical JSON of `value`, as `length` bytes of lowercase hex."""
    return blake3.blake3(canonical_json(value)).hexdigest(length=length)
