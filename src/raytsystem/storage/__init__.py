"""Storage layer: the content-addressed raw store and the ledger database. Imports nothing above it."""
