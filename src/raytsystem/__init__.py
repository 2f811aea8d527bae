"""raytsystem: a local-first knowledge base built as an immutable evidence pipeline.

Layers point one way: `cli` -> `pipeline` (ingest, query, review, verify, inspect) -> `model`
(adapters, claims, generations, index, terms) -> `storage` (raw blobs, ledger database).
`errors`, `canonical` and `ids` are the shared base every layer may use.
"""

__version__ = "0.1.0"
