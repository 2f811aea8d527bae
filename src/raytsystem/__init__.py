"""raytsystem: a local-first knowledge base built as an immutable evidence pipeline.

Layers point one way (ARCHITECTURE.md): the front ends (`cli`, `mcp_server`, `universe`) ->
`api` (the service layer, `api.Session`) -> `pipeline` (the operations) -> `storage` (ledger,
blobs, index files) -> `model` (pure functions) -> the ground floor (`errors`, `canonical`,
`ids`, `sentences`, `config`, `workspace`).
"""

__version__ = "0.1.0"
