"""Pipeline operations: ingest, query, search, review, verify and inspection.

Each public operation opens its own transaction(s); helpers take a connection and never commit.
"""
